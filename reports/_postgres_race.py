"""Writes across machines, measured: processes racing on one PostgreSQL database.

Each process opens its own gate over its own connection, as separate
machines would, waits at a barrier, and writes every key once; the bodies
append their key to a log file, so body runs are counted from the log, not
from the gate. Measured only where a server is named by
``AGTOOL_TEST_POSTGRES`` (``.ci/run`` starts one); the section says so
otherwise, and ``--check`` does not compare it (it depends on the machine).
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["measure_postgres_race"]

_PROCESSES, _KEYS = 4, 10


def _table(log: str) -> dict[str, Any]:
    def place(order: str) -> dict[str, Any]:
        with open(log, "a", encoding="utf-8") as runs:
            runs.write(order + "\n")
        return {"order": order}

    return {"place": {"fn": place, "effect": "write", "args": {"order": {"type": "str"}},
                      "returns": {"order": {"type": "str"}}}}


def _worker(url: str, table: str, secret: str, log: str, barrier: Any, answers: Any) -> None:
    import agtool
    from agtool._store.postgres import PostgresStore

    store = PostgresStore(url, table=table)
    gate = agtool.Gate(_table(log), scope={"reversible_write"}, store=store, pending_wait=30.0,
                       secret=secret)
    barrier.wait(timeout=60)
    for key in range(_KEYS):
        envelope = gate.call_tool("place", {"order": f"K-{key}"}, run_id="race", step_id="s")
        answers.put(bool(envelope["ok"]))
    store.close()


def measure_postgres_race() -> dict[str, Any]:
    """The race's counts, or why it was not run."""
    url = os.environ.get("AGTOOL_TEST_POSTGRES", "")
    if not url:
        return {"measured": False,
                "why": "no PostgreSQL server: set AGTOOL_TEST_POSTGRES (.ci/run starts one)"}
    table = f"report_{uuid.uuid4().hex[:16]}"
    context = multiprocessing.get_context("spawn")
    try:
        with tempfile.TemporaryDirectory() as folder:
            log = str(Path(folder) / "runs.log")
            Path(log).touch()
            barrier, answers = context.Barrier(_PROCESSES), context.Queue()
            secret = secrets.token_hex(16)  # every machine's gate shares the store's key
            workers = [context.Process(target=_worker,
                                       args=(url, table, secret, log, barrier, answers))
                       for _ in range(_PROCESSES)]
            for worker in workers:
                worker.start()
            oks = [answers.get(timeout=120) for _ in range(_PROCESSES * _KEYS)]
            for worker in workers:
                worker.join(60)
            runs = Counter(Path(log).read_text().split())
    finally:
        _drop(url, table)
    return {"measured": True, "processes": _PROCESSES, "keys": _KEYS,
            "calls": len(oks), "ok": sum(oks), "body_runs": sum(runs.values()),
            "keys_run_twice": sum(1 for count in runs.values() if count > 1)}


def _drop(url: str, table: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
            sql.Identifier(table), sql.Identifier(f"{table}_tokens")))
