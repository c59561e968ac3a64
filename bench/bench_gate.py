"""Time the gate against a bare call, pydantic and jsonschema, side by side in one run.

    python bench/bench_gate.py            # full run, about 30 s
    python bench/bench_gate.py --quick    # about 5 s
    python bench/bench_gate.py --json     # the figures as JSON
    python bench/bench_gate.py --strict   # exit 1 if a target fails

Every case runs ``stock_lookup``'s three arguments (or its result) through one
statement, compiled into its own loop so no wrapper call is timed. Cases are
interleaved batch by batch in a rotating order, so drift on the machine falls
on all of them alike. A figure is the median, over batches, of a batch's mean
ns per call, minus the same figure for an empty loop. The garbage collector and
everything else are left as they are.

The memo-miss case clears the gate's memo before each call: every timed call is
a real miss (checked afterwards with the gate's counters) and pays for one
``dict.clear()`` as well, shown on its own row, so the miss figure errs against
the gate. The reference report imports ``measure`` from here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import pydantic

from agtool import Gate
from agtool.tools import MAX_ROWS, REGIONS, TOOLS, stock_lookup

# jsonschema ships no type hints; imported as a module object so the bench type-checks
# the same with or without stubs installed.
jsonschema: Any = importlib.import_module("jsonschema")

__all__ = ["CASES", "TARGETS", "main", "measure"]

TOOL = "stock_lookup"
ARGS: dict[str, Any] = {"sku": "A100", "region": "seoul", "limit": MAX_ROWS}
BAD_REGION: dict[str, Any] = {**ARGS, "region": "mars"}
BOOL_LIMIT: dict[str, Any] = {**ARGS, "limit": True}

# Case names, in the order the table prints them.
EMPTY = "empty loop (subtracted from all)"
BARE = "bare call"
MISS = "gate: valid call, memo miss"
CLEAR = "  of which dict.clear() (upper bound)"
HIT = "gate: memo hit"
BLOCKED_REGION = "gate: blocked, bad region"
BLOCKED_BOOL = "gate: blocked, bool limit"
GATE_ARGS = "gate: validate_args"
GATE_RESULT = "gate: validate_result"
PYD_ARGS = "pydantic strict: args"
PYD_RESULT = "pydantic strict: result"
JS_ARGS = "jsonschema: args"
JS_RESULT = "jsonschema: result"

#: Name -> the statement timed; names are bound by ``_namespace``.
CASES: dict[str, str] = {
    EMPTY: "pass",
    BARE: "fn(**args)",
    MISS: "clear(); miss_call(tool, args)",
    CLEAR: "scratch[tool] = args; scratch_clear()",
    HIT: "hit_call(tool, args)",
    BLOCKED_REGION: "hit_call(tool, bad_region)",
    BLOCKED_BOOL: "hit_call(tool, bool_limit)",
    GATE_ARGS: "validate_args(tool, args)",
    GATE_RESULT: "validate_result(tool, result)",
    PYD_ARGS: "ArgsModel.model_validate(args)",
    PYD_RESULT: "ResultModel.model_validate(result)",
    JS_ARGS: "args_validator.is_valid(args)",
    JS_RESULT: "result_validator.is_valid(result)",
}


# -- The competitors, written to the same contract as TOOLS["stock_lookup"] ----------------------

Region = Literal["busan", "jeju", "seoul"]
_STRICT = pydantic.ConfigDict(strict=True, extra="forbid")


class ArgsModel(pydantic.BaseModel):
    model_config = _STRICT
    sku: str
    region: Region
    limit: int = pydantic.Field(ge=1, le=MAX_ROWS)


class RowModel(pydantic.BaseModel):
    model_config = _STRICT
    store: str
    count: int = pydantic.Field(ge=0)


class ResultModel(pydantic.BaseModel):
    model_config = _STRICT
    sku: str
    rows: list[RowModel] = pydantic.Field(min_length=1, max_length=MAX_ROWS)


ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "region": {"enum": list(REGIONS)},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS},
    },
    "required": ["sku", "region", "limit"],
    "additionalProperties": False,
}
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "rows": {
            "type": "array", "minItems": 1, "maxItems": MAX_ROWS,
            "items": {
                "type": "object",
                "properties": {"store": {"type": "string"},
                               "count": {"type": "integer", "minimum": 0}},
                "required": ["store", "count"],
            },
        },
    },
    "required": ["sku", "rows"],
}


def _namespace() -> dict[str, Any]:
    """Everything the case statements name, built fresh for one run."""
    if set(get_args(Region)) != set(REGIONS):
        raise RuntimeError("the pydantic model's regions no longer match agtool.tools.REGIONS")
    jsonschema.Draft202012Validator.check_schema(ARGS_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(RESULT_SCHEMA)
    miss_gate, hit_gate = Gate(TOOLS), Gate(TOOLS)
    result = stock_lookup(**ARGS)
    hit_gate.call_tool(TOOL, ARGS)  # the one run of the body the hit case may see
    scratch: dict[str, Any] = {}
    return {
        "tool": TOOL, "args": ARGS, "bad_region": BAD_REGION, "bool_limit": BOOL_LIMIT,
        "result": result, "fn": stock_lookup,
        "miss_gate": miss_gate, "clear": miss_gate.cache.clear, "miss_call": miss_gate.call_tool,
        "hit_gate": hit_gate, "hit_call": hit_gate.call_tool,
        "validate_args": hit_gate.validate_args, "validate_result": hit_gate.validate_result,
        "scratch": scratch, "scratch_clear": scratch.clear,
        "ArgsModel": ArgsModel, "ResultModel": ResultModel,
        "args_validator": jsonschema.Draft202012Validator(ARGS_SCHEMA),
        "result_validator": jsonschema.Draft202012Validator(RESULT_SCHEMA),
    }


def _pydantic_accepts(model: type[pydantic.BaseModel], value: object) -> bool:
    try:
        model.model_validate(value)
    except pydantic.ValidationError:
        return False
    return True


def _check_agreement(ns: dict[str, Any]) -> None:
    """All three checkers accept the timed call and refuse both blocked ones, or we stop."""
    gate: Gate = ns["hit_gate"]
    verdicts = {
        "gate": [gate.validate_args(TOOL, a) == "" for a in (ARGS, BAD_REGION, BOOL_LIMIT)]
        + [gate.validate_result(TOOL, ns["result"]) == ""],
        "pydantic": [_pydantic_accepts(ArgsModel, a) for a in (ARGS, BAD_REGION, BOOL_LIMIT)]
        + [_pydantic_accepts(ResultModel, ns["result"])],
        "jsonschema": [ns["args_validator"].is_valid(a) for a in (ARGS, BAD_REGION, BOOL_LIMIT)]
        + [ns["result_validator"].is_valid(ns["result"])],
    }
    for checker, verdict in verdicts.items():
        if verdict != [True, False, False, True]:
            raise RuntimeError(f"{checker} does not judge the benchmark calls like the gate: "
                               f"{verdict}")


# -- Timing --------------------------------------------------------------------------------------

Loop = Callable[[int], int]


def _compile_loop(statement: str, ns: dict[str, Any]) -> Loop:
    """``loop(n) -> elapsed ns`` running ``statement`` n times, inlined like timeit does."""
    source = (
        "def loop(_n, _clock=_clock):\n"
        "    _it = range(_n)\n"
        "    _t0 = _clock()\n"
        "    for _ in _it:\n"
        f"        {statement}\n"
        "    return _clock() - _t0\n"
    )
    scope = {**ns, "_clock": time.perf_counter_ns}
    exec(compile(source, "<bench loop>", "exec"), scope)  # noqa: S102 - our own statements
    loop: Loop = scope["loop"]
    return loop


def _calibrate(loop: Loop, batch_ns: int) -> int:
    """Iterations for one batch to last about ``batch_ns``."""
    n = 1
    while True:
        elapsed = loop(n)
        if elapsed >= batch_ns // 8 or n >= 1 << 24:
            return max(1, int(n * batch_ns / max(elapsed, 1)))
        n *= 2


@dataclass(frozen=True)
class _Plan:
    batches: int
    batch_ns: int


_FULL, _QUICK = _Plan(batches=151, batch_ns=10_000_000), _Plan(batches=41, batch_ns=2_500_000)


def _time_cases(ns: dict[str, Any], plan: _Plan) -> dict[str, float]:
    """Median over batches of each case's mean ns per call, the empty loop not subtracted."""
    loops = {name: _compile_loop(statement, ns) for name, statement in CASES.items()}
    sizes = {name: _calibrate(loop, plan.batch_ns) for name, loop in loops.items()}
    means: dict[str, list[float]] = {name: [] for name in loops}
    order = list(loops)
    for batch in range(plan.batches):
        # Rotate the order each batch: every case runs early, late, and next to every other.
        for name in order[batch % len(order):] + order[:batch % len(order)]:
            means[name].append(loops[name](sizes[name]) / sizes[name])
    return {name: statistics.median(values) for name, values in means.items()}


# -- Targets -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """``measured <= limit`` (both in multiples of a bare call), with how it reads."""

    name: str
    measured_label: str
    limit_label: str
    measured: Callable[[dict[str, float]], float]
    limit: Callable[[dict[str, float]], float]


def _overhead(ns: dict[str, float]) -> float:
    return ns[MISS] - ns[BARE]


TARGETS = [
    Target("miss overhead no slower than pydantic",
           "gate overhead on a valid miss (miss - bare)", "pydantic strict args + result",
           _overhead, lambda ns: ns[PYD_ARGS] + ns[PYD_RESULT]),
    Target("blocked (bad region) <= 5x bare", "blocked, bad region", "5 x bare",
           lambda ns: ns[BLOCKED_REGION], lambda ns: 5 * ns[BARE]),
    Target("blocked (bool limit) <= 5x bare", "blocked, bool limit", "5 x bare",
           lambda ns: ns[BLOCKED_BOOL], lambda ns: 5 * ns[BARE]),
    Target("memo hit <= 10x bare", "memo hit", "10 x bare",
           lambda ns: ns[HIT], lambda ns: 10 * ns[BARE]),
    Target("jsonschema >= 10x the gate", "10 x gate overhead on a valid miss",
           "jsonschema args + result", lambda ns: 10 * _overhead(ns),
           lambda ns: ns[JS_ARGS] + ns[JS_RESULT]),
]


def measure(quick: bool = False) -> dict[str, Any]:
    """Run every case once, side by side; return ns, ratios to a bare call, and the targets."""
    plan = _QUICK if quick else _FULL
    namespace = _namespace()
    _check_agreement(namespace)
    raw = _time_cases(namespace, plan)
    ns = {name: max(value - raw[EMPTY], 0.0) for name, value in raw.items() if name != EMPTY}
    miss_stats = namespace["miss_gate"].stats(TOOL)
    hit_stats = namespace["hit_gate"].stats(TOOL)
    if miss_stats.hits or hit_stats.runs != 1:
        raise RuntimeError(f"a miss was answered from the memo or a hit ran the body: "
                           f"{miss_stats}, {hit_stats}")
    bare = ns[BARE]
    targets = []
    for target in TARGETS:
        measured, limit = target.measured(ns), target.limit(ns)
        targets.append({
            "name": target.name,
            "measured": target.measured_label, "measured_x_bare": round(measured / bare, 2),
            "limit": target.limit_label, "limit_x_bare": round(limit / bare, 2),
            "passed": measured <= limit,
        })
    return {
        "quick": quick,
        "batches": plan.batches,
        "method": ("median over interleaved batches of mean ns per call, empty loop "
                   "subtracted; memo miss clears the memo before each call (clear included)"),
        "empty_loop_ns": round(raw[EMPTY], 1),
        "ns": {name: round(value, 1) for name, value in ns.items()},
        "ratios": {name.strip(): round(value / bare, 2) for name, value in ns.items()},
        "targets": targets,
        "passed": all(target["passed"] for target in targets),
    }


def render(figures: dict[str, Any]) -> str:
    """The table of cases and the targets, as printed."""
    width = max(map(len, figures["ns"]))
    lines = [f"{'case':<{width}}  {'median ns':>10}  {'x bare':>7}", "-" * (width + 21)]
    for name, value in figures["ns"].items():
        lines.append(f"{name:<{width}}  {value:>10,.0f}  {figures['ratios'][name.strip()]:>7.2f}")
    lines += ["", f"empty loop {figures['empty_loop_ns']:.0f} ns per iteration, subtracted above;"
              f" {figures['batches']} batches{' (quick)' if figures['quick'] else ''}.", ""]
    for target in figures["targets"]:
        verdict = "PASS" if target["passed"] else "FAIL"
        lines.append(f"{verdict}  {target['name']}: {target['measured']} "
                     f"{target['measured_x_bare']:.2f}x bare <= {target['limit']} "
                     f"{target['limit_x_bare']:.2f}x bare")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a ~5 s run with fewer batches")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target fails")
    options = parser.parse_args(argv)
    figures = measure(quick=options.quick)
    print(json.dumps(figures, indent=2) if options.json else render(figures))
    return 1 if options.strict and not figures["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
