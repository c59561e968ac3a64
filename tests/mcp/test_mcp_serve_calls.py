"""`agtool.mcp.server` in process: runs, the store off the loop, broken entries, rates,
refusals that name their flag, approvals over elicitation, and records that are asked for.

Driven by the SDK's own ``Client`` against the server object, as in tests/test_mcp.py.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client

from agtool import Gate, SqliteStore
from agtool.mcp import APPROVAL_META, ERROR_META, RUN_ID_META, Rates, server

#: Seconds a whole in-process scenario may take.
SCENARIO_TIMEOUT = 30
SMS = {"to": "+821012345678", "text": "Your refund was sent."}
WRITER = frozenset({"read_public", "reversible_write"})


def run(scenario: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            return await scenario()

    return anyio.run(bounded)


def error_of(result: Any) -> dict[str, Any]:
    """The structured error of a refusal, from ``_meta`` (the text block says the same)."""
    assert result.is_error is True
    assert result.structured_content is None
    assert json.loads(result.content[0].text)["error"] == result.meta[ERROR_META]
    return dict(result.meta[ERROR_META])


class Table:
    """A small table whose bodies count their runs, and the thread each ran on."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.paid: list[dict[str, Any]] = []
        self.read_threads: list[int] = []

    def tools(self) -> dict[str, dict[str, Any]]:
        def search(status: str, limit: int) -> dict[str, Any]:
            self.read_threads.append(threading.get_ident())
            return {"tickets": [{"id": "T-1"}][:limit]}

        def send_sms(to: str, text: str) -> dict[str, Any]:
            self.sent.append({"to": to, "text": text})
            return {"sent": len(self.sent)}

        def refund(order: str, cents: int) -> dict[str, Any]:
            self.paid.append({"order": order, "cents": cents})
            return {"refunded": cents}

        return {
            "search": {"fn": search, "args": {"status": {"type": "str"},
                                              "limit": {"type": "int", "min": 1}},
                       "returns": {"tickets": {"type": "list", "item": {"id": {"type": "str"}}}}},
            "send_sms": {"fn": send_sms, "effect": "write", "risk": "reversible_write",
                         "key_args": ["to"],
                         "args": {"to": {"type": "str"}, "text": {"type": "str"}},
                         "returns": {"sent": {"type": "int"}}},
            "refund": {"fn": refund, "effect": "write", "risk": "irreversible",
                       "args": {"order": {"type": "str"}, "cents": {"type": "int", "min": 1}},
                       "returns": {"refunded": {"type": "int"}}},
        }


# --- Whose run a call is --------------------------------------------------------------------


def test_the_same_write_from_two_clients_without_a_run_runs_for_each() -> None:
    """No run named, no session: each request is its own run, never the server process's, so
    a second client asking the same write is not told the first client's result."""
    table = Table()
    mcp_server = server(Gate(table.tools(), scope=WRITER))

    async def scenario() -> list[Any]:
        answers = []
        for _ in range(2):
            async with Client(mcp_server) as client:
                answers.append(await client.call_tool("send_sms", SMS))
        return answers

    first, second = run(scenario)
    assert [first.structured_content, second.structured_content] == [{"sent": 1}, {"sent": 2}]
    assert len(table.sent) == 2


def test_a_named_run_replays_a_retry_and_another_run_writes_again() -> None:
    """A run the client names keeps its writes: a retry replays, another run's does not."""
    table = Table()
    gate = Gate(table.tools(), scope=WRITER)

    async def scenario() -> list[Any]:
        async with Client(server(gate)) as client:
            return [await client.call_tool("send_sms", SMS, meta={RUN_ID_META: run_id})
                    for run_id in ("run-1", "run-1", "run-2")]

    sent = [answer.structured_content["sent"] for answer in run(scenario)]
    assert sent == [1, 1, 2]
    assert gate.stats("send_sms").replayed == 1


# --- The store off the event loop -----------------------------------------------------------


class SlowStore(SqliteStore):
    """A real SQLite store whose claim says when it has started waiting on the database."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, busy_timeout=5.0)
        self.waiting = threading.Event()

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        self.waiting.set()
        return super().claim(*args, **kwargs)


@pytest.fixture
def locked_store(tmp_path: Path) -> Iterator[tuple[SlowStore, sqlite3.Connection]]:
    """A store on a file, and a second connection to it that will hold its write lock (taken
    once the gate has opened the store: opening reads the store's key fingerprint)."""
    path = tmp_path / "writes.db"
    store = SlowStore(path)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        yield store, holder
    finally:
        holder.close()
        store.close()


def test_a_write_waiting_on_a_locked_store_does_not_stall_a_read(
        locked_store: tuple[SlowStore, sqlite3.Connection]) -> None:
    """While one write waits on a locked store key, another client's read is answered: the
    store is called off the event loop. The write goes on once the lock is let go."""
    store, holder = locked_store
    table = Table()
    mcp_server = server(Gate(table.tools(), scope=WRITER, store=store))
    holder.execute("BEGIN EXCLUSIVE")
    order: list[str] = []

    async def scenario() -> Any:
        async with Client(mcp_server) as writer, Client(mcp_server) as reader, \
                anyio.create_task_group() as group:
            async def write() -> None:
                answer = await writer.call_tool("send_sms", SMS)
                order.append("write ok" if not answer.is_error else "write refused")

            group.start_soon(write)
            while not store.waiting.is_set():  # the write is now inside the store
                await anyio.sleep(0.01)
            read = await reader.call_tool("search", {"status": "open", "limit": 1})
            order.append("read ok" if not read.is_error else "read refused")
            holder.execute("COMMIT")  # the lock goes only after the read was answered
        return order

    assert run(scenario) == ["read ok", "write ok"]
    assert len(table.sent) == 1


# --- A broken entry -------------------------------------------------------------------------


def test_a_broken_entry_hides_that_tool_and_the_rest_are_listed(
        caplog: pytest.LogCaptureFixture) -> None:
    """An entry replaced by a broken one after start-up is left out of tools/list, named in
    a warning; every other tool is listed and answers."""
    tools = Table().tools()
    gate = Gate(tools, scope=WRITER)
    tools["send_sms"] = {**tools["send_sms"], "args": {"to": {"type": "no-such-type"}}}

    async def scenario() -> tuple[list[str], Any]:
        async with Client(server(gate)) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            return listed, await client.call_tool("search", {"status": "open", "limit": 1})

    with caplog.at_level(logging.WARNING, logger="agtool"):
        listed, read = run(scenario)
    assert listed == ["search", "refund"]
    assert read.structured_content == {"tickets": [{"id": "T-1"}]}
    assert any("'send_sms' is not listed" in entry.getMessage() for entry in caplog.records)


# --- Rates ----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_count_per_tool_and_per_client_in_a_sliding_window() -> None:
    """N calls per window per (tool, client); the next waits until the oldest leaves it."""
    clock = Clock()
    rates = Rates(["search=2/10", "*=1/60"], clock=clock)
    assert [rates.take("search", "a") for _ in range(2)] == [0.0, 0.0]
    assert rates.take("search", "a") == pytest.approx(10.0)
    assert rates.take("search", "b") == 0.0  # another client has its own window
    assert rates.take("send_sms", "a") == 0.0  # the * limit, per tool
    assert rates.take("send_sms", "a") == pytest.approx(60.0)
    assert rates.take("refund", "a") == 0.0
    clock.now += 4
    assert rates.take("search", "a") == pytest.approx(6.0)
    clock.now += 6
    assert rates.take("search", "a") == 0.0


@pytest.mark.parametrize("text", ["search", "search=2", "search=0/10", "search=2/0",
                                  "=2/10", "search=x/10", "search=2/inf"])
def test_a_malformed_rate_is_refused_naming_it(text: str) -> None:
    """Every part of NAME=N/SECONDS is checked; the message quotes what was given."""
    with pytest.raises(ValueError, match="NAME=N/SECONDS") as caught:
        Rates([text])
    assert repr(text) in str(caught.value)


def test_a_call_over_its_rate_is_a_retryable_error_and_the_body_does_not_run() -> None:
    """The third call in the window is refused RATE_LIMITED, retryable, with retry_after."""
    table = Table()
    mcp_server = server(Gate(table.tools()), rates=Rates(["search=2/3600"]))

    async def scenario() -> list[Any]:
        async with Client(mcp_server) as client:
            return [await client.call_tool("search", {"status": "open", "limit": limit})
                    for limit in (1, 2, 3)]

    first, second, third = run(scenario)
    assert not first.is_error
    assert not second.is_error
    error = error_of(third)
    assert (error["code"], error["retryable"]) == ("RATE_LIMITED", True)
    assert error["details"]["reason"] == "rate:limited"
    assert 3590 < error["details"]["retry_after"] <= 3600
    assert len(table.read_threads) == 2


# --- Refusals that say what allows the call -------------------------------------------------


def test_a_write_outside_the_scope_names_the_flag_that_allows_it() -> None:
    """Refused for its risk, a write's message names --scope with that risk."""
    table = Table()

    async def scenario() -> Any:
        async with Client(server(Gate(table.tools()))) as client:
            return await client.call_tool("send_sms", SMS)

    error = error_of(run(scenario))
    assert error["details"]["reason"] == "auth:scope:reversible_write"
    assert "--scope reversible_write" in error["message"]
    assert table.sent == []


# --- Approvals over MCP ---------------------------------------------------------------------

ALL = frozenset({"read_public", "reversible_write", "irreversible"})
REFUND = {"order": "A-1", "cents": 500}


def answering(action: str, approve: bool, shown: list[str]) -> Any:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.append(params.message)
        return types.ElicitResult(action=action, content={"approve": approve})
    return elicit


@pytest.mark.parametrize("mode", [
    pytest.param("auto", id="2026-input-required"),
    pytest.param("legacy", id="2025-elicitation-request"),
])
@pytest.mark.parametrize(("action", "approve", "runs"), [
    pytest.param("accept", True, 1, id="accepted"),
    pytest.param("accept", False, 0, id="accepted-but-not-approved"),
    pytest.param("decline", True, 0, id="declined"),
])
def test_an_irreversible_write_asks_a_person_over_elicitation(action: str, approve: bool,
                                                              runs: int, mode: str) -> None:
    """A client that shows forms is asked, with the exact arguments; only a yes runs it:
    a 2026-07-28 client in an input round, a 2025 one by a request during the call."""
    table, shown = Table(), []
    mcp_server = server(Gate(table.tools(), scope=ALL))

    async def scenario() -> Any:
        async with Client(mcp_server, mode=mode, elicitation_callback=answering(
                action, approve, shown)) as client:
            return await client.call_tool("refund", REFUND)

    answer = run(scenario)
    assert len(shown) == 1
    assert "refund" in shown[0]
    assert '"cents": 500' in shown[0]
    assert '"order": "A-1"' in shown[0]
    assert len(table.paid) == runs
    if runs:
        assert answer.structured_content == {"refunded": 500}
    else:
        assert error_of(answer)["code"] == "APPROVAL_REQUIRED"


def test_an_approval_answered_for_one_set_of_arguments_runs_no_other() -> None:
    """The form's state is the gate's approval of the exact arguments shown: sent back with
    other arguments, it covers nothing, and the refund is not made."""
    table = Table()
    mcp_server = server(Gate(table.tools(), scope=ALL))

    async def scenario() -> Any:
        async with Client(mcp_server, elicitation_callback=answering("accept", True,
                                                                     [])) as client:
            asked = await client.session.call_tool("refund", REFUND, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            (key,) = asked.input_requests
            yes = {key: types.ElicitResult(action="accept", content={"approve": True})}
            return await client.session.call_tool(
                "refund", {**REFUND, "cents": 500_000}, input_responses=yes,
                request_state=asked.request_state, allow_input_required=True)

    assert error_of(run(scenario))["code"] == "APPROVAL_REQUIRED"
    assert table.paid == []


def test_without_elicitation_the_refusal_says_how_an_operator_approves() -> None:
    """A client that cannot show a form is told so, and what an operator can do; the
    operator's approval of these exact arguments in _meta then runs it, once."""
    table = Table()
    gate = Gate(table.tools(), scope=ALL)
    token = gate.approve("refund", REFUND, by="operator", single_use=True).token

    async def scenario() -> list[Any]:
        async with Client(server(gate)) as client:
            return [await client.call_tool("refund", REFUND),
                    await client.call_tool("refund", {**REFUND, "cents": 9},
                                           meta={APPROVAL_META: token}),
                    await client.call_tool("refund", REFUND, meta={APPROVAL_META: token})]

    refused, other_args, approved = run(scenario)
    message = error_of(refused)["message"]
    assert "cannot show an approval prompt" in message
    assert "agtool/approval" in message
    assert error_of(other_args)["code"] == "APPROVAL_REQUIRED"
    assert approved.structured_content == {"refunded": 500}
    assert table.paid == [REFUND]


# --- Records are asked for ------------------------------------------------------------------


@pytest.fixture
def root_at_info() -> Iterator[None]:
    """The root logger at INFO, as ``MCPServer()``'s default ``log_level`` leaves it."""
    from mcp.server.mcpserver import MCPServer

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    root.handlers.clear()  # as in a fresh process: basicConfig does nothing where handlers are
    try:
        MCPServer("host-app")  # configures the root logger, as any host application may
        assert root.level == logging.INFO
        root.handlers[:] = handlers  # its own handler writes to stderr: not kept
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


def test_an_info_root_logger_does_not_turn_call_records_on(root_at_info: None,
                                                            caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    """The host's root level is its own: no record is built for agtool.calls until that
    logger (or agtool) is given a level; then each call logs one."""
    gate = Gate(Table().tools())
    caplog.set_level(logging.INFO)  # the root logger, as the host left it
    gate.call_tool("search", {"status": "open", "limit": 1})
    assert [entry for entry in caplog.records if entry.name == "agtool.calls"] == []
    caplog.set_level(logging.INFO, logger="agtool.calls")
    gate.call_tool("search", {"status": "open", "limit": 1})
    assert [entry.name for entry in caplog.records] == ["agtool.calls"]


# --- On the loop ----------------------------------------------------------------------------


def test_a_read_named_on_loop_runs_on_the_loop_and_answers_the_same() -> None:
    """on_loop: the same answers, the body on the event loop's thread, not a worker's."""
    table = Table()
    calls = [("search", {"status": "open", "limit": 1}), ("search", {"status": "open",
                                                                     "limit": True})]

    async def scenario(on_loop: tuple[str, ...]) -> tuple[list[Any], int]:
        async with Client(server(Gate(table.tools()), on_loop=on_loop)) as client:
            answers = [await client.call_tool(name, args) for name, args in calls]
        return answers, threading.get_ident()

    threaded, loop_thread = run(lambda: scenario(()))
    inline, inline_loop = run(lambda: scenario(("search",)))
    assert [(a.is_error, a.structured_content) for a in threaded] == [
        (a.is_error, a.structured_content) for a in inline]
    assert table.read_threads[0] != loop_thread
    assert table.read_threads[1] == inline_loop


def test_on_loop_must_name_a_tool_of_the_table() -> None:
    """A typo in on_loop is said at once, naming it."""
    with pytest.raises(ValueError, match="'serch'"):
        server(Gate(Table().tools()), on_loop=("serch",))


def test_the_rate_middleware_limits_a_server_built_elsewhere() -> None:
    """The proxy's --rate: appended to any server's middleware, the call over its limit is
    refused RATE_LIMITED before the server's handler runs, per tool."""
    from agtool.mcp._middleware import RateMiddleware

    table = Table()
    mcp_server = server(Gate(table.tools()))
    mcp_server.middleware.append(RateMiddleware(Rates(["search=1/3600"])))

    async def scenario() -> list[Any]:
        async with Client(mcp_server) as client:
            return [await client.call_tool("search", {"status": "open", "limit": 1}),
                    await client.call_tool("search", {"status": "open", "limit": 2}),
                    await client.call_tool("send_sms", SMS)]

    first, second, other_tool = run(scenario)
    assert not first.is_error
    assert error_of(second)["code"] == "RATE_LIMITED"
    assert error_of(other_tool)["code"] == "PERMISSION_DENIED"  # no limit: the gate answers
    assert len(table.read_threads) == 1


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_a_malformed_rate_flag_is_one_line_and_nothing_starts(
        capsys: pytest.CaptureFixture[str], command: str) -> None:
    """`--rate` is checked before the table is served or the upstream started."""
    from agtool._cli import main

    target = ["--table", "tests.fixtures.mcp_table:TOOLS"] if command == "serve" else []
    tail = ["--", sys.executable, "-c", "raise SystemExit(3)"] if command == "proxy" else []
    assert main(["mcp", command, *target, "--rate", "search=often", *tail]) == 2
    err = capsys.readouterr().err
    assert "NAME=N/SECONDS" in err
    assert err.count("\n") == 1
