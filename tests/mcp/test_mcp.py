"""agtool over MCP: a gated table served, and a gate in front of a lax MCP server.

The fast tests talk to ``agtool.mcp.server`` in process through the SDK's own
``Client``; the slow ones start real subprocesses (``agtool mcp serve``, over
stdio and streamable HTTP, and ``agtool mcp proxy`` in front of
``tests/_lax_server.py``) and drive them with ``ClientSession``. Every
subprocess scenario runs under ``anyio.fail_after``, so a hang fails.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from _ports import free_port, wait_for_port
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import agtool
from agtool import ContractError, Gate, to_json_schema
from agtool._cli import main
from agtool._loader import load_table
from agtool.mcp import ERROR_META, RUN_ID_META, STEP_ID_META, server

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_TABLE = "tests.fixtures.mcp_table:TOOLS"
#: Seconds a whole subprocess scenario may take, start-up included.
SCENARIO_TIMEOUT = 60


def fixture_tools() -> dict[str, Any]:
    """A fresh copy of the fixture table, its module's SENT list emptied."""
    table = load_table(FIXTURE_TABLE, ROOT)
    table["send_sms"]["fn"].__globals__["SENT"].clear()
    return dict(table)


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run one async scenario under the timeout."""
    async def bounded() -> Any:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            return await scenario()

    return anyio.run(bounded)


def error_of(result: Any) -> dict[str, Any]:
    """The structured error of a failed call: in ``_meta`` and in the text block, and never
    as ``structuredContent``, which TypeScript SDK 1.x clients validate even on an error."""
    assert result.is_error is True
    assert result.structured_content is None
    answer = json.loads(result.content[0].text)
    assert answer["ok"] is False
    assert result.meta[ERROR_META] == answer["error"]
    return dict(answer["error"])


WRITER = frozenset({"read_public", "reversible_write"})
SMS = {"to": "+821012345678", "text": "Your refund was sent."}
#: The run a client names for its writes, so that a retry of one is answered from the store.
RUN = {RUN_ID_META: "conversation-1"}


# --- In process: agtool.mcp.server ---------------------------------------------------------


def test_tools_are_listed_with_the_gates_schemas_and_annotations() -> None:
    """Each tool's inputSchema is the one the gate enforces; reads and writes say which."""
    tools = fixture_tools()

    async def scenario() -> dict[str, Any]:
        async with Client(server(tools)) as client:
            listed = await client.list_tools()
        return {tool.name: tool for tool in listed.tools}

    listed = run(scenario)
    assert list(listed) == ["search_tickets", "customer", "send_sms"]
    schema = {key: value for key, value in to_json_schema(tools, "search_tickets").items()
              if key != "$schema"}
    assert listed["search_tickets"].input_schema == schema
    assert listed["search_tickets"].input_schema["additionalProperties"] is False
    assert listed["search_tickets"].output_schema["properties"]["tickets"]["type"] == "array"
    read, write = listed["search_tickets"].annotations, listed["send_sms"].annotations
    assert (read.read_only_hint, read.open_world_hint) == (True, False)
    assert (write.read_only_hint, write.destructive_hint) == (False, False)


@pytest.mark.parametrize(("args", "reason"), [
    pytest.param({"status": "open", "limit": True}, "args:type:limit", id="bool-for-int"),
    pytest.param({"status": "open", "limit": "2"}, "args:type:limit", id="str-for-int"),
    pytest.param({"status": "open", "limit": 2, "team": "x"}, "args:unexpected:team",
                 id="extra"),
    pytest.param({"status": "opened", "limit": 2}, "args:allowed:status", id="enum"),
    pytest.param({"limit": 2}, "args:missing:status", id="missing"),
])
def test_a_bad_call_is_an_error_result_and_the_body_never_runs(args: dict[str, Any],
                                                                reason: str) -> None:
    """The SDK hands the args to the gate untouched: the mistake is refused, not coerced."""
    gate = Gate(fixture_tools())

    async def scenario() -> Any:
        async with Client(server(gate)) as client:
            return await client.call_tool("search_tickets", args)

    error = error_of(run(scenario))
    assert (error["code"], error["details"]["reason"]) == ("INVALID_ARGUMENT", reason)
    assert error["retryable"] is False
    assert gate.stats("search_tickets").runs == 0


def test_a_good_call_carries_structured_content_and_redacts_sensitive_fields() -> None:
    """Success is structuredContent (the value) plus a text block with the source."""
    async def scenario() -> tuple[Any, Any]:
        async with Client(server(fixture_tools())) as client:
            tickets = await client.call_tool("search_tickets", {"status": "open", "limit": 1})
            contact = await client.call_tool("customer", {"customer_id": "c-7"})
        return tickets, contact

    tickets, contact = run(scenario)
    assert tickets.is_error is False
    assert tickets.structured_content == {"tickets": [{"id": "T-1",
                                                       "title": "Refund not received"}]}
    text = json.loads(tickets.content[0].text)
    assert text["data"] == tickets.structured_content
    assert text["source"]["tool"] == "search_tickets"
    assert contact.structured_content == {"name": "Kim", "phone": "[redacted]"}
    assert "+8210" not in contact.content[0].text


def test_a_write_is_refused_outside_the_scope_and_an_unknown_tool_is_an_error() -> None:
    """The served gate's default scope is public reads: a write is denied before it runs."""
    gate = Gate(fixture_tools())

    async def scenario() -> tuple[Any, Any]:
        async with Client(server(gate)) as client:
            return (await client.call_tool("send_sms", SMS),
                    await client.call_tool("no_such_tool", {}))

    denied, unknown = run(scenario)
    assert error_of(denied)["details"]["reason"] == "auth:scope:reversible_write"
    assert error_of(unknown)["code"] == "UNKNOWN_TOOL"
    assert gate.stats("send_sms").runs == 0


def test_a_retried_write_is_answered_from_the_store_by_its_business_key() -> None:
    """Same named run, same key args: the retry replays; other args on that key conflict."""
    gate = Gate(fixture_tools(), scope=WRITER)
    run_meta = {RUN_ID_META: "conversation-7"}

    async def scenario() -> list[Any]:
        async with Client(server(gate)) as client:
            return [await client.call_tool("send_sms", SMS, meta=run_meta),
                    await client.call_tool("send_sms", SMS, meta=run_meta),
                    await client.call_tool("send_sms", {**SMS, "text": "Sent twice?"},
                                           meta=run_meta)]

    first, retry, other = run(scenario)
    assert first.structured_content == retry.structured_content == {"sent": 1}
    assert gate.stats("send_sms").runs == 1
    assert gate.stats("send_sms").replayed == 1
    assert error_of(other)["code"] == "CONFLICT"


def test_meta_names_the_run_and_the_step_of_a_write() -> None:
    """A new step id is a new write; another run id is another run, even on one connection."""
    gate = Gate(fixture_tools(), scope=WRITER)

    async def call(client: Any, run_id: str, step_id: str) -> Any:
        return await client.call_tool("send_sms", SMS,
                                      meta={RUN_ID_META: run_id, STEP_ID_META: step_id})

    async def scenario() -> list[Any]:
        async with Client(server(gate)) as client:
            return [await call(client, "run-1", "notify"), await call(client, "run-1", "notify"),
                    await call(client, "run-1", "notify-again"),
                    await call(client, "run-2", "notify")]

    sent = [result.structured_content["sent"] for result in run(scenario)]
    assert sent == [1, 1, 2, 3]
    assert gate.stats("send_sms").runs == 3


def test_gate_options_with_a_gate_are_refused() -> None:
    """A gate brings its own scope: passing another beside it is a mistake, said at once."""
    with pytest.raises(TypeError, match="scope"):
        server(Gate(fixture_tools()), scope=WRITER)


# --- Subprocesses: agtool mcp serve -------------------------------------------------------


def agtool_params(*argv: str, **env: str) -> StdioServerParameters:
    """``python -m agtool._cli ARGV`` as a stdio server, run from the repository root."""
    return StdioServerParameters(command=sys.executable, args=["-m", "agtool._cli", *argv],
                                 cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), **env})


@pytest.mark.slow
def test_mcp_serve_over_stdio(tmp_path: Path) -> None:
    """A real client lists, calls, is refused and retries a write (in the run it names)
    against `agtool mcp serve`."""
    runs, records = tmp_path / "runs.txt", tmp_path / "records.jsonl"
    params = agtool_params("mcp", "serve", "--table", FIXTURE_TABLE, "--scope", "read_public",
                           "--scope", "reversible_write", "--records", str(records),
                           AGTOOL_TEST_RUNS=str(runs))

    async def scenario() -> list[Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            return [listed,
                    await session.call_tool("search_tickets", {"status": "open", "limit": 2}),
                    await session.call_tool("search_tickets", {"status": "open", "limit": True}),
                    await session.call_tool("send_sms", SMS, meta=RUN),
                    await session.call_tool("send_sms", SMS, meta=RUN)]

    listed, good, bad, first, retry = run(scenario)
    assert [tool.name for tool in listed.tools] == ["search_tickets", "customer", "send_sms"]
    assert listed.tools[2].annotations.read_only_hint is False
    assert len(good.structured_content["tickets"]) == 2
    assert error_of(bad)["details"]["reason"] == "args:type:limit"
    assert first.structured_content == retry.structured_content == {"sent": 1}
    assert runs.read_text().splitlines() == ["search_tickets", "send_sms"]
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(line["tool"], line["reason"], line["replayed"]) for line in lines] == [
        ("search_tickets", "", False), ("search_tickets", "args:type:limit", False),
        ("send_sms", "", False), ("send_sms", "", True)]


@pytest.mark.slow
def test_mcp_serve_over_streamable_http(tmp_path: Path) -> None:
    """Over --http, each MCP session is a run: a retry in it replays, a new session runs anew."""
    port, runs = free_port(), tmp_path / "runs.txt"
    process = subprocess.Popen(  # noqa: S603 - this repository's own CLI
        [sys.executable, "-m", "agtool._cli", "mcp", "serve", "--table", FIXTURE_TABLE,
         "--http", "--port", str(port), "--scope", "read_public", "--scope",
         "reversible_write", "--records", str(tmp_path / "records.jsonl")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "AGTOOL_TEST_RUNS": str(runs)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process, SCENARIO_TIMEOUT)

        async def session_calls() -> list[Any]:
            url = f"http://127.0.0.1:{port}/mcp"
            async with streamable_http_client(url) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                return [await session.call_tool("send_sms", SMS),
                        await session.call_tool("send_sms", SMS),
                        await session.call_tool("search_tickets", {"status": "x", "limit": 1})]

        first, retry, bad = run(session_calls)
        (again, _, _) = run(session_calls)
    finally:
        process.terminate()
        process.communicate(timeout=SCENARIO_TIMEOUT)
    assert first.structured_content == retry.structured_content == {"sent": 1}
    assert again.structured_content == {"sent": 2}
    assert error_of(bad)["details"]["reason"] == "args:allowed:status"
    assert runs.read_text().splitlines() == ["send_sms", "send_sms"]


# --- Subprocesses: agtool mcp proxy in front of a lax server ------------------------------


def proxy_scenario(tmp_path: Path, *options: str,
                   calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any], str]:
    """Through `agtool mcp proxy OPTIONS -- python tests/_lax_server.py`: listing and results.

    Also gives the proxy's stderr (its notes and warnings).
    """
    errlog = tmp_path / "proxy.err"
    params = agtool_params("mcp", "proxy", "--records", str(tmp_path / "records.jsonl"),
                           "--env", "LAX_RUNS", *options, "--", sys.executable,
                           str(ROOT / "tests" / "_lax_server.py"),
                           LAX_RUNS=str(tmp_path / "runs.jsonl"))

    async def scenario() -> tuple[Any, list[Any]]:
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                return listed, [await session.call_tool(name, args) for name, args in calls]

    listed, results = run(scenario)
    return listed, results, errlog.read_text()


def lax_runs(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_the_proxy_refuses_what_the_lax_server_would_coerce_or_drop(tmp_path: Path) -> None:
    """True for an int and an extra arg are refused; the lax server's body never runs for them."""
    listed, results, err = proxy_scenario(tmp_path, calls=[
        ("count_items", {"limit": True}),
        ("count_items", {"limit": 2, "bogus": 1}),
        ("count_items", {"limit": 2}),
        ("count_items", {"region": "busan", "limit": 2}),
        ("delete_everything", {"confirm": True}),
    ])
    coerced, dropped, good, other, destructive = results
    assert error_of(coerced)["details"]["reason"] == "args:type:limit"
    assert error_of(dropped)["details"]["reason"] == "args:unexpected:bogus"
    assert good.structured_content == {"limit": 2, "region": "seoul"}
    assert other.structured_content == {"limit": 2, "region": "busan"}
    # No annotations: MCP's defaults make it a destructive write, outside the default scope.
    assert error_of(destructive)["details"]["reason"] == "auth:scope:irreversible"
    assert lax_runs(tmp_path) == [{"tool": "count_items", "limit": 2, "region": "seoul"},
                                  {"tool": "count_items", "limit": 2, "region": "busan"}]
    names = [tool.name for tool in listed.tools]
    # days_until's remote $ref is unenforceable (its format: date alone is enforced)
    assert names == ["count_items", "stock_level", "delete_everything"]
    assert "'days_until' is hidden: keyword '$ref'" in err
    assert "'delete_everything' does not say it is read-only" in err
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [record["reason"] for record in records] == [
        "args:type:limit", "args:unexpected:bogus", "", "", "auth:scope:irreversible"]


@pytest.mark.slow
def test_the_proxy_passes_a_trusted_tool_through_and_takes_effect_overrides(
        tmp_path: Path) -> None:
    """--trust-tool forwards an unenforceable tool (logged); --effect and --sensitive apply."""
    listed, results, err = proxy_scenario(
        tmp_path, "--trust-tool", "days_until", "--effect", "delete_everything=read",
        "--sensitive", "count_items.region",
        calls=[("days_until", {"day": "2026-01-31"}),
               ("delete_everything", {"confirm": 1}),
               ("delete_everything", {"confirm": True}),
               ("count_items", {"limit": 3, "region": "jeju"})])
    passed, refused, ran, redacted = results
    assert redacted.structured_content == {"limit": 3, "region": "[redacted]"}
    assert "jeju" not in redacted.content[0].text
    assert "days_until" in [tool.name for tool in listed.tools]
    assert passed.is_error is False
    assert lax_runs(tmp_path)[0]["tool"] == "days_until"
    assert error_of(refused)["details"]["reason"] == "args:type:confirm"
    assert ran.structured_content == {"result": "deleted"}
    assert "'days_until' is passed through ungated" in err
    assert [run["tool"] for run in lax_runs(tmp_path)] == ["days_until", "delete_everything",
                                                           "count_items"]


# --- Without the extra, and the CLI's own refusals -----------------------------------------


def test_without_the_mcp_extra_the_import_error_names_it(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """agtool.mcp, and `agtool mcp serve`, say which extra to install, in one line."""
    monkeypatch.setitem(sys.modules, "mcp", None)  # what a missing package looks like
    monkeypatch.delitem(sys.modules, "agtool.mcp")
    monkeypatch.delattr(agtool, "mcp")
    with pytest.raises(ImportError) as caught:
        importlib.import_module("agtool.mcp")
    assert str(caught.value) == "agtool.mcp needs the mcp extra: pip install 'agtool-gate[mcp]'"
    monkeypatch.delitem(sys.modules, "agtool.mcp", raising=False)
    assert main(["mcp", "serve", "--table", FIXTURE_TABLE]) == 2
    err = capsys.readouterr().err
    assert err == "agtool mcp: agtool.mcp needs the mcp extra: pip install 'agtool-gate[mcp]'\n"


@pytest.mark.parametrize(("argv", "word"), [
    pytest.param(["mcp", "proxy"], "command after --", id="no-upstream"),
    pytest.param(["mcp", "proxy", "--"], "command after --", id="empty-upstream"),
    pytest.param(["mcp", "proxy", "--url", "http://127.0.0.1:9/mcp", "--", "x"], "not both",
                 id="url-and-command"),
    pytest.param(["mcp", "pin", "--pins", "pins.json"], "command after --", id="pin-nothing"),
    pytest.param(["mcp", "proxy", "--env", "AGTOOL_SECRET", "--", "x"], "never handed",
                 id="env-secret"),
    pytest.param(["mcp", "proxy", "--effect", "count_items", "--", "x"], "NAME=VALUE",
                 id="effect-without-value"),
    pytest.param(["mcp", "proxy", "--sensitive", "count_items", "--", "x"], "NAME.VALUE",
                 id="sensitive-without-field"),
    pytest.param(["mcp", "serve", "--table", "tests.fixtures.mcp_table:NOPE"], "has no 'NOPE'",
                 id="no-such-table"),
])
def test_mcp_commands_refuse_what_they_cannot_run(capsys: pytest.CaptureFixture[str],
                                                  argv: list[str], word: str) -> None:
    """A missing upstream command or a malformed option is exit 2 and one line, nothing started."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert word in err
    assert err.count("\n") == 1


def test_a_redacted_value_still_matches_the_listed_output_schema() -> None:
    """A sensitive int comes back "[redacted]"; the client's own output check must accept it."""
    def balance(account: str) -> dict[str, Any]:
        return {"owner": "Kim", "cents": 1999, "history": [{"cents": 5, "memo": "tea"}]}

    tools = {"balance": {
        "fn": balance, "args": {"account": {"type": "str"}},
        "returns": {"owner": {"type": "str"}, "cents": {"type": "int", "sensitive": True},
                    "history": {"type": "list", "item": {
                        "cents": {"type": "int", "sensitive": True}, "memo": {"type": "str"}}}},
    }}

    async def scenario() -> Any:
        async with Client(server(tools)) as client:
            await client.list_tools()  # the client checks later results against these schemas
            return await client.call_tool("balance", {"account": "a-1"})

    result = run(scenario)
    assert result.is_error is False
    assert result.structured_content == {"owner": "Kim", "cents": "[redacted]",
                                         "history": [{"cents": "[redacted]", "memo": "tea"}]}
    assert "1999" not in result.content[0].text


# --- The proxy's own code, in this process, in front of the lax server -------------------


@pytest.mark.slow
def test_the_proxy_in_process_gates_the_lax_server(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy's table, gate and server, driven by the official client in this process
    (the upstream is a real subprocess): the lax server's coercion and dropping are refused
    before it runs, a good call reaches it, a trusted tool passes through ungated, and
    every call leaves a record."""
    from agtool.mcp._proxy import Upstream, gated_table, proxy_server

    runs = tmp_path / "runs.jsonl"
    monkeypatch.setenv("LAX_RUNS", str(runs))
    records: list[Any] = []

    async def scenario() -> tuple[Any, ...]:
        async with Upstream([sys.executable, str(ROOT / "tests" / "_lax_server.py")],
                            env=["LAX_RUNS"]) as up:
            table, passed = gated_table(up, await up.tools(), trust_tools={"days_until"},
                                        sensitive={"count_items": ["region"]})
            gate = Gate(table, records=records.append)
            async with Client(proxy_server(up, gate, passed)) as client:
                listed = [tool.name for tool in (await client.list_tools()).tools]
                coerced = await client.call_tool("count_items", {"limit": True})
                dropped = await client.call_tool("count_items", {"limit": 2, "bogus": 1})
                good = await client.call_tool("count_items", {"limit": 2, "region": "jeju"})
                trusted = await client.call_tool("days_until", {"day": "2026-01-11"})
                return listed, coerced, dropped, good, trusted

    listed, coerced, dropped, good, trusted = run(scenario)
    assert listed == ["count_items", "stock_level", "delete_everything", "days_until"]
    assert error_of(coerced)["details"]["reason"] == "args:type:limit"
    assert error_of(dropped)["details"]["reason"] == "args:unexpected:bogus"
    assert good.structured_content == {"limit": 2, "region": "[redacted]"}
    assert not trusted.is_error
    assert trusted.content[0].text == "10"
    ran = [json.loads(line) for line in runs.read_text().splitlines()]
    assert ran == [{"tool": "count_items", "limit": 2, "region": "jeju"},
                   {"tool": "days_until", "day": "2026-01-11"}]
    assert [(record.tool, record.ok, record.reason) for record in records] == [
        ("count_items", False, "args:type:limit"), ("count_items", False, "args:unexpected:bogus"),
        ("count_items", True, ""), ("days_until", True, "ungated")]


@pytest.mark.slow
@pytest.mark.parametrize(("options", "runs"), [
    # No memo by default: a read-only hint says nothing of whether the answer stays.
    ((), 3),
    # --memo opts a read in: the repeat is answered from the memo, the body runs once...
    (("--memo", "count_items=60"), 1),
    # ...until a write through the proxy forgets every read of that upstream.
    (("--memo", "count_items=60", "--effect", "delete_everything=reversible_write",
      "--scope", "reversible_write", "--scope", "read_public", "--write"), 2),
])
def test_the_proxy_remembers_a_read_only_when_told_and_a_write_forgets_it(
        tmp_path: Path, options: tuple[str, ...], runs: int) -> None:
    """Three equal reads run the upstream body 3 times, once with --memo, twice across a write."""
    write = "--write" in options
    calls: list[tuple[str, dict[str, Any]]] = [("count_items", {"limit": 2}),
                                               ("count_items", {"limit": 2})]
    if write:
        calls.insert(1, ("delete_everything", {"confirm": True}))
    else:
        calls.append(("count_items", {"limit": 2}))
    _, results, _ = proxy_scenario(tmp_path, *[option for option in options
                                               if option != "--write"], calls=calls)
    assert all(not result.is_error for result in results), results
    counted = [run for run in lax_runs(tmp_path) if run["tool"] == "count_items"]
    assert len(counted) == runs


# --- The proxy's decisions on an imported listing, in process (no upstream is started) -----------

def _listed_tools() -> list[Any]:
    import mcp.types as types

    closed = {"type": "object", "properties": {"content": {"type": "string"}},
              "required": ["content"], "additionalProperties": False}
    return [
        types.Tool(name="read_text", input_schema={"type": "object", "properties": {
            "path": {"type": "string"}, "head": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["path"]}, output_schema=closed,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False)),
        types.Tool(name="odd", input_schema={"type": "object", "properties": {
            "n": {"type": "integer", "not": {"$ref": "https://example.com/n.json"}}}},
            annotations=types.ToolAnnotations(read_only_hint=True)),
        types.Tool(name="slow", input_schema={"type": "object"},
                   execution=types.ToolExecution(task_support="required"),
                   annotations=types.ToolAnnotations(read_only_hint=True)),
        types.Tool(name="save", input_schema={"type": "object", "properties": {
            "text": {"type": "string"}}, "required": ["text"]},
            annotations=types.ToolAnnotations(destructive_hint=False, open_world_hint=False)),
    ]


def test_the_proxy_serves_what_it_can_enforce_and_names_the_keyword_of_what_it_hides(
        caplog: pytest.LogCaptureFixture) -> None:
    """Closed outputs and exclusive bounds are served; a remote $ref and a task-only tool are
    hidden."""
    from agtool.mcp._proxy import Upstream, gated_table

    upstream = Upstream(["never-started"])
    with caplog.at_level("WARNING", logger="agtool"):
        table, passed = gated_table(upstream, _listed_tools(), trust_tools={"odd"},
                                    memo={"read_text": 30})
    assert sorted(table) == ["read_text", "save"]
    assert list(passed) == ["odd"]
    assert "tool 'slow' is hidden: keyword 'taskSupport' cannot be enforced" in caplog.text
    assert table["read_text"]["ttl"] == 30  # --memo opted it in
    assert table["save"]["fn"].__name__ == "upstream_save"
    with caplog.at_level("WARNING", logger="agtool"):
        gated_table(upstream, _listed_tools())
    assert "tool 'odd' is hidden: keyword '$ref' cannot be enforced" \
        in caplog.text


def test_an_upstream_read_is_not_remembered_unless_named_and_a_write_cannot_be() -> None:
    """No --memo: ttl 0 for every read; --memo on a write is refused, naming the flag."""
    from agtool._jsonschema import SchemaError
    from agtool.mcp._proxy import Upstream, gated_table

    upstream = Upstream(["never-started"])
    table, _ = gated_table(upstream, _listed_tools())
    assert table["read_text"]["ttl"] == 0
    with pytest.raises(ContractError, match="'--memo': names a tool that writes"):
        gated_table(upstream, _listed_tools(), memo={"save": 10})
    with pytest.raises(SchemaError, match="is named by --memo"):
        gated_table(upstream, _listed_tools(), memo={"nothing": 10})


def test_a_write_through_the_proxy_forgets_before_and_after_even_when_it_fails() -> None:
    """A write's body calls Served.forget on both sides, and after a failure too."""
    from agtool.mcp._proxy import Served, Upstream

    served = Served(Upstream(["never-started"]))
    seen: list[str] = []
    served.forget = lambda: seen.append("forget")

    async def body(**arguments: Any) -> Any:
        seen.append("write")
        raise ConnectionError("the upstream went away")

    with pytest.raises(ConnectionError):
        anyio.run(lambda: served.forgetting(body)(text="x"))
    assert seen == ["forget", "write", "forget"]
