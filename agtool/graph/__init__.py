"""The repair graph for your own table: ``build_graph(gate=gate)`` and ``handle(order, gate=gate)``.

A LangGraph agent over any ``Gate``: a failed tool call is a path through the
graph, repaired by its reason (``default_repairs``) or by the model that
picked it, within ``MAX_ATTEMPTS``. See ``agtool.graph._build`` for the graph
(``agtool.graph._model`` for the model path) and ``agtool.graph._repairs`` for the
rules; ``agtool.tools`` holds the seed's stock agent built on it.
"""

from __future__ import annotations

from ._build import (
    MAX_ATTEMPTS,
    STEP_ID,
    ModelState,
    Outcome,
    State,
    build_graph,
    build_naive,
    giveup,
    handle,
    order_pick,
    result_reply,
    rows_of,
    run_graph,
    tool_specs,
)
from ._repairs import (
    Call,
    Fix,
    RepairRule,
    convert_exactly,
    default_repairs,
    drop_argument,
    exact_value,
    rule_for,
    to_bound,
    use_fallback,
    use_successor,
)

__all__ = [
    "MAX_ATTEMPTS",
    "STEP_ID",
    "Call",
    "Fix",
    "ModelState",
    "Outcome",
    "RepairRule",
    "State",
    "build_graph",
    "build_naive",
    "convert_exactly",
    "default_repairs",
    "drop_argument",
    "exact_value",
    "giveup",
    "handle",
    "order_pick",
    "result_reply",
    "rows_of",
    "rule_for",
    "run_graph",
    "to_bound",
    "tool_specs",
    "use_fallback",
    "use_successor",
]
