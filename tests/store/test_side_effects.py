"""Side effects that hold: interrupted bodies, crashed processes, reconcile, operators, workers.

Every test counts the body's own runs (a list inside the body) and reads the
store through its own methods: nothing expected is copied from the gate.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import _crash_worker
import pytest
from _race import race

from agtool import Gate, NotApplied, SqliteStore
from agtool._cli import main as agtool_main

WRITE_SCOPE = frozenset({"reversible_write"})
ARGS: dict[str, Any] = {"order": "A-1", "amount": 30}
PAY_ARGS = {"order": {"type": "str"}, "amount": {"type": "int", "min": 1}}
PAY_RETURNS = {"receipt": {"type": "str"}}
CALL = {"run_id": "run-1", "step_id": "pay"}
WAIT = 10.0  #: how long a test waits for a background body before it gives up


def ok(value: Any) -> dict[str, Any]:
    return {"ok": True, "value": value, "error": ""}


def failed(reason: str) -> dict[str, Any]:
    return {"ok": False, "value": None, "error": reason}


def pay_gate(fn: Callable[..., Any], *, reconcile: Callable[..., Any] | None = None,
             store: Any = None, **gate: Any) -> Gate:
    entry: dict[str, Any] = {"fn": fn, "args": PAY_ARGS, "returns": PAY_RETURNS,
                             "effect": "write", "key_args": ["order"]}
    if reconcile is not None:
        entry["reconcile"] = reconcile
    return Gate({"pay": entry}, scope=WRITE_SCOPE, store=store, pending_wait=0.05, **gate)


class Payments:
    """An outside system that records payments by order, and a body that makes one."""

    def __init__(self, interrupt: list[BaseException] | None = None) -> None:
        self.made: list[str] = []
        self.interrupt = list(interrupt or [])

    def pay(self, order: str, amount: int) -> dict[str, Any]:
        self.made.append(order)
        if self.interrupt:
            raise self.interrupt.pop(0)
        return {"receipt": f"r-{order}-{len(self.made)}"}

    def find(self, order: str, amount: int) -> dict[str, Any] | None:
        """The reconcile: the payment for this order, if the system has one."""
        return {"receipt": f"found-{order}"} if order in self.made else None


# -- A BaseException mid-body ----------------------------------------------------------------


def test_the_issue_reproduction_pays_once() -> None:
    """The issue's case: a write that pays and is then cancelled, called twice with one key."""
    sent: list[str] = []

    def pay(order: str, amount: int) -> dict[str, Any]:
        sent.append(order)
        raise asyncio.CancelledError()

    gate = pay_gate(pay)
    with pytest.raises(asyncio.CancelledError):
        gate.call_tool("pay", dict(ARGS), **CALL)
    assert gate.call_tool("pay", dict(ARGS), **CALL) == failed("write:unknown")
    assert sent == ["A-1"]


def test_an_async_write_cancelled_mid_body_is_never_run_again() -> None:
    """A task cancelled while its write body awaits: ``CancelledError`` reaches the caller, the
    key is unknown, and the retry is refused, on the async path too."""
    started, sent = asyncio.Event(), []

    async def pay(order: str, amount: int) -> dict[str, Any]:
        sent.append(order)
        started.set()
        await asyncio.sleep(30)
        return {"receipt": "late"}

    async def scenario() -> dict[str, Any]:
        gate = pay_gate(pay)
        task = asyncio.create_task(gate.acall_tool("pay", dict(ARGS), **CALL))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return dict(await gate.acall_tool("pay", dict(ARGS), **CALL))

    assert asyncio.run(scenario()) == failed("write:unknown")
    assert sent == ["A-1"]


def test_not_applied_frees_the_key_for_the_next_call() -> None:
    """A body that stops with ``NotApplied`` says it did nothing: the key is freed and the
    exception still propagates; the next call runs the body and is kept."""
    payments = Payments([NotApplied()])
    gate = pay_gate(payments.pay)
    with pytest.raises(NotApplied):
        gate.call_tool("pay", dict(ARGS), **CALL)
    assert gate.call_tool("pay", dict(ARGS), **CALL) == ok({"receipt": "r-A-1-2"})
    assert gate.call_tool("pay", dict(ARGS), **CALL) == ok({"receipt": "r-A-1-2"})
    assert payments.made == ["A-1", "A-1"]


# -- Reconcile -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["sync", "async"])
def test_reconcile_finds_the_effect_and_never_runs_the_body_again(path: str) -> None:
    """After an interrupted payment the retry asks the outside system by the business key: it
    finds the payment, whose value is kept and replayed; the body ran once."""
    payments = Payments([KeyboardInterrupt()])
    gate = pay_gate(payments.pay, reconcile=payments.find)
    with pytest.raises(KeyboardInterrupt):
        gate.call_tool("pay", dict(ARGS), **CALL)
    if path == "sync":
        answer = gate.call_tool("pay", dict(ARGS), **CALL)
    else:
        answer = asyncio.run(gate.acall_tool("pay", dict(ARGS), **CALL))
    assert answer == ok({"receipt": "found-A-1"})
    assert gate.call_tool("pay", dict(ARGS), **CALL) == answer
    assert payments.made == ["A-1"]
    stats = gate.stats("pay")
    assert (stats.runs, stats.unknown, stats.reconciled, stats.replayed) == (1, 1, 1, 1)
    assert gate.store.pending() == []


@pytest.mark.parametrize("path", ["sync", "async"])
def test_reconcile_that_finds_nothing_runs_the_body_once_more(path: str) -> None:
    """The interruption came before the effect: reconcile says so (``None``) and the retry
    runs the body, once, and keeps its outcome."""
    made: list[str] = []

    def pay(order: str, amount: int) -> dict[str, Any]:
        if not made:
            made.append("interrupted")
            raise asyncio.CancelledError()  # before any payment was made
        made.append(order)
        return {"receipt": f"r-{order}"}

    async def afind(order: str, amount: int) -> dict[str, Any] | None:
        return {"receipt": "found"} if order in made else None

    gate = pay_gate(pay, reconcile=afind if path == "async" else
                    (lambda order, amount: {"receipt": "found"} if order in made else None))
    with pytest.raises(asyncio.CancelledError):
        gate.call_tool("pay", dict(ARGS), **CALL)
    answer = (gate.call_tool("pay", dict(ARGS), **CALL) if path == "sync"
              else asyncio.run(gate.acall_tool("pay", dict(ARGS), **CALL)))
    assert answer == ok({"receipt": "r-A-1"})
    assert gate.call_tool("pay", dict(ARGS), **CALL) == answer
    assert made == ["interrupted", "A-1"]


def test_reconcile_that_raises_leaves_the_key_unknown() -> None:
    """A reconcile that cannot reach the outside system decides nothing: ``write:unknown``."""
    payments = Payments([SystemExit(1)])

    def unreachable(order: str, amount: int) -> None:
        raise ConnectionError("payments API down")

    gate = pay_gate(payments.pay, reconcile=unreachable)
    with pytest.raises(SystemExit):
        gate.call_tool("pay", dict(ARGS), **CALL)
    assert gate.call_tool("pay", dict(ARGS), **CALL) == failed("write:unknown")
    assert gate.call_tool("pay", dict(ARGS), **CALL) == failed("write:unknown")
    assert payments.made == ["A-1"]
    assert [entry.state for entry in gate.store.pending()] == ["unknown"]


def test_racing_retries_reconcile_once() -> None:
    """Eight threads retry an unknown key at once: one takes it over and reconciles, the others
    wait for its outcome; reconcile and body run once between them."""
    payments = Payments([KeyboardInterrupt()])
    looked: list[str] = []
    gate_lock = threading.Lock()

    def slow_find(order: str, amount: int) -> dict[str, Any] | None:
        with gate_lock:
            looked.append(order)
        time.sleep(0.2)  # long enough that every other thread finds the key taken
        return payments.find(order, amount)

    gate = pay_gate(payments.pay, reconcile=slow_find)
    gate.pending_wait = WAIT
    with pytest.raises(KeyboardInterrupt):
        gate.call_tool("pay", dict(ARGS), **CALL)
    answers = race(8, lambda _: dict(gate.call_tool("pay", dict(ARGS), **CALL)))
    assert answers == [ok({"receipt": "found-A-1"})] * 8
    assert looked == ["A-1"]
    assert payments.made == ["A-1"]


def test_reconcile_is_a_write_tools_field() -> None:
    """A read with a reconcile, or a reconcile that cannot be called, fails at registration."""
    from agtool import ContractError

    read = {"fn": dict, "args": {}, "returns": {}, "reconcile": lambda: None}
    with pytest.raises(ContractError, match="reconcile"):
        Gate({"look": read})
    bad = {"fn": dict, "args": {}, "returns": {}, "effect": "write", "reconcile": 3}
    with pytest.raises(ContractError, match=r"reconcile.*callable"):
        Gate({"pay": bad})


# -- kill -9 inside a body, then an operator -------------------------------------------------


def crash_inside_the_body(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    """A subprocess starts the payment, makes its effect, and is killed with SIGKILL in it."""
    db, mark = str(tmp_path / "writes.sqlite3"), tmp_path / "paid"
    worker = subprocess.Popen(  # noqa: S603 - this repository's own worker
        [sys.executable, _crash_worker.__file__, db, str(mark)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + WAIT
    while not mark.exists() and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.01)
    assert mark.exists(), "the worker never made its effect"
    worker.send_signal(signal.SIGKILL)
    assert worker.wait(WAIT) == -signal.SIGKILL
    return db, mark


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = agtool_main(list(argv))
    return status, capsys.readouterr().out


@pytest.mark.slow
def test_a_process_killed_inside_a_write_leaves_it_unknown_until_an_operator_resolves_it(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kill -9`` inside the body: a restarted gate never runs it again (``write:unknown``),
    ``agtool writes list`` shows the key, and ``resolve`` makes every repeat answer the
    outcome the operator found."""
    db, mark = crash_inside_the_body(tmp_path)
    assert mark.read_text() == "A-1"
    restarted = Gate(_crash_worker.table(None), scope=WRITE_SCOPE, store=db)
    call = {"run_id": _crash_worker.RUN_ID, "step_id": _crash_worker.STEP_ID}
    args = dict(_crash_worker.ARGS)
    assert restarted.call_tool("pay", dict(args), **call) == failed("write:unknown")

    status, out = run_cli(capsys, "writes", "list", "--store", db, "--json")
    assert status == 0
    listed = [json.loads(line) for line in out.splitlines()]
    key = restarted.idempotency_key("pay", args, **call)
    assert [(entry["key"], entry["tool"], entry["state"]) for entry in listed] == [
        (key, "pay", "unknown")]
    assert key is not None
    status, _ = run_cli(capsys, "writes", "resolve", "--store", db, key,
                        "--value", '{"receipt": "from-the-bank"}')
    assert status == 0
    assert restarted.call_tool("pay", dict(args), **call) == ok({"receipt": "from-the-bank"})
    assert run_cli(capsys, "writes", "list", "--store", db) == (0, "")


def test_writes_cli_resolves_with_an_error_and_forgets(tmp_path: pathlib.Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``resolve --error`` makes repeats answer that failure; ``forget`` lets the body run again;
    a key that is not there is a one-line error with status 1."""
    db = str(tmp_path / "writes.sqlite3")
    payments = Payments([KeyboardInterrupt(), KeyboardInterrupt()])
    gate = pay_gate(payments.pay, store=db)
    for step in ("a", "b"):
        with pytest.raises(KeyboardInterrupt):
            gate.call_tool("pay", dict(ARGS), run_id="run-1", step_id=step)
    key_a, key_b = (gate.idempotency_key("pay", ARGS, "run-1", step) for step in ("a", "b"))
    assert key_a is not None
    assert key_b is not None
    status, out = run_cli(capsys, "writes", "list", "--store", db)
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()] == ["unknown", "unknown"]
    assert run_cli(capsys, "writes", "resolve", "--store", db, key_a, "--error",
                   "raised:Declined")[0] == 0
    assert gate.call_tool("pay", dict(ARGS), run_id="run-1", step_id="a") == failed(
        "raised:Declined")
    assert run_cli(capsys, "writes", "forget", "--store", db, key_b)[0] == 0
    assert gate.call_tool("pay", dict(ARGS), run_id="run-1", step_id="b") == ok(
        {"receipt": "r-A-1-3"})
    assert payments.made == ["A-1", "A-1", "A-1"]
    assert run_cli(capsys, "writes", "forget", "--store", db, "no-such-key")[0] == 1
    assert run_cli(capsys, "writes", "resolve", "--store", db, key_a, "--value", "1")[0] == 1
    assert run_cli(capsys, "writes", "resolve", "--store", db, key_a, "--error", " ")[0] == 2


# -- Bounded workers for timed bodies --------------------------------------------------------


class Hung:
    """A body that blocks until released, counting how many times it started."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0
        self._lock = threading.Lock()

    def __call__(self, q: str) -> dict[str, Any]:
        with self._lock:
            self.started += 1
        self.release.wait(WAIT)
        return {"q": q}


def hung_gate(body: Hung, workers: int) -> Gate:
    return Gate({"look": {"fn": body, "args": {"q": {"type": "str"}},
                          "returns": {"q": {"type": "str"}}, "timeout": 0.01}},
                workers=workers)


def test_a_thousand_timed_calls_to_a_hung_body_hold_at_most_the_pool() -> None:
    """1,000 timed calls to a body that never answers: the gate starts at most ``workers``
    threads; the calls past them answer ``timeout:busy`` at once, their body never started."""
    body = Hung()
    gate = hung_gate(body, workers=4)
    before = threading.active_count()
    try:
        answers = [gate.call_tool("look", {"q": str(i)})["error"] for i in range(1000)]
        assert threading.active_count() - before <= 4
        assert answers.count("timeout") == 4
        assert answers.count("timeout:busy") == 996
        assert body.started == 4
        stats = gate.stats("look")
        assert (stats.runs, stats.timed_out) == (4, 4)
        model = gate.call_for_model("look", {"q": "x"})
        assert (model["error"]["code"], model["error"]["retryable"]) == ("TIMEOUT", True)
    finally:
        body.release.set()


def test_timed_sync_bodies_on_the_async_path_share_the_same_bounded_pool() -> None:
    """On the async path a timed sync body runs on the gate's pool too, never the loop's
    default executor: 200 concurrent calls start at most ``workers`` bodies."""
    body = Hung()
    gate = hung_gate(body, workers=3)

    async def scenario() -> list[str]:
        answers = await asyncio.gather(*(gate.acall_tool("look", {"q": str(i)})
                                         for i in range(200)))
        return [answer["error"] for answer in answers]

    try:
        errors = asyncio.run(scenario())
        assert sorted(set(errors)) == ["timeout", "timeout:busy"]
        assert errors.count("timeout") == 3
        assert body.started == 3
    finally:
        body.release.set()


def test_workers_are_reused_once_free() -> None:
    """A worker whose body answered takes the next call: many calls, one thread."""
    gate = Gate({"look": {"fn": lambda q: {"q": q}, "args": {"q": {"type": "str"}},
                          "returns": {"q": {"type": "str"}}, "timeout": 5}}, workers=2)
    before = threading.active_count()
    assert all(gate.call_tool("look", {"q": str(i)})["ok"] for i in range(200))
    assert threading.active_count() - before <= 2


def test_a_timed_write_refused_for_want_of_a_worker_frees_its_key() -> None:
    """A timed write that finds every worker busy never started: its key is free, and once a
    worker is free the same call runs and is kept."""
    body = Hung()
    made: list[str] = []

    def pay(order: str, amount: int) -> dict[str, Any]:
        made.append(order)
        return {"receipt": f"r-{order}"}

    table = {"look": {"fn": body, "args": {"q": {"type": "str"}},
                      "returns": {"q": {"type": "str"}}, "timeout": 0.01},
             "pay": {"fn": pay, "args": PAY_ARGS, "returns": PAY_RETURNS, "effect": "write",
                     "timeout": 5}}
    gate = Gate(table, scope={"read_public", "reversible_write"}, workers=1)
    try:
        assert gate.call_tool("look", {"q": "hang"})["error"] == "timeout"
        assert gate.call_tool("pay", dict(ARGS), **CALL) == failed("timeout:busy")
        assert made == []
    finally:
        body.release.set()
    deadline = time.monotonic() + WAIT
    while gate.call_tool("pay", dict(ARGS), **CALL) == failed("timeout:busy"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert gate.call_tool("pay", dict(ARGS), **CALL) == ok({"receipt": "r-A-1"})
    assert made == ["A-1"]


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "8"])
def test_a_pool_size_that_is_not_a_positive_int_is_refused(workers: Any) -> None:
    with pytest.raises(ValueError, match="workers"):
        Gate({}, workers=workers)


# -- A store failing at each step ------------------------------------------------------------


class Failing(SqliteStore):
    """A SQLite store whose chosen methods raise, as a full disk or a closed connection does."""

    def __init__(self, *failing: str) -> None:
        super().__init__()
        self.failing = set(failing)
        for name in failing:
            setattr(self, name, self._broken)

    def _broken(self, *args: Any) -> Any:
        raise sqlite3_error()


def sqlite3_error() -> Exception:
    import sqlite3

    return sqlite3.OperationalError("database or disk is full")


def test_a_store_that_cannot_take_over_answers_write_store_and_runs_nothing() -> None:
    payments = Payments([KeyboardInterrupt()])
    store = SqliteStore()
    gate = pay_gate(payments.pay, reconcile=payments.find, store=store)
    with pytest.raises(KeyboardInterrupt):
        gate.call_tool("pay", dict(ARGS), **CALL)
    store.take_over = Failing("take_over")._broken  # type: ignore[method-assign]
    assert gate.call_tool("pay", dict(ARGS), **CALL) == failed("write:store")
    assert payments.made == ["A-1"]


@pytest.mark.parametrize("failing", [("finish",), ("finish", "mark_unknown")])
def test_a_full_disk_after_the_body_never_answers_ok(failing: tuple[str, ...]) -> None:
    """The body paid; the store cannot keep it: the caller is told ``write:unknown``, the
    outcome is never claimed to be recorded, and a repeat never pays again."""
    payments = Payments()
    gate = pay_gate(payments.pay, store=Failing(*failing))
    assert gate.call_tool("pay", dict(ARGS), **CALL) == failed("write:unknown")
    assert gate.call_tool("pay", dict(ARGS), **CALL)["ok"] is False
    assert payments.made == ["A-1"]
