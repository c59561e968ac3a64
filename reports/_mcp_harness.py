"""The harness measured from the outside, on the lax MCP server: what each property found.

``tests/_lax_server.py`` (the SDK's high-level server: it coerces ``True`` to
1, drops extra arguments, and returns a level above its own
``outputSchema``'s maximum) is started as a real subprocess and checked as
``agtool check --mcp`` checks any server, with a fixed seed. The server
answers the same calls the same way, so the same code gives the same
figures and ``--check`` can compare them.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LAX_SERVER", "REPORT_SEED", "measure_mcp_harness", "render_mcp_harness"]

LAX_SERVER = Path(__file__).resolve().parent.parent / "tests" / "_lax_server.py"
REPORT_SEED = 0

Progress = Callable[[str], None]


def measure_mcp_harness(progress: Progress, examples: int | None = None
                        ) -> dict[str, Any] | None:
    """Check the lax server; ``None`` where it or the ``mcp`` extra is not there."""
    try:
        from hypothesis import HealthCheck, settings

        from agtool.harness._mcp_check import EXAMPLES_PER_ITEM, PROPERTIES, run_check
    except ImportError:
        return None
    if not LAX_SERVER.exists():  # an installed package: the tests are not shipped
        return None
    progress("harness: the lax MCP server, from the outside")
    per_item = EXAMPLES_PER_ITEM if examples is None else min(examples, EXAMPLES_PER_ITEM)
    profile = settings(max_examples=per_item, database=None, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow])
    with open(os.devnull, "a") as errlog:
        results = run_check(f"{sys.executable} {LAX_SERVER}", settings=profile,
                            seed=REPORT_SEED, errlog=errlog)
    drawn: Counter[str] = Counter()
    for result in results:
        drawn.update(result.drawn)
    return {
        "server": "tests/_lax_server.py",
        "profile": f"seed {REPORT_SEED}, at most {per_item} examples per item",
        "properties": [_property(prop, [result for result in results
                                        if result.item.prop == prop])
                       for prop in PROPERTIES],
        "failed_items": [f"{result.item.tool} {result.item.label}" for result in results
                         if result.outcome == "failed"],
        "warned_items": [f"{result.item.tool} {result.item.label}" for result in results
                         if result.outcome == "warned"],
        "skipped": sorted({_why_not_run(result) for result in results
                           if result.outcome == "skipped"}),
        "drawn": [{"class": name, "count": count} for name, count in sorted(drawn.items())],
    }


def _why_not_run(result: Any) -> str:
    # The importer's message starts with the command, whose paths differ between machines.
    where = re.search(r"at '([^']+)': ([^;]+)", result.message)
    if result.item.prop == "contract" and where:
        return f"`{result.item.tool}`, its schema at `{where[1]}`: {where[2]}"
    return f"`{result.item.tool}`, a tool that may write (no `readOnlyHint: true`)"


def _property(prop: str, results: list[Any]) -> dict[str, Any]:
    return {"name": prop, "items": len(results),
            "skipped": sum(result.outcome == "skipped" for result in results),
            "examples": sum(result.examples for result in results),
            "failures": sum(result.outcome == "failed" for result in results),
            "warnings": sum(result.outcome == "warned" for result in results),
            "inconclusive": sum(result.outcome == "inconclusive" for result in results)}


def render_mcp_harness(figures: dict[str, Any] | None) -> list[str]:
    """The report's Markdown section for ``measure_mcp_harness``'s figures."""
    if not figures:
        return []
    return [
        "## Harness on an MCP server, from the outside (the lax server)",
        "",
        f"`agtool check --mcp` on `{figures['server']}`, {figures['profile']}: contracts "
        "imported from the server's own schemas, calls through the official MCP client.",
        "",
        "| property | items | skipped | examples sent | FAIL | WARN | inconclusive |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {prop['name']} | {prop['items']} | {prop['skipped']} | {prop['examples']} | "
          f"{prop['failures']} | {prop.get('warnings', 0)} | {prop.get('inconclusive', 0)} |"
          for prop in figures["properties"]),
        "",
        "Failed: " + (", ".join(f"`{item}`" for item in figures["failed_items"]) or "none")
        + ".",
        "",
        "Warned (a schema looser than the server): "
        + (", ".join(f"`{item}`" for item in figures.get("warned_items", [])) or "none") + ".",
        "",
        "Not run: " + ("; ".join(figures["skipped"]) or "nothing") + ".",
        "",
        "| class of call drawn | sent |",
        "|---|---:|",
        *(f"| {row['class']} | {row['count']} |" for row in figures["drawn"]),
        "",
    ]
