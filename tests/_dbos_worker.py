"""A DBOS application whose one workflow refunds an order through a gate; killed on demand.

    python _dbos_worker.py FOLDER MODE

Its system database and the gate's write store are SQLite files in FOLDER, and
the refund's effect is a line appended to FOLDER/effects.log. The workflow
``refund_workflow`` (id ``wf-1``) runs one step, ``refund_step``, which calls
the gate with ``keys_for.dbos()``. On the first run (no FOLDER/killed file)
the process SIGKILLs itself, by MODE:

- ``after-call``: after the gate answered and before DBOS checkpoints the step;
- ``in-body``: inside the body, after the effect and before the gate records it;
- ``ungated``: the control, a step that runs the body itself, killed after it.

Every later run only launches DBOS, which recovers the pending workflow and
runs the step again, and prints the workflow's result as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID

from agtool import Gate, keys_for

FOLDER = Path(sys.argv[1])
MODE = sys.argv[2]
EFFECTS = FOLDER / "effects.log"
KILLED = FOLDER / "killed"


def _first_run() -> bool:
    if KILLED.exists():
        return False
    KILLED.write_text("1")
    return True


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def issue_refund(order: str, amount: int) -> dict[str, Any]:
    with EFFECTS.open("a") as effects:  # the side effect: must happen once
        effects.write(f"{order}\n")
    if MODE == "in-body" and _first_run():
        _die()
    return {"refund_id": f"R-{order}"}


def refunded(order: str, amount: int) -> dict[str, Any] | None:
    """The reconcile of an unknown outcome: whether the refund happened, read from the world."""
    done = EFFECTS.exists() and f"{order}\n" in EFFECTS.read_text().splitlines(keepends=True)
    return {"refund_id": f"R-{order}"} if done else None


TOOLS = {"issue_refund": {
    "fn": issue_refund, "effect": "write", "risk": "reversible_write", "key_args": ["order"],
    "reconcile": refunded,
    "args": {"order": {"type": "str"}, "amount": {"type": "int"}},
    "returns": {"refund_id": {"type": "str"}}}}
GATE = Gate(TOOLS, scope={"reversible_write"}, store=str(FOLDER / "writes.sqlite3"))


@DBOS.step()
def refund_step(order: str, amount: int) -> dict[str, Any]:
    if MODE == "ungated":
        answer = {"ok": True, "value": issue_refund(order, amount), "error": ""}
    else:
        answer = dict(GATE.call_tool("issue_refund", {"order": order, "amount": amount},
                                     **keys_for.dbos()))
    if MODE in ("after-call", "ungated") and _first_run():
        _die()
    return answer


@DBOS.workflow()
def refund_workflow(order: str, amount: int) -> dict[str, Any]:
    return refund_step(order, amount)


def main() -> None:
    DBOS(config={"name": "agtool-dbos-test", "log_level": "WARNING",
                 "system_database_url": f"sqlite:///{FOLDER / 'dbos.sqlite3'}"})
    DBOS.launch()  # recovers the workflow a killed process left pending
    try:
        if not KILLED.exists():
            with SetWorkflowID("wf-1"):
                DBOS.start_workflow(refund_workflow, "O-7", 20)
        result = DBOS.retrieve_workflow("wf-1").get_result()
        stats = GATE.stats("issue_refund")
        print(json.dumps({"result": result, "runs": stats.runs, "replayed": stats.replayed,
                          "reconciled": stats.reconciled}))
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main()
