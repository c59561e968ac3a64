"""The seed's stock agent: the reference example of the repair graph, configured, not special.

What makes it the stock agent is all here: the tool an order without one goes
to (``DEFAULT_TOOL``), its repairs (``REPAIRS``: a bad region falls back to
``FALLBACK_REGION``, ``legacy_stock`` hands over to ``stock_lookup`` when its
result is too big, a bad or missing ``limit`` gets a valid one) and its
answer, a sentence about stock. ``agtool.tools`` binds it to the reference
gate; any other gate over the same two tools works too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from ._gate import Gate
from .graph._build import (
    AgentGraph,
    State,
    build_graph,
    build_naive,
    order_pick,
    reasons_repaired_by,
)
from .graph._repairs import RepairRule, drop_argument, to_bound, use_fallback, use_successor

__all__ = [
    "DEFAULT_TOOL",
    "FALLBACK_REGION",
    "REPAIRS",
    "SUCCESSORS",
    "can_repair",
    "pick",
    "reply",
    "stock_graph",
    "stock_naive",
]

#: The region searched instead of one the contract does not allow; one of ``tools.REGIONS``.
FALLBACK_REGION = "seoul"
#: The tool ``pick`` chooses when the order names none (or names ``None``).
DEFAULT_TOOL = "stock_lookup"
#: Tool -> the tool that replaces it when its result is ``too_big``.
SUCCESSORS: dict[str, str] = {"legacy_stock": "stock_lookup"}

pick = order_pick(DEFAULT_TOOL)


# The largest valid value: ``limit`` is an upper bound, so this loses no row
# the caller could have wanted, and a mistyped value is not guessed at.
_use_highest = to_bound("max")


#: Reason -> rule. ``*`` as the argument matches any argument. What a rule
#: returns is checked by the gate again like any other call.
REPAIRS: dict[str, RepairRule] = {
    "args:allowed:region": use_fallback(FALLBACK_REGION),
    "result:too_big": use_successor(SUCCESSORS),
    "args:type:limit": _use_highest,
    "args:min:limit": to_bound("min"),
    "args:max:limit": to_bound("max"),
    "args:missing:limit": _use_highest,
    "args:unexpected:*": drop_argument,
}

#: Whether ``REPAIRS`` has a rule for a reason (empty results, raised bodies never do).
can_repair = reasons_repaired_by(REPAIRS)


def _arg(args: object, name: str) -> object:
    return args.get(name) if isinstance(args, dict) else None


def _first_stock(rows: Sequence[Any]) -> tuple[str, int] | None:
    """The first row's store and count, or ``None`` when it does not show both."""
    first = rows[0] if rows else None
    if not isinstance(first, dict):
        return None
    store, count = first.get("store"), first.get("count")
    if not isinstance(store, str) or type(count) is not int:
        return None
    return store, count


def _stock_sentence(sku: object, region: object, rows: Sequence[Any]) -> str:
    stock = _first_stock(rows)
    if stock is None:
        return f"{sku}: no stock shown in {region}."
    store, count = stock
    if count > 0:
        return f"{sku}: {count} in stock at {store} ({region})."
    # A row with count 0 names a store, not stock: say so rather than imply any.
    return f"{sku}: none in stock at {store} ({region})."


def _same(left: object, right: object) -> bool:
    try:
        return type(left) is type(right) and bool(left == right)
    except Exception:  # values that cannot be compared are taken as the same
        return True


def reply(state: State) -> dict[str, Any]:
    """Answer from the first row of ``rows``; claims stock only where that row shows a count > 0.

    When a repair searched another region than the order asked for, the
    answer says so.
    """
    args = state.get("args")
    sku, region = _arg(args, "sku"), _arg(args, "region")
    answer = _stock_sentence(sku, region, state.get("rows") or [])
    asked = _arg(state.get("order"), "region")
    if asked is not None and not _same(region, asked):
        answer += f" Searched {region} instead of {asked!r}."
    return {"ok": True, "answer": answer}


def stock_graph(model: BaseChatModel | None, *, gate: Gate) -> AgentGraph:
    """The stock agent's repairing graph over ``gate``: by rule, or with ``model`` picking."""
    if model is None:
        return build_graph(gate=gate, pick=pick, reply=reply, repairs=REPAIRS,
                           can_repair=can_repair, name="agtool_agent")
    return build_graph(model, gate=gate, reply=reply, name="agtool_model_agent")


def stock_naive(*, gate: Gate) -> AgentGraph:
    """The stock agent's one-call graph over ``gate``."""
    return build_naive(gate=gate, pick=pick, reply=reply)
