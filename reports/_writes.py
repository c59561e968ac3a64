"""Safe side effects, measured: writes once per key, authority in code, records without secrets.

A small table of two write tools runs real scenarios (retries, threads, a
restart on the same SQLite file, a timeout, a conflict, refused scope and
approvals); every figure is a count taken from the bodies, the gate or the
records, so the section is as reproducible as the rest of the report.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agtool import Gate, tools

__all__ = ["measure_writes"]

_PHONE = "+821055501234"  # a sensitive value: it must appear in no record
_THREADS = 8
_RETRIES = 5


class _Counted:
    """A write body that counts its runs and takes a moment, so that callers overlap."""

    def __init__(self, delay: float) -> None:
        self.runs = 0
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, **args: Any) -> dict[str, Any]:
        with self._lock:
            self.runs += 1
        time.sleep(self.delay)
        return {"receipt": f"r-{args.get('order_id', 'notice')}"}


def _table(reserve: _Counted, notify: _Counted) -> dict[str, Any]:
    return {
        "reserve_stock": {
            "fn": reserve, "effect": "write", "key_args": ["order_id"], "timeout": 0.05,
            "args": {"order_id": {"type": "str", "pattern": "ORD-[0-9]{4}"},
                     "sku": {"type": "str"}, "count": {"type": "int", "min": 1, "max": 9}},
            "returns": {"receipt": {"type": "str"}},
        },
        "notify_customer": {
            "fn": notify, "effect": "write", "risk": "external_effect",
            "args": {"phone": {"type": "str", "sensitive": True}, "text": {"type": "str"}},
            "returns": {"receipt": {"type": "str"}},
        },
    }


def measure_writes() -> dict[str, Any]:
    """Run the scenarios and count what happened."""
    with tempfile.TemporaryDirectory() as folder:
        return _measure(Path(folder))


def _measure(folder: Path) -> dict[str, Any]:
    reserve, notify = _Counted(0.0), _Counted(0.02)
    records: list[dict[str, Any]] = []
    store = folder / "writes.sqlite3"
    scope = {"read_public", "reversible_write", "external_effect"}
    gate = Gate(_table(reserve, notify), store=store, scope=scope,
                records=lambda record: records.append(record.as_dict()))
    order = {"order_id": "ORD-0001", "sku": "A100", "count": 2}

    for _ in range(_RETRIES):
        gate.call_tool("reserve_stock", order, run_id="run-1", step_id="reserve")
    retry_runs = reserve.runs

    message = {"phone": _PHONE, "text": "Your order is reserved."}
    approval = gate.approve("notify_customer", message)
    threads = [threading.Thread(target=gate.call_tool, args=("notify_customer", message),
                                kwargs={"run_id": "run-1", "step_id": "notify",
                                        "approvals": [approval]})
               for _ in range(_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    thread_runs = notify.runs

    restarted = Gate(_table(reserve, notify), store=store, scope=scope)
    restarted.call_tool("reserve_stock", order, run_id="run-1", step_id="reserve")
    restart_runs = reserve.runs - retry_runs

    conflict = gate.call_tool("reserve_stock", {**order, "count": 3}, run_id="run-1",
                              step_id="reserve")["error"]

    slow = Gate(_table(_Counted(0.2), notify), store=folder / "slow.sqlite3", scope=scope,
                pending_wait=10.0)
    slow_body = slow.table["reserve_stock"]["fn"]
    first = slow.call_tool("reserve_stock", order, run_id="run-2", step_id="reserve")["error"]
    retried = slow.call_tool("reserve_stock", order, run_id="run-2", step_id="reserve")

    before = notify.runs
    denied = gate.call_tool("notify_customer", message, scope={"read_public"}, run_id="run-3",
                            step_id="notify", approvals=[approval])["error"]
    other = {**message, "text": "Your order was cancelled."}
    unapproved = gate.call_tool("notify_customer", other, run_id="run-3", step_id="notify",
                                approvals=[approval])["error"]
    refused_runs = notify.runs - before

    model_error = tools.GATE.call_for_model(
        "stock_lookup", {"sku": "A100", "region": "daegu", "limit": 1})["error"]
    written = json.dumps(records)
    return {
        "retries": {"calls": _RETRIES, "body_runs": retry_runs},
        "threads": {"calls": _THREADS, "body_runs": thread_runs},
        "restart": {"body_runs": restart_runs},
        "timeout": {"first": first, "retry_ok": retried["ok"], "body_runs": slow_body.runs},
        "conflict": conflict,
        "refused": {"scope": denied, "approval": unapproved, "body_runs": refused_runs},
        "records": {"count": len(records), "sensitive_values_found": written.count(_PHONE)},
        "model_error": {key: model_error[key] for key in ("code", "retryable", "message")},
    }
