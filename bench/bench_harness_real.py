"""The MCP harness on real third-party servers: items, verdicts and time, per server.

    bash tests/thirdparty/install.sh                  # once: the pinned servers
    python bench/bench_harness_real.py                # every installed server
    python bench/bench_harness_real.py --servers time git --max-examples 3
    python bench/bench_harness_real.py --no-examples  # without the known-good calls

Each server (``tests/thirdparty/servers.py``: official Python and npm ones) is
started in a sandbox of temporary state (its own files, repository, database
or memory file, a scrubbed environment, ``unshare -n`` where allowed) and
checked as ``agtool check --mcp CMD --allow-writes --examples FILE`` checks
it, with writes allowed (the state is thrown away) and, unless
``--no-examples``, the calls a user who knows the server would give as
known-good (a file inside the allowed root, the sandbox's repository, a table
that exists). Prints a markdown table (items, FAIL, WARN, inconclusive,
skipped, passed, seconds) and every FAIL and WARN line with its call, for the
hand check against the official client; ``--json FILE`` keeps them all.
Then precision (FAILs that report a defect of ``tests/thirdparty/defects.py``,
the ledger of defects found by hand, over all FAILs) and recall (the ledger's
defects reported as a FAIL or a WARN).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/thirdparty describes the servers

from thirdparty.defects import score  # type: ignore[import-not-found]  # noqa: E402
from thirdparty.servers import SERVERS, installed, sandboxed  # type: ignore[import-not-found]  # noqa: E402

from agtool.harness._mcp_check import ItemResult, never_accepted, run_check  # noqa: E402

Calls = dict[str, list[dict[str, Any]]]


def _time_calls(_state: Path) -> Calls:
    return {"get_current_time": [{"timezone": "UTC"}, {"timezone": "Asia/Seoul"}],
            "convert_time": [{"source_timezone": "UTC", "time": "12:00",
                              "target_timezone": "Asia/Seoul"}]}


def _git_calls(state: Path) -> Calls:
    repo = {"repo_path": str(state / "repo")}
    return {"git_status": [repo], "git_diff_unstaged": [repo], "git_diff_staged": [repo],
            "git_diff": [{**repo, "target": "main"}], "git_log": [repo],
            "git_show": [{**repo, "revision": "HEAD"}],
            "git_branch": [{**repo, "branch_type": "local"}],
            "git_create_branch": [{**repo, "branch_name": "feature"}],
            "git_checkout": [{**repo, "branch_name": "main"}],
            "git_add": [{**repo, "files": ["README.md"]}], "git_reset": [repo],
            "git_commit": [{**repo, "message": "a commit"}]}


def _sqlite_calls(_state: Path) -> Calls:
    return {"read_query": [{"query": "SELECT * FROM items"}],
            "write_query": [{"query": "INSERT INTO items (name) VALUES ('fig')"}],
            "create_table": [{"query": "CREATE TABLE IF NOT EXISTS more (x INTEGER)"}],
            "describe_table": [{"table_name": "items"}], "list_tables": [{}],
            "append_insight": [{"insight": "apples sell best"}]}


def _filesystem_calls(state: Path) -> Calls:
    root = state / "files"
    hello, notes = str(root / "hello.txt"), str(root / "notes")
    return {"read_file": [{"path": hello}], "read_text_file": [{"path": hello}],
            "read_multiple_files": [{"paths": [hello]}],
            "write_file": [{"path": str(root / "new.txt"), "content": "new"}],
            "edit_file": [{"path": hello, "edits": [{"oldText": "hello", "newText": "hello"}]}],
            "create_directory": [{"path": str(root / "made")}],
            "list_directory": [{"path": str(root)}],
            "list_directory_with_sizes": [{"path": str(root)}],
            "directory_tree": [{"path": str(root)}],
            "search_files": [{"path": str(root), "pattern": "*.md"}],
            "get_file_info": [{"path": hello}], "list_allowed_directories": [{}],
            "move_file": [{"source": str(root / "notes" / "todo.md"),
                           "destination": str(root / "notes" / "todo.md")}],
            "read_media_file": [{"path": notes + "/todo.md"}]}


def _memory_calls(_state: Path) -> Calls:
    entity = {"name": "sandbox", "entityType": "place", "observations": ["made by servers.py"]}
    return {"read_graph": [{}], "search_nodes": [{"query": "sandbox"}],
            "open_nodes": [{"names": ["sandbox"]}], "create_entities": [{"entities": [entity]}],
            "add_observations": [{"observations": [{"entityName": "sandbox",
                                                    "contents": ["seen"]}]}],
            "create_relations": [{"relations": [{"from": "sandbox", "to": "sandbox",
                                                 "relationType": "contains"}]}]}


def _everything_calls(_state: Path) -> Calls:
    return {"echo": [{"message": "hello"}], "get-sum": [{"a": 1, "b": 2}],
            "get-structured-content": [{"location": "Chicago"}],
            "get-annotated-message": [{"messageType": "success"}],
            "get-resource-links": [{"count": 2}], "get-tiny-image": [{}], "get-env": [{}],
            "trigger-long-running-operation": [{"duration": 1, "steps": 1}]}


#: The known-good calls a user of each server would write, given its sandbox's state.
KNOWN_GOOD: dict[str, Callable[[Path], Calls]] = {
    "time": _time_calls, "git": _git_calls, "sqlite": _sqlite_calls,
    "filesystem": _filesystem_calls, "memory": _memory_calls, "everything": _everything_calls}


def check_server(name: str, *, settings: Any, seed: int, timeout: float,
                 examples: bool) -> dict[str, Any]:
    """One server checked in a fresh sandbox: counts, time and its findings."""
    server = SERVERS[name]
    with tempfile.TemporaryDirectory(prefix=f"agtool-bench-{name}-") as tmp:
        argv, env, cwd = sandboxed(server, Path(tmp))
        calls = KNOWN_GOOD[name](Path(tmp) / "state") if examples else {}
        started = time.perf_counter()
        with open(os.devnull, "a") as errlog:
            results = run_check(shlex.join(argv), allow_writes=True, settings=settings,
                                seed=seed, errlog=errlog, env=env, cwd=str(cwd),
                                timeout=timeout, examples=calls)
        seconds = time.perf_counter() - started
    counts = Counter(result.outcome for result in results)
    return {"server": name, "registry": server.registry, "items": len(results),
            "tools": len({result.item.tool for result in results}),
            **{outcome: counts[outcome] for outcome in
               ("failed", "warned", "inconclusive", "skipped", "passed")},
            "seconds": round(seconds, 1), "never_accepted": never_accepted(results),
            "findings": [_finding(result) for result in results
                         if result.outcome in ("failed", "warned", "inconclusive")]}


def _finding(result: ItemResult) -> dict[str, str]:
    return {"item": result.item.name, "verdict": result.outcome,
            "message": result.message.split("\nFailing test case")[0]}


def profile(max_examples: int) -> Any:
    """The Hypothesis settings of a check: no database, no deadline (each example is a call)."""
    from hypothesis import HealthCheck, settings

    return settings(max_examples=max_examples, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def score_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Precision and recall of the checked servers' findings, against the ledger."""
    return dict(score({row["server"]: row["findings"] for row in rows}))


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The per-server markdown table."""
    lines = ["| server | registry | tools | items | FAIL | WARN | inconclusive | skipped | "
             "passed | seconds |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['server']} | {row['registry']} | {row['tools']} | {row['items']} "
                     f"| {row['failed']} | {row['warned']} | {row['inconclusive']} | "
                     f"{row['skipped']} | {row['passed']} | {row['seconds']} |")
    total = {key: sum(row[key] for row in rows) for key in
             ("tools", "items", "failed", "warned", "inconclusive", "skipped", "passed")}
    lines.append(f"| all | | {total['tools']} | {total['items']} | {total['failed']} | "
                 f"{total['warned']} | {total['inconclusive']} | {total['skipped']} | "
                 f"{total['passed']} | {round(sum(row['seconds'] for row in rows), 1)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", nargs="*", default=list(SERVERS), choices=list(SERVERS))
    parser.add_argument("--max-examples", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--no-examples", action="store_true")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    settings = profile(args.max_examples)
    missing = [name for name in args.servers if not installed(SERVERS[name])]
    if missing:
        print(f"not installed: {', '.join(missing)} (bash tests/thirdparty/install.sh)")
    rows = []
    for name in args.servers:
        if name in missing:
            continue
        print(f"checking {name} ...", file=sys.stderr, flush=True)
        rows.append(check_server(name, settings=settings, seed=args.seed,
                                 timeout=args.timeout, examples=not args.no_examples))
    print(f"seed {args.seed}, at most {args.max_examples} examples per item, "
          f"{'no known-good calls' if args.no_examples else 'known-good calls given'}\n")
    print("\n".join(table(rows)))
    for row in rows:
        for finding in row["findings"]:
            word = {"failed": "FAIL", "warned": "WARN"}.get(finding["verdict"], "INCONCLUSIVE")
            for line in finding["message"].splitlines()[:4]:
                print(f"{word} {row['server']} {finding['item']}: {line[:400]}")
        if row["never_accepted"]:
            print(f"NEVER ACCEPTED {row['server']}: {', '.join(row['never_accepted'])}")
    figures = score_rows(rows)
    print(f"\nprecision of FAIL: {figures['true_fails']} / {figures['fails']} = "
          f"{figures['precision']}; recall: {figures['defects_reported']} of "
          f"{figures['defects']} known defects = {figures['recall']}")
    for item in figures["unknown_fails"]:
        print(f"FAIL NOT IN THE LEDGER (check it by hand): {item}")
    for missed in figures["missed"]:
        print(f"MISSED: {missed}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
