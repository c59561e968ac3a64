"""`aproxy(http=...)` in process: a real upstream served over streamable HTTP through a gate,
with a token, a remembered read and a rate; SIGTERM ends it and the upstream with it.

The proxy runs in the test's own event loop (so coverage follows it); its upstream is
``tests/_fault_server.py``, a real subprocess, and its client the SDK's, over loopback.
The stdio proxy is driven as a subprocess in ``tests/mcp/test_proxy_faults.py``.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _bounded import alive, run
from _list_changes import assert_told_both_ways, changes_seen
from _ports import free_port, listening
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from sse_starlette.sse import AppStatus

from agtool._records import CallRecord
from agtool.mcp import HttpOptions, Rates, aproxy

ROOT = Path(__file__).resolve().parents[2]
FAULT = [sys.executable, str(ROOT / "tests" / "_fault_server.py")]
TOKEN = "t" * 24
WRITES = {"read_public", "reversible_write"}


def test_an_http_proxy_gates_remembers_limits_and_ends_its_upstream_on_sigterm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the door with the token: `whoami` asked twice is answered once by the
    upstream (`--memo`), the second `note` is RATE_LIMITED and never reaches it; SIGTERM
    shuts the HTTP server down, stops the upstream's process group and exits 143."""
    runs = tmp_path / "runs.jsonl"
    monkeypatch.setenv("FAULT_RUNS", str(runs))
    port = free_port()
    records: list[CallRecord] = []
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP)}

    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: aproxy(
                FAULT, env=["FAULT_RUNS"], scope=WRITES, records=records.append,
                memo={"whoami": 60.0}, rates=Rates(["note=1/60"]),
                http=HttpOptions("127.0.0.1", port, {"AGTOOL_TEST_TOKEN": TOKEN})))
            await listening(port)
            url = f"http://127.0.0.1:{port}/mcp"
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http, \
                    Client(streamable_http_client(url, http_client=http)) as session:
                seen["names"] = [tool.name for tool in (await session.list_tools()).tools]
                seen["answers"] = [await session.call_tool("whoami", {"nonce": "1"}),
                                   await session.call_tool("whoami", {"nonce": "1"}),
                                   await session.call_tool("note", {"text": "first"}),
                                   await session.call_tool("note", {"text": "second"})]
            signal.raise_signal(signal.SIGTERM)

    try:
        run(scenario)
    except BaseException as exc:  # SystemExit, perhaps inside the task group's group
        exited = getattr(exc, "exceptions", [exc])[0]
    else:
        raise AssertionError("SIGTERM did not end the proxy")
    finally:
        AppStatus.should_exit = False  # see tests/mcp/test_http_door.py's `serving`
    assert isinstance(exited, SystemExit)
    assert exited.code == 128 + signal.SIGTERM
    assert {number: signal.getsignal(number) for number in handlers} == handlers
    assert seen["names"] == ["note", "whoami", "retitle", "grow"]
    first, again, noted, limited = seen["answers"]
    assert again.structured_content == first.structured_content
    assert noted.structured_content == {"noted": "first"}
    assert json.loads(limited.content[0].text)["error"]["code"] == "RATE_LIMITED"
    ran = [json.loads(line) for line in runs.read_text().splitlines()]
    assert [(entry["tool"], entry["args"]) for entry in ran] == [
        ("whoami", {"nonce": "1"}), ("note", {"text": "first"})]
    assert [record.memo_hit for record in records if record.tool == "whoami"] == [False, True]
    assert not alive(int(first.structured_content["pid"]))


def test_an_http_client_listening_hears_a_tool_hidden_and_served_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over streamable HTTP as over stdio: the upstream changes ``whoami``'s description
    (a "rug pull"), the proxy hides it and the client's ``subscriptions/listen`` stream
    says so; changed back, it is served again and said again."""
    monkeypatch.setenv("FAULT_RUNS", str(tmp_path / "runs.jsonl"))
    port = free_port()

    async def scenario() -> dict[str, Any]:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: aproxy(
                FAULT, env=["FAULT_RUNS"],
                http=HttpOptions("127.0.0.1", port, {"AGTOOL_TEST_TOKEN": TOKEN})))
            await listening(port)
            url = f"http://127.0.0.1:{port}/mcp"
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http, \
                    Client(streamable_http_client(url, http_client=http)) as session, \
                    session.listen(tools_list_changed=True) as events:
                changes = aiter(events)
                seen = await changes_seen(session, lambda: anext(changes))
            group.cancel_scope.cancel()
        return seen

    try:
        seen = run(scenario)
    finally:
        AppStatus.should_exit = False  # see tests/mcp/test_http_door.py's `serving`
    assert_told_both_ways(seen, ToolsListChanged)
