"""Regenerate the measured tool report: ``python -m reports`` or ``agtool report``.

``reports/tool_report.json`` and ``reports/tool_report.md`` are written from
real runs of ``agtool.tools``, the harness and the benchmark; ``--check``
regenerates them in a temporary folder and fails, with a diff, when the
committed files no longer match what the code measures.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._incidents import measure_incidents
from ._postgres_race import measure_postgres_race
from ._real_servers import REAL_SERVERS_HEADING
from ._reference import measure_reference
from ._render import BENCHMARK_HEADING, POSTGRES_HEADING, render_markdown
from ._writes import measure_writes

__all__ = ["REPORT_DIR", "build_report", "main", "render_markdown", "write_report"]

REPORT_DIR = Path(__file__).resolve().parent
JSON_NAME, MD_NAME = "tool_report.json", "tool_report.md"
#: Timings differ between runs, and the Postgres race and the real servers need what the
#: machine may not have; everything else in the report is deterministic.
VOLATILE_KEYS = ("benchmark", "postgres_race", "real_servers")
#: The machine-dependent sections come last in the Markdown, each after its own heading.
VOLATILE_HEADINGS = (BENCHMARK_HEADING, REAL_SERVERS_HEADING, POSTGRES_HEADING)

Progress = Callable[[str], None]


def build_report(progress: Progress, *, benchmark: bool = True, real_servers: bool = True,
                 examples: int | None = None) -> dict[str, Any]:
    """Measure everything the report states.

    ``benchmark`` and ``real_servers`` run the two machine-dependent
    measurements (the gate's benchmark; the harness on real third-party
    servers, a few minutes). ``examples`` lowers the harness's examples per
    property (for tests of the report itself); the committed report always
    uses the fixed profile.
    """
    progress("running the reference tools and graphs")
    report = measure_reference()
    progress("running writes, approvals and records")
    report["side_effects"] = measure_writes()
    report["side_effects"]["incidents"] = measure_incidents()
    progress("racing processes on PostgreSQL, where a server is given")
    report["postgres_race"] = measure_postgres_race()
    from hypothesis import settings  # the harness needs Hypothesis: imported only when asked

    from ._harness import REPORT_SETTINGS, measure_harness

    profile = REPORT_SETTINGS if examples is None else settings(REPORT_SETTINGS,
                                                                max_examples=examples)
    report["harness"] = measure_harness(progress, profile)
    from ._mcp_harness import measure_mcp_harness

    report["mcp_harness"] = measure_mcp_harness(progress, examples)
    if benchmark:
        from ._benchmark import measure_benchmark

        progress("timing the gate against a bare call")
        report["benchmark"] = measure_benchmark()
    if real_servers:
        from ._real_servers import measure_real_servers

        report["real_servers"] = measure_real_servers(progress)
    return report


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """Write the JSON and Markdown files into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / JSON_NAME, out / MD_NAME
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    md_path.write_text(render_markdown(report), "utf-8")
    return [json_path, md_path]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    parser.add_argument("--out", type=Path, default=REPORT_DIR, help="folder to write into")
    parser.add_argument("--check", action="store_true",
                        help="regenerate in a temporary folder and diff against --out")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[report] {message}", file=sys.stderr, flush=True)

    if not args.check:
        for path in write_report(build_report(progress), args.out):
            progress(f"wrote {path}")
        return 0
    with tempfile.TemporaryDirectory() as fresh:
        # The machine-dependent sections are not compared, so they are not run: --check
        # stays fast.
        write_report(build_report(progress, benchmark=False, real_servers=False), Path(fresh))
        diff = _compare(args.out, Path(fresh))
    if diff:
        print("".join(diff), end="")
        print(f"\nThe committed report in {args.out} is stale: run `python -m reports`.",
              file=sys.stderr)
        return 1
    progress("the committed report matches what the code measures")
    return 0


def _compare(committed: Path, fresh: Path) -> list[str]:
    diff: list[str] = []
    for name, strip in ((JSON_NAME, _stable_json), (MD_NAME, _stable_markdown)):
        old_path = committed / name
        old = strip(old_path.read_text("utf-8")) if old_path.exists() else ""
        new = strip((fresh / name).read_text("utf-8"))
        diff += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     f"committed/{name}", f"measured/{name}")
    return diff


def _stable_json(text: str) -> str:
    data = json.loads(text) if text else {}
    for key in VOLATILE_KEYS:
        data.pop(key, None)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _stable_markdown(text: str) -> str:
    for heading in VOLATILE_HEADINGS:
        text = text.split(heading)[0]
    return text.rstrip() + "\n"
