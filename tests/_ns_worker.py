"""One replica of a write service, run as its own process (often in a PID namespace of its own).

``python _ns_worker.py STORE RUNS MODE [LEASE]`` builds a gate over the SQLite
file ``STORE`` (with a fixed secret: every replica digests alike) and makes one
write call of ``charge``; its body appends a line to ``RUNS`` first, so the
test counts body runs by counting lines. ``MODE`` says what the body does next:
``hold`` waits until ``RUNS + ".go"`` exists, ``die`` exits the process on the
spot (its claim left pending), ``fast`` and ``plain`` answer at once. The
call's envelope is printed as one JSON line. In ``hold`` and ``fast``,
``charge`` has a ``reconcile`` that finds nothing: a replica that took a live
owner for dead would take the key over and charge again. In ``die`` and
``plain`` it has none: an unknown key is answered ``write:unknown``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import agtool

SECRET = "replicas-share-this-secret-0123"  # noqa: S105 - a test's own secret
ARGS = {"card": "c-1", "cents": 500}


def table(runs: str, mode: str) -> dict[str, dict[str, Any]]:
    def charge(card: str, cents: int) -> dict[str, Any]:
        with open(runs, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
        if mode == "die":
            os._exit(3)  # mid-body: the claim stays pending under a process that is gone
        while mode == "hold" and not os.path.exists(runs + ".go"):
            time.sleep(0.01)
        return {"card": card, "cents": cents}

    entry: dict[str, Any] = {
        "fn": charge,
        "args": {"card": {"type": "str"}, "cents": {"type": "int", "min": 1}},
        "returns": {"card": {"type": "str"}, "cents": {"type": "int"}},
        "effect": "write", "risk": "reversible_write",
    }
    if mode in ("hold", "fast"):
        entry["reconcile"] = lambda card, cents: None  # "nothing happened": runs again
    return {"charge": entry}


def main() -> None:
    store, runs, mode = sys.argv[1:4]
    lease = float(sys.argv[4]) if len(sys.argv) > 4 else 300.0
    gate = agtool.Gate(table(runs, mode), scope={"reversible_write"}, store=store,
                       secret=SECRET, lease=lease, pending_wait=0.2)
    envelope = gate.call_tool("charge", dict(ARGS), run_id="run-1", step_id="step-1")
    print(json.dumps({"pid": os.getpid(), "envelope": dict(envelope)}), flush=True)


if __name__ == "__main__":
    main()
