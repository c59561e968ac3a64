"""The proxy's upstream supervisor in process: restarts, lost upstreams, pings, process groups.

``agtool.mcp._upstream.Upstream`` runs here in the test's own event loop, so
coverage sees it; the upstreams behind it are real stdio subprocesses
(``tests/_fault_server.py``, which dies, blocks and changes on request, and
``tests/_erring_server.py``, which answers every error shape), reached through the
SDK's client. ``tests/mcp/test_proxy_faults.py`` drives the same faults through the
``agtool mcp proxy`` command; these pin the supervisor's own promises. Every
scenario runs under ``anyio.fail_after``, so a hang fails rather than blocks.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from _bounded import alive, run
from _erring_server import NAMES

from agtool._errors import UpstreamError, UpstreamUnavailable
from agtool.mcp import _upstream
from agtool.mcp._upstream import Upstream, upstream_environment, value_of

ROOT = Path(__file__).resolve().parents[2]
FAULT = [sys.executable, str(ROOT / "tests" / "_fault_server.py")]
ERRING = [sys.executable, str(ROOT / "tests" / "_erring_server.py")]
#: The tests that take seconds: they restart an upstream, or wait out a timeout or a change.
slow = pytest.mark.slow


@pytest.fixture
def fault_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the fault server appends each call to, handed to it by ``env``."""
    runs = tmp_path / "runs.jsonl"
    monkeypatch.setenv("FAULT_RUNS", str(runs))
    return runs


def fault_upstream(**options: Any) -> Upstream:
    return Upstream(FAULT, env=["FAULT_RUNS", "FAULT_ONCE"], **options)


async def whoami(upstream: Upstream, nonce: str = "") -> dict[str, Any]:
    result = await upstream.call("whoami", {"nonce": nonce})
    assert result.structured_content is not None
    return result.structured_content


async def next_session(upstream: Upstream, old: object) -> None:
    """Wait until the supervisor has published a session other than ``old``."""
    while upstream.session is None or upstream.session is old:
        await anyio.sleep(0.02)


# --- Starting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    pytest.param([sys.executable, "-c", "import sys; sys.exit(5)"], id="exits-at-once"),
    pytest.param([sys.executable, "-c", "print('not json-rpc')"], id="not-mcp"),
    pytest.param(["/nonexistent/agtool-upstream"], id="no-such-command"),
])
def test_an_upstream_that_does_not_start_as_an_mcp_server_is_unavailable(
        command: list[str]) -> None:
    """Nothing is served: `UpstreamUnavailable` names the command, raised from `async with`."""
    async def scenario() -> None:
        async with Upstream(command):
            raise AssertionError("entered an upstream that never started")

    with pytest.raises(UpstreamUnavailable, match="did not start as an MCP server") as raised:
        run(scenario)
    assert repr(command[0]) in str(raised.value)


@pytest.mark.parametrize(("command", "url"), [((), None), (["python"], "http://127.0.0.1:1/mcp")])
def test_the_upstream_is_a_command_or_a_url(command: list[str], url: str | None) -> None:
    with pytest.raises(ValueError, match="command or its url, not both and not neither"):
        Upstream(command, url=url)


def test_the_upstream_gets_what_env_names_and_never_the_gates_secret(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOOL_TEST_PASSED", "yes")
    monkeypatch.delenv("AGTOOL_TEST_UNSET", raising=False)
    assert upstream_environment(["AGTOOL_TEST_PASSED", "AGTOOL_TEST_UNSET"]) == {
        "AGTOOL_TEST_PASSED": "yes"}
    with pytest.raises(ValueError, match="never handed to the upstream"):
        Upstream(FAULT, env=["AGTOOL_SECRET"])


# --- Answers and their faults -------------------------------------------------------------------


def test_every_page_of_the_listing_is_read_and_each_upstream_error_is_mapped() -> None:
    """The listing spans three pages; an upstream's INTERNAL_ERROR is a 502 (its body may
    have run), a refusal 422, its own timeout `TimeoutError`; an `isError` answer is the
    body's `UpstreamError(422)` with the upstream's text."""
    async def scenario() -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with Upstream(ERRING) as upstream:
            found["listed"] = [tool.name for tool in upstream.listed]
            found["tools"] = [tool.name for tool in await upstream.tools()]
            for name in ("crash", "refuse", "slow"):
                try:
                    await upstream.call(name, {})
                except Exception as exc:  # the mapping is what is checked
                    found[name] = exc
            try:
                await upstream.body("tool_error")()
            except UpstreamError as exc:
                found["tool_error"] = exc
            found["texts"] = [await upstream.body("text", timeout=30)(value=value)
                              for value in ('{"n": 1}', "[]", "7", "prose")]
        return found

    found = run(scenario)
    assert found["listed"] == list(NAMES)
    assert found["tools"] == list(NAMES)
    assert isinstance(found["crash"], UpstreamError)
    assert found["crash"].status == 502
    assert found["crash"].body == "crash failed upstream"
    assert isinstance(found["refuse"], UpstreamError)
    assert found["refuse"].status == _upstream.UPSTREAM_TOOL_ERROR
    assert isinstance(found["slow"], TimeoutError)
    assert (found["tool_error"].status, found["tool_error"].body) == (422, "no such order")
    assert found["texts"] == [{"n": 1}, {"text": "[]"}, {"text": "7"}, {"text": "prose"}]


def test_value_of_prefers_structured_content_to_text() -> None:
    result = types.CallToolResult(content=[types.TextContent(type="text", text='{"a": 1}')],
                                  structured_content={"b": 2})
    assert value_of(result) == {"b": 2}


@slow
def test_an_upstream_that_says_its_connection_closed_is_restarted(
        caplog: pytest.LogCaptureFixture) -> None:
    """`CONNECTION_CLOSED` from the upstream is a lost connection: the call is a
    `ConnectionError`, the session is dropped and a new process serves the next call."""
    async def scenario() -> str:
        async with Upstream(ERRING) as upstream:
            old = upstream.session
            with pytest.raises(ConnectionError, match="the connection was lost"):
                await upstream.call("closed", {})
            await next_session(upstream, old)
            after = await upstream.body("text")(value="still here")
            return str(after["text"])

    with caplog.at_level(logging.WARNING, logger="agtool"):
        after = run(scenario)
    assert after == "still here"
    assert "was lost: restarting it (restart 1 of at most 5 in 60 s)" in caplog.text


# --- Lost and restarted -----------------------------------------------------------------------


@slow
def test_an_upstream_that_dies_mid_call_is_restarted_and_told_to_the_listener(
        fault_runs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The write happened and no answer came: `ConnectionError` (the gate's
    `upstream:connection`, a write's outcome unknown); the next call reaches a new
    process, the old one is gone, and the restart's listing reaches `on_listing`."""
    listings: list[list[str]] = []

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with fault_upstream() as upstream:
            upstream.on_listing = lambda tools: listings.append([tool.name for tool in tools])
            before = await whoami(upstream, "1")
            with pytest.raises(ConnectionError, match="'note': the connection was lost"):
                await upstream.call("note", {"text": "die"})
            return before, await whoami(upstream, "2")

    with caplog.at_level(logging.WARNING, logger="agtool"):
        before, after = run(scenario)
    assert after["instance"] != before["instance"]
    assert not alive(before["pid"])
    ran = [json.loads(line) for line in fault_runs.read_text().splitlines()]
    assert [(entry["tool"], entry["instance"]) for entry in ran] == [
        ("whoami", before["instance"]), ("note", before["instance"]),
        ("whoami", after["instance"])]
    assert listings == [["note", "whoami", "retitle", "grow"]]
    assert "'note': the connection was lost" not in caplog.text  # said once, by the gate
    assert "was lost: restarting it (restart 1 of at most 5" in caplog.text


@slow
def test_past_its_restarts_the_upstream_is_gone_and_every_call_says_so(
        fault_runs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`restarts=0`: the first loss is final. `gone` is set, a call is a lost connection
    without waiting, and its listing is unavailable."""
    async def scenario() -> None:
        async with fault_upstream(restarts=0) as upstream:
            with pytest.raises(ConnectionError):
                await upstream.call("note", {"text": "die"})
            await upstream.gone.wait()
            with pytest.raises(ConnectionError, match="is gone"):
                await upstream.call("whoami", {})
            with pytest.raises(UpstreamUnavailable, match="did not list its tools"):
                await upstream.tools()

    with caplog.at_level(logging.WARNING, logger="agtool"):
        run(scenario)
    assert "was lost and is not restarted (0 restarts in 60 s): every call now fails" in (
        caplog.text)
    assert "restarting it" not in caplog.text
    assert [json.loads(line)["tool"] for line in fault_runs.read_text().splitlines()] == [
        "note"]


@slow
def test_an_upstream_whose_restarts_all_fail_is_gone_after_its_budget(
        tmp_path: Path, fault_runs: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Each restart exits before the handshake: each failure is said, `restarts` of them
    are tried, then the upstream is gone and a waiting call wakes to say so."""
    monkeypatch.setenv("FAULT_ONCE", str(tmp_path / "started"))

    async def scenario() -> None:
        async with fault_upstream(restarts=2) as upstream:
            with pytest.raises(ConnectionError):
                await upstream.call("note", {"text": "die"})
            with pytest.raises(ConnectionError, match="is gone"):
                await upstream.call("whoami", {})  # waits through both restarts
            assert upstream.gone.is_set()

    with caplog.at_level(logging.WARNING, logger="agtool"):
        run(scenario)
    assert "(restart 1 of at most 2 in 60 s)" in caplog.text
    assert "(restart 2 of at most 2 in 60 s)" in caplog.text
    assert caplog.text.count("failed (") == 2  # each restart that did not start, said
    assert "is not restarted (2 restarts in 60 s)" in caplog.text


@slow
def test_restarts_long_ago_leave_the_window(fault_runs: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is per `RESTART_WINDOW`: a restart older than it no longer counts."""
    monkeypatch.setattr(_upstream, "RESTART_WINDOW", 0.0)

    async def scenario() -> list[str]:
        instances = []
        async with fault_upstream(restarts=1) as upstream:
            for index in range(3):  # three losses, one restart allowed at a time
                instances.append((await whoami(upstream, str(index)))["instance"])
                with pytest.raises(ConnectionError):
                    await upstream.call("note", {"text": "die"})
            assert not upstream.gone.is_set()
            instances.append((await whoami(upstream, "last"))["instance"])
        return instances

    assert len(set(run(scenario))) == 4


# --- Timeouts and pings -----------------------------------------------------------------------


@slow
def test_a_call_given_up_on_leaves_an_upstream_that_answers_a_ping_in_place(
        fault_runs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`hang` awaits for ever but the process still reads: the body's own timeout ends the
    call with `TimeoutError`, the ping that follows is answered, and nothing restarts."""
    async def scenario() -> tuple[str, str]:
        async with fault_upstream() as upstream:
            before = (await whoami(upstream))["instance"]
            with pytest.raises(TimeoutError):
                await upstream.body("note", timeout=0.3)(text="hang")
            await anyio.sleep(0.3)  # the ping is sent and answered meanwhile
            return before, (await whoami(upstream))["instance"]

    with caplog.at_level(logging.WARNING, logger="agtool"):
        before, after = run(scenario)
    assert before == after
    assert "ping" not in caplog.text


@slow
def test_a_blocked_upstream_fails_the_ping_and_is_restarted_its_process_ended(
        fault_runs: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """`block` stops the whole upstream process: the ping after the timeout goes unanswered,
    the upstream is restarted, and its blocked process is ended with its group."""
    monkeypatch.setattr(_upstream, "PING_TIMEOUT", 0.3)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with fault_upstream() as upstream:
            before = await whoami(upstream)
            old = upstream.session
            with pytest.raises(TimeoutError):
                await upstream.body("note", timeout=0.3)(text="block")
            await next_session(upstream, old)
            return before, await whoami(upstream)

    with caplog.at_level(logging.WARNING, logger="agtool"):
        before, after = run(scenario)
    assert after["instance"] != before["instance"]
    assert not alive(before["pid"])
    assert "does not answer a ping after a call was given up on: it is restarted" in (
        caplog.text)


@slow
def test_stop_ends_the_upstream_process_group_at_once_and_may_be_called_again(
        fault_runs: Path) -> None:
    """`stop` is what a signal handler calls: synchronous, and safe more than once."""
    async def scenario() -> int:
        async with fault_upstream(restarts=0) as upstream:
            pid = int((await whoami(upstream))["pid"])
            upstream.stop()
            assert not alive(pid)
            upstream.stop()
            await upstream.gone.wait()  # the supervisor saw the loss, and did not restart
            return pid

    pid = run(scenario)
    assert not alive(pid)


# --- Listings that change -----------------------------------------------------------------------


@slow
def test_a_changed_listing_reaches_on_listing_and_a_failing_listener_breaks_nothing(
        fault_runs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`notifications/tools/list_changed` lists again: `listed` follows, `on_listing` gets
    it; a listener that raises is logged, and the upstream serves on."""
    seen: list[list[types.Tool]] = []

    async def scenario() -> tuple[str, str]:
        async with fault_upstream() as upstream:
            changed = anyio.Event()

            def on_listing(tools: list[types.Tool]) -> None:
                seen.append(tools)
                changed.set()
                raise RuntimeError("the listener broke")

            upstream.on_listing = on_listing
            await upstream.call("retitle", {"text": "Renamed."})
            await changed.wait()
            described = {tool.name: tool.description for tool in upstream.listed}["whoami"]
            return described, (await whoami(upstream))["instance"]

    with caplog.at_level(logging.WARNING, logger="agtool"):
        described, instance = run(scenario)
    assert described == "Renamed."
    assert {tool.name: tool.description for tool in seen[0]}["whoami"] == "Renamed."
    assert "the listing of the upstream server" in caplog.text
    assert "RuntimeError: the listener broke" in caplog.text
    assert instance


def test_a_listing_that_fails_after_list_changed_is_said_and_the_old_one_kept(
        fault_runs: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Asked to list again, an upstream that cannot: the warning says so; `listed` stays."""
    async def scenario() -> list[str]:
        async with fault_upstream() as upstream:
            before = [tool.name for tool in upstream.listed]
            failing = anyio.Event()

            async def broken(session: Any) -> list[types.Tool]:
                failing.set()
                raise OSError("the listing broke")

            monkeypatch.setattr(upstream, "_tools", broken)
            await upstream.call("grow", {})
            await failing.wait()
            await anyio.sleep(0.05)
            assert [tool.name for tool in upstream.listed] == before
            return before

    with caplog.at_level(logging.WARNING, logger="agtool"):
        run(scenario)
    assert "said its tools changed, and did not list them (OSError: the listing broke)" in (
        caplog.text)


def test_the_upstream_process_gets_only_the_safe_environment(
        fault_runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOOL_SECRET", "s" * 32)
    monkeypatch.setenv("AGTOOL_TEST_CLOUD_TOKEN", "tok-123")

    async def scenario() -> dict[str, str]:
        async with fault_upstream() as upstream:
            return dict((await whoami(upstream))["env"])

    env = run(scenario)
    assert env["FAULT_RUNS"] == os.environ["FAULT_RUNS"]
    assert "AGTOOL_SECRET" not in env
    assert "AGTOOL_TEST_CLOUD_TOKEN" not in env
