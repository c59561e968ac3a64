"""Property 5: the repairing graph fixes what can be fixed, gives up on the rest, within budget.

Orders are valid reference calls with defects planted by ``strategies.orders``;
which are repairable is the graph's own ``can_repair``. Whether an answer can
be non-empty is read from the reference data (``tools.STOCK``), so a repaired
order is expected to end ``ok`` only where stock exists to be found.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agtool import tools
from agtool.harness._checks import body_of, instrument
from agtool.harness.strategies import model_mistakes, orders

TOOLS = tools.TOOLS
MAX = tools.MAX_ATTEMPTS


def _stocked(sku: str, region: str) -> bool:
    return bool(tools.STOCK.get(sku, {}).get(region))


#: Valid calls with rows to find, in their own region and in the fallback a repair moves to.
STOCKED = [(sku, region) for sku in sorted(tools.STOCK) for region in tools.REGIONS
           if _stocked(sku, region) and _stocked(sku, tools.FALLBACK_REGION)]
#: Valid calls whose honest answer is empty: an unknown sku, or a region with no rows.
EMPTY = [("Z999", region) for region in tools.REGIONS] + [
    (sku, region) for sku in sorted(tools.STOCK) for region in tools.REGIONS
    if not _stocked(sku, region)]


def calls(pairs: list[tuple[str, str]]) -> st.SearchStrategy[dict[str, Any]]:
    """Valid stock_lookup arguments over the given (sku, region) pairs."""
    return st.builds(lambda pair, limit: {"sku": pair[0], "region": pair[1], "limit": limit},
                     st.sampled_from(pairs), st.integers(1, tools.MAX_ROWS))


def repairable_orders(fixes: tuple[int, int] = (1, MAX - 1)) -> Any:
    return orders(TOOLS, "stock_lookup", can_repair=tools.can_repair, fixes=fixes,
                  base=calls(STOCKED))


def unrepairable_orders() -> Any:
    return orders(TOOLS, "stock_lookup", can_repair=tools.can_repair, repairable=False,
                  fixes=(0, MAX - 2), base=calls(STOCKED))


def test_the_reference_data_has_both_kinds_of_call() -> None:
    """There are stocked calls to repair towards and empty ones to give up on."""
    assert STOCKED
    assert EMPTY


@given(order=repairable_orders())
def test_a_repairable_order_ends_ok_within_the_budget(order: Any) -> None:
    """Every planted defect is repaired, once each, and the answer is ok within MAX_ATTEMPTS."""
    outcome = tools.handle(order.fields)
    assert outcome["ok"], outcome
    assert outcome["attempts"] == 1 + len(order.repairable_errors) <= MAX
    assert sorted(outcome["errors"]) == sorted(order.repairable_errors)
    assert {fix["reason"] for fix in outcome["fixes"]} == set(order.repairable_errors)


@given(order=unrepairable_orders())
def test_an_unrepairable_order_gives_up_with_its_reason(order: Any) -> None:
    """The run ends on the planted unrepairable reason, having tried nothing it cannot fix."""
    outcome = tools.handle(order.fields)
    assert not outcome["ok"]
    assert outcome["errors"][-1] == order.unrepairable_error
    assert set(outcome["errors"]) <= set(order.errors)
    assert outcome["attempts"] == len(outcome["errors"]) <= MAX
    assert outcome["rows"] == []


@given(order=orders(TOOLS, "stock_lookup", can_repair=tools.can_repair, fixes=(0, 0),
                    base=calls(EMPTY)))
def test_an_empty_answer_is_not_retried(order: Any) -> None:
    """A valid call with nothing to find gives up on result:empty after one attempt."""
    outcome = tools.handle(order.fields)
    assert not outcome["ok"]
    assert outcome["errors"] == ["result:empty"]
    assert outcome["attempts"] == 1


@given(order=orders(TOOLS, "legacy_stock", can_repair=tools.can_repair, fixes=(0, MAX - 2),
                    base=st.just({"sku": "A100", "region": "seoul", "limit": 1})))
def test_too_many_rows_switch_to_the_tool_that_keeps_the_limit(order: Any) -> None:
    """legacy_stock returns every row: the planted defects, then too_big, are all repaired."""
    outcome = tools.handle(order.fields)
    assert outcome["ok"], outcome
    assert outcome["errors"][-1] == "result:too_big"
    assert sorted(outcome["errors"][:-1]) == sorted(order.repairable_errors)
    assert outcome["attempts"] == len(order.repairable_errors) + 2 <= MAX


@given(order=repairable_orders(fixes=(MAX, MAX)))
def test_more_defects_than_attempts_end_at_the_budget(order: Any) -> None:
    """An order needing one repair too many stops after exactly MAX_ATTEMPTS calls."""
    outcome = tools.handle(order.fields)
    assert not outcome["ok"]
    assert outcome["attempts"] == MAX
    assert len(outcome["calls"]) == MAX


def _any_order() -> st.SearchStrategy[Any]:
    with_tool = model_mistakes(TOOLS, "stock_lookup").map(
        lambda mistake: {**mistake.args, "tool": "stock_lookup"})
    return st.one_of(repairable_orders((0, MAX)), unrepairable_orders(), with_tool,
                     st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=4)),
                     st.none(), st.lists(st.integers(), max_size=3))


@given(order=_any_order())
@example(order={"sku": "A100", "region": "daegu", "limit": "2", "sku_id": "A100"})
@example(order={"tool": "nope"})
@example(order=None)
def test_attempts_never_exceed_the_budget(order: Any) -> None:
    """Any order at all: an outcome, never an exception, and attempts <= MAX_ATTEMPTS."""
    outcome = tools.handle(order)
    assert type(outcome["ok"]) is bool
    assert 0 <= outcome["attempts"] <= MAX
    assert len(outcome["calls"]) == outcome["attempts"]


@pytest.mark.slow
@given(order=_any_order())
@example(order={"sku": "A100", "region": "daegu", "limit": 9, "extra": 1})
def test_no_body_runs_on_refused_arguments_along_the_way(order: Any) -> None:
    """Counted bodies: every body run took arguments the gate accepts, one run per such call."""
    gate = instrument(TOOLS)
    state = tools.build_graph(gate=gate).invoke({"order": order})
    accepted = [call for call in state.get("calls", [])
                if gate.validate_args(call["tool"], call["args"]) == ""]
    for name in TOOLS:
        body = body_of(gate, name)
        assert all(gate.validate_args(name, args) == "" for args in body.seen), body.seen
        # A fresh gate and a run that never repeats a call: no memo hit can stand in for a run.
        assert body.runs == sum(call["tool"] == name for call in accepted)
