"""Time agtool's MCP server against the SDK's own ``MCPServer`` on the same sync body.

    python bench/bench_mcp.py              # full run, about 30 s
    python bench/bench_mcp.py --quick      # a few seconds
    python bench/bench_mcp.py --json       # the figures as JSON
    python bench/bench_mcp.py --strict     # exit 1 if a target fails

Every case is one ``tools/call`` of ``stock_lookup`` made by the SDK's
``Client`` over its in-process transport, so each pays the whole MCP stack
(request model, dispatch, result serialization) as a real client's call does.
The cases run in rounds, each round timing every case once for one batch of
calls in an order rotated by one, and a target is the median of its per-round
ratios (the case against the SDK's ``MCPServer`` timed in that same round).

A miss case clears the gate's memo before each call, so every call runs the
body (checked afterwards with the gate's counters) and also pays for the
clear: the miss figures err against agtool. How a miss meets the SDK's cost:
the SDK runs a sync tool in a worker thread (``anyio.to_thread``); a read
named in ``on_loop`` (``--on-loop NAME``: declared not to block) runs on the
event loop through the gate's compiled fast path, with no hop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

from agtool import Gate, JsonLinesSink
from agtool.mcp import server
from agtool.tools import TOOLS, stock_lookup

__all__ = ["CASES", "TARGETS", "main", "measure"]

TOOL = "stock_lookup"
ARGS = {"sku": "A100", "region": "busan", "limit": 2}
BASE = "sdk: MCPServer, sync body"


@dataclass(frozen=True)
class Target:
    """``case`` costs at most ``limit`` times ``baseline`` (median of per-round ratios)."""

    case: str
    baseline: str
    limit: float
    says: str


def _table() -> dict[str, Any]:
    return {TOOL: dict(TOOLS[TOOL])}


def _sdk() -> tuple[Any, Gate | None, bool]:
    app = MCPServer("bench", log_level="WARNING")
    app.tool()(stock_lookup)
    return app, None, False


def _agtool(*, on_loop: bool, records: Path | None = None,
            miss: bool = True) -> Callable[[], tuple[Any, Gate | None, bool]]:
    def make() -> tuple[Any, Gate | None, bool]:
        gate = Gate(_table(), records=JsonLinesSink(records) if records else None)
        return server(gate, on_loop=(TOOL,) if on_loop else ()), gate, miss
    return make


def _cases(records: Path) -> dict[str, Callable[[], tuple[Any, Gate | None, bool]]]:
    return {
        BASE: _sdk,
        "agtool: miss, body in a worker thread": _agtool(on_loop=False),
        "agtool: miss, on_loop": _agtool(on_loop=True),
        "agtool: miss, on_loop, JsonLinesSink records": _agtool(on_loop=True, records=records),
        "agtool: hit": _agtool(on_loop=False, miss=False),
    }


CASES = tuple(_cases(Path("unused")))
TARGETS = (
    Target("agtool: miss, on_loop", BASE, 1.0,
           "an MCP memo miss costs at most what the SDK's own server costs"),
    Target("agtool: hit", BASE, 1.0, "a memo hit costs at most what the SDK's server costs"),
    Target("agtool: miss, on_loop, JsonLinesSink records", "agtool: miss, on_loop", 1.15,
           "records cost the fast path at most 15%"),
)


async def _batch(client: Client, gate: Gate | None, miss: bool, calls: int) -> float:
    """Seconds per call of one batch (the memo cleared before each call of a miss case)."""
    clear: Callable[[], None] = gate.clear if gate is not None and miss else (lambda: None)
    started = time.perf_counter()
    for _ in range(calls):
        clear()
        result = await client.call_tool(TOOL, ARGS)
        if result.is_error:
            raise AssertionError(f"a bench call failed: {result.content}")
    return (time.perf_counter() - started) / calls


async def _measure(rounds: int, calls: int, records: Path) -> dict[str, list[float]]:
    made = {name: make() for name, make in _cases(records).items()}
    times: dict[str, list[float]] = {name: [] for name in made}
    clients: dict[str, Client] = {}
    async with AsyncExitStack() as stack:
        for name, (target, gate, miss) in made.items():
            clients[name] = await stack.enter_async_context(Client(target))
            await _batch(clients[name], gate, miss, 20)  # warm up
        names = list(made)
        for index in range(rounds):
            order = names[index % len(names):] + names[:index % len(names)]
            for name in order:
                _, gate, miss = made[name]
                times[name].append(await _batch(clients[name], gate, miss, calls))
    _check_misses(made)
    return times


def _check_misses(made: dict[str, tuple[Any, Gate | None, bool]]) -> None:
    for name, (_, gate, miss) in made.items():
        if gate is None:
            continue
        stats = gate.stats(TOOL)
        if miss and stats.hits:
            raise AssertionError(f"{name}: {stats.hits} calls were memo hits, not misses")
        if not miss and stats.hits < stats.runs:
            raise AssertionError(f"{name}: only {stats.hits} hits for {stats.runs} runs")


def measure(rounds: int = 80, calls: int = 25) -> dict[str, Any]:
    """Median seconds per call of every case, and each target's median per-round ratio."""
    with tempfile.TemporaryDirectory() as folder:
        times = anyio.run(_measure, rounds, calls, Path(folder) / "records.jsonl")
    medians = {name: statistics.median(values) for name, values in times.items()}
    targets = []
    for target in TARGETS:
        pairs = zip(times[target.case], times[target.baseline], strict=True)
        ratios = [case / base for case, base in pairs]
        ratio = statistics.median(ratios)
        targets.append({"case": target.case, "baseline": target.baseline, "limit": target.limit,
                        "ratio": round(ratio, 3), "met": ratio <= target.limit,
                        "says": target.says})
    return {"rounds": rounds, "calls": calls,
            "us_per_call": {name: round(value * 1e6, 1) for name, value in medians.items()},
            "x_sdk": {name: round(value / medians[BASE], 3) for name, value in medians.items()},
            "targets": targets}


def render(figures: dict[str, Any]) -> str:
    lines = [f"{figures['rounds']} rounds of {figures['calls']} calls; median us per call, "
             f"and x the SDK's MCPServer"]
    for name, micros in figures["us_per_call"].items():
        lines.append(f"  {name:<48} {micros:>9.1f} us  {figures['x_sdk'][name]:>6.2f}x")
    for target in figures["targets"]:
        verdict = "met" if target["met"] else "NOT MET"
        lines.append(f"  target: {target['case']} / {target['baseline']} = {target['ratio']:.2f}x"
                     f" (limit {target['limit']}x): {verdict} - {target['says']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its figures; with ``--strict``, exit 1 if a target fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a run of a few seconds")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 80, quick 20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target fails")
    args = parser.parse_args(argv)
    rounds = args.rounds or (20 if args.quick else 80)
    # Short batches in many rounds: on a shared machine a burst of other work then falls on
    # one round's few calls of each case, not on one case's whole batch.
    figures = measure(rounds, 25)
    print(json.dumps(figures, indent=2) if args.json else render(figures))
    return 1 if args.strict and not all(target["met"] for target in figures["targets"]) else 0


if __name__ == "__main__":
    sys.exit(main())
