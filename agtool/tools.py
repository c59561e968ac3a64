"""The reference tools: the seed's inventory example, runnable.

Two tools over one small stock table, their contract table ``TOOLS``, the
gate bound to it, and the seed's stock agent (``agtool._stock_agent``) bound to
that gate. ``legacy_stock`` ignores ``limit``, as old APIs do, so the
result check has something to refuse. Every later piece of agtool (the graph,
the harness, the report) is exercised on this module first.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from ._gate import Gate
from ._stock_agent import (
    FALLBACK_REGION,
    REPAIRS,
    can_repair,
    pick,
    reply,
    stock_graph,
    stock_naive,
)
from .graph._build import (
    MAX_ATTEMPTS,
    AgentGraph,
    NaiveOutcome,
    Outcome,
    State,
    giveup,
    make_fetch,
    make_repair,
    run_graph,
)
from .graph._model import tool_specs as _tool_specs

__all__ = [
    "CACHE",
    "CALLS",
    "GATE",
    "MAX_ROWS",
    "REGIONS",
    "STOCK",
    "TOOLS",
    "cache_key",
    "call_tool",
    "legacy_stock",
    "stock_lookup",
    "validate_args",
    "validate_result",
]

REGIONS = ["busan", "jeju", "seoul"]
MAX_ROWS = 2

Row = dict[str, Any]

STOCK: dict[str, dict[str, list[Row]]] = {
    "A100": {
        "busan": [{"store": "Haeundae", "count": 4}, {"store": "Seomyeon", "count": 1}],
        "jeju": [{"store": "Jeju City", "count": 2}],
        "seoul": [
            {"store": "Gangnam", "count": 7},
            {"store": "Hongdae", "count": 3},
            {"store": "Jamsil", "count": 5},
        ],
    },
    "B200": {
        "busan": [],
        "jeju": [{"store": "Seogwipo", "count": 1}],
        "seoul": [{"store": "Myeongdong", "count": 2}, {"store": "Yeouido", "count": 6}],
    },
    "C300": {
        "busan": [{"store": "Gwangalli", "count": 9}],
        "jeju": [],
        "seoul": [{"store": "Jongno", "count": 0}],
    },
}

#: Tool-body runs across both tools; each body adds 1 on its first line.
CALLS = 0


def stock_lookup(sku: str, region: str, limit: int) -> dict[str, Any]:
    """At most ``limit`` store rows holding ``sku`` in ``region``; none for an unknown sku."""
    global CALLS
    CALLS += 1
    rows = STOCK.get(sku, {}).get(region, [])
    return {"sku": sku, "rows": rows[:limit]}


def legacy_stock(sku: str, region: str, limit: int) -> dict[str, Any]:
    """The old API: takes ``limit`` and ignores it, returning every row."""
    global CALLS
    CALLS += 1
    rows = STOCK.get(sku, {}).get(region, [])
    return {"sku": sku, "rows": list(rows)}


_ARGS = {
    "sku": {"type": "str", "required": True, "description": "Product code, e.g. A100."},
    "region": {"type": "str", "required": True, "allowed": REGIONS,
               "description": "Region whose stores are searched."},
    "limit": {"type": "int", "required": True, "min": 1, "max": MAX_ROWS,
              "description": "How many store rows to return at most."},
}
_RETURNS = {
    "sku": {"type": "str"},
    "rows": {"type": "list", "max_len": MAX_ROWS,
             "item": {"store": {"type": "str"}, "count": {"type": "int", "min": 0}}},
}

TOOLS: dict[str, dict[str, Any]] = {
    "stock_lookup": {
        "fn": stock_lookup,
        "description": "Stores in a region that hold a product, with their counts.",
        "args": _ARGS,
        "returns": _RETURNS,
    },
    "legacy_stock": {
        "fn": legacy_stock,
        "description": "Old stock API; returns every store and ignores limit.",
        "args": _ARGS,
        "returns": _RETURNS,
    },
}

#: The gate over ``TOOLS``; the names below are its bound methods and memo.
GATE = Gate(TOOLS)
validate_args = GATE.validate_args
validate_result = GATE.validate_result
call_tool = GATE.call_tool
cache_key = GATE.cache_key
CACHE = GATE.cache

# The reference agent: the seed's stock agent (``_stock_agent``) on the reusable graph
# (``_graph``), bound here to ``GATE``. Neither module imports this one.
fetch = make_fetch(GATE)
repair = make_repair(GATE, REPAIRS)


def build_graph(model: BaseChatModel | None = None, *, gate: Gate | None = None) -> AgentGraph:
    """The stock agent's repairing graph over ``gate`` (default ``GATE``); see ``_graph``."""
    return stock_graph(model, gate=GATE if gate is None else gate)


def build_naive(*, gate: Gate | None = None) -> AgentGraph:
    """The stock agent's one-call graph over ``gate`` (default ``GATE``)."""
    return stock_naive(gate=GATE if gate is None else gate)


@functools.cache
def _reference_graph(naive: bool) -> AgentGraph:
    return build_naive() if naive else build_graph()


def run_naive(order: object) -> NaiveOutcome:
    """Run ``build_naive()`` on ``order`` against the reference tools; never raises."""
    out = run_graph(_reference_graph(True), GATE, order)
    return NaiveOutcome(ok=out["ok"], answer=out["answer"], rows=out["rows"],
                        errors=out["errors"], calls=out["calls"])


def handle(order: object, model: BaseChatModel | None = None) -> Outcome:
    """Run ``build_graph(model)`` on ``order`` against the reference tools; never raises.

    (Only ``build_graph`` itself can raise, when ``model`` cannot bind tools.)
    ``tool_runs`` is the tool bodies this run ran (memo hits and refused calls
    run none). The model's conversation is in the state of
    ``build_graph(model).invoke(...)``.
    """
    graph = _reference_graph(False) if model is None else build_graph(model)
    return run_graph(graph, GATE, order)


def tool_specs(source: Gate | Mapping[str, Mapping[str, Any]] | None = None,
               ) -> list[dict[str, Any]]:
    """``agtool.graph._build.tool_specs`` of ``source``, by default of ``GATE``."""
    return _tool_specs(GATE if source is None else source)


__all__ += [
    "FALLBACK_REGION",
    "MAX_ATTEMPTS",
    "REPAIRS",
    "State",
    "build_graph",
    "build_naive",
    "can_repair",
    "fetch",
    "giveup",
    "handle",
    "pick",
    "repair",
    "reply",
    "run_naive",
    "tool_specs",
]
