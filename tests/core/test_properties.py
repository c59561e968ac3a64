"""Properties 1-4 of the gate, on the reference tools, a ticket table and tables nobody wrote.

1. A single-defect call is refused with exactly its planted reason; the body runs zero times.
2. A valid call runs the body once; its repeat, keys in any order, runs it zero times and
   returns an equal value; a different call runs it again.
3. A bad result is refused with ``result:<kind>``, is not remembered, and its repeat runs again.
4. The gate never raises and answers the three-key envelope, for any name and any args.

Every defect site of every hand-written tool is its own test case, so each defect kind runs
on every run; Hypothesis varies the values. Expected reasons are the ones the strategies
planted; body runs are counted by ``agtool.harness._checks.Body`` wrappers, not read from the gate.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from _tables import TICKETS
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agtool import ARG_CHECKS, RESULT_CHECKS, Gate, ToolStats, tools
from agtool.harness._checks import (
    body_of,
    check_bad_result,
    check_envelope,
    check_memo,
    check_refused,
    check_returns,
    instrument,
)
from agtool.harness.strategies import (
    MISTAKES,
    BadResult,
    DefectiveCall,
    DefectSite,
    any_calls,
    bad_results,
    contract_tables,
    defect_sites,
    model_mistakes,
    one_defect_args,
    permuted,
    result_sites,
    valid_args,
    valid_results,
)

TOOLS = tools.TOOLS


TABLES = {"reference": TOOLS, "tickets": TICKETS}
TOOL_CASES = [(label, name) for label, table in TABLES.items() for name in table]
SITE_CASES = [(label, name, site) for label, name in TOOL_CASES
              for site in defect_sites(TABLES[label], name)]
RESULT_CASES = [(label, name, kind) for label, name in TOOL_CASES for kind in RESULT_CHECKS
                if kind in {site.kind for site in result_sites(TABLES[label], name)}]
#: Arguments the reference data has rows for, so the real body's answers are not all empty.
STOCKED = st.fixed_dictionaries({"sku": st.sampled_from(sorted(tools.STOCK)),
                                 "region": st.sampled_from(tools.REGIONS),
                                 "limit": st.integers(1, tools.MAX_ROWS)})
KEYS = ("sku", "region", "limit")
#: Per parametrized case: there are dozens of cases, each one run every time, so each gets a
#: third of the profile's examples (read after the profile is loaded, at collection).
PER_CASE = settings(max_examples=max(10, settings().max_examples // 3))


def test_every_defect_kind_has_a_case_on_every_run() -> None:
    """The parametrized cases cover every argument check and every result kind.

    (But ``schema``, which only an imported JSON Schema's rules beyond the specs make:
    tests/jsonschema/test_schema_check.py holds those.)"""
    assert {site.kind for _, _, site in SITE_CASES} == set(ARG_CHECKS) - {"schema"}
    assert {kind for _, _, kind in RESULT_CASES} == set(RESULT_CHECKS)


# --- property 1 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "name", "site"), SITE_CASES,
                         ids=[f"{name}-{site}" for _, name, site in SITE_CASES])
@PER_CASE
@given(data=st.data())
def test_a_single_defect_is_refused_with_its_reason(label: str, name: str, site: DefectSite,
                                                    data: st.DataObject) -> None:
    """Each defect site: refused with exactly the planted reason, and no body run."""
    table = TABLES[label]
    call = data.draw(one_defect_args(table, name, site.kind, site.arg, site.path))
    check_refused(instrument(table, [name], stub=True), name, call.args, call.reason, call.echo)


def trap(args: dict[str, Any], kind: str, arg: str) -> DefectiveCall:
    """A hand-made defective call: the reason is the defect written into it."""
    site = DefectSite(kind, "" if kind == "unexpected" else arg)
    return DefectiveCall(args, kind, arg, f"{kind}:{arg}", site, "classic trap")


@given(call=one_defect_args(TOOLS, "stock_lookup"))
@example(call=trap({"sku": "A100", "region": "seoul", "limit": True}, "type", "limit"))
@example(call=trap({"sku": "A100", "region": "seoul", "limit": "2"}, "type", "limit"))
@example(call=trap({"sku": "A100", "region": "seoul", "limit": 1.0}, "type", "limit"))
@example(call=trap({"sku_id": "A100", "region": "seoul", "limit": 1, "sku": "A100"},
                   "unexpected", "sku_id"))
@example(call=trap({"sku": "A100", "region": "daegu", "limit": 1}, "allowed", "region"))
@example(call=trap({"sku": "A100", "region": "seoul", "limit": 0}, "min", "limit"))
def test_the_classic_traps_never_reach_the_real_body(call: DefectiveCall) -> None:
    """True, "2" and 1.0 for an int, sku_id for sku, daegu for a region: the body never runs."""
    gate = instrument(TOOLS, ["stock_lookup"])  # the real function, wrapped in a counter
    check_refused(gate, "stock_lookup", call.args, call.reason)
    assert body_of(gate, "stock_lookup").seen == []


@pytest.mark.parametrize("kind", MISTAKES)
@PER_CASE
@given(data=st.data())
def test_a_model_mistake_is_refused_naming_a_real_defect(kind: str, data: st.DataObject) -> None:
    """A renamed, dropped, extra or mistyped argument is refused, its reason one of its defects."""
    mistake = data.draw(model_mistakes(TOOLS, "stock_lookup", kind))
    gate = instrument(TOOLS, ["stock_lookup"], stub=True)
    envelope = check_envelope(gate, "stock_lookup", mistake.args, mistake.echo)
    assert envelope["error"].removeprefix("args:") in mistake.reasons
    assert body_of(gate, "stock_lookup").runs == 0


# --- property 2 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "name"), TOOL_CASES)
@given(data=st.data())
def test_a_valid_call_runs_once_and_its_repeat_never(label: str, name: str,
                                                     data: st.DataObject) -> None:
    """With a stub answering a valid value: one run, then memo hits in any key order."""
    table = TABLES[label]
    args = data.draw(valid_args(table, name))
    gate = instrument(table, [name], stub=True)
    body_of(gate, name).value = data.draw(valid_results(table, name))
    first = check_memo(gate, name, args, data.draw(permuted(args)),
                       data.draw(valid_args(table, name)))
    assert first["ok"]


@given(args=STOCKED | valid_args(TOOLS, "stock_lookup"), keys=st.permutations(KEYS),
       other=STOCKED)
@example(args={"sku": "A100", "region": "jeju", "limit": 1}, keys=("limit", "region", "sku"),
         other={"sku": "A100", "region": "jeju", "limit": 1})
@example(args={"sku": "B200", "region": "busan", "limit": 2}, keys=KEYS,
         other={"sku": "B200", "region": "busan", "limit": 2})
def test_the_memo_with_the_real_reference_bodies(args: dict[str, Any], keys: tuple[str, ...],
                                                 other: dict[str, Any]) -> None:
    """Real bodies: stocked calls are remembered; empty answers are refused and not remembered."""
    for name in TOOLS:
        check_memo(instrument(TOOLS, [name]), name, args, {key: args[key] for key in keys}, other)


# --- property 3 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "name", "kind"), RESULT_CASES)
@PER_CASE
@given(data=st.data())
def test_a_bad_result_is_refused_and_not_remembered(label: str, name: str, kind: str,
                                                    data: st.DataObject) -> None:
    """Each result kind: refused as result:<kind>, twice, with the body run both times."""
    table = TABLES[label]
    bad = data.draw(bad_results(table, name, kind))
    args = data.draw(valid_args(table, name))
    check_bad_result(instrument(table, [name], stub=True), name, args, bad.value, bad.reason)


def seeded(value: Any, kind: str) -> BadResult:
    """One of the seed's four bad results, with the kind the seed says it is."""
    return BadResult(value, kind, DefectSite(kind, "rows"), "the seed's example")


_ROW = {"store": "Gangnam", "count": 3}


@given(bad=bad_results(TOOLS, "stock_lookup"), args=STOCKED)
@example(bad=seeded({"sku": "A100", "rows": [{"store": "Gangnam", "count": "4개"}]}, "shape"),
         args={"sku": "A100", "region": "seoul", "limit": 1})
@example(bad=seeded({"sku": "A100", "rows": []}, "empty"),
         args={"sku": "A100", "region": "seoul", "limit": 1})
@example(bad=seeded({"sku": "A100", "rows": [_ROW] * (tools.MAX_ROWS + 1)}, "too_big"),
         args={"sku": "A100", "region": "seoul", "limit": 1})
@example(bad=seeded({"sku": "A100", "rows": [{"store": "Gangnam", "count": -1}]}, "range"),
         args={"sku": "A100", "region": "seoul", "limit": 1})
def test_the_seeds_bad_results_are_refused(bad: BadResult, args: dict[str, Any]) -> None:
    """A string count, no rows, too many rows, a negative count: each refused and forgotten."""
    gate = instrument(TOOLS, ["stock_lookup"], stub=True)
    check_bad_result(gate, "stock_lookup", args, bad.value, bad.reason)


def test_legacy_stock_breaks_its_own_return_contract() -> None:
    """legacy_stock ignores limit: check_returns catches it where the rows exceed MAX_ROWS."""
    gate = instrument(TOOLS, ["legacy_stock"])
    with pytest.raises(AssertionError, match=r"result:too_big"):
        check_returns(gate, "legacy_stock", {"sku": "A100", "region": "seoul", "limit": 1})


@given(args=STOCKED | valid_args(TOOLS, "stock_lookup"))
def test_stock_lookup_keeps_its_own_return_contract(args: dict[str, Any]) -> None:
    """stock_lookup takes every valid call and never returns a misshapen or oversized value."""
    check_returns(instrument(TOOLS, ["stock_lookup"]), "stock_lookup", args)


# --- property 4 -----------------------------------------------------------------------------------


class ValuesRaise(dict):  # type: ignore[type-arg]
    """Arguments that pass every check but whose values() raises."""

    def values(self) -> Any:
        raise RuntimeError("values() raised")


#: An int argument with no upper bound, where a 5000-digit int passes the check.
COUNTER = {"count_up": {"fn": lambda n: {"n": n}, "args": {"n": {"type": "int", "min": 0}},
                        "returns": {"n": {"type": "int"}}}}


@pytest.mark.slow
@given(call=any_calls(TOOLS))
@example(call=("stock_lookup", ValuesRaise(sku="A100", region="seoul", limit=1)))
@example(call=("stock_lookup", {"sku": "A100", "region": "seoul", "limit": 1, 2: "x"}))
@example(call=(["stock_lookup"], {}))
@example(call=("stock_lookup", ["A100", "seoul", 1]))
def test_the_gate_answers_anything_with_one_honest_envelope(call: tuple[Any, Any]) -> None:
    """Real reference bodies, any name and any args: an envelope, never an exception."""
    check_envelope(instrument(TOOLS), *call)


@given(n=st.integers(min_value=0) | st.sampled_from([10**5000, 2**64, 2**63]))
def test_an_int_too_long_to_print_is_answered(n: int) -> None:
    """A valid int beyond any JSON width (even str() refuses it) is run, not a crash."""
    envelope = check_envelope(instrument(COUNTER), "count_up", {"n": n})
    assert envelope["ok"]


@pytest.mark.slow
@given(data=st.data())
def test_the_ticket_table_answers_anything(data: st.DataObject) -> None:
    """Stubbed ticket bodies, any call: an envelope, never an exception."""
    name, args = data.draw(any_calls(TICKETS))
    gate = instrument(TICKETS, stub=True)
    if isinstance(name, str) and name in TICKETS:
        body_of(gate, name).value = data.draw(valid_results(TICKETS, name))
    check_envelope(gate, name, args)


# --- tables nobody wrote --------------------------------------------------------------------------


def _tool(data: st.DataObject, table: dict[str, Any]) -> str:
    return data.draw(st.sampled_from(sorted(table)), label="tool")


@pytest.mark.slow
@given(table=contract_tables(), data=st.data())
def test_generated_tables_refuse_each_single_defect(table: dict[str, Any],
                                                   data: st.DataObject) -> None:
    """Property 1 on a random table: the planted reason, no body run."""
    name = _tool(data, table)
    call = data.draw(one_defect_args(table, name))
    check_refused(instrument(table, [name], stub=True), name, call.args, call.reason, call.echo)


@pytest.mark.slow
@given(table=contract_tables(), data=st.data())
def test_generated_tables_remember_successes(table: dict[str, Any], data: st.DataObject) -> None:
    """Property 2 on a random table: one run, then hits in any key order."""
    name = _tool(data, table)
    args = data.draw(valid_args(table, name))
    gate = instrument(table, [name], stub=True)
    body_of(gate, name).value = data.draw(valid_results(table, name))
    assert check_memo(gate, name, args, data.draw(permuted(args)),
                      data.draw(valid_args(table, name)))["ok"]


@pytest.mark.slow
@given(table=contract_tables(), data=st.data())
def test_generated_tables_refuse_bad_results(table: dict[str, Any], data: st.DataObject) -> None:
    """Property 3 on a random table: result:<kind>, not remembered."""
    name = _tool(data, table)
    bad = data.draw(bad_results(table, name))
    args = data.draw(valid_args(table, name))
    check_bad_result(instrument(table, [name], stub=True), name, args, bad.value, bad.reason)


@pytest.mark.slow
@given(table=contract_tables(), data=st.data())
def test_generated_tables_answer_anything(table: dict[str, Any], data: st.DataObject) -> None:
    """Property 4 on a random table: any call gets one honest envelope."""
    name, args = data.draw(any_calls(table))
    gate = instrument(table, stub=True)
    if isinstance(name, str) and name in table:
        body_of(gate, name).value = data.draw(valid_results(table, name))
    check_envelope(gate, name, args)


# --- the checks themselves: each fails on a gate that breaks its promise --------------------------


def _broken(gate_class: type[Gate], table: dict[str, Any], name: str) -> Gate:
    """A gate of ``gate_class`` over the instrumented copy of ``table``'s tool ``name``."""
    return gate_class(instrument(table, [name], stub=True).table)


class RunsBodyFirst(Gate):
    """Runs the body, then checks the arguments: the bug the gate exists to prevent."""

    def call_tool(self, name: Any, args: Any, echo: Any = None, **context: Any) -> Any:
        with contextlib.suppress(Exception):
            self.table[name]["fn"](**args)
        return super().call_tool(name, args, echo, **context)


class RemembersNothing(Gate):
    """Forgets every success: the memo never answers."""

    def call_tool(self, name: Any, args: Any, echo: Any = None, **context: Any) -> Any:
        self.clear()
        return super().call_tool(name, args, echo, **context)


class RemembersFailures(Gate):
    """Answers a repeated call with whatever it answered first, refusals included."""

    def call_tool(self, name: Any, args: Any, echo: Any = None, **context: Any) -> Any:
        seen = self.__dict__.setdefault("seen", {})
        key = repr(sorted(args.items()))
        if key not in seen:
            seen[key] = super().call_tool(name, args, echo, **context)
        return seen[key]


class SharesItsMemo(Gate):
    """Hands out the remembered object itself, so a caller's change reaches the next caller."""

    def call_tool(self, name: Any, args: Any, echo: Any = None, **context: Any) -> Any:
        shared = self.__dict__.setdefault("shared", {})
        envelope = super().call_tool(name, args, echo, **context)
        if envelope["ok"]:
            envelope["value"] = shared.setdefault(repr(sorted(args.items())), envelope["value"])
        return envelope


class Raises(Gate):
    """Lets an exception out."""

    def call_tool(self, name: Any, args: Any, echo: Any = None, **context: Any) -> Any:
        raise KeyError(name)


class MiscountsRuns(Gate):
    """Counts no runs."""

    def stats(self, name: str) -> ToolStats:
        return ToolStats()


GOOD = {"sku": "A100", "region": "seoul", "limit": 1}


def test_check_refused_catches_a_body_run_on_refused_arguments() -> None:
    """A gate that runs the body before refusing fails check_refused."""
    gate = _broken(RunsBodyFirst, TOOLS, "stock_lookup")
    with pytest.raises(AssertionError, match="ran 1 time"):
        check_refused(gate, "stock_lookup", {**GOOD, "limit": True}, "type:limit")


def test_check_refused_catches_a_wrong_reason() -> None:
    """A defect the gate names wrongly (or not at all) fails check_refused."""
    gate = instrument(TOOLS, ["stock_lookup"], stub=True)
    with pytest.raises(AssertionError, match="the defect planted is 'type:limit'"):
        check_refused(gate, "stock_lookup", {**GOOD, "limit": 1}, "type:limit")


def test_check_memo_catches_a_memo_that_never_answers() -> None:
    """A gate that forgets successes fails check_memo on the repeat."""
    gate = _broken(RemembersNothing, TOOLS, "stock_lookup")
    body_of(gate, "stock_lookup").value = {"sku": "A100", "rows": [{"store": "S", "count": 1}]}
    with pytest.raises(AssertionError, match="expected none"):
        check_memo(gate, "stock_lookup", GOOD, GOOD, GOOD)


def test_check_memo_catches_a_memo_the_caller_can_change() -> None:
    """A gate that hands out its remembered object fails check_memo once the caller edits it."""
    gate = _broken(SharesItsMemo, TOOLS, "stock_lookup")
    body_of(gate, "stock_lookup").value = {"sku": "A100", "rows": [{"store": "S", "count": 1}]}
    with pytest.raises(AssertionError, match="the first call"):
        check_memo(gate, "stock_lookup", GOOD, dict(reversed(GOOD.items())), GOOD)


def test_check_bad_result_catches_a_remembered_failure() -> None:
    """A gate that remembers a refused result fails check_bad_result on the repeat."""
    gate = _broken(RemembersFailures, TOOLS, "stock_lookup")
    with pytest.raises(AssertionError, match="must not be remembered"):
        check_bad_result(gate, "stock_lookup", GOOD, {"sku": "A100", "rows": []}, "empty")


def test_check_envelope_catches_a_gate_that_raises() -> None:
    """An exception out of call_tool fails check_envelope, naming it."""
    with pytest.raises(AssertionError, match="raised KeyError"):
        check_envelope(_broken(Raises, TOOLS, "stock_lookup"), "stock_lookup", GOOD)


def test_the_checks_catch_counters_that_disagree_with_the_body() -> None:
    """gate.stats is checked against the counted bodies, not trusted."""
    gate = _broken(MiscountsRuns, TOOLS, "stock_lookup")
    body_of(gate, "stock_lookup").value = {"sku": "A100", "rows": [{"store": "S", "count": 1}]}
    with pytest.raises(AssertionError, match=r"gate\.stats says 0"):
        check_memo(gate, "stock_lookup", GOOD, GOOD, GOOD)


def test_check_returns_catches_a_function_that_cannot_take_its_contract() -> None:
    """A contract naming an argument the function lacks fails check_returns before any call."""
    table = {"t": {"fn": lambda a: {"a": a}, "args": {"a": {"type": "int"}, "b": {"type": "int"}},
                   "returns": {"a": {"type": "int"}}}}
    with pytest.raises(AssertionError, match="cannot take the valid arguments"):
        check_returns(instrument(table), "t", {"a": 1, "b": 2})
    builtin = {"t": {"fn": dict, "args": {"a": {"type": "int"}}, "returns": {"a": {"type": "int"}}}}
    assert check_returns(instrument(builtin), "t", {"a": 1})["ok"]  # no signature to compare


def test_instrumented_bodies_are_required() -> None:
    """The checks count through Body wrappers; a plain gate is refused with a TypeError."""
    with pytest.raises(TypeError, match="not instrumented"):
        body_of(Gate(TOOLS), "stock_lookup")
    body = body_of(instrument(TOOLS), "stock_lookup")
    assert "runs=0" in repr(body)
    assert not body.stubbed
    assert f"{body.value!r}" == "REAL"  # calls the real function until a value is set


#: Bodies that raise for some valid calls: the envelope names the exception, the run counts.
FLAKY = {"flaky": {"fn": lambda n: {"n": 10 // (n % 3)}, "args": {"n": {"type": "int"}},
                   "returns": {"n": {"type": "int"}}}}


class HashRaises(str):
    """A name equal to a str, whose hash raises."""

    def __hash__(self) -> int:
        raise RuntimeError("no hash")


@given(n=st.integers())
@example(n=3)
def test_a_body_that_raises_is_answered_not_thrown(n: int) -> None:
    """A raising body gives raised:<Exception> and counts its run; nothing escapes."""
    envelope = check_envelope(instrument(FLAKY), "flaky", {"n": n})
    assert (envelope["error"] == "raised:ZeroDivisionError") == (n % 3 == 0)


def test_a_name_whose_hash_raises_is_an_unknown_tool() -> None:
    """A str subclass that cannot be hashed is answered unknown_tool, not an exception."""
    envelope = check_envelope(instrument(FLAKY), HashRaises("flaky"), {"n": 1})
    assert envelope["error"] == "args:unknown_tool"


def test_arguments_that_cannot_be_copied_are_still_checked() -> None:
    """An argument deepcopy refuses is still refused with its reason; the body never runs."""
    check_refused(instrument(TOOLS, ["stock_lookup"], stub=True), "stock_lookup",
                  {**GOOD, "sku": threading.Lock()}, "type:sku")
