"""The side effects that break other frameworks, measured: each scenario counts body runs.

A cancelled payment retried, a process killed inside a payment and its key
resolved by an operator, and a store that fails after the body ran. Every
figure is a count taken from the bodies or from the store, never typed in.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agtool import Approval, Envelope, Gate, SqliteStore
from agtool._authority import TOKEN_PREFIX
from agtool._cli import main as agtool_main

__all__ = ["measure_incidents"]

_SCOPE = {"reversible_write"}
_ARGS = {"order": "ORD-1", "amount": 30}
_RUN, _STEP = "run-1", "pay"
_RETRIES = 3
_WAIT = 20.0

#: A process that starts a payment, makes it, and sleeps until it is killed.
_CRASH = """
import os, sys, time
import agtool

def pay(order, amount):
    with open(sys.argv[2] + ".part", "w") as effect:
        effect.write(order)
    os.replace(sys.argv[2] + ".part", sys.argv[2])
    time.sleep(60)
    return {"receipt": "never"}

table = {"pay": {"fn": pay, "effect": "write", "key_args": ["order"],
                 "args": {"order": {"type": "str"}, "amount": {"type": "int"}},
                 "returns": {"receipt": {"type": "str"}}}}
gate = agtool.Gate(table, scope={"reversible_write"}, store=sys.argv[1])
gate.call_tool("pay", {"order": "ORD-1", "amount": 30}, run_id="run-1", step_id="pay")
"""


class _Payments:
    def __init__(self, interrupt: BaseException | None = None) -> None:
        self.made = 0
        self.interrupt = interrupt

    def pay(self, order: str, amount: int) -> dict[str, Any]:
        self.made += 1
        if self.interrupt is not None:
            interrupt, self.interrupt = self.interrupt, None
            raise interrupt
        return {"receipt": f"r-{order}"}


def _table(fn: Any) -> dict[str, Any]:
    return {"pay": {"fn": fn, "effect": "write", "key_args": ["order"],
                    "args": {"order": {"type": "str"}, "amount": {"type": "int"}},
                    "returns": {"receipt": {"type": "str"}}}}


def _pay(gate: Gate) -> Envelope:
    return gate.call_tool("pay", dict(_ARGS), run_id=_RUN, step_id=_STEP)


def measure_incidents() -> dict[str, Any]:
    """Run each scenario and count what happened."""
    with tempfile.TemporaryDirectory() as folder:
        return {"cancelled": _cancelled(), "crash": _crash(Path(folder)),
                "failing_store": _failing_store(), "forged_approvals": _forged()}


def _cancelled() -> dict[str, Any]:
    payments = _Payments(asyncio.CancelledError())
    gate = Gate(_table(payments.pay), scope=_SCOPE)
    propagated = False
    try:
        _pay(gate)
    except asyncio.CancelledError:
        propagated = True
    answers = [_pay(gate)["error"] for _ in range(_RETRIES)]
    return {"retries": _RETRIES, "propagated": propagated, "answers": sorted(set(answers)),
            "payments": payments.made}


def _crash(folder: Path) -> dict[str, Any]:
    db, mark = folder / "writes.sqlite3", folder / "paid"
    worker = subprocess.Popen([sys.executable, "-c", _CRASH, str(db), str(mark)],  # noqa: S603
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + _WAIT
    while not mark.exists() and worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.send_signal(signal.SIGKILL)
    worker.wait(_WAIT)
    payments = _Payments()
    gate = Gate(_table(payments.pay), scope=_SCOPE, store=db)
    before = [_pay(gate)["error"] for _ in range(_RETRIES)]
    listed = [entry.state for entry in gate.store.pending()]
    key = gate.idempotency_key("pay", _ARGS, _RUN, _STEP) or ""
    with open(os.devnull, "w") as quiet:  # the command's own "resolved ..." line
        stdout, sys.stdout = sys.stdout, quiet
        try:
            status = agtool_main(["writes", "resolve", "--store", str(db), key,
                                  "--value", '{"receipt": "from-the-bank"}'])
        finally:
            sys.stdout = stdout
    after = _pay(gate)
    return {"killed_with": "SIGKILL", "effect_made": mark.exists(), "retries": _RETRIES,
            "answers_before": sorted(set(before)), "listed": listed, "resolve_status": status,
            "answer_after": after["value"], "body_runs_after_crash": payments.made}


class _Money:
    """An argument with no canonical form: its repr is all that tells two apart."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __repr__(self) -> str:
        return "Money(...)"


def _forged() -> dict[str, Any]:
    """An irreversible payment, and every way of forging its approval the issue measured."""
    payments = _Payments()
    table = _table(payments.pay)
    table["pay"]["risk"] = "irreversible"
    table["transfer"] = {"fn": payments.pay, "effect": "write", "risk": "irreversible",
                         "args": {"order": {"type": "str"}, "amount": {"type": "dict"}},
                         "returns": {"receipt": {"type": "str"}}}
    gate = Gate(table, scope={"irreversible"})
    plan = gate.call_tool("pay", dict(_ARGS), dry_run=True, run_id=_RUN, step_id=_STEP)["value"]
    real = gate.approve("pay", {**_ARGS, "amount": 1})  # a real approval, of other args
    mutated = gate.approve("pay", {**_ARGS, "amount": 1})
    object.__setattr__(mutated, "token", real.token.replace("1", "3", 1))

    class Covers(Approval):
        """A subclass whose token is a real one for other args."""

    body = base64.urlsafe_b64encode(json.dumps(
        {"v": 1, "tool": "pay", "args": plan["args_digest"], "run": "", "step": "",
         "exp": None, "id": "x", "by": "me", "once": False}).encode()).decode().rstrip("=")
    hand_made = f"{TOKEN_PREFIX}.{body}." + base64.urlsafe_b64encode(
        hmac.new(b"guessed-secret", body.encode(), hashlib.sha256).digest()).decode()
    forgeries: dict[str, list[Any]] = {
        "hand-made token, HMAC under a guessed key": [hand_made],
        "rebuilt from the dry-run plan's args_digest": [Approval(plan["args_digest"])],
        "Approval subclass": [Covers(real.token)],
        "instance mutated with object.__setattr__": [mutated],
        "approval of other arguments": [real],
    }
    answers = {name: gate.call_tool("pay", dict(_ARGS), run_id=_RUN, step_id=_STEP,
                                    approvals=approvals)["error"]
               for name, approvals in forgeries.items()}
    small = gate.approve("transfer", {"order": "ORD-1", "amount": {"value": _Money(1)}})
    answers["Money(1) approved, Money(10**9) sent (no canonical form)"] = gate.call_tool(
        "transfer", {"order": "ORD-1", "amount": {"value": _Money(10**9)}}, run_id=_RUN,
        step_id="transfer", approvals=[small])["error"]
    return {"answers": answers, "payments": payments.made}


class _FullDisk(SqliteStore):
    def finish(self, key: str, owner: str, outcome: dict[str, Any]) -> bool:
        raise sqlite3.OperationalError("database or disk is full")


def _failing_store() -> dict[str, Any]:
    payments = _Payments()
    gate = Gate(_table(payments.pay), scope=_SCOPE, store=_FullDisk())
    log = logging.getLogger("agtool")
    log.disabled = True  # the store's error is logged, as it should be, but not in the report
    try:
        first = _pay(gate)
    finally:
        log.disabled = False
    answers = [_pay(gate)["error"] for _ in range(_RETRIES)]
    return {"first_ok": first["ok"], "first": first["error"], "retries": _RETRIES,
            "answers": sorted(set(answers)), "payments": payments.made}
