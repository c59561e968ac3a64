"""The rule-driven agent graphs: failures as paths, repairs by reason, a bounded budget.

Expected reasons are built from the defect each order plants, or asked of the
gate (``validate_args``) where the claim is "the reason is the gate's";
expected rows come from ``STOCK``; body runs are counted with ``tools.CALLS``
and ``GATE.stats`` after the memo is cleared, never copied from the graph's output.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph

import agtool.tools as tools
from agtool import STAGES, Gate, parse_reason
from agtool._stock_agent import DEFAULT_TOOL, SUCCESSORS
from agtool.graph._build import (
    AGENT_STAGES,
    ORDER_NOT_OBJECT,
    REPAIR_NONE,
    REPAIR_REPEAT,
    Call,
    State,
)

OUTCOME_KEYS = {"ok", "answer", "rows", "errors", "calls", "attempts", "fixes", "tool_runs"}
NAIVE_KEYS = {"ok", "answer", "rows", "errors", "calls"}
LIMIT = tools.TOOLS["stock_lookup"]["args"]["limit"]


@pytest.fixture
def cleared() -> Iterator[None]:
    """An empty memo, so every call whose args pass runs its body."""
    tools.GATE.clear()
    yield
    tools.GATE.clear()


def total_runs() -> int:
    return sum(tools.GATE.stats(name).runs for name in tools.TOOLS)


def order_args(order: dict[Any, Any]) -> dict[Any, Any]:
    return {key: value for key, value in order.items() if key != "tool"}


def in_stock(sku: str, region: str) -> list[dict[str, Any]]:
    return tools.STOCK[sku][region]


def first_valid_region_other_than(region: str) -> str:
    return next(r for r in tools.REGIONS if r != region)


# --- the reference scenarios ---------------------------------------------------------------


def test_bad_region_is_repaired_to_the_fallback_in_two_attempts(cleared: None) -> None:
    """A region the contract does not allow is replaced by FALLBACK_REGION and the call retried."""
    order: dict[str, Any] = {"sku": "A100", "region": "daegu", "limit": 2}
    assert order["region"] not in tools.REGIONS
    assert tools.FALLBACK_REGION in tools.REGIONS

    out = tools.handle(order)

    assert set(out) == OUTCOME_KEYS
    assert out["ok"] is True
    assert out["attempts"] == 2
    assert out["errors"] == ["args:allowed:region"]
    assert out["rows"] == in_stock("A100", tools.FALLBACK_REGION)[: order["limit"]]
    fixed_args = {**order, "region": tools.FALLBACK_REGION}
    assert out["calls"] == [{"tool": DEFAULT_TOOL, "args": order},
                            {"tool": DEFAULT_TOOL, "args": fixed_args}]
    assert out["fixes"] == [{"reason": "args:allowed:region", "field": "region", "action": "set",
                             "was": "daegu", "now": tools.FALLBACK_REGION}]
    assert out["tool_runs"] == 1  # the refused first call ran no body


def test_empty_result_gives_up_after_one_attempt(cleared: None) -> None:
    """An empty result cannot be fixed by asking again, so the run gives up at once."""
    order = {"sku": "B200", "region": "busan", "limit": 2}
    assert in_stock("B200", "busan") == []

    out = tools.handle(order)

    assert out["ok"] is False
    assert out["attempts"] == 1
    assert out["errors"] == ["result:empty"]
    assert out["fixes"] == []
    assert out["rows"] == []
    assert "result:empty" in out["answer"]
    assert out["tool_runs"] == 1


def test_legacy_too_big_is_repaired_by_switching_tools(cleared: None) -> None:
    """legacy_stock ignoring the limit is refused as too_big and the call moves to stock_lookup."""
    sku, region = next((sku, region) for sku, regions in tools.STOCK.items()
                       for region, rows in regions.items() if len(rows) > tools.MAX_ROWS)
    order = {"sku": sku, "region": region, "limit": tools.MAX_ROWS, "tool": "legacy_stock"}

    out = tools.handle(order)

    assert out["ok"] is True
    assert out["errors"] == ["result:too_big"]
    assert [call["tool"] for call in out["calls"]] == ["legacy_stock", SUCCESSORS["legacy_stock"]]
    assert out["rows"] == in_stock(sku, region)[: tools.MAX_ROWS]
    assert out["fixes"] == [{"reason": "result:too_big", "field": "tool", "action": "set",
                             "was": "legacy_stock", "now": "stock_lookup"}]
    assert out["tool_runs"] == 2  # both bodies ran: too_big is only known after the call


# --- every repair in REPAIRS ---------------------------------------------------------------

# reason -> (order planting exactly that defect, the fixed field, its value after the fix)
REPAIR_CASES: dict[str, tuple[dict[str, Any], str, Any]] = {
    "args:allowed:region": ({"sku": "A100", "region": "daegu", "limit": 1},
                            "region", tools.FALLBACK_REGION),
    "result:too_big": ({"sku": "A100", "region": "seoul", "limit": 2, "tool": "legacy_stock"},
                       "tool", "stock_lookup"),
    "args:type:limit": ({"sku": "A100", "region": "busan", "limit": "2"}, "limit", LIMIT["max"]),
    "args:min:limit": ({"sku": "A100", "region": "busan", "limit": LIMIT["min"] - 1},
                       "limit", LIMIT["min"]),
    "args:max:limit": ({"sku": "A100", "region": "busan", "limit": LIMIT["max"] + 1},
                       "limit", LIMIT["max"]),
    "args:missing:limit": ({"sku": "A100", "region": "busan"}, "limit", tools.MAX_ROWS),
    "args:unexpected:*": ({"sku": "A100", "region": "busan", "limit": 1, "colour": "red"},
                          "colour", None),
}


def test_every_repair_has_a_case() -> None:
    """A rule added to REPAIRS without a scenario here fails this test."""
    assert set(REPAIR_CASES) == set(tools.REPAIRS)


@pytest.mark.parametrize("key", sorted(REPAIR_CASES))
def test_each_repair_fixes_its_reason(key: str, cleared: None) -> None:
    """Each rule turns its reason into one field change, and the fixed call succeeds."""
    order, field, value = REPAIR_CASES[key]
    stage, check, arg = parse_reason(key)
    reason = f"{stage}:{check}:{field}" if arg == "*" else key

    out = tools.handle(copy.deepcopy(order))

    assert out["errors"] == [reason]
    assert out["ok"] is True
    assert out["attempts"] == 2
    assert len(out["fixes"]) == 1
    fix = out["fixes"][0]
    assert (fix["reason"], fix["field"], fix["now"]) == (reason, field, value)
    assert fix["action"] == ("drop" if arg == "*" else "set")
    assert order == REPAIR_CASES[key][0]  # the caller's order is never changed


@pytest.mark.parametrize(
    "reason",
    ["result:empty", "args:unknown_tool", "raised:KeyError", "raised:ZeroDivisionError",
     "args:missing:sku", "args:type:sku", "args:missing:region", "result:shape", "result:range",
     "args:not_object", "args:bad_contract", ORDER_NOT_OBJECT, REPAIR_REPEAT, ""],
)
def test_unfixable_reasons_are_not_repairable(reason: str) -> None:
    """Reasons no rule can fix are reported as such, so the run gives up on them at once."""
    assert tools.can_repair(reason) is False


def test_wildcard_repair_covers_any_unexpected_argument() -> None:
    """``args:unexpected:*`` matches every argument name, including one with colons."""
    for arg in ("colour", "sku_id", "a:b"):
        assert tools.can_repair(f"args:unexpected:{arg}") is True


# --- the budget and the no-repeat rule -----------------------------------------------------


def test_attempts_never_exceed_the_budget(cleared: None) -> None:
    """An order with more fixable defects than the budget allows stops at MAX_ATTEMPTS."""
    order = {"sku": "A100", "region": "daegu", "limit": "2", "colour": "red"}
    planted = ["args:unexpected:colour", "args:allowed:region", "args:type:limit"]
    assert len(planted) >= tools.MAX_ATTEMPTS

    out = tools.handle(order)

    assert out["ok"] is False
    assert out["attempts"] == tools.MAX_ATTEMPTS == len(out["calls"])
    assert out["errors"] == planted[: tools.MAX_ATTEMPTS]
    assert out["answer"] == f"No answer: {out['errors'][-1]}."
    assert out["tool_runs"] == 0


def test_a_repair_that_repeats_a_call_gives_up(cleared: None) -> None:
    """When the fallback is itself refused, the same fixed call is not made twice."""
    table = copy.deepcopy({name: {k: v for k, v in entry.items() if k != "fn"}
                           for name, entry in tools.TOOLS.items()})
    for name, entry in table.items():
        entry["fn"] = tools.TOOLS[name]["fn"]
        entry["args"]["region"]["allowed"] = [r for r in tools.REGIONS
                                              if r != tools.FALLBACK_REGION]
    gate = Gate(table)
    graph = tools.build_graph(gate=gate)

    state = graph.invoke({"order": {"sku": "A100", "region": "daegu", "limit": 1}})

    assert state["ok"] is False
    assert state["errors"] == ["args:allowed:region", "args:allowed:region", REPAIR_REPEAT]
    assert state["attempts"] == 2
    keys = [gate.cache_key(call["tool"], call["args"]) for call in state["calls"]]
    assert len(keys) == len(set(keys))
    assert gate.stats(DEFAULT_TOOL).runs == 0


def test_repair_without_a_rule_ends_the_run() -> None:
    """Asked to fix an unfixable reason, repair records ``repair:none`` and changes nothing."""
    call: Call = {"tool": DEFAULT_TOOL, "args": {"sku": "B200", "region": "busan", "limit": 1}}
    update = tools.repair({"errors": ["result:empty"], "calls": [call]})
    assert update == {"errors": [REPAIR_NONE]}


def test_repair_with_no_bound_to_use_ends_the_run() -> None:
    """A limit rule on a contract that has no bound for it gives ``repair:none``, not a guess."""
    def lookup(sku: str, region: str, limit: int) -> dict[str, Any]:
        return {"sku": sku, "rows": [{"store": "X", "count": 1}]}

    table = {"stock_lookup": {"fn": lookup, "args": {
        "sku": {"type": "str"}, "region": {"type": "str"}, "limit": {"type": "int"}},
        "returns": {"sku": {"type": "str"}, "rows": {"type": "list"}}}}
    gate = Gate(table)

    state = tools.build_graph(gate=gate).invoke({"order": {"sku": "A", "region": "r"}})

    assert state["errors"] == ["args:missing:limit", REPAIR_NONE]
    assert state["ok"] is False


# --- failures are values: bodies that raise, malformed orders ------------------------------


def raising_gate() -> Gate:
    def lookup(sku: str, region: str, limit: int) -> dict[str, Any]:
        raise KeyError("rows")

    return Gate({"stock_lookup": {**tools.TOOLS["stock_lookup"], "fn": lookup}})


@pytest.mark.parametrize("builder", [tools.build_naive, tools.build_graph])
def test_a_tool_body_raising_ends_the_run_with_its_reason(builder: Any) -> None:
    """A tool that raises is a ``raised:<Exception>`` path ending ok false, never a crash."""
    gate = raising_gate()

    state = builder(gate=gate).invoke({"order": {"sku": "A100", "region": "busan", "limit": 1}})

    assert state["ok"] is False
    assert state["errors"] == ["raised:KeyError"]
    assert state["attempts"] == 1
    assert "raised:KeyError" in state["answer"]
    assert gate.stats("stock_lookup").raised == 1


def test_a_gate_that_raises_is_not_hidden() -> None:
    """A bug below the graph (a gate breaking its never-raise promise) surfaces from invoke."""
    class Broken(Gate):
        def call_for_model(self, name: object, args: object, echo: Any = None,
                           **context: Any) -> Any:
            raise RuntimeError("gate bug")

    graph = tools.build_graph(gate=Broken(tools.TOOLS))
    with pytest.raises(RuntimeError, match="gate bug"):
        graph.invoke({"order": {"sku": "A100", "region": "busan", "limit": 1}})


NOT_DICTS = [None, "A100", 42, ["sku", "A100"], ("sku", "A100"), b"{}", 1.5]


@pytest.mark.parametrize("order", NOT_DICTS, ids=repr)
@pytest.mark.parametrize("run", [tools.handle, tools.run_naive], ids=["handle", "naive"])
def test_an_order_that_is_not_a_dict_ends_without_a_call(order: object, run: Any) -> None:
    """A non-dict order ends ok false with ``order:not_object`` and no call to the gate."""
    before = tools.CALLS
    out = run(order)
    assert out["ok"] is False
    assert out["errors"] == [ORDER_NOT_OBJECT]
    assert out["calls"] == []
    assert ORDER_NOT_OBJECT in out["answer"]
    assert before == tools.CALLS


UNFIXABLE_ORDERS = {
    "empty": {},
    "no sku": {"region": "busan", "limit": 1},
    "sku int": {"sku": 100, "region": "busan", "limit": 1},
    "sku None": {"sku": None, "region": "busan", "limit": 1},
    "no region": {"sku": "A100", "limit": 1},
    "region int": {"sku": "A100", "region": 3, "limit": 1},
    "unknown tool": {"sku": "A100", "region": "busan", "limit": 1, "tool": "stock_search"},
    "tool not str": {"sku": "A100", "region": "busan", "limit": 1, "tool": 7},
    "tool unhashable": {"sku": "A100", "region": "busan", "limit": 1, "tool": ["x"]},
    "non-str key": {"sku": "A100", "region": "busan", "limit": 1, 5: "five"},
}


@pytest.mark.parametrize("order", list(UNFIXABLE_ORDERS.values()), ids=list(UNFIXABLE_ORDERS))
def test_malformed_orders_end_with_the_gates_reason(order: dict[Any, Any], cleared: None) -> None:
    """Fields are passed to the gate as they are, so the run ends with the gate's own reason."""
    tool = order.get("tool", DEFAULT_TOOL)
    expected = "args:" + tools.validate_args(tool, order_args(order))
    before = tools.CALLS

    for out in (tools.run_naive(order), tools.handle(order)):
        assert out["ok"] is False
        assert out["errors"] == [expected]
        assert out["answer"] == f"No answer: {expected}."
        assert out["rows"] == []
    assert before == tools.CALLS


@pytest.mark.parametrize(
    "order", [case[0] for case in REPAIR_CASES.values()], ids=list(REPAIR_CASES)
)
def test_naive_gives_up_on_what_the_repair_graph_fixes(order: dict[str, Any]) -> None:
    """The naive graph makes one call and goes straight to giveup with that call's reason."""
    out = tools.run_naive(order)
    assert set(out) == NAIVE_KEYS
    assert out["ok"] is False
    assert len(out["calls"]) == 1
    assert len(out["errors"]) == 1
    assert out["answer"] == f"No answer: {out['errors'][0]}."


def test_naive_answers_a_good_order(cleared: None) -> None:
    """A valid order with stock is answered from the first row in one call."""
    order = {"sku": "A100", "region": "busan", "limit": 2}
    first = in_stock("A100", "busan")[0]
    out = tools.run_naive(order)
    assert out["ok"] is True
    assert out["errors"] == []
    assert out["rows"] == in_stock("A100", "busan")[:2]
    assert out["answer"] == f"A100: {first['count']} in stock at {first['store']} (busan)."


def test_extra_order_keys_do_not_change_the_callers_order() -> None:
    """pick copies the order: the call's args are a fresh dict without ``tool``."""
    order = {"sku": "A100", "region": "busan", "limit": 1, "tool": "legacy_stock"}
    snapshot = dict(order)
    update = tools.pick({"order": order, "run_id": "run-1"})
    assert update == {"tool": "legacy_stock", "args": order_args(snapshot)}
    update["args"]["sku"] = "changed"
    assert order == snapshot


def test_pick_keeps_the_callers_run_id_or_makes_a_fresh_one() -> None:
    """A run id given by the caller keys the run's writes; without one each run gets its own."""
    order = {"sku": "A100"}
    assert "run_id" not in tools.pick({"order": order, "run_id": "run-1"})
    fresh = {tools.pick({"order": order})["run_id"] for _ in range(3)}
    assert len(fresh) == 3
    assert all(isinstance(run_id, str) and run_id for run_id in fresh)


def test_a_none_tool_means_the_default_tool() -> None:
    """``"tool": None`` in an order is the same as leaving the tool out."""
    assert tools.pick({"order": {"sku": "A100", "tool": None}})["tool"] == DEFAULT_TOOL


def echo_gate() -> Gate:
    """The reference stock_lookup with a request id the caller must copy from the order."""
    def lookup(sku: str, region: str, limit: int, request_id: str) -> dict[str, Any]:
        return tools.stock_lookup(sku, region, limit)

    entry = tools.TOOLS["stock_lookup"]
    args = {**entry["args"], "request_id": {"type": "str", "echo": True}}
    return Gate({"stock_lookup": {**entry, "fn": lookup, "args": args}})


def test_echo_arguments_are_checked_against_the_order() -> None:
    """The order's echo values go to the gate: passed through they match, absent they fail."""
    gate = echo_gate()
    graph = tools.build_graph(gate=gate)
    order = {"sku": "A100", "region": "busan", "limit": 1, "request_id": "r-17"}
    without = {key: value for key, value in order.items() if key != "request_id"}
    assert gate.validate_args("stock_lookup", order, {"request_id": "r-17"}) == ""

    copied = graph.invoke({"order": order})
    absent = graph.invoke({"order": without})

    assert copied["ok"] is True
    assert copied["errors"] == []
    assert absent["ok"] is False
    assert absent["errors"] == ["args:" + gate.validate_args("stock_lookup", without, {})]


# --- bodies never run on refused args ------------------------------------------------------

ORDERS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "sku": st.sampled_from(["A100", "B200", "C300", "Z999", 100, None, True]),
            "region": st.sampled_from([*tools.REGIONS, "daegu", "", 1, None]),
            "limit": st.sampled_from([0, 1, 2, 3, -1, "2", True, 1.0, None]),
            "tool": st.sampled_from(["stock_lookup", "legacy_stock", "nope", None, 3]),
            "colour": st.just("red"),
            "sku_id": st.just("A100"),
        },
    ),
    st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2),
)


@pytest.mark.slow
@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(order=ORDERS)
def test_any_order_ends_in_a_bounded_honest_outcome(order: object) -> None:
    """Whatever the order: no exception, attempts within budget, no repeated call, bodies run
    exactly for the calls whose args passed and were not in the memo."""
    remembered = set(tools.CACHE)
    runs_before = total_runs()

    out = tools.handle(order)

    assert set(out) == OUTCOME_KEYS
    assert out["attempts"] == len(out["calls"]) <= tools.MAX_ATTEMPTS
    keys = [tools.cache_key(c["tool"], c["args"]) if isinstance(c["tool"], str) else None
            for c in out["calls"]]
    assert len([k for k in keys if k is not None]) == len({k for k in keys if k is not None})
    passed = [key for call, key in zip(out["calls"], keys, strict=True)
              if tools.validate_args(call["tool"], call["args"]) == ""]
    expected_runs = len([key for key in passed if key not in remembered])
    assert out["tool_runs"] == expected_runs == total_runs() - runs_before
    for reason in out["errors"]:
        assert parse_reason(reason).stage in (*STAGES, *AGENT_STAGES)
    assert {fix["reason"] for fix in out["fixes"]} <= set(out["errors"])
    if out["ok"]:
        assert out["rows"]
        assert not out["errors"] or tools.can_repair(out["errors"][-1])
    else:
        assert out["errors"]
        assert out["answer"] == f"No answer: {out['errors'][-1]}."
        assert out["rows"] == []


def test_second_identical_order_in_one_run_runs_no_body(cleared: None) -> None:
    """The memo answers a repeated order within its run: the second call runs no body."""
    order = {"sku": "A100", "region": "daegu", "limit": 1}
    graph = tools.build_graph()
    before = tools.CALLS
    first = graph.invoke({"order": order, "run_id": "run-1"})
    between = tools.CALLS
    hits_before = tools.GATE.stats(DEFAULT_TOOL).hits
    second = graph.invoke({"order": order, "run_id": "run-1"})
    assert between - before == 1
    assert between == tools.CALLS
    assert second["rows"] == first["rows"]
    assert tools.GATE.stats(DEFAULT_TOOL).hits == hits_before + 1


def test_another_run_does_not_see_this_runs_memo(cleared: None) -> None:
    """A memo scoped to a run: the same order in a fresh run runs its body again."""
    order = {"sku": "A100", "region": "daegu", "limit": 1}
    first = tools.handle(order)
    second = tools.handle(order)
    assert first["tool_runs"] == 1
    assert second["tool_runs"] == 1
    assert second["rows"] == first["rows"]


# --- reply and giveup ----------------------------------------------------------------------

STOCK_CLAIM = re.compile(r"\b(\d+) in stock\b")


def test_reply_never_claims_stock_from_a_zero_count_row(cleared: None) -> None:
    """A first row with count 0 names the store but claims no stock."""
    sku, region = next((sku, region) for sku, regions in tools.STOCK.items()
                       for region, rows in regions.items() if rows and rows[0]["count"] == 0)
    out = tools.handle({"sku": sku, "region": region, "limit": 1})
    assert out["ok"] is True
    assert STOCK_CLAIM.search(out["answer"]) is None
    assert tools.STOCK[sku][region][0]["store"] in out["answer"]


@pytest.mark.parametrize(
    "rows",
    [[], [{"store": "X"}], [{"count": 3}], [{"store": "X", "count": True}],
     [{"store": "X", "count": "3"}], ["X"], [None]],
    ids=repr,
)
def test_reply_claims_nothing_from_rows_it_cannot_read(rows: list[Any]) -> None:
    """reply given rows without a store and an int count says no stock is shown."""
    update = tools.reply({"order": {}, "args": {"sku": "A100", "region": "busan"}, "rows": rows})
    assert STOCK_CLAIM.search(update["answer"]) is None


def test_reply_states_the_first_rows_count_and_store() -> None:
    """The answer quotes exactly the first row, in the region actually searched."""
    rows = [{"store": "Seomyeon", "count": 5}, {"store": "Haeundae", "count": 9}]
    args = {"sku": "A100", "region": "busan", "limit": 2}
    update = tools.reply({"order": args, "args": args, "rows": rows})
    assert STOCK_CLAIM.findall(update["answer"]) == ["5"]
    assert "Seomyeon" in update["answer"]
    assert "busan" in update["answer"]


def test_giveup_writes_the_last_reason() -> None:
    """giveup ends ok false with the last reason in the answer and no rows."""
    update = tools.giveup({"errors": ["args:allowed:region", "result:empty"],
                           "rows": [{"store": "X", "count": 1}]})
    assert update == {"ok": False, "answer": "No answer: result:empty.", "rows": []}


def test_fetch_records_the_call_and_reason_and_never_raises() -> None:
    """fetch appends the call, the gate's reason, and one attempt, for any tool and args."""
    for tool, args in [("stock_lookup", {"sku": 1}), (None, None), (["x"], "args")]:
        update = tools.fetch({"tool": tool, "args": args})
        assert update["calls"] == [{"tool": tool, "args": args}]
        assert update["attempts"] == 1
        assert update["ok"] is False
        assert update["errors"] == [tools.call_tool(tool, args)["error"]]
        assert update["rows"] == []


# --- it is a LangGraph graph ---------------------------------------------------------------


def edges_of(graph: Any) -> set[tuple[str, str]]:
    return {(edge.source, edge.target) for edge in graph.get_graph().edges}


def test_graph_structure_shows_the_failure_paths() -> None:
    """The drawn graph has the repair loop; the naive one goes from fetch to giveup only."""
    full, naive = edges_of(tools.build_graph()), edges_of(tools.build_naive())
    loop = {("fetch", "repair"), ("repair", "fetch"), ("repair", "giveup")}
    assert loop <= full
    assert {("fetch", "reply"), ("fetch", "giveup"), ("pick", "giveup")} <= full & naive
    assert not {edge for edge in naive if "repair" in edge}
    mermaid = tools.build_graph().get_graph().draw_mermaid()
    assert "fetch -.-> repair;" in mermaid
    assert "repair -.-> fetch;" in mermaid


def test_graph_streams_node_by_node() -> None:
    """Streaming the bad-region order shows pick, a refused fetch, repair, fetch, reply."""
    order = {"sku": "A100", "region": "daegu", "limit": 1}
    steps = [next(iter(chunk)) for chunk in
             tools.build_graph().stream({"order": order}, stream_mode="updates")]
    assert steps == ["pick", "fetch", "repair", "fetch", "reply"]


def test_graph_embeds_as_a_subgraph() -> None:
    """The compiled graph runs as one node of a parent graph sharing its state."""
    parent: StateGraph[State] = StateGraph(State)
    parent.add_node("agent", tools.build_graph())
    parent.add_edge(START, "agent")
    parent.add_edge("agent", END)
    order = {"sku": "A100", "region": "daegu", "limit": 1}

    state = parent.compile().invoke({"order": order})

    assert state["ok"] is True
    assert state["errors"] == ["args:allowed:region"]
    assert state["attempts"] == 2


def test_tools_reexports_the_graph_names() -> None:
    """The names the lab asks for are reachable from agtool.tools and listed in its __all__."""
    names = {"State", "pick", "fetch", "reply", "giveup", "build_naive", "run_naive",
             "MAX_ATTEMPTS", "FALLBACK_REGION", "REPAIRS", "can_repair", "repair", "build_graph",
             "handle"}
    assert names <= set(tools.__all__)
    assert all(hasattr(tools, name) for name in names)
    assert tools.MAX_ATTEMPTS == 3
