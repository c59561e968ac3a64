"""The harness on real third-party MCP servers: per server, and its precision and recall.

Runs ``bench/bench_harness_real.py``'s check of each pinned server that
``bash tests/thirdparty/install.sh`` installed (official ones, from PyPI and
npm, each in a sandbox of temporary state), and scores the findings against
``tests/thirdparty/defects.py``, the ledger of defects found by hand with the
official client (``tests/thirdparty/test_defects.py`` shows each one again on
every run). A FAIL the ledger does not know is counted false. Time limits and
the servers' own timing make the counts vary a little between machines, so
``--check`` does not compare this section.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._benchmark import load_script

__all__ = ["REAL_SERVERS_HEADING", "measure_real_servers", "render_real_servers"]

ROOT = Path(__file__).resolve().parent.parent
BENCH_SCRIPT = ROOT / "bench" / "bench_harness_real.py"
REAL_SERVERS_HEADING = ("## Harness on real third-party MCP servers (measured where they are "
                        "installed)")
SEED, EXAMPLES, TIMEOUT = 0, 5, 10.0
COLUMNS = ("tools", "items", "failed", "warned", "inconclusive", "skipped", "passed", "seconds")


def measure_real_servers(progress: Callable[[str], None]) -> dict[str, Any]:
    """Check every installed server; ``measured: False`` with why, where none is."""
    bench = load_script(BENCH_SCRIPT, "agtool_bench_harness_real")
    names = [name for name in bench.SERVERS if bench.installed(bench.SERVERS[name])]
    if not names:
        return {"measured": False,
                "why": "no third-party server is installed (bash tests/thirdparty/install.sh)"}
    rows = []
    for name in names:
        progress(f"harness: the real server {name}, in a sandbox")
        rows.append(bench.check_server(name, settings=bench.profile(EXAMPLES), seed=SEED,
                                       timeout=TIMEOUT, examples=True))
    scored = bench.score_rows(rows)
    return {
        "measured": True,
        "profile": f"seed {SEED}, at most {EXAMPLES} examples per item, a {TIMEOUT:g} s time "
                   "limit per call, writes allowed, the known-good calls given",
        "servers": [{"server": row["server"], "registry": row["registry"],
                     **{key: row[key] for key in COLUMNS}} for row in rows],
        "fail_items": [f"{row['server']} {finding['item']}" for row in rows
                  for finding in row["findings"] if finding["verdict"] == "failed"],
        **scored,
    }


def render_real_servers(figures: dict[str, Any] | None) -> list[str]:
    """The report's Markdown section for ``measure_real_servers``'s figures."""
    if not figures:
        return []
    if not figures["measured"]:
        return [REAL_SERVERS_HEADING, "", f"Not measured on this run: {figures['why']}.", ""]
    total = {key: round(sum(row[key] for row in figures["servers"]), 1) for key in COLUMNS}
    return [
        REAL_SERVERS_HEADING,
        "",
        "`python bench/bench_harness_real.py` on the pinned official servers, each in a sandbox "
        f"of temporary state: {figures['profile']}. A FAIL is true when it reports a defect of "
        "`tests/thirdparty/defects.py`, the ledger of defects found by hand with the official "
        "client (each shown again by `tests/thirdparty/test_defects.py`); any other FAIL is "
        "counted false. Time limits make the counts vary between machines, so `--check` does "
        "not compare this section.",
        "",
        "| server | registry | tools | items | FAIL | WARN | inconclusive | skipped | passed | "
        "seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {row['server']} | {row['registry']} | "
          + " | ".join(f"{row[key]:g}" for key in COLUMNS) + " |" for row in figures["servers"]),
        "| all | | " + " | ".join(f"{total[key]:g}" for key in COLUMNS) + " |",
        "",
        f"**Precision of FAIL: {figures['true_fails']} / {figures['fails']} = "
        f"{_share(figures['precision'])}.** **Recall: {figures['defects_reported']} of the "
        f"{figures['defects']} defects in the ledger reported as a FAIL or a WARN, "
        f"{_share(figures['recall'])}.**",
        "",
        "FAIL: " + (", ".join(f"`{item}`" for item in figures["fail_items"]) or "none") + ".",
        "",
        "FAIL not in the ledger (counted false): "
        + (", ".join(f"`{item}`" for item in figures["unknown_fails"]) or "none") + ".",
        "",
        "Missed: " + ("; ".join(figures["missed"]) or "none") + ".",
        "",
    ]


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
