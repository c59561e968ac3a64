"""The harness's own figures: every property run under one fixed, derandomized profile.

Derandomized Hypothesis draws the same examples for the same code, so these
figures are as reproducible as the rest of the report and ``--check`` can
compare them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agtool import tools
from agtool.harness._checks import body_of, instrument
from agtool.harness.strategies import (
    PROPERTIES,
    defect_sites,
    one_defect_args,
    orders,
    run_property,
)

__all__ = ["REPORT_EXAMPLES", "REPORT_SETTINGS", "measure_harness"]

REPORT_EXAMPLES = 50
REPORT_SETTINGS = settings(
    max_examples=REPORT_EXAMPLES, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_GRAPH_TOOL = "stock_lookup"

Progress = Callable[[str], None]


def measure_harness(progress: Progress, profile: settings = REPORT_SETTINGS) -> dict[str, Any]:
    """Run the plugin's properties and the graph's over the reference table; count everything."""
    table = tools.TOOLS
    figures = [_gate_property(prop, table, progress, profile) for prop in PROPERTIES]
    progress("harness: the repairing graph on generated orders")
    figures.append(_graph_property(profile))
    progress("harness: counting tool-body runs on refused arguments")
    refused_calls, body_runs = _refused_body_runs(table, profile)
    return {
        "profile": f"derandomized, {profile.max_examples} examples per property, tool and case",
        "properties": figures,
        "defect_kinds": sorted({site.kind for name in table for site in defect_sites(table, name)}),
        "refused_calls": refused_calls,
        "body_runs_on_refused_args": body_runs,
    }


def _gate_property(prop: str, table: Any, progress: Progress, profile: settings
                   ) -> dict[str, Any]:
    examples = failures = 0
    for name in sorted(table):
        progress(f"harness: property {prop!r} on {name}")
        run = run_property(prop, table, name, profile)
        examples, failures = examples + run.examples, failures + run.failures
    return {"name": prop, "examples": examples, "failures": failures}


def _refused_body_runs(table: Any, profile: settings) -> tuple[int, int]:
    """Single-defect calls at every defect site of every tool; the body runs they caused."""
    calls = runs = 0
    for name in sorted(table):
        for site in defect_sites(table, name):
            gate = instrument(table, [name], stub=True)
            drawn = one_defect_args(table, name, site.kind, site.arg, site.path)

            @profile
            @given(st.tuples(drawn, st.just((gate, name))))
            def refuse(drawn: Any) -> None:
                call, (gate, name) = drawn
                gate.call_tool(name, call.args, call.echo)

            refuse()
            calls += gate.stats(name).blocked
            runs += body_of(gate, name).runs
    return calls, runs


def _graph_property(profile: settings) -> dict[str, Any]:
    """Property 5: repairable orders end ok or on an honest empty answer; none breaks budget."""
    examples = failures = 0
    for repairable in (True, False):
        counted = [0]
        drawn = orders(tools.TOOLS, _GRAPH_TOOL, can_repair=tools.can_repair,
                       repairable=repairable,
                       fixes=(1, tools.MAX_ATTEMPTS - 1) if repairable else (0, 1))

        @profile
        @given(st.tuples(drawn, st.just(counted)))
        def handled(drawn: Any) -> None:
            order, counted = drawn
            counted[0] += 1
            _check_handled(order, tools.handle(order.fields))

        try:
            handled()
        except Exception as exc:
            failures += len(getattr(exc, "exceptions", None) or [exc])
        examples += counted[0]
    return {"name": "graph", "examples": examples, "failures": failures}


def _check_handled(order: Any, outcome: Any) -> None:
    errors = outcome["errors"]
    if outcome["attempts"] > tools.MAX_ATTEMPTS:
        raise AssertionError(f"{outcome['attempts']} attempts for {order.fields}")
    refused = sum(1 for error in errors if error.startswith("args:"))
    if outcome["tool_runs"] > len(outcome["calls"]) - refused:
        raise AssertionError(f"a body ran on refused arguments: {outcome}")
    if order.repairable and not outcome["ok"] and errors[-1] not in ("result:empty",):
        raise AssertionError(f"a repairable order was not repaired: {outcome}")
    if not order.repairable and (outcome["ok"] or order.unrepairable_error not in errors):
        raise AssertionError(f"an unrepairable order did not give up on its reason: {outcome}")
