"""A process that makes one write through a gate over a SQLite file and is killed inside it.

Run as ``python _crash_worker.py DB MARK``: the body writes ``MARK`` (the
effect, made before the crash) and then waits to be killed with SIGKILL by
the test, so the key is left claimed by a process that no longer exists.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import agtool

ARGS = {"order": "A-1", "amount": 30}
RUN_ID, STEP_ID = "run-crash", "pay"


def table(mark: str | None) -> dict[str, Any]:
    def pay(order: str, amount: int) -> dict[str, Any]:
        if mark is None:
            raise AssertionError("the body ran again after the crash")
        with open(mark + ".part", "w", encoding="utf-8") as effect:
            effect.write(order)  # the payment is made ...
        os.replace(mark + ".part", mark)  # (all at once: the test reads it as soon as it exists)
        time.sleep(60)  # ... and the process is killed before its outcome is stored
        return {"receipt": "never"}

    return {"pay": {"fn": pay, "effect": "write", "key_args": ["order"],
                    "args": {"order": {"type": "str"}, "amount": {"type": "int", "min": 1}},
                    "returns": {"receipt": {"type": "str"}}}}


if __name__ == "__main__":
    db, mark = sys.argv[1], sys.argv[2]
    gate = agtool.Gate(table(mark), scope={"reversible_write"}, store=db)
    gate.call_tool("pay", dict(ARGS), run_id=RUN_ID, step_id=STEP_ID)
