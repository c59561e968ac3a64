"""In process: the proxy tells its clients only when what it serves changes.

``Served.relisted`` is given listings as the SDK parses them (an ``Upstream`` that is never
started); a listener on its subscription bus counts what a listening client would hear.
The same on a real proxy subprocess, with the SDK's clients, is ``test_proxy_list_changed``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types

from agtool.mcp._proxy import Served
from agtool.mcp._upstream import Upstream

READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


def tool(name: str, description: str = "A tool.") -> types.Tool:
    return types.Tool(name=name, description=description, annotations=READ, input_schema={
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}})


class _Session:
    """A client connection of an earlier protocol version: counts what it is sent."""

    protocol_version = "2025-11-25"

    def __init__(self, fails: bool = False) -> None:
        self.told, self.fails = 0, fails

    async def send_tool_list_changed(self) -> None:
        if self.fails:
            raise BrokenPipeError("the client left")
        self.told += 1


def test_a_listener_hears_a_tool_hidden_and_served_again_and_nothing_else() -> None:
    """The same listing again says nothing; a changed tool (hidden), a tool back as it was
    (served again) each say list_changed once; earlier-version clients are sent it too,
    and one whose connection broke is dropped, breaking nothing."""
    served = Served(Upstream(["never-started"]))
    heard: list[Any] = []
    served.changes.bus.subscribe(heard.append)
    listening, gone = _Session(), _Session(fails=True)
    served.changes.listed(listening)
    served.changes.listed(gone)
    first = [tool("a"), tool("b")]
    served.admit(first)
    assert sorted(served.table) == ["a", "b"]  # multipleOf no longer hides a tool

    def relist(listing: list[types.Tool]) -> int:
        anyio.run(served.relisted, listing)
        return len(heard)

    assert relist(first) == 0
    assert relist([tool("a", "Do something else."), tool("b")]) == 1
    assert sorted(served.table) == ["b"]
    assert relist([tool("a", "Do something else."), tool("b")]) == 1
    assert relist(first) == 2
    assert sorted(served.table) == ["a", "b"]
    assert listening.told == 2
    assert gone.told == 0


def test_a_modern_session_is_told_on_its_listen_stream_only() -> None:
    """A 2026-07-28 connection is not sent a standalone notification (its listen stream,
    the bus, carries the event)."""
    served = Served(Upstream(["never-started"]))
    modern = _Session()
    modern.protocol_version = "2026-07-28"
    served.changes.listed(modern)
    served.admit([tool("a")])
    anyio.run(served.relisted, [tool("a", "Changed.")])
    assert modern.told == 0
