"""What agtool.otel costs a call: nothing without a provider, and how much per span with one.

    python bench/bench_otel.py            # about 20 s
    python bench/bench_otel.py --quick    # a few seconds
    python bench/bench_otel.py --json     # the figures as JSON
    python bench/bench_otel.py --strict   # exit 1 if the no-provider target fails

Each case is a gate call compiled into its own loop, timed by this thread's CPU
time (``time.thread_time_ns``: another process on the shared cores does not
count against a case), an empty loop subtracted. The cases run in interleaved
rounds, in an order rotated each round, and each figure is the median over
rounds of a ratio (or difference) taken within one round.

The cases, on a memo hit and on a refused call (a bad region):
``plain`` is a gate never instrumented; ``no provider`` is a gate given to
``instrument`` with no tracer or meter provider set (it declines, so the
target is that this costs what ``plain`` does); ``no-op sink`` is a gate with
a records sink that does nothing (what any sink costs: the gate leaves its
compiled fast path to write a record); ``traced`` is a gate instrumented with
an SDK ``TracerProvider`` (a ``SimpleSpanProcessor`` into an exporter that
drops each span, so export itself is not timed) and an SDK ``MeterProvider``;
``spans only`` the same without the meter provider. The cost of a span is
``traced - plain``, and, of it, ``traced - no-op sink`` is what tracing adds
beyond the record. One span of the SDK alone is timed beside them for scale.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from agtool import CallRecord, Gate
from agtool.otel import instrument
from agtool.tools import MAX_ROWS, TOOLS

__all__ = ["TARGET", "main", "measure"]

TOOL = "stock_lookup"
ARGS: dict[str, Any] = {"sku": "A100", "region": "seoul", "limit": MAX_ROWS}
BAD_REGION: dict[str, Any] = {**ARGS, "region": "mars"}
#: A call through a gate ``instrument`` declined may cost at most this much of a plain one.
TARGET = 1.05
VARIANTS = ("plain", "no provider", "no-op sink", "spans only", "traced")
#: The reference: one span of the SDK alone, with two attributes, through the same processor.
SDK_SPAN = "SDK span alone (reference)"
CALLS = {"memo hit": ARGS, "refused": BAD_REGION}


class _Dropped(SpanExporter):
    """An exporter that takes each span and keeps nothing: span making is timed, not export."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _ignore(record: CallRecord) -> None:
    """A records sink that does nothing with its record."""


@dataclass
class _Setup:
    gates: dict[str, Gate]
    exporter: _Dropped
    providers: tuple[TracerProvider, MeterProvider]


def _setup() -> _Setup:
    if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider":
        raise RuntimeError("a global tracer provider is set: the no-provider case needs none")
    exporter = _Dropped()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    gates = {variant: Gate(TOOLS, records=_ignore if variant == "no-op sink" else None)
             for variant in VARIANTS}
    if instrument(gates["no provider"]):
        raise RuntimeError("instrument() installed itself with no provider set")
    if not (instrument(gates["traced"], tracer_provider=tracer_provider,
                       meter_provider=meter_provider)
            and instrument(gates["spans only"], tracer_provider=tracer_provider)):
        raise RuntimeError("instrument() declined the SDK providers")
    for gate in gates.values():
        if not gate.call_tool(TOOL, ARGS)["ok"]:  # the one run a memo-hit case may see
            raise RuntimeError("the benchmark call is refused")
    return _Setup(gates, exporter, (tracer_provider, meter_provider))


Loop = Callable[[int], int]


def _loop(call: Callable[..., Any], args: dict[str, Any] | None) -> Loop:
    """``loop(n)``: n calls of ``call(TOOL, args)`` (or an empty body), in thread CPU ns."""
    clock = time.thread_time_ns

    def timed(n: int) -> int:
        started = clock()
        for _ in range(n):
            call(TOOL, args)
        return clock() - started

    def empty(n: int) -> int:
        started = clock()
        for _ in range(n):
            _ignore  # noqa: B018 - the loop's own cost, to subtract
        return clock() - started

    return empty if args is None else timed


def _batch(loop: Loop, batch_ns: int) -> int:
    n = 1
    while True:
        elapsed = loop(n)
        if elapsed >= batch_ns // 8 or n >= 1 << 22:
            return max(1, int(n * batch_ns / max(elapsed, 1)))
        n *= 2


def measure(quick: bool = False) -> dict[str, Any]:
    """Time every case side by side; the per-round medians and the target's verdict."""
    rounds, batch_ns = (15, 5_000_000) if quick else (61, 10_000_000)
    setup = _setup()
    tracer = setup.providers[0].get_tracer("bench")

    def sdk_span(tool: str, args: object) -> None:
        with tracer.start_as_current_span("execute_tool", attributes={"tool": tool, "n": 1}):
            pass

    cases: dict[str, Loop] = {"empty loop": _loop(_ignore, None), SDK_SPAN: _loop(sdk_span, ARGS)}
    for call, args in CALLS.items():
        for variant in VARIANTS:
            cases[f"{variant}: {call}"] = _loop(setup.gates[variant].call_tool, args)
    log = logging.getLogger("agtool.calls")
    level = log.level
    log.setLevel(logging.WARNING)  # records go to the sinks only, as in bench_gate
    gc.collect()
    gc.freeze()
    try:
        batches = {name: _batch(loop, batch_ns) for name, loop in cases.items()}
        raw = _rounds(cases, batches, rounds)
    finally:
        gc.unfreeze()
        log.setLevel(level)
        for provider in setup.providers:
            provider.shutdown()
    if setup.exporter.spans == 0:
        raise RuntimeError("the traced gate exported no span")
    return _figures(raw, quick, setup.exporter.spans)


def _rounds(cases: dict[str, Loop], batches: dict[str, int], rounds: int
            ) -> list[dict[str, float]]:
    names = list(cases)
    measured = []
    for index in range(rounds):
        shift = index % len(names)
        one: dict[str, float] = {}
        for name in names[shift:] + names[:shift]:
            one[name] = cases[name](batches[name]) / batches[name]
        measured.append(one)
    return measured


def _figures(raw: list[dict[str, float]], quick: bool, spans: int) -> dict[str, Any]:
    empty = statistics.median(r["empty loop"] for r in raw)
    net = [{name: value - empty for name, value in r.items() if name != "empty loop"}
           for r in raw]

    def ratio(a: str, b: str) -> float:
        return statistics.median(r[a] / r[b] for r in net)

    def gap(a: str, b: str) -> int:
        return round(statistics.median(r[a] - r[b] for r in net))

    figures: dict[str, Any] = {"quick": quick, "rounds": len(raw), "spans_exported": spans,
                               "clock": "thread CPU time", "empty_loop_ns": round(empty, 1),
                               "ns": {name: round(statistics.median(r[name] for r in net), 1)
                                      for name in net[0]}}
    verdicts = {}
    for call in CALLS:
        plain, unset, sink, spans_only, traced = (f"{variant}: {call}" for variant in VARIANTS)
        verdicts[call] = {
            "no provider vs plain": round(ratio(unset, plain), 3),
            "passed": ratio(unset, plain) <= TARGET,
            "traced vs plain": round(ratio(traced, plain), 2),
            "span cost ns (traced - plain)": gap(traced, plain),
            "of which beyond a record ns (traced - no-op sink)": gap(traced, sink),
            "spans only ns (spans only - plain)": gap(spans_only, plain),
        }
    figures["cases"] = verdicts
    figures["passed"] = all(verdict["passed"] for verdict in verdicts.values())
    figures["load_before"] = round(os.getloadavg()[0], 2)
    return figures


def render(figures: dict[str, Any]) -> str:
    width = max(map(len, figures["ns"]))
    lines = [f"{'case':<{width}}  {'median ns':>10}", "-" * (width + 12)]
    lines += [f"{name:<{width}}  {value:>10,.0f}" for name, value in figures["ns"].items()]
    lines.append("")
    for call, verdict in figures["cases"].items():
        lines.append(f"{'PASS' if verdict['passed'] else 'FAIL'}  {call}: no provider vs plain "
                     f"{verdict['no provider vs plain']:.3f}x (target <= {TARGET}x); traced "
                     f"{verdict['traced vs plain']:.2f}x, a span costs "
                     f"{verdict['span cost ns (traced - plain)'] / 1000:.1f} us, of which "
                     f"{verdict['of which beyond a record ns (traced - no-op sink)'] / 1000:.1f}"
                     f" us beyond writing a record; spans without metrics "
                     f"{verdict['spans only ns (spans only - plain)'] / 1000:.1f} us")
    lines.append(f"\n{figures['rounds']} rounds, {figures['clock']}, empty loop "
                 f"{figures['empty_loop_ns']:.0f} ns subtracted; {figures['spans_exported']:,} "
                 f"spans exported; 1-minute load {figures['load_before']:g}.")
    return "\n".join(lines)


#: The command line's switches, each off unless given.
FLAGS = {"--quick": "a run of a few seconds", "--json": "print the figures as JSON",
         "--strict": "exit 1 if the no-provider target fails"}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    for flag, meaning in FLAGS.items():
        parser.add_argument(flag, action="store_true", help=meaning)
    options = parser.parse_args(argv)
    figures = measure(quick=options.quick)
    print(json.dumps(figures, indent=2) if options.json else render(figures))
    return 1 if options.strict and not figures["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
