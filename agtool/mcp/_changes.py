"""Who hears that a server's tool listing changed, on each version of the protocol.

On 2026-07-28 a client that wants to hear it opens a ``subscriptions/listen``
stream, served from ``bus`` (the SDK's ``ListenHandler``). Before that, a
server sends ``notifications/tools/list_changed`` on the connection of each
client (which the server's capabilities must say, ``tools.listChanged``):
those that listed the tools are remembered here, by their connection.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged

__all__ = ["ListChanges"]

_log = logging.getLogger("agtool")
#: The first protocol version whose clients hear changes on listen streams only (versions
#: are dates, so they compare as strings do).
LISTEN_SINCE = "2026-07-28"


class ListChanges:
    """The listening clients of one server, told together by ``tell``."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        #: A session of each earlier-version connection that listed, by its connection.
        self._sessions: dict[int, Any] = {}

    def listed(self, session: Any) -> None:
        """A client listed the tools: on an earlier version, it is told of changes."""
        if str(getattr(session, "protocol_version", "")) >= LISTEN_SINCE:
            return  # told on its listen stream, if it opened one
        # The per-request session shares its connection's channel to the client.
        connection = getattr(session, "_connection", session)
        self._sessions[id(connection)] = session

    async def tell(self) -> None:
        """``notifications/tools/list_changed`` to every client that may hear it."""
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client gone: it hears nothing more
                _log.debug("a client was not told its tools changed (%s)", type(exc).__name__)
                self._sessions.pop(key, None)
