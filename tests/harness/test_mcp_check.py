"""The harness over MCP servers, from the outside: `agtool check --mcp` and `pytest --agtool-mcp`.

The fast tests reach servers in this process through the SDK's in-memory
transport, so coverage follows the checks: the strict server must pass every
item, the lax one must fail with items naming each of its defects, agtool's
own served table must pass. The slow ones start real subprocesses: the same
servers over stdio, `agtool mcp serve` over stdio and streamable HTTP, a
server that dies on bad input, the `agtool check` command and pytest itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import _lax_server
import _strict_server
import mcp.types as types
import pytest
from _ports import free_port, wait_for_port
from hypothesis import Phase, settings
from jsonschema import Draft202012Validator
from mcp.client._memory import InMemoryTransport  # the SDK's own in-process transport
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agtool._cli import main
from agtool._loader import load_table
from agtool.harness._mcp_check import (
    EXAMPLES_PER_ITEM,
    ItemResult,
    McpTarget,
    choose_seed,
    plan,
    run_check,
    run_item,
    tools_under_test,
)
from agtool.mcp import server as agtool_server

ROOT = Path(__file__).resolve().parents[2]
#: Few examples: every one is a round trip to a server, and these tests test the harness.
SMALL = settings(max_examples=3, database=None, deadline=None)
STRICT = f"{sys.executable} {ROOT / 'tests' / '_strict_server.py'}"
LAX = f"{sys.executable} {ROOT / 'tests' / '_lax_server.py'}"
#: What the lax server gets wrong against its own schemas, as the items that must fail.
LAX_DEFECTS = {
    "count_items::refused[type:limit]",        # True, "2" and 2.0 coerced to an int
    "count_items::mistake[bool-for-int]",
    "count_items::mistake[string-number]",
    "stock_level::accepts",                    # a level above its outputSchema's maximum
}
#: Where its schemas are looser than it: open objects whose extra arguments it drops.
LAX_WARNINGS = {
    "count_items::refused[unexpected:*]",
    "count_items::mistake[extra-argument]",
    "stock_level::refused[unexpected:*]",
    "stock_level::mistake[extra-argument]",
}


def in_process(build: Callable[[], Any]) -> Callable[[], Any]:
    """A transport to a fresh server from ``build`` in this process, for each session."""
    return lambda: InMemoryTransport(build())


#: The canary of a server in this process: planted by whoever starts it (no one here).
CANARY = "agtool-canary-in-process"


def check(name: str, build: Callable[[], Any], **options: Any) -> list[ItemResult]:
    options.setdefault("canary", CANARY)
    return run_check(name, transport=in_process(build), settings=SMALL, **options)


def run_items(build: Callable[[], Any], names: Collection[str], seed: int,
              profile: settings = SMALL) -> list[ItemResult]:
    """Only the items ``names`` (``tool::label``) of the server ``build`` makes."""
    with McpTarget("in-process", transport=in_process(build)) as target:
        tools = {tool.name: tool for tool in tools_under_test(target)}
        chosen = [item for item in plan(list(tools.values()), allow_writes=True)
                  if f"{item.tool}::{item.label}" in names]
        assert len(chosen) == len(names)
        return [run_item(target, tools[item.tool], item, profile, seed) for item in chosen]


def by_item(results: list[ItemResult]) -> dict[str, ItemResult]:
    return {f"{result.item.tool}::{result.item.label}": result for result in results}


def outcomes(results: list[ItemResult], outcome: str) -> set[str]:
    return {name for name, result in by_item(results).items() if result.outcome == outcome}


def fixture_tools() -> dict[str, Any]:
    return dict(load_table("tests.fixtures.mcp_table:TOOLS", ROOT))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The calls the strict server receives in this process, in order."""
    calls: list[dict[str, Any]] = []
    original = _strict_server.call_tool

    async def recording(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        calls.append({"tool": params.name, "args": params.arguments})
        return await original(ctx, params)

    monkeypatch.setattr(_strict_server, "call_tool", recording)
    return calls


def strict_app() -> Server[Any]:
    return Server("strict", on_list_tools=_strict_server.list_tools,
                  on_call_tool=_strict_server.call_tool)


# --- In process -----------------------------------------------------------------------------


def test_the_strict_server_passes_every_item(recorded: list[dict[str, Any]]) -> None:
    """Every item of a server that holds its tools to their schemas passes, and each one
    really sent calls: defective ones the schema refuses, and valid ones it admits."""
    results = check("strict", strict_app, allow_writes=True)
    assert outcomes(results, "failed") == set()
    assert outcomes(results, "skipped") == set()
    names = set(by_item(results))
    assert {"search_orders::refused[allowed:status]", "search_orders::refused[max:limit]",
            "search_orders::refused[pattern:customer]", "get_price::refused[min:weight_kg]",
            "get_price::mistake[extra-argument]", "cancel_order::accepts"} <= names
    assert all(result.examples >= 1 and sum(result.drawn.values()) >= 1 for result in results
               if result.item.prop not in ("listing", "secret"))
    inputs = {name: Draft202012Validator(tool.input_schema)
              for name, tool in _strict_server.TOOLS.items()}
    valid = [call for call in recorded if inputs[call["tool"]].is_valid(call["args"])]
    refused = [call for call in recorded if not inputs[call["tool"]].is_valid(call["args"])]
    assert valid
    assert refused
    assert {call["tool"] for call in refused} == set(_strict_server.TOOLS)


def test_a_write_tool_is_called_only_when_writes_are_allowed(
        recorded: list[dict[str, Any]]) -> None:
    """Without allow_writes a destructive tool's items are skipped, saying how to allow them,
    and not one call reaches it."""
    results = check("strict", strict_app)
    skipped = {name: result for name, result in by_item(results).items()
               if result.outcome == "skipped"}
    assert skipped
    assert {name.split("::")[0] for name in skipped} == {"cancel_order"}
    assert all("--agtool-allow-writes" in result.message for result in skipped.values())
    assert "cancel_order" not in {call["tool"] for call in recorded}
    assert outcomes(results, "failed") == set()


def test_the_lax_server_fails_with_an_item_naming_each_defect() -> None:
    """Coercion and a result outside the outputSchema each fail an item that says what
    happened; an extra argument its open schema admits and it drops warns (never fails);
    what the lax server does refuse passes."""
    results = check("lax", lambda: _lax_server.app)
    assert outcomes(results, "failed") == LAX_DEFECTS
    assert outcomes(results, "warned") >= LAX_WARNINGS
    assert {"count_items::refused[missing:limit]", "count_items::accepts"} <= outcomes(
        results, "passed")
    items = by_item(results)
    coerced = items["count_items::refused[type:limit]"].message
    assert "accepted a call its own inputSchema refuses" in coerced
    assert "args:type:limit" in coerced
    assert "jsonschema on the server's inputSchema: $.limit" in coerced
    dropped = items["count_items::refused[unexpected:*]"].message
    assert "set additionalProperties: false" in dropped
    assert "Additional properties are not allowed" not in dropped
    out_of_range = items["stock_level::accepts"].message
    assert "outside its outputSchema" in out_of_range
    assert "result:range" in out_of_range
    assert 'stock_level({"sku": ' in out_of_range  # the call that broke it
    unenforceable = items["days_until::contract"]
    assert unenforceable.outcome == "skipped"
    # its format: date alone imports
    assert "without the network" in unenforceable.message
    assert {name for name in outcomes(results, "skipped")
            if name.startswith("delete_everything::")}


def test_agtools_own_served_table_passes() -> None:
    """`agtool.mcp.server` over the fixture table passes: its refusals carry the exact
    reason planted. The redacted phone's outputSchema is beyond the importer, which is
    said by a skipped `contract` item; the tool's calls are still checked."""
    results = check("agtool", lambda: agtool_server(fixture_tools()))
    assert outcomes(results, "failed") == set()
    items = by_item(results)
    assert "by jsonschema alone" in items["customer::contract"].message
    assert items["customer::refused[pattern:customer_id]"].outcome == "passed"
    assert items["search_tickets::accepts"].outcome == "passed"
    assert items["send_sms::accepts"].outcome == "skipped"


def liar_app() -> Server[Any]:
    """Tools that break the harness's properties in the ways the strict server never does."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"], "additionalProperties": False}
    output = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    read = types.ToolAnnotations(read_only_hint=True)
    tools = [types.Tool(name=name, input_schema=schema, output_schema=output, annotations=read)
             for name in ("wrong_reason", "text_only", "rpc_error")]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = [types.TextContent(type="text", text="{}")]
        if params.name == "rpc_error":  # refused as a protocol error, not as a tool result
            raise MCPError(types.INVALID_PARAMS, "invalid params")
        if params.name == "wrong_reason":  # agtool's error shape, with a reason it did not plant
            error = {"ok": False, "error": {"details": {"reason": "args:min:n"}}}
            return types.CallToolResult(content=text, structured_content=error, is_error=True)
        if (params.arguments or {}).get("n") == "raise":
            raise ValueError("the server's handler raised")
        return types.CallToolResult(content=text)  # an outputSchema, but no structuredContent

    return Server("liar", on_list_tools=list_tools, on_call_tool=call_tool)


def test_a_refusal_with_another_reason_and_a_result_without_structure_fail() -> None:
    """An agtool-shaped refusal must name the planted defect; a valid call answered without
    the structuredContent its outputSchema promises fails `accepts`, a refused one warns;
    a server that refuses everything pins no refusal: inconclusive, never a pass."""
    items = by_item(check("liar", liar_app))
    wrong = items["wrong_reason::refused[type:n]"]
    assert wrong.outcome == "failed"
    assert "'args:min:n'" in wrong.message
    assert "the defect planted is 'args:type:n'" in wrong.message
    assert items["wrong_reason::refused[min:n]"].outcome == "passed"
    refused_valid = items["wrong_reason::accepts"]
    assert refused_valid.outcome == "warned"
    assert "refused what its schema admits" in refused_valid.message
    assert items["text_only::accepts"].outcome == "failed"
    assert "returned no structuredContent" in items["text_only::accepts"].message
    # Refused, but so is every call without the defect: nothing pins it on type:n.
    assert items["rpc_error::refused[type:n]"].outcome == "inconclusive"
    assert "cannot be pinned" in items["rpc_error::refused[type:n]"].message
    assert "JSON-RPC error -32602" in items["rpc_error::accepts"].message


def test_the_same_seed_sends_the_same_calls(recorded: list[dict[str, Any]]) -> None:
    """Calls are drawn from the seed alone: the same seed twice, the same calls in the same
    order; another seed, other calls."""
    def calls_of(seed: int) -> list[str]:
        recorded.clear()
        run_items(strict_app, ["search_orders::refused[type:tags[]]",
                               "get_price::mistake[string-number]", "get_price::accepts"], seed)
        return [json.dumps(call, sort_keys=True) for call in recorded]

    first = calls_of(7)
    assert first
    assert calls_of(7) == first
    assert calls_of(8) != first


def test_draws_the_two_oracles_read_otherwise_are_not_sent() -> None:
    """1.0 for an integer (jsonschema admits it, the gate does not) and NaN (JSON cannot
    carry it) are never sent, so they cannot make a verdict on the server; an extra key is
    judged by the server's schema as written: refused when it is closed, admitted (a
    warning at most) when it is open, whatever agtool's copy of it says."""
    from agtool.harness._mcp_check import _Checks

    with McpTarget("strict", transport=in_process(strict_app)) as target:
        tool = next(tool for tool in tools_under_test(target) if tool.name == "get_price")
        checks = _Checks(target, tool)
        good = {"sku": "ab", "currency": "KRW", "weight_kg": 1.5}
        assert checks.valid(good) == good
        assert checks.defective({**good, "weight_kg": float("nan")},
                                frozenset({"type:weight_kg"}), good) is None
        assert checks.defective({**good, "extra": 1}, frozenset({"unexpected:extra"}),
                                good) == ("contract", {**good, "extra": 1}, good)
    with McpTarget("lax", transport=in_process(lambda: _lax_server.app)) as target:
        tool = next(tool for tool in tools_under_test(target) if tool.name == "count_items")
        checks = _Checks(target, tool)
        base = {"limit": 2}
        assert checks.defective({"limit": 2.0}, frozenset({"type:limit"}), base) is None
        assert checks.defective({"limit": True}, frozenset({"type:limit"}), base) == (
            "contract", {"limit": True}, base)
        # The lax server's schema leaves the object open: an extra key is its to admit.
        assert checks.defective({"limit": 2, "x": 1}, frozenset({"unexpected:x"}), base) == (
            "open", {"limit": 2, "x": 1}, base)


def test_items_are_planned_per_site_and_mistake_and_capped_in_examples() -> None:
    """One refused item per defect site and one mistake item per mistake the contract
    admits; no profile draws more than EXAMPLES_PER_ITEM per item."""
    from agtool.harness.strategies import defect_sites, mistake_kinds

    with McpTarget("strict", transport=in_process(strict_app)) as target:
        tools = tools_under_test(target)
        items = plan(tools, allow_writes=True)
        for tool in tools:
            table = {tool.name: tool.entry}
            mine = [item for item in items if item.tool == tool.name]
            assert [item.case for item in mine if item.prop == "refused"] == defect_sites(
                table, tool.name)
            assert [item.case for item in mine if item.prop == "mistake"] == mistake_kinds(
                table, tool.name)
    results = run_items(strict_app, ["get_price::accepts", "search_orders::refused[max:limit]"],
                        0, settings(max_examples=500, database=None))
    # Drawn: besides, `accepts` first sends the calls the schema's hints make.
    assert [result.drawn.get("valid call", 0) + result.drawn.get("max: above max", 0)
            for result in results] == [EXAMPLES_PER_ITEM] * 2
    assert by_item(results)["get_price::accepts"].drawn["hinted call"] >= 1


#: The lax server's defects that every draw of their item meets, whatever the seed.
EVERY_DRAW = {"count_items::mistake[bool-for-int]": "failed",
              "count_items::mistake[string-number]": "failed",
              "count_items::mistake[extra-argument]": "warned",
              "count_items::refused[unexpected:*]": "warned"}


def test_the_lax_servers_defects_are_found_under_every_seed() -> None:
    """Ten seeds, two examples per item: the items whose every draw meets a defect fail (or
    warn) every time, so what the lax server gets wrong is found on every run."""
    # Finding is the point here, not shrinking: no shrink phase.
    profile = settings(SMALL, max_examples=2, phases=[Phase.generate])
    for seed in range(10):
        results = run_items(lambda: _lax_server.app, EVERY_DRAW, seed, profile)
        assert {name: result.outcome for name, result in by_item(results).items()} == (
            EVERY_DRAW), seed


def test_seeds_are_chosen_from_the_option_the_profile_or_afresh() -> None:
    """A given seed wins; a derandomized profile's is fixed; otherwise each run has its own."""
    assert choose_seed(42, derandomized=True) == 42
    assert choose_seed(None, derandomized=True) == choose_seed(None, derandomized=True)
    assert len({choose_seed(None, derandomized=False) for _ in range(5)}) > 1


def test_a_server_that_does_not_start_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """No such command: `agtool check` exits 2 with one line naming it; an empty target too."""
    assert main(["check", "--mcp", "no-such-mcp-server-command"]) == 2
    err = capsys.readouterr().err
    assert "no-such-mcp-server-command" in err
    assert "did not start" in err
    assert err.count("\n") == 1
    with pytest.raises(ValueError, match="empty"):
        McpTarget("  ")


# --- Real subprocesses ---------------------------------------------------------------------


@pytest.mark.slow
def test_agtool_check_over_stdio_subprocesses(capsys: pytest.CaptureFixture[str]) -> None:
    """`agtool check` passes the strict server (status 0) and fails the lax one (status 1)
    with a FAIL line naming each defect, a WARN line for each loose schema, the skips said
    once per tool, and the seed."""
    assert main(["check", "--mcp", STRICT, "--allow-writes", "--max-examples", "3",
                 "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert " 0 failed, 0 warned, 0 inconclusive, 0 skipped; seed 3" in out
    assert main(["check", "--mcp", LAX, "--max-examples", "3", "--seed", "11"]) == 1
    out = capsys.readouterr().out
    fails = {" ".join(line.split(" ")[1:3]).rstrip(":") for line in out.splitlines()
             if line.startswith("FAIL ")}
    assert fails == {name.replace("::", " ") for name in LAX_DEFECTS}
    warns = {" ".join(line.split(" ")[1:3]).rstrip(":") for line in out.splitlines()
             if line.startswith("WARN ")}
    assert warns >= {name.replace("::", " ") for name in LAX_WARNINGS}
    assert sum(line.startswith("SKIP delete_everything") for line in out.splitlines()) == 1
    assert out.splitlines()[-1].endswith("seed 11 (the same calls again: --seed 11)")


@pytest.mark.slow
def test_agtool_mcp_serve_passes_over_stdio_and_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture table served by `agtool mcp serve`, checked through a real client over
    stdio and over streamable HTTP: no item fails."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    serve = [sys.executable, "-m", "agtool._cli", "mcp", "serve", "--table",
             "tests.fixtures.mcp_table:TOOLS", "--records", os.devnull]
    stdio = run_check(" ".join(serve), settings=SMALL)
    assert outcomes(stdio, "failed") == set()
    assert outcomes(stdio, "passed") >= {"search_tickets::accepts",
                                         "search_tickets::refused[allowed:status]"}
    port = free_port()
    process = subprocess.Popen([*serve, "--http", "--port", str(port)],  # noqa: S603
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, 60)
        http = run_check(f"http://127.0.0.1:{port}/mcp", settings=SMALL)
    finally:
        process.terminate()
        process.communicate(timeout=60)
    assert outcomes(http, "failed") == set()
    assert set(by_item(http)) == set(by_item(stdio))


@pytest.mark.slow
def test_a_server_that_dies_on_bad_input_is_named_and_started_again() -> None:
    """A server that exits on a defective call fails that item with the call that killed it;
    the next item starts the server again, so valid calls still pass."""
    names = ["get_price::refused[min:weight_kg]", "get_price::refused[type:currency]",
             "get_price::accepts"]
    # Passed by name: the server gets the SDK's safe environment, not this process's.
    with McpTarget(STRICT, env={"STRICT_MODE": "crash"}) as target:
        tools = {tool.name: tool for tool in tools_under_test(target)}
        chosen = [item for item in plan(list(tools.values()))
                  if f"{item.tool}::{item.label}" in names]
        items = by_item([run_item(target, tools[item.tool], item, SMALL, 0) for item in chosen])
    assert items["get_price::refused[type:currency]"].outcome == "failed"
    died = items["get_price::refused[min:weight_kg]"]
    assert died.outcome == "failed"
    assert "broke the server or the session" in died.message
    assert "get_price(" in died.message
    assert items["get_price::accepts"].outcome == "passed"


pytest_plugins = ["pytester"]


@pytest.mark.slow
def test_the_pytest_plugin_runs_the_items_over_a_lax_server(pytester: pytest.Pytester) -> None:
    """`pytest --agtool-mcp=CMD`: one item per tool, property and case, marked `agtool`; the
    lax server's defects fail in a few readable lines with the seed to replay them; JUnit XML
    carries each item's examples and seed."""
    pytester.makeconftest("")
    xml = pytester.path / "report.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--agtool-mcp={LAX}",
                                "--hypothesis-seed=5", "-m", "agtool", f"--junitxml={xml}",
                                "-k", "count_items or stock_level or days_until")
    text = result.stdout.str()
    assert "agtool mcp: seed 5 (the same calls again: --hypothesis-seed=5)" in text
    assert "agtool mcp: 'refused' does not hold for tool 'count_items'" in text
    assert "--hypothesis-seed=5 '--agtool-item=count_items::refused[type:limit]'" in text
    assert "Traceback" not in text
    assert "agtool mcp warnings" in text
    assert "WARN count_items refused[unexpected:*]:" in text
    ran: dict[str, str] = {}
    for case in ElementTree.parse(xml).getroot().iter("testcase"):  # noqa: S314 - pytest's own
        tool = case.get("classname", "").rsplit(".", 1)[-1]
        outcome = next((child.tag for child in case if child.tag in ("failure", "skipped")),
                       "passed")
        ran[f"{tool}::{case.get('name')}"] = outcome
        props = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
        assert props.get("seed") == "5"
        calls = outcome != "skipped" and case.get("name") not in ("listing", "secret")
        assert int(props.get("examples") or "-1") >= (1 if calls else 0)
    assert {name for name, outcome in ran.items() if outcome == "failure"} >= LAX_DEFECTS
    assert ran["count_items::refused[missing:limit]"] == "passed"
    assert ran["days_until::contract"] == "skipped"
    assert not any(name.startswith("delete_everything") for name in ran)  # -k left it out


@pytest.mark.slow
def test_a_pytest_replay_line_runs_exactly_its_item_with_its_flags(
        pytester: pytest.Pytester) -> None:
    """A failure's replay line carries --agtool-allow-writes when the run had it, and selects
    exactly that item (not every item whose name contains the tool's); run as printed, it
    fails the same way. The NDJSON summary fills `case` and the verdict for MCP items."""
    pytester.makeconftest("")
    summary = pytester.path / "summary.ndjson"
    first = pytester.runpytest("-p", "no:cacheprovider", f"--agtool-mcp={LAX}",
                               "--hypothesis-seed=2", "--agtool-allow-writes",
                               f"--agtool-summary={summary}", "-k", "delete_everything")
    replay = next(line.split("replay: ", 1)[1] for line in first.stdout.lines
                  if "replay: pytest" in line and "delete_everything::refused[type:confirm]"
                  in line)
    assert "--agtool-allow-writes" in replay
    lines = [json.loads(line) for line in summary.read_text().splitlines()]
    cases = {line["case"] for line in lines if line["property"] == "refused"}
    assert "type:confirm" in cases
    assert {line["verdict"] for line in lines} >= {"failed", "warned", "passed"}
    import shlex

    words = shlex.split(replay)
    assert words[0] == "pytest"
    again = pytester.runpytest("-p", "no:cacheprovider", *words[1:])
    again.assert_outcomes(failed=1)
    assert "delete_everything::refused[type:confirm]" in again.stdout.str()
