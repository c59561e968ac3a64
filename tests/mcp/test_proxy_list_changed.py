"""`agtool mcp proxy` tells its own clients when what it serves changes: tools/list_changed.

A real proxy subprocess over stdio in front of ``tests/_fault_server.py``, whose
``retitle`` changes ``whoami``'s description and says so upstream. The proxy lists
again, hides the changed tool (a "rug pull"), and its client hears it: the SDK's
``Client`` on its ``subscriptions/listen`` stream (2026-07-28), or a ``ClientSession``
of 2025-11-25 as ``notifications/tools/list_changed``. Put back as it was, the tool
is served again, and said again.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from _bounded import run
from _list_changes import assert_told_both_ways, changes_seen
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.subscriptions import ToolsListChanged

ROOT = Path(__file__).resolve().parents[2]
FAULT = str(ROOT / "tests" / "_fault_server.py")

pytestmark = pytest.mark.slow


def _proxy(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agtool._cli", "mcp", "proxy", "--env", "FAULT_RUNS", "--records",
              str(tmp_path / "records.jsonl"), "--", sys.executable, FAULT],
        cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), "FAULT_RUNS": str(tmp_path / "runs")})


def test_a_listening_client_hears_a_tool_hidden_and_served_again(tmp_path: Path) -> None:
    """2026-07-28 (the SDK's ``Client``): a changed upstream tool is hidden and the client's
    listen stream says so; changed back, it is served again and said again."""
    async def scenario() -> dict[str, Any]:
        with (tmp_path / "err").open("w") as err:
            async with Client(stdio_client(_proxy(tmp_path), errlog=err)) as client, \
                    client.listen(tools_list_changed=True) as events:
                changes = aiter(events)
                return await changes_seen(client, lambda: anext(changes))

    assert_told_both_ways(run(scenario), ToolsListChanged)


def test_a_client_of_an_earlier_version_is_sent_list_changed(tmp_path: Path) -> None:
    """2025-11-25 (``ClientSession``): the proxy says tools.listChanged and sends
    notifications/tools/list_changed to the client that listed."""
    async def scenario() -> dict[str, Any]:
        send, receive = anyio.create_memory_object_stream[Any](16)

        async def on_message(message: Any) -> None:
            root = getattr(message, "root", message)
            if isinstance(root, types.ToolListChangedNotification):
                await send.send(root)

        with (tmp_path / "err").open("w") as err, send, receive:
            async with stdio_client(_proxy(tmp_path), errlog=err) as (read, write), \
                    ClientSession(read, write, message_handler=on_message) as session:
                initialized = await session.initialize()
                assert initialized.capabilities.tools is not None
                assert initialized.capabilities.tools.list_changed
                return await changes_seen(session, receive.receive)

    assert_told_both_ways(run(scenario), types.ToolListChangedNotification)
