"""A worker process for the multi-process write test in ``test_writes.py``.

Started with multiprocessing's ``spawn`` context, so it imports nothing from
the test session: only the standard library and ``agtool``. Each worker builds
its own ``Gate`` over the shared SQLite file, waits at a barrier so that every
worker claims the key at the same moment, and makes one write call. The body
appends one line (its process id) to ``log_path`` before answering, so the
parent counts body runs by counting lines, not by asking the gate.
"""

from __future__ import annotations

import os
import time
from typing import Any

import agtool

RUN_ID = "run-procs"
STEP_ID = "step-1"
ARGS = {"order": "A-1", "qty": 2}


def _table(log_path: str) -> dict[str, dict[str, Any]]:
    def place_order(order: str, qty: int) -> dict[str, Any]:
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
        time.sleep(0.2)  # long enough that the other workers find the key pending
        return {"order": order, "qty": qty, "pid": os.getpid()}

    return {"place_order": {
        "fn": place_order,
        "args": {"order": {"type": "str"}, "qty": {"type": "int", "min": 1}},
        "returns": {"order": {"type": "str"}, "qty": {"type": "int"}, "pid": {"type": "int"}},
        "effect": "write",
        "key_args": ["order"],
    }}


def call_once(db_path: str, log_path: str, barrier: Any, results: Any) -> None:
    """Build a gate over ``db_path``, wait for the others, call once, put what happened."""
    try:
        gate = agtool.Gate(_table(log_path), scope={"reversible_write"}, store=db_path,
                           pending_wait=10.0)
        barrier.wait(timeout=30)
        envelope = gate.call_tool("place_order", dict(ARGS), run_id=RUN_ID, step_id=STEP_ID)
        stats = gate.stats("place_order")
        results.put({"envelope": dict(envelope), "runs": stats.runs,
                     "replayed": stats.replayed, "crash": ""})
    except BaseException as exc:  # the parent must hear of it rather than wait forever
        barrier.abort()  # and so must the other workers, waiting at the barrier
        results.put({"envelope": None, "runs": 0, "replayed": 0,
                     "crash": f"{type(exc).__name__}: {exc}"})
