"""Writes per second through a write store: SQLite file against PostgreSQL.

    python bench/bench_stores.py                       # SQLite only
    AGTOOL_TEST_POSTGRES=postgresql://... python bench/bench_stores.py
    python bench/bench_stores.py --seconds 1 --postgres postgresql://...

One write is one ``Gate.call_tool`` of a write tool with a trivial body and
a key of its own: the gate checks the args, claims the key in the store
(``run``), runs the body, checks the result and finishes the key with the
outcome. Nothing is replayed, so every write reaches the disk or the server.

Workers run for a fixed time each and the writes they made are counted, so
the run is bounded (about ``seconds`` x 12 plus process start-up, under 60 s
by default on two cores). Threads share one gate and its store (the
PostgreSQL pool has one connection per thread); processes each open their
own, as separate agents on one machine do. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import agtool
from agtool._store import SqliteStore

WORKERS = (1, 4, 16)

Opener = Callable[[int], Any]  # pool size -> an open store


def _gate(store: Any) -> agtool.Gate:
    """A gate whose one write tool has a trivial body, over ``store``."""
    tools = {"place_order": {
        "fn": lambda order: {"order": order},
        "args": {"order": {"type": "str"}}, "returns": {"order": {"type": "str"}},
        "effect": "write", "key_args": ["order"]}}
    # A server store needs an explicit secret; the same one keys every store here alike.
    return agtool.Gate(tools, scope={"reversible_write"}, store=store,
                       secret="bench-stores-secret-0123456789")  # noqa: S106 - a bench's own


def write_for(gate: agtool.Gate, seconds: float, start: float) -> int:
    """Writes with fresh keys until ``seconds`` after ``start``; how many were made."""
    prefix, made = uuid.uuid4().hex, 0
    while time.time() < start:
        time.sleep(0.001)
    end = start + seconds
    while time.time() < end:
        answer = gate.call_tool("place_order", {"order": f"{prefix}-{made}"}, run_id="bench",
                                step_id="write")
        if not answer["ok"]:
            raise RuntimeError(f"a write failed: {answer['error']}")
        made += 1
    if gate.stats("place_order").runs < made:
        raise RuntimeError("a write was answered without its body running")
    return made


def with_threads(opener: Opener, workers: int, seconds: float) -> float:
    store = opener(workers)
    gate = _gate(store)
    counts = [0] * workers
    start = time.time() + 0.2  # every thread is waiting before the clock starts

    def work(i: int) -> None:
        counts[i] = write_for(gate, seconds, start)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    return sum(counts) / seconds


def _process(spec: tuple[str, str, str], seconds: float, ready: Any, out: Any) -> None:
    store = _open(spec, 1)
    ready.wait(timeout=120)  # every process has imported agtool and connected
    out.put(write_for(_gate(store), seconds, time.time()))
    store.close()


def with_processes(spec: tuple[str, str, str], workers: int, seconds: float) -> float:
    # fork, not spawn: sixteen fresh interpreters importing agtool would take longer than
    # the run. Nothing is open in this process when it forks.
    context = (multiprocessing.get_context("fork") if hasattr(os, "fork")
               else multiprocessing.get_context("spawn"))
    out, ready = context.Queue(), context.Barrier(workers)
    processes = [context.Process(target=_process, args=(spec, seconds, ready, out))
                 for _ in range(workers)]
    for process in processes:
        process.start()
    made = sum(out.get(timeout=120) for _ in processes)
    for process in processes:
        process.join()
    return float(made) / seconds


def _open(spec: tuple[str, str, str], pool: int) -> Any:
    kind, where, table = spec
    if kind == "sqlite":
        return SqliteStore(where)
    from agtool._store.postgres import PostgresStore

    return PostgresStore(where, table=table, pool_size=pool)


def _drop(url: str, table: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
            sql.Identifier(table), sql.Identifier(f"{table}_tokens")))


def measure(postgres: str, seconds: float, processes: bool) -> list[tuple[str, dict[str, float]]]:
    """Writes per second for each store, mode and number of workers."""
    rows: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as scratch:
        specs = [("SQLite file", ("sqlite", os.path.join(scratch, "writes.sqlite"), ""))]
        if postgres:
            specs.append(("PostgreSQL", ("postgres", postgres,
                                         f"bench_{uuid.uuid4().hex[:12]}")))
        for name, spec in specs:
            _open(spec, 1).close()  # the file or table exists before anyone races for it
            try:
                rows.append((f"{name}, threads", {
                    str(n): with_threads(functools.partial(_open, spec), n, seconds)
                    for n in WORKERS}))
                if processes:
                    rows.append((f"{name}, processes", {
                        str(n): with_processes(spec, n, seconds) for n in WORKERS}))
            finally:
                if spec[0] == "postgres":
                    _drop(spec[1], spec[2])
    return rows


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    lines = ["| writes/s: store, workers as | " + " | ".join(str(n) for n in WORKERS) + " |",
             "|---|" + "---:|" * len(WORKERS)]
    lines += [f"| {name} | " + " | ".join(f"{figures[str(n)]:,.0f}" for n in WORKERS) + " |"
              for name, figures in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--postgres", default=os.environ.get("AGTOOL_TEST_POSTGRES", ""),
                        help="a PostgreSQL url (default: $AGTOOL_TEST_POSTGRES; none: SQLite only)")
    parser.add_argument("--seconds", type=float, default=1.5, help="each case's timed run")
    parser.add_argument("--no-processes", action="store_true", help="threads only")
    args = parser.parse_args(argv)
    rows = measure(args.postgres, args.seconds, not args.no_processes)
    print(f"Writes per second (a write call with a new key, through a Gate),"
          f" {os.cpu_count()} cores, {args.seconds:g} s per case:\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
