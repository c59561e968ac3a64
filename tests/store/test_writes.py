"""Write tools: never memoized, run once per idempotency key, the first outcome replayed.

Every test counts the body's own runs (a counter inside the body) and checks
answers against values the body itself produced (a serial number per run, so
a second run can never pass for a replay); nothing expected is copied from
the gate's output. The stateful property at the end mixes keys, retries,
restarts over one SQLite file and failing bodies against a model kept here.
"""

from __future__ import annotations

import asyncio
import copy
import multiprocessing
import os
import pathlib
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import _write_worker as worker
import pytest
from _owners import exited_owner
from _race import race
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agtool import (
    Approval,
    CallRecord,
    Claim,
    Gate,
    SqliteStore,
    StoredWrite,
    UpstreamError,
    is_retryable,
)
from agtool._store import new_owner

WRITE_SCOPE = frozenset({"reversible_write"})
#: The secret of the gates whose digests a test compares, and of gates over the spy stores.
SECRET = "test-writes-secret-0123456789"  # noqa: S105 - a test's own secret
ORDER_ARGS: dict[str, Any] = {
    "order": {"type": "str", "min_len": 1},
    "qty": {"type": "int", "min": 1},
    "note": {"type": "str", "required": False, "sensitive": True},
}
ORDER_RETURNS: dict[str, Any] = {"order": {"type": "str"}, "serial": {"type": "int"}}
ARGS: dict[str, Any] = {"order": "A-1", "qty": 1}
#: What every gate over a shared store is given: the key its digests are made with.
GATE_OPTIONS: dict[str, Any] = {"secret": secrets.token_hex(16)}
#: How long a test waits for a body left running in the background before it gives up.
SETTLE_SECONDS = 5.0


class Answer:
    """A scripted run of ``Body`` that returns ``value`` instead of the usual answer."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Body:
    """A write body that counts its runs (thread-safe) and answers a fresh serial per run.

    ``script`` says what each run does, in order: an exception instance is
    raised, an ``Answer`` returns its value; once the script is used up every
    run answers ``{"order": order, "serial": n}``. ``sleep`` delays every run.
    """

    def __init__(self, script: list[BaseException | Answer] | None = None,
                 sleep: float = 0.0) -> None:
        self.script = list(script or [])
        self.sleep = sleep
        self.calls: list[dict[str, Any]] = []
        self.finished = 0
        self._lock = threading.Lock()

    def __call__(self, **kwargs: Any) -> Any:
        with self._lock:
            self.calls.append(dict(kwargs))
            serial = len(self.calls)
            step = self.script.pop(0) if self.script else None
        try:
            if self.sleep:
                time.sleep(self.sleep)
            if isinstance(step, BaseException):
                raise step
            if isinstance(step, Answer):
                return step.value
            return {"order": kwargs["order"], "serial": serial}
        finally:
            with self._lock:
                self.finished += 1

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.calls)

    def wait_finished(self, runs: int) -> None:
        """Block until ``runs`` runs have returned or raised (bodies left in the background)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                if self.finished >= runs:
                    return
            time.sleep(0.005)
        raise AssertionError(f"the body did not finish {runs} runs in {SETTLE_SECONDS}s")


def write_table(body: Callable[..., Any], name: str = "place", **entry: Any) -> dict[str, Any]:
    return {name: {"fn": body, "args": ORDER_ARGS, "returns": ORDER_RETURNS, "effect": "write",
                   **entry}}


def write_gate(body: Callable[..., Any], *, store: Any = None, pending_wait: float = 0.05,
               scope: frozenset[str] = WRITE_SCOPE, **entry: Any) -> Gate:
    """A gate keyed with ``SECRET``: its digests are the ones ``gate_digest`` reads, and a
    store with no file beside it (the spies here) needs an explicit secret."""
    return Gate(write_table(body, **entry), scope=scope, store=store, pending_wait=pending_wait,
                secret=SECRET)


def place(gate: Gate, args: dict[str, Any] | None = None, run_id: str | None = "run-1",
          step_id: str | None = "step-1", **kwargs: Any) -> dict[str, Any]:
    """One call of the ``place`` write; a fresh copy of ``args`` so the body cannot alter ours."""
    return dict(gate.call_tool("place", copy.deepcopy(ARGS if args is None else args),
                               run_id=run_id, step_id=step_id, **kwargs))


def ok(value: Any) -> dict[str, Any]:
    return {"ok": True, "value": value, "error": ""}


def failed(reason: str) -> dict[str, Any]:
    return {"ok": False, "value": None, "error": reason}


def wait_for_state(store: SqliteStore, key: str, state: str) -> StoredWrite:
    """The key's entry once it reaches ``state`` (a background body settling it)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        stored = store.lookup(key)
        if stored is not None and stored.state == state:
            return stored
        time.sleep(0.005)
    raise AssertionError(f"{key} never reached {state!r}: {store.lookup(key)}")


def gate_digest(gate: Gate, args: dict[str, Any]) -> str:
    """The args digest the gate claims with, read from a store that refuses the claim."""
    spy = SpyStore(fail={"claim"})
    spying = Gate(gate.table, scope=WRITE_SCOPE, store=spy, secret=SECRET)
    assert spying.call_tool("place", dict(args), run_id="spy", step_id="spy")["error"] == (
        "write:store")
    return spy.claims[0][2]


class SpyStore:
    """A ``WriteStore`` over an in-memory ``SqliteStore`` that logs claims and can be broken."""

    def __init__(self, *, fail: Iterable[str] = (), land: Iterable[str] = ()) -> None:
        self.inner = SqliteStore()
        self.fail = set(fail)
        #: Methods that do their work and then raise: a reply lost after the commit.
        self.land = set(land)
        self.claims: list[tuple[str, str, str]] = []
        self.calls: Counter[str] = Counter()

    def _maybe_fail(self, method: str) -> None:
        self.calls[method] += 1
        if method in self.fail:
            raise OSError(f"store down in {method}")

    def claim(self, key: str, tool: str, args_digest: str, owner: str, lease: float) -> Claim:
        self.claims.append((key, tool, args_digest))
        self._maybe_fail("claim")
        claim = self.inner.claim(key, tool, args_digest, owner, lease)
        self._maybe_lose("claim")
        return claim

    def _maybe_lose(self, method: str) -> None:
        if method in self.land:
            self.land.discard(method)  # once: the retry's connection works
            raise OSError(f"reply of {method} lost")

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Every other method of the store protocol, counted and breakable the same way."""
        method = getattr(self.inner, name)

        def call(*args: Any) -> Any:
            self._maybe_fail(name)
            answer = method(*args)
            self._maybe_lose(name)
            return answer
        return call


# -- Never memoized ------------------------------------------------------------------------------


def test_write_is_never_memoized() -> None:
    """The same write under a new run id or step id runs again, and the memo stays empty."""
    body = Body()
    gate = write_gate(body)
    keys = [("run-1", "step-1"), ("run-1", "step-2"), ("run-2", "step-1")]
    answers = [place(gate, run_id=run_id, step_id=step_id) for run_id, step_id in keys]
    assert body.count == len(keys)
    assert [answer["value"]["serial"] for answer in answers] == [1, 2, 3]
    assert len(gate.cache) == 0
    assert gate.stats("place").hits == 0


def test_write_next_to_a_read_keeps_the_memo_to_the_read() -> None:
    """In one gate, a read is remembered and a write with the same args never is."""
    read, write = Body(), Body()
    table = {**write_table(write),
             "look": {"fn": read, "args": ORDER_ARGS, "returns": ORDER_RETURNS}}
    gate = Gate(table, scope={"read_public", "reversible_write"})
    for step in ("s1", "s2"):
        assert gate.call_tool("look", dict(ARGS))["ok"]
        assert place(gate, step_id=step)["ok"]
    assert (read.count, write.count) == (1, 2)
    assert len(gate.cache) == 1
    assert list(gate.cache) == [gate.cache_key("look", ARGS)]


# -- The first outcome, replayed -----------------------------------------------------------------


def test_repeat_replays_the_first_outcome_without_running_the_body() -> None:
    """Every repeat of a key answers the first envelope; only the first call runs the body."""
    body = Body()
    gate = write_gate(body)
    first = place(gate)
    repeats = [place(gate) for _ in range(4)]
    assert first == ok({"order": "A-1", "serial": 1})
    assert repeats == [first] * 4
    assert body.count == 1
    stats = gate.stats("place")
    assert (stats.runs, stats.replayed) == (1, 4)


def test_replay_does_not_care_about_argument_order() -> None:
    """The same args in another key order are the same call: replayed, not a conflict."""
    body = Body()
    gate = write_gate(body, key_args=["order"])
    first = place(gate, {"order": "A-1", "qty": 2, "note": "x"})
    again = place(gate, {"note": "x", "qty": 2, "order": "A-1"})
    assert again == first
    assert body.count == 1


def test_replayed_value_is_the_callers_own_copy() -> None:
    """A caller that changes a replayed value does not change what the next repeat answers."""
    body = Body()
    gate = write_gate(body)
    first = place(gate)
    expected = copy.deepcopy(first)
    replayed = place(gate)
    replayed["value"]["serial"] = -1
    replayed["value"]["extra"] = "scribbled"
    first["value"]["order"] = "scribbled too"
    assert place(gate) == expected
    assert body.count == 1


def test_replay_is_marked_in_records_and_in_the_model_answer() -> None:
    """A replay's record says ``replayed``; the model is handed the first call's data again."""
    body = Body()
    records: list[CallRecord] = []
    gate = Gate(write_table(body), scope=WRITE_SCOPE, records=records.append)
    first = gate.call_for_model("place", dict(ARGS), run_id="r", step_id="s")
    again = gate.call_for_model("place", dict(ARGS), run_id="r", step_id="s")
    assert first["ok"]
    assert again["ok"]
    assert again["data"] == first["data"] == {"order": "A-1", "serial": 1}
    assert again["request_id"] != first["request_id"]
    assert [record.replayed for record in records] == [False, True]
    assert body.count == 1


# -- The idempotency key and conflicts -----------------------------------------------------------


def test_changing_a_non_key_arg_is_a_conflict() -> None:
    """With ``key_args``, other args under a used key answer ``write:conflict``; no body run."""
    body = Body()
    gate = write_gate(body, key_args=["order"])
    first = place(gate, {"order": "A-1", "qty": 1})
    conflict = place(gate, {"order": "A-1", "qty": 2})
    assert first["ok"]
    assert conflict == failed("write:conflict")
    assert body.count == 1
    assert place(gate, {"order": "A-1", "qty": 1}) == first  # the original still replays
    assert body.count == 1


def test_changing_a_key_arg_is_a_new_key() -> None:
    """With ``key_args``, another value of a key arg is another write: the body runs."""
    body = Body()
    gate = write_gate(body, key_args=["order"])
    first = place(gate, {"order": "A-1", "qty": 1})
    second = place(gate, {"order": "B-2", "qty": 2})
    assert first == ok({"order": "A-1", "serial": 1})
    assert second == ok({"order": "B-2", "serial": 2})
    assert body.count == 2
    key_a = gate.idempotency_key("place", {"order": "A-1", "qty": 1}, "r", "s")
    assert key_a == gate.idempotency_key("place", {"order": "A-1", "qty": 9, "note": "n"}, "r", "s")
    assert key_a != gate.idempotency_key("place", {"order": "B-2", "qty": 1}, "r", "s")


def test_a_type_change_in_a_non_key_arg_is_a_conflict() -> None:
    """Args that Python calls equal but that differ in type (``1`` and ``1.0``) conflict."""
    body = Body()
    args = {**ORDER_ARGS, "qty": {"type": "float"}}
    gate = Gate({"place": {"fn": body, "args": args, "returns": ORDER_RETURNS,
                           "effect": "write", "key_args": ["order"]}}, scope=WRITE_SCOPE)
    assert place(gate, {"order": "A-1", "qty": 1})["ok"]
    assert place(gate, {"order": "A-1", "qty": 1.0}) == failed("write:conflict")
    assert body.count == 1


def test_conflict_with_a_running_write_answers_at_once() -> None:
    """Other args under a key still running answer ``write:conflict`` without the pending wait."""
    body = Body(sleep=0.3)
    gate = write_gate(body, key_args=["order"], pending_wait=5.0)
    first: list[dict[str, Any]] = []
    runner = threading.Thread(target=lambda: first.append(place(gate, {"order": "A-1", "qty": 1})))
    runner.start()
    while body.count == 0:
        time.sleep(0.002)
    started = time.monotonic()
    conflict = place(gate, {"order": "A-1", "qty": 2})
    waited = time.monotonic() - started
    runner.join()
    assert conflict == failed("write:conflict")
    assert waited < 5.0  # the pending wait would have taken all five seconds
    assert first == [ok({"order": "A-1", "serial": 1})]
    assert body.count == 1


def test_key_keeps_run_step_and_tool_apart() -> None:
    """Colons in ids never make two keys alike, and each tool has keys of its own."""
    gate = Gate({**write_table(Body(), name="a"), **write_table(Body(), name="b")},
                scope=WRITE_SCOPE)
    keys = {gate.idempotency_key("a", ARGS, "r:1", "s"),
            gate.idempotency_key("a", ARGS, "r", "1:s"),
            gate.idempotency_key("a", ARGS, "r", "s"),
            gate.idempotency_key("b", ARGS, "r", "s")}
    assert len(keys) == 4


@given(st.lists(st.tuples(st.text(min_size=1, max_size=4), st.text(min_size=1, max_size=4)),
                min_size=2, max_size=6,
                unique=True))
def test_distinct_run_and_step_pairs_give_distinct_keys(pairs: list[tuple[str, str]]) -> None:
    """Any two different (run id, step id) pairs give two different keys for the same args."""
    gate = Gate(write_table(Body()), scope=WRITE_SCOPE)
    keys = {gate.idempotency_key("place", ARGS, run_id, step_id) for run_id, step_id in pairs}
    assert len(keys) == len(pairs)


def test_sensitive_key_value_never_appears_in_the_key() -> None:
    """The business key is a digest: a sensitive order id is not readable in the store's key."""
    args = {**ORDER_ARGS, "order": {"type": "str", "sensitive": True}}
    gate = Gate({"place": {"fn": Body(), "args": args, "returns": ORDER_RETURNS,
                           "effect": "write", "key_args": ["order"]}}, scope=WRITE_SCOPE)
    private = "ACCT-9931-PRIVATE"
    key = gate.idempotency_key("place", {"order": private, "qty": 1}, "run-1", "step-1")
    assert key is not None
    assert private not in key
    assert "run-1" in key
    assert "step-1" in key


def test_idempotency_key_is_none_for_reads_and_non_dict_args() -> None:
    """Only a valid write with dict args has a key."""
    gate = Gate({**write_table(Body()),
                 "look": {"fn": Body(), "args": ORDER_ARGS, "returns": ORDER_RETURNS}},
                scope=WRITE_SCOPE)
    assert gate.idempotency_key("look", ARGS, "r", "s") is None
    assert gate.idempotency_key("nope", ARGS, "r", "s") is None
    assert gate.idempotency_key("place", [("order", "A-1")], "r", "s") is None
    assert gate.idempotency_key("place", ARGS, "r", "s") is not None
    assert gate.idempotency_key("place", ARGS, "", "s") is None


def test_idempotency_key_is_none_without_the_business_key() -> None:
    """Args that lack a key arg have no key (they would be refused before any claim)."""
    gate = write_gate(Body(), key_args=["order"])
    without = {key: value for key, value in ARGS.items() if key != "order"}
    assert gate.idempotency_key("place", without, "r", "s") is None
    assert gate.idempotency_key("place", ARGS, "r", "s") is not None


# -- Restarts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_path", [str, pathlib.Path], ids=["str-path", "pathlib-path"])
def test_new_gate_over_the_same_file_replays(tmp_path: pathlib.Path,
                                             as_path: Callable[[Any], Any]) -> None:
    """A restarted process (a new gate over the same SQLite file) replays and still conflicts."""
    path = as_path(tmp_path / "writes.sqlite")
    body, failure_body = Body(), Body([ValueError("no stock")])

    def table() -> dict[str, Any]:
        return {**write_table(body, key_args=["order"]), **write_table(failure_body, "cancel")}

    before = Gate(table(), scope=WRITE_SCOPE, store=path)
    first = place(before, {"order": "A-1", "qty": 1})
    refused = before.call_tool("cancel", dict(ARGS), run_id="run-1", step_id="step-1")
    assert first == ok({"order": "A-1", "serial": 1})
    assert refused == failed("raised:ValueError")
    assert isinstance(before.store, SqliteStore)
    before.store.close()

    after = Gate(table(), scope=WRITE_SCOPE, store=path, pending_wait=0.05)
    assert place(after, {"order": "A-1", "qty": 1}) == first
    assert place(after, {"order": "A-1", "qty": 5}) == failed("write:conflict")
    assert after.call_tool("cancel", dict(ARGS), run_id="run-1", step_id="step-1") == refused
    assert (body.count, failure_body.count) == (1, 1)
    assert after.stats("place").replayed == 1
    assert after.stats("cancel").replayed == 1


def dead_owner() -> str:
    """The owner name of a process of this host that has exited (and been reaped)."""
    return exited_owner()


def test_key_claimed_by_a_dead_process_is_unknown_never_rerun(tmp_path: pathlib.Path) -> None:
    """A key whose owner died mid-body answers ``write:unknown``, is listed for an operator,
    and runs again only once the operator forgets it (or answers what resolve stored)."""
    path = tmp_path / "writes.sqlite"
    gate = write_gate(Body(), store=path)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    dead = SqliteStore(path)
    assert dead.claim(key, "place", gate_digest(gate, ARGS), dead_owner(), 300.0).state == "run"
    dead.close()  # and never finishes

    body = Body()
    restarted = write_gate(body, store=path)
    assert place(restarted) == failed("write:unknown")
    assert [(entry.key, entry.state) for entry in restarted.store.pending()] == [
        (key, "unknown")]
    assert body.count == 0
    assert restarted.store.forget(key)
    assert place(restarted) == ok({"order": "A-1", "serial": 1})
    assert body.count == 1
    assert restarted.store.pending() == []


def test_a_live_owner_on_this_host_holds_its_key_past_any_lease() -> None:
    """A claim whose owner is a live process of this host is never taken as abandoned by the
    clock: a body may run past its lease, and a second run beside it would be a double write."""
    store = SqliteStore()
    body = Body()
    gate = write_gate(body, store=store)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    assert store.claim(key, "place", gate_digest(gate, ARGS), new_owner(), 0.0).state == "run"
    time.sleep(0.01)
    assert [place(gate) for _ in range(3)] == [failed("write:in_progress")] * 3
    assert body.count == 0


def test_key_claimed_on_another_host_is_in_progress_until_its_lease_runs_out() -> None:
    """An owner on another host cannot be seen: its claim answers ``write:in_progress`` until
    its lease runs out, then reads unknown, never free."""
    store = SqliteStore()
    body = Body()
    gate = write_gate(body, store=store)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    elsewhere = "another-host.example:4242:far"
    assert store.claim(key, "place", gate_digest(gate, ARGS), elsewhere, 0.3).state == "run"
    assert place(gate) == failed("write:in_progress")
    deadline = time.monotonic() + SETTLE_SECONDS
    while place(gate) == failed("write:in_progress") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert place(gate) == failed("write:unknown")
    assert body.count == 0


# -- Threads and processes -----------------------------------------------------------------------


def test_threads_on_one_gate_run_the_body_once() -> None:
    """Eight threads writing one key at once: one body run, eight identical envelopes."""
    body = Body(sleep=0.1)
    gate = write_gate(body, pending_wait=5.0)
    answers = race(8, lambda _: place(gate))
    assert body.count == 1
    assert answers == [ok({"order": "A-1", "serial": 1})] * 8
    stats = gate.stats("place")
    assert (stats.runs, stats.replayed) == (1, 7)


def test_threads_on_separate_gates_over_one_file_run_the_body_once(
        tmp_path: pathlib.Path) -> None:
    """Six gates, each with its own connection to one SQLite file: one body run among them."""
    path = tmp_path / "writes.sqlite"
    SqliteStore(path).close()  # the file exists before they race (see test_store's open test)
    body = Body(sleep=0.1)
    gates = [write_gate(body, store=path, pending_wait=5.0) for _ in range(6)]
    answers = race(6, lambda i: place(gates[i]))
    assert body.count == 1
    assert answers == [ok({"order": "A-1", "serial": 1})] * 6
    assert sum(gate.stats("place").replayed for gate in gates) == 5


@pytest.mark.parametrize(("exc", "reason"), [
    pytest.param(UpstreamError(429, applied=False), "upstream:429", id="rate-limited"),
    pytest.param(UpstreamError(503, applied=False), "upstream:503", id="unavailable")])
def test_a_waiter_takes_over_a_key_freed_by_a_failure_never_acted_on(exc: Exception,
                                                                      reason: str) -> None:
    """A call waiting on a running write runs the body itself once that write fails with the
    body's word that the upstream did nothing (``applied=False``)."""
    body = Body([exc], sleep=0.15)
    gate = write_gate(body, pending_wait=5.0)

    def call(i: int) -> dict[str, Any]:
        while i and body.count == 0:  # the first thread claims; the second finds it pending
            time.sleep(0.002)
        return place(gate)

    answers = race(2, call)
    assert answers[0] == failed(reason)
    assert answers[1] == ok({"order": "A-1", "serial": 2})
    assert body.count == 2
    assert place(gate) == answers[1]
    assert body.count == 2


@pytest.mark.slow
def test_processes_run_the_body_once(tmp_path: pathlib.Path) -> None:
    """Three spawned processes, each with its own gate over one SQLite file: one body run."""
    db_path = str(tmp_path / "writes.sqlite")
    log_path = str(tmp_path / "runs.log")
    SqliteStore(db_path).close()  # the file exists before they race (see test_store's open test)
    context = multiprocessing.get_context("spawn")
    processes = 3
    barrier = context.Barrier(processes)
    results = context.Queue()
    workers = [context.Process(target=worker.call_once, args=(db_path, log_path, barrier, results))
               for _ in range(processes)]
    for process in workers:
        process.start()
    try:
        answers = [results.get(timeout=60) for _ in workers]
    finally:
        for process in workers:
            process.join(timeout=30)
    assert [answer["crash"] for answer in answers] == [""] * processes
    lines = pathlib.Path(log_path).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1  # the body ran in exactly one process
    expected = ok({**worker.ARGS, "pid": int(lines[0])})
    assert [answer["envelope"] for answer in answers] == [expected] * processes
    assert sorted(answer["runs"] for answer in answers) == [0] * (processes - 1) + [1]
    assert sum(answer["replayed"] for answer in answers) == processes - 1
    assert all(process.exitcode == 0 for process in workers)


# -- Timeouts ------------------------------------------------------------------------------------


def timed_out_write(pending_wait: float) -> tuple[Gate, Body, str]:
    """A gate whose write overruns its 0.05 s timeout (the body sleeps 0.3 s), called once."""
    body = Body(sleep=0.3)
    gate = write_gate(body, timeout=0.05, pending_wait=pending_wait)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    assert place(gate) == failed("timeout")
    assert gate.stats("place").timed_out == 1
    return gate, body, key


def test_timed_out_write_stores_its_late_outcome_and_a_retry_replays_it() -> None:
    """The overrunning body finishes in the background and is stored; a retry replays it."""
    gate, body, key = timed_out_write(pending_wait=0.05)
    assert isinstance(gate.store, SqliteStore)
    stored = wait_for_state(gate.store, key, "done")
    body.wait_finished(1)
    assert stored.outcome == ok({"order": "A-1", "serial": 1})
    assert place(gate) == ok({"order": "A-1", "serial": 1})
    assert body.count == 1
    assert gate.stats("place").replayed == 1


def test_retry_while_a_timed_out_write_runs_waits_and_replays() -> None:
    """A retry made while the body still runs waits (``pending_wait``) and gets its outcome."""
    gate, body, _ = timed_out_write(pending_wait=5.0)
    assert body.count == 1
    assert body.finished == 0  # still running
    assert place(gate) == ok({"order": "A-1", "serial": 1})
    body.wait_finished(1)
    assert body.count == 1


def test_retry_while_a_timed_out_write_runs_answers_in_progress_after_the_wait() -> None:
    """A retry whose ``pending_wait`` ends before the body does answers ``write:in_progress``."""
    gate, body, key = timed_out_write(pending_wait=0.02)
    assert body.finished == 0
    assert place(gate) == failed("write:in_progress")
    assert body.count == 1
    assert isinstance(gate.store, SqliteStore)
    wait_for_state(gate.store, key, "done")
    body.wait_finished(1)
    assert place(gate) == ok({"order": "A-1", "serial": 1})
    assert body.count == 1


def test_timed_out_write_then_refused_by_its_upstream_frees_its_key() -> None:
    """A late 429 says nothing was done: the retry after it runs the body again."""
    body = Body([UpstreamError(429, applied=False)], sleep=0.2)
    gate = write_gate(body, timeout=0.05)
    assert place(gate) == failed("timeout")
    body.wait_finished(1)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    deadline = time.monotonic() + SETTLE_SECONDS
    while gate.store.lookup(key) is not None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert gate.store.lookup(key) is None
    body.sleep = 0.0
    assert place(gate) == ok({"order": "A-1", "serial": 2})
    assert body.count == 2


# -- No key --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("run_id", "step_id"), [
    pytest.param(None, "step-1", id="no-run-id"),
    pytest.param("run-1", None, id="no-step-id"),
    pytest.param(None, None, id="neither"),
    pytest.param("", "step-1", id="empty-run-id"),
    pytest.param("run-1", "", id="empty-step-id"),
    pytest.param(7, "step-1", id="int-run-id"),
])
def test_write_without_a_key_is_refused(run_id: Any, step_id: Any) -> None:
    """A write without a non-empty run id and step id answers ``write:no_key``; no body run."""
    body = Body()
    gate = write_gate(body)
    assert place(gate, run_id=run_id, step_id=step_id) == failed("write:no_key")
    answer = gate.call_for_model("place", dict(ARGS), run_id=run_id, step_id=step_id)
    assert answer["ok"] is False
    assert answer["error"]["details"]["reason"] == "write:no_key"
    assert answer["error"]["retryable"] is False
    assert body.count == 0


def test_read_needs_no_key() -> None:
    """Run and step ids are for writes only: a read answers without them."""
    body = Body()
    gate = Gate({"look": {"fn": body, "args": ORDER_ARGS, "returns": ORDER_RETURNS}})
    assert gate.call_tool("look", dict(ARGS)) == ok({"order": "A-1", "serial": 1})


# -- Failures: retryable ones free the key, others are stored ------------------------------------


@pytest.mark.parametrize(("exc", "reason"), [
    pytest.param(UpstreamError(503), "upstream:503", id="upstream-503"),
    pytest.param(UpstreamError(429), "upstream:429", id="rate-limited-without-its-word"),
    pytest.param(ConnectionResetError(), "upstream:connection", id="connection-reset"),
    pytest.param(ConnectionRefusedError(), "upstream:connection", id="connection-refused"),
    pytest.param(TimeoutError(), "timeout", id="body-raised-timeout"),
])
def test_failure_that_may_have_taken_effect_leaves_the_key_unknown(exc: BaseException,
                                                                  reason: str) -> None:
    """A retryable failure after which the upstream may have acted (a 5xx, a reset connection,
    a timeout) answers its reason, and every repeat ``write:unknown``: never a second write.
    A 429 or a refused connection is no proof either: the body may have acted before the call
    that failed."""
    assert is_retryable(reason)
    body = Body([exc])
    gate = write_gate(body)
    assert place(gate) == failed(reason)
    assert [place(gate) for _ in range(3)] == [failed("write:unknown")] * 3
    assert body.count == 1
    stats = gate.stats("place")
    assert (stats.runs, stats.unknown, stats.replayed) == (1, 1, 0)
    answer = gate.call_for_model("place", dict(ARGS), run_id="run-1", step_id="step-1")
    assert answer["error"]["code"] == "UNKNOWN_OUTCOME"
    assert answer["error"]["retryable"] is False


@pytest.mark.parametrize(("exc", "reason"), [
    pytest.param(UpstreamError(429, retry_after=1.0, applied=False), "upstream:429",
                 id="rate-limited"),
    pytest.param(UpstreamError(503, applied=False), "upstream:503", id="unavailable"),
])
def test_failure_never_acted_on_frees_the_key(exc: BaseException, reason: str) -> None:
    """The body's word that the upstream did nothing (``UpstreamError(..., applied=False)``)
    frees the key: the same key runs the body again."""
    assert is_retryable(reason)
    body = Body([exc])
    gate = write_gate(body)
    assert place(gate) == failed(reason)
    assert place(gate) == ok({"order": "A-1", "serial": 2})
    assert body.count == 2
    assert place(gate) == ok({"order": "A-1", "serial": 2})
    assert body.count == 2
    stats = gate.stats("place")
    assert (stats.runs, stats.replayed) == (2, 1)


@pytest.mark.parametrize(("script", "reason"), [
    pytest.param(ValueError("bad sku"), "raised:ValueError", id="raised"),
    pytest.param(UpstreamError(404), "upstream:404", id="upstream-404"),
    pytest.param(UpstreamError(400), "upstream:400", id="upstream-400"),
    pytest.param(Answer("not a dict"), "result:shape", id="bad-result-shape"),
    pytest.param(Answer({"order": "A-1"}), "result:shape", id="bad-result-missing-key"),
])
def test_non_retryable_failure_is_stored_and_replayed(script: BaseException | Answer,
                                                      reason: str) -> None:
    """A failure a retry cannot fix is the key's outcome: repeats answer it, the body runs once."""
    assert not is_retryable(reason)
    body = Body([script])
    gate = write_gate(body)
    first = place(gate)
    assert first == failed(reason)
    assert [place(gate) for _ in range(3)] == [first] * 3
    assert body.count == 1
    assert gate.stats("place").replayed == 3


# -- A broken store ------------------------------------------------------------------------------


def test_store_whose_claim_raises_answers_write_store() -> None:
    """A store that cannot claim: ``write:store`` (retryable), no body run, nothing raised;
    the claim, which may have landed before the failure, is given back (nothing ran)."""
    body = Body()
    store = SpyStore(fail={"claim"})
    gate = write_gate(body, store=store)
    assert place(gate) == failed("write:store")
    answer = gate.call_for_model("place", dict(ARGS), run_id="run-1", step_id="step-1")
    assert answer["ok"] is False
    assert answer["error"]["details"]["reason"] == "write:store"
    assert answer["error"]["retryable"] is True
    assert body.count == 0
    assert store.calls["finish"] == 0
    assert store.calls["release"] == store.calls["claim"] == 2


def test_a_claim_that_landed_and_then_failed_is_given_back_not_left_pending() -> None:
    """A claim whose insert landed but whose reply was lost: ``write:store``, and the key is
    free again (never pending under this live process), so the retry runs the body once."""
    body = Body()
    store = SpyStore(land={"claim"})
    gate = write_gate(body, store=store)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    assert place(gate) == failed("write:store")
    assert store.inner.lookup(key) is None
    assert place(gate) == ok({"order": "A-1", "serial": 1})
    assert body.count == 1


def test_a_take_over_that_landed_and_then_failed_is_unknown_again_then_reconciled() -> None:
    """A take-over whose update landed but whose reply was lost: the key is unknown again,
    not pending under this live process; the retry reconciles, never runs blind."""
    body, asked = Body(), []
    store = SpyStore()
    gate = write_gate(body, store=store,
                      reconcile=lambda **args: asked.append(args) or {"order": "A-1",
                                                                         "serial": 7})
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    assert store.inner.claim(key, "place", gate_digest(gate, ARGS), dead_owner(),
                             300.0).state == "run"
    store.land.add("take_over")
    assert place(gate) == failed("write:store")
    entry = store.inner.lookup(key)
    assert entry is not None
    assert entry.state == "unknown"
    assert place(gate) == ok({"order": "A-1", "serial": 7})
    assert (body.count, len(asked)) == (0, 1)


def test_a_finish_that_landed_and_then_failed_answers_what_was_kept() -> None:
    """A finish whose update landed but whose reply was lost: the caller is answered the
    outcome the store kept, not ``write:unknown``; repeats replay it."""
    body = Body()
    store = SpyStore(land={"finish"})
    gate = write_gate(body, store=store)
    first = place(gate)
    assert first == ok({"order": "A-1", "serial": 1})
    assert place(gate) == first
    assert body.count == 1
    assert gate.stats("place").unknown == 0


def test_store_whose_finish_raises_tells_the_truth_and_leaves_the_key_unknown() -> None:
    """A store that cannot keep the outcome: the caller is not told ``ok`` but ``write:unknown``
    (the effect happened, its outcome is not recorded), and a repeat never runs the body."""
    body = Body()
    store = SpyStore(fail={"finish"})
    gate = write_gate(body, store=store, pending_wait=0.05)
    assert place(gate) == failed("write:unknown")
    assert store.calls["finish"] == 1
    assert place(gate) == failed("write:unknown")
    assert body.count == 1
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    stored = store.inner.lookup(key)
    assert stored is not None
    assert stored.state == "unknown"


def test_store_whose_finish_and_mark_raise_leaves_the_key_unknown_all_the_same() -> None:
    """The store can neither keep the outcome nor mark the key: the row stays pending, but this
    process has let go of it, so every repeat reads it unknown at once, never free."""
    body = Body()
    store = SpyStore(fail={"finish", "mark_unknown"})
    gate = Gate(write_table(body), scope=WRITE_SCOPE, store=store, pending_wait=0.05,
                secret=SECRET)
    assert place(gate) == failed("write:unknown")
    assert place(gate) == failed("write:unknown")
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    stored = store.inner.lookup(key)
    assert stored is not None
    assert stored.state == "unknown"  # as seen: the row itself is still pending
    assert body.count == 1


class ForgetfulStore(SpyStore):
    """Says a key is done but hands back an outcome that is no envelope."""

    def __init__(self, outcome: Any) -> None:
        super().__init__()
        self.outcome = outcome

    def claim(self, key: str, tool: str, args_digest: str, owner: str, lease: float) -> Claim:
        self.claims.append((key, tool, args_digest))
        return Claim("done", self.outcome)


@pytest.mark.parametrize("outcome", [
    pytest.param(None, id="none"),
    pytest.param({}, id="empty"),
    pytest.param({"ok": False, "value": None, "error": ""}, id="failure-without-reason"),
    pytest.param({"ok": True, "value": 1, "error": "raised:X"}, id="success-with-reason"),
    pytest.param({"ok": 1, "value": 1, "error": ""}, id="ok-not-a-bool"),
    pytest.param(["ok"], id="not-a-dict"),
])
def test_a_malformed_stored_outcome_is_a_store_failure(outcome: Any) -> None:
    """A store answering done with no honest envelope gives ``write:store``, never a false answer,
    and the body does not run."""
    body = Body()
    gate = write_gate(body, store=ForgetfulStore(outcome))
    assert place(gate) == failed("write:store")
    assert body.count == 0
    assert gate.stats("place").replayed == 0


def test_store_whose_release_raises_keeps_the_key_after_a_retryable_failure() -> None:
    """A failure never acted on whose key cannot be freed: the repeat answers
    ``write:unknown`` (the store could not be told), never a second run."""
    body = Body([UpstreamError(429, applied=False)])
    store = SpyStore(fail={"release"})
    gate = write_gate(body, store=store, pending_wait=0.05)
    assert place(gate) == failed("upstream:429")
    assert place(gate) == failed("write:unknown")
    assert body.count == 1


def test_a_store_that_says_pending_forever_never_runs_the_body() -> None:
    """A key another caller owns answers ``write:in_progress`` once ``pending_wait`` is over."""
    body = Body()
    store = SpyStore()
    gate = write_gate(body, store=store, pending_wait=0.05)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    digest = gate_digest(gate, ARGS)
    assert store.inner.claim(key, "place", digest, new_owner(), 300.0).state == "run"
    assert place(gate) == failed("write:in_progress")
    assert body.count == 0
    assert store.calls["claim"] >= 2  # it looked again while it waited


# -- Dry runs, scope and approval ----------------------------------------------------------------


@pytest.mark.parametrize(("risk", "needs_approval"), [
    ("reversible_write", False), ("external_effect", True), ("irreversible", True)])
def test_dry_run_answers_the_plan_without_running_or_claiming(risk: str,
                                                              needs_approval: bool) -> None:
    """``dry_run`` answers the plan (sensitive args redacted); no body run, the key stays free."""
    body = Body()
    gate = write_gate(body, risk=risk, scope=frozenset({risk}))
    args = {"order": "A-1", "qty": 3, "note": "card 4111"}
    plan = place(gate, args, dry_run=True)
    assert plan == ok({"tool": "place", "args": {"order": "A-1", "qty": 3, "note": "[redacted]"},
                       "args_digest": gate.approve("place", args).args_digest,
                       "effect": "write", "risk": risk, "needs_approval": needs_approval})
    assert body.count == 0
    key = gate.idempotency_key("place", args, "run-1", "step-1")
    assert key is not None
    assert gate.store.lookup(key) is None
    approvals = [gate.approve("place", args)] if needs_approval else []
    assert place(gate, args, approvals=approvals) == ok({"order": "A-1", "serial": 1})
    assert body.count == 1


def test_irreversible_write_needs_scope_and_an_exact_approval() -> None:
    """No scope, no approval, or an approval of other args: refused before the key is claimed."""
    body = Body()
    gate = write_gate(body, risk="irreversible", scope=frozenset({"reversible_write"}))
    args = {"order": "A-1", "qty": 3}
    key = gate.idempotency_key("place", args, "run-1", "step-1")
    assert key is not None
    right = gate.approve("place", args, by="ops")
    assert place(gate, args, approvals=[right]) == failed("auth:scope:irreversible")
    scope = {"irreversible"}
    assert place(gate, args, scope=scope) == failed("auth:approval")
    other = gate.approve("place", {"order": "A-1", "qty": 4})
    assert place(gate, args, scope=scope, approvals=[other]) == failed("auth:approval")
    forged = Approval("0" * 64)
    assert place(gate, args, scope=scope, approvals=[forged]) == failed("auth:approval")
    assert body.count == 0
    assert gate.store.lookup(key) is None
    first = place(gate, args, scope=scope, approvals=[right])
    assert first == ok({"order": "A-1", "serial": 1})
    assert place(gate, args, scope=scope, approvals=[right]) == first
    assert body.count == 1


# -- Outcomes JSON cannot write exactly ----------------------------------------------------------


class UnwritableRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("extra", [
    pytest.param(2**70, id="huge-int"),
    pytest.param(-0.0, id="negative-zero"),
    pytest.param({"k": [1, 2.5, None, True, "\u2028"]}, id="json-values"),
])
def test_outcome_of_exact_json_values_is_replayed_exactly(extra: Any) -> None:
    """JSON values come back from the store as they were answered, types and all."""
    calls: list[int] = []

    def body(order: str, qty: int, note: str = "") -> dict[str, Any]:
        calls.append(qty)
        return {"order": order, "serial": len(calls), "extra": extra}

    gate = write_gate(body, pending_wait=0.05)
    first = place(gate)
    assert first["ok"]
    again = place(gate)
    assert len(calls) == 1
    assert again == first
    assert repr(again["value"]["extra"]) == repr(extra)  # -0.0 stays -0.0, 2**70 an int


@pytest.mark.parametrize("extra", [
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param({(1, 2): "tuple key"}, id="tuple-dict-key"),
    pytest.param({1: "a", "1": "b"}, id="colliding-keys"),
    pytest.param((1, 2), id="tuple"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(UnwritableRepr(), id="repr-raises"),
    pytest.param(nested(10**5), id="nested-1e5"),
    pytest.param(10**5000, id="int-too-long"),
])
def test_outcome_that_cannot_be_stored_exactly_is_never_answered_ok(extra: Any) -> None:
    """A write whose value would not come back from the store as it was answered: the caller
    is told ``write:unknown`` (the effect happened, its outcome is not recorded), never ``ok``;
    a repeat never re-runs, never hangs, and never replays something else."""
    calls: list[int] = []

    def body(order: str, qty: int, note: str = "") -> dict[str, Any]:
        calls.append(qty)
        return {"order": order, "serial": len(calls), "extra": extra}

    gate = write_gate(body, pending_wait=0.05)
    assert place(gate) == failed("write:unknown")
    assert place(gate) == failed("write:unknown")
    assert len(calls) == 1
    assert gate.stats("place").unknown == 1
    assert [entry.state for entry in gate.store.pending()] == ["unknown"]


# -- The stateful property -----------------------------------------------------------------------

RUN_IDS = ("run-a", "run-b")
STEP_IDS = ("s1", "s2")
ORDERS = ("A-1", "B-2")
QTYS = (1, 2)
#: What a body does when it runs, and the reason it answers (None: success).
BEHAVIOURS: dict[str, str | None] = {
    "ok": None,
    "rate_limited": "upstream:429",  # never acted on: the key is freed
    "upstream": "upstream:503",  # acted, then failed: the key is left unknown
    "cancelled": "cancelled",  # CancelledError after the effect: propagates, key unknown
    "cancelled_early": "cancelled",  # CancelledError before any effect: the same to the gate
    "raises": "raised:ValueError",  # stored
    "bad_result": "result:shape",  # stored
}
#: Behaviours whose run keeps no outcome: the key is freed, or left unknown.
FREED = ("rate_limited",)
UNKNOWN_AFTER = ("upstream", "cancelled", "cancelled_early")
#: Behaviours whose run made its effect in the world (what a reconcile finds).
EFFECT_MADE = ("ok", "upstream", "cancelled")
#: The store methods that can fail for one call: the disk fills, the connection closes.
STORE_STEPS = ("claim", "finish", "mark_unknown", "release", "take_over")
#: ``keyed`` and ``reconciled`` name their business object by ``order`` alone; ``whole`` by
#: all its args; ``reconciled`` asks the world about an unknown outcome before it re-runs.
TOOLS = ("keyed", "whole", "reconciled")
MAX_GATES = 3

ModelKey = tuple[str, ...]


class BreakableStore:
    """A store whose methods named in ``broken`` each fail once, as a full disk does, and
    whose methods named in ``lost`` each do their work once and then fail: the reply of a
    statement that landed, lost."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.broken: set[str] = set()
        self.lost: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in STORE_STEPS:
            return method

        def step(*args: Any) -> Any:
            if name in self.broken:
                self.broken.discard(name)
                raise sqlite3.OperationalError("database or disk is full")
            answer = method(*args)
            if name in self.lost:
                self.lost.discard(name)
                raise sqlite3.OperationalError("the connection closed before the reply")
            return answer
        return step


class WriteMachine(RuleBasedStateMachine):
    """Gates over one SQLite file, opened, closed and restarted between calls, checked against a
    model: which keys hold which outcome, which are unknown, how often each key's body
    must have run, and how many replays each gate must have counted. Bodies may be cancelled
    before or after their effect, the store may fail at any step of a call, an operator may
    resolve or forget a key, and one tool reconciles with the world. The model's keys are
    built here, not by the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="agtool-writes-")
        self.path = os.path.join(self.dir, "writes.sqlite")
        self.opened: list[Any] = []
        self.behaviour = "ok"
        self.serial = 0
        self.current: ModelKey = ()
        self.body_runs: Counter[ModelKey] = Counter()  # what the bodies did
        self.keeping_runs: Counter[ModelKey] = Counter()  # runs whose outcome is kept
        #: The world: each key's effect, as a reconcile finds it.
        self.effects: dict[ModelKey, dict[str, Any]] = {}
        self.reconciles = 0  # how many reconciles found an effect
        self.forgotten: Counter[ModelKey] = Counter()  # keys an operator let run again
        entry = {"fn": self.body, "args": ORDER_ARGS, "returns": ORDER_RETURNS,
                 "effect": "write"}
        self.table = {
            "keyed": {**entry, "key_args": ["order"]},
            "whole": dict(entry),
            "reconciled": {**entry, "key_args": ["order"], "reconcile": self.find},
        }
        self.gates: list[Gate] = []
        self.replays: list[Counter[str]] = []  # per gate, per tool: expected replays
        self.runs: list[Counter[str]] = []  # per gate, per tool: expected body runs
        # The model.
        self.stored: dict[ModelKey, tuple[dict[str, Any], dict[str, Any]]] = {}
        #: Keys whose body started and did not answer for good: never run again by the gate.
        self.unknown: dict[ModelKey, dict[str, Any]] = {}
        self.real_keys: dict[ModelKey, str] = {}
        self.expected_runs: Counter[ModelKey] = Counter()
        self.last: tuple[str, str, str, dict[str, Any]] | None = None
        self.calls_since_open = 0  # gates are dear to open: a few calls between openings
        self.open_gate()

    def body(self, order: str, qty: int, note: str = "") -> Any:
        self.body_runs[self.current] += 1
        self.serial += 1
        if self.behaviour not in FREED + UNKNOWN_AFTER:
            self.keeping_runs[self.current] += 1
        if self.behaviour in EFFECT_MADE:
            self.effects[self.current] = {"order": order, "serial": self.serial}
        if self.behaviour == "rate_limited":
            raise UpstreamError(429, applied=False)
        if self.behaviour == "upstream":
            raise UpstreamError(503)
        if self.behaviour in ("cancelled", "cancelled_early"):
            raise asyncio.CancelledError()
        if self.behaviour == "raises":
            raise ValueError(order)
        if self.behaviour == "bad_result":
            return {"order": order}
        return {"order": order, "serial": self.serial}

    def find(self, order: str, qty: int, note: str = "") -> dict[str, Any] | None:
        """The reconcile: the effect the world holds for the key being called, if any."""
        return self.effects.get(self.current)

    def open_store(self) -> Any:
        """A new connection to the machine's one store (a SQLite file here)."""
        return SqliteStore(self.path)

    def open_gate(self) -> None:
        self.calls_since_open = 0
        inner = self.open_store()
        self.opened.append(inner)
        store = BreakableStore(inner)
        self.gates.append(Gate(self.table, scope=WRITE_SCOPE, store=store, pending_wait=0,
                               **GATE_OPTIONS))
        self.replays.append(Counter())
        self.runs.append(Counter())

    @staticmethod
    def model_key(tool: str, run_id: str, step_id: str, args: dict[str, Any]) -> ModelKey:
        business = (args["order"],) if tool != "whole" else tuple(
            f"{name}={args[name]!r}" for name in sorted(args))
        return (run_id, step_id, tool, *business)

    def expect_run(self, which: int, tool: str, key: ModelKey, args: dict[str, Any],
                   broken: set[str]) -> dict[str, Any]:
        """The answer of a call that runs the body, and the key's state after it."""
        self.expected_runs[key] += 1
        self.runs[which][tool] += 1
        reason = BEHAVIOURS[self.behaviour]
        expected = (ok({"order": args["order"], "serial": self.serial + 1}) if reason is None
                    else failed(reason))
        if self.behaviour in FREED:
            if "release" in broken:  # the store could not be told: unknown, never free
                self.unknown[key] = dict(args)
        elif self.behaviour in UNKNOWN_AFTER:
            self.unknown[key] = dict(args)
        elif "finish" in broken:
            self.unknown[key] = dict(args)
            expected = failed("write:unknown")
        else:
            self.stored[key] = (dict(args), expected)
        return expected

    def expect(self, which: int, tool: str, key: ModelKey, args: dict[str, Any],
               broken: set[str]) -> dict[str, Any]:
        """What the call must answer, with the model moved on as the call moves the store."""
        if "claim" in broken:
            return failed("write:store")
        for held in (self.stored, self.unknown):
            if key in held:
                if (held[key][0] if held is self.stored else held[key]) != args:
                    return failed("write:conflict")
                break
        if key in self.stored:
            self.replays[which][tool] += 1
            return self.stored[key][1]
        if key not in self.unknown:
            return self.expect_run(which, tool, key, args, broken)
        if tool != "reconciled":
            return failed("write:unknown")
        if "take_over" in broken:
            return failed("write:store")
        del self.unknown[key]
        found = self.effects.get(key)
        if found is None:  # nothing happened: the body runs after all
            return self.expect_run(which, tool, key, args, broken)
        self.reconciles += 1
        if "finish" in broken:
            self.unknown[key] = dict(args)
            return failed("write:unknown")
        self.stored[key] = (dict(args), ok(found))
        return ok(found)

    def call(self, which: int, tool: str, run_id: str, step_id: str,
             args: dict[str, Any], broken: frozenset[str] = frozenset(),
             lost: frozenset[str] = frozenset()) -> None:
        which %= len(self.gates)
        key = self.model_key(tool, run_id, step_id, args)
        gate = self.gates[which]
        real_key = gate.idempotency_key(tool, args, run_id, step_id)
        assert real_key is not None
        self.real_keys[key] = real_key
        # A lost reply is as a failure of the step for a claim (given back: nothing ran) and
        # a take-over (unknown again); a finish, mark or release that landed stands.
        failing = set(broken) | (set(lost) & {"claim", "take_over"})
        was_free = key not in self.stored and key not in self.unknown
        expected = self.expect(which, tool, key, args, failing)
        if was_free and "claim" in set(lost) - set(broken) and "release" in broken:
            # The claim landed and could not be given back: this process gave it up, and
            # every reader sees it unknown (never pending under a live owner, never free).
            self.unknown[key] = dict(args)
        store = gate.store
        assert isinstance(store, BreakableStore)
        store.broken = set(broken)
        store.lost = set(lost) - set(broken)
        self.current = key
        if expected == failed("cancelled"):
            with pytest.raises(asyncio.CancelledError):
                gate.call_tool(tool, dict(args), run_id=run_id, step_id=step_id)
        else:
            answer = gate.call_tool(tool, dict(args), run_id=run_id, step_id=step_id)
            assert dict(answer) == expected, (key, self.behaviour, sorted(broken))
        store.broken, store.lost = set(), set()
        self.last = (tool, run_id, step_id, dict(args))
        self.calls_since_open += 1

    @rule(which=st.integers(0, MAX_GATES - 1), tool=st.sampled_from(TOOLS),
          run_id=st.sampled_from(RUN_IDS), step_id=st.sampled_from(STEP_IDS),
          order=st.sampled_from(ORDERS), qty=st.sampled_from(QTYS),
          behaviour=st.sampled_from(sorted(BEHAVIOURS)))
    def write(self, which: int, tool: str, run_id: str, step_id: str, order: str, qty: int,
              behaviour: str) -> None:
        """A write of a key from the pool; what its body does if it runs is drawn too."""
        self.behaviour = behaviour
        self.call(which, tool, run_id, step_id, {"order": order, "qty": qty})

    @precondition(lambda self: self.last is not None)
    @rule(which=st.integers(0, MAX_GATES - 1), behaviour=st.sampled_from(sorted(BEHAVIOURS)),
          broken=st.sets(st.sampled_from(STORE_STEPS), max_size=2).map(frozenset),
          lost=st.sets(st.sampled_from(STORE_STEPS), max_size=2).map(frozenset))
    def retry(self, which: int, behaviour: str, broken: frozenset[str],
              lost: frozenset[str]) -> None:
        """The last call again, exactly: a retry, on a store that may fail at some steps, or
        lose the reply of a step that landed."""
        assert self.last is not None
        self.behaviour = behaviour
        self.call(which, *self.last, broken=broken, lost=lost)

    @precondition(lambda self: bool(self.unknown))
    @rule(data=st.data(), resolve=st.booleans())
    def operator(self, data: st.DataObject, resolve: bool) -> None:
        """An operator lists the keys in doubt, checks the world, and resolves or forgets one."""
        store = self.gates[0].store
        listed = {entry.key: entry.state for entry in store.pending()}
        assert listed == {self.real_keys[key]: "unknown" for key in self.unknown}
        key = data.draw(st.sampled_from(sorted(self.unknown)))
        args = self.unknown.pop(key)
        if resolve:
            outcome = ok({"order": args["order"], "serial": -1})  # what the world was found to hold
            assert store.resolve(self.real_keys[key], outcome)
            self.stored[key] = (args, outcome)
        else:
            assert store.forget(self.real_keys[key])
            self.forgotten[key] += 1

    @precondition(lambda self: len(self.gates) < MAX_GATES and self.calls_since_open >= 2)
    @rule()
    def another_process(self) -> None:
        """One more gate (a process of its own) over the same file."""
        self.open_gate()

    @precondition(lambda self: self.calls_since_open >= 2)
    @rule()
    def restart(self) -> None:
        """Every gate goes away; one new gate opens the same file."""
        self.close_all()
        self.open_gate()

    @rule(run_id=st.sampled_from(RUN_IDS), empty=st.sampled_from(["run", "step"]))
    def without_key(self, run_id: str, empty: str) -> None:
        """A write with an empty run id or step id is refused and runs nothing."""
        before = sum(self.body_runs.values())
        answer = self.gates[0].call_tool(
            "keyed", {"order": "A-1", "qty": 1}, run_id="" if empty == "run" else run_id,
            step_id="" if empty == "step" else "s1")
        assert dict(answer) == failed("write:no_key")
        assert sum(self.body_runs.values()) == before

    @invariant()
    def bodies_ran_as_the_model_says(self) -> None:
        """Each key's body ran as often as the model says, and the runs whose outcome is kept
        number at most one per key, unless an operator forgot it: no second write."""
        assert self.body_runs == self.expected_runs
        assert all(runs <= 1 + self.forgotten[key] for key, runs in self.keeping_runs.items())

    @invariant()
    def gates_counted_replays_runs_and_reconciles(self) -> None:
        """Each gate's counters agree with the model's; no gate remembered a write."""
        for gate, replays, runs in zip(self.gates, self.replays, self.runs, strict=True):
            for tool in TOOLS:
                stats = gate.stats(tool)
                assert (stats.replayed, stats.runs) == (replays[tool], runs[tool])
            assert len(gate.cache) == 0

    def close_all(self) -> None:
        for store in self.opened:
            store.close()
        self.opened, self.gates, self.replays, self.runs = [], [], [], []

    def teardown(self) -> None:
        self.close_all()
        shutil.rmtree(self.dir, ignore_errors=True)


TestWriteMachine = pytest.mark.slow(WriteMachine.TestCase)


class PostgresWriteMachine(WriteMachine):
    """The same machine over one PostgreSQL table, each gate with its own connection."""

    def __init__(self) -> None:
        from _pg import new_table, postgres_url

        self.url, self.pg_table = postgres_url(), new_table()
        super().__init__()

    def open_store(self) -> Any:
        from agtool import PostgresStore

        return PostgresStore(self.url, table=self.pg_table, pool_size=1)

    def teardown(self) -> None:
        from _pg import drop_table

        super().teardown()
        drop_table(self.url, self.pg_table)


TestPostgresWriteMachine = pytest.mark.slow(PostgresWriteMachine.TestCase)


# -- The model's own check -----------------------------------------------------------------------


def test_model_keys_split_the_pool_as_the_gates_keys_do() -> None:
    """The machine's model keys tell the pool's calls apart exactly as the gate's keys do."""
    table = {tool: {"fn": Body(), "args": ORDER_ARGS, "returns": ORDER_RETURNS,
                    "effect": "write", **({"key_args": ["order"]} if tool != "whole" else {})}
             for tool in TOOLS}
    gate = Gate(table, scope=WRITE_SCOPE)
    pool = [(tool, run_id, step_id, {"order": order, "qty": qty})
            for tool in TOOLS for run_id in RUN_IDS for step_id in STEP_IDS
            for order in ORDERS for qty in QTYS]
    pairs = {(WriteMachine.model_key(*call), gate.idempotency_key(call[0], call[3], call[1],
                                                                  call[2])) for call in pool}
    model_keys = {model for model, _ in pairs}
    gate_keys = {real for _, real in pairs}
    assert len(pairs) == len(model_keys) == len(gate_keys)  # a bijection between the two


@pytest.mark.parametrize("exc", [
    pytest.param(SystemExit(2), id="exit"),
    pytest.param(KeyboardInterrupt(), id="interrupt"),
    pytest.param(asyncio.CancelledError(), id="cancelled"),
    pytest.param(GeneratorExit(), id="generator-exit"),
])
def test_a_write_body_interrupted_by_a_base_exception_is_never_run_again(
        exc: BaseException) -> None:
    """A ``BaseException`` from a write body propagates, and its key is left unknown: the body
    may have made its effect before it was interrupted, so no retry runs it a second time."""
    sent: list[str] = []

    def pay(order: str, qty: int, note: str = "") -> Any:
        sent.append(order)  # the effect, made before the interruption
        raise exc

    store = SqliteStore()
    gate = write_gate(pay, store=store)
    with pytest.raises(type(exc)):
        place(gate)
    assert place(gate) == failed("write:unknown")
    assert sent == ["A-1"]
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    stored = store.lookup(key)
    assert stored is not None
    assert stored.state == "unknown"


def test_a_claim_the_store_failed_to_settle_is_settled_when_it_answers_again(
        tmp_path: pathlib.Path) -> None:
    """An interrupted write whose mark-unknown fails leaves its row pending under this live
    process, which other processes of the host must read as in progress; the next time the
    store answers this process, the mark is made good, and they read it unknown."""
    path = tmp_path / "writes.sqlite"
    store = SpyStore()
    store.inner = SqliteStore(path)

    def interrupted(order: str, qty: int, note: str = "") -> Any:
        if not calls:
            calls.append(order)
            store.fail.add("mark_unknown")
            raise KeyboardInterrupt
        return {"order": order, "serial": 2}

    calls: list[str] = []
    gate = write_gate(interrupted, store=store)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None

    def seen_elsewhere() -> str:
        done = subprocess.run(  # noqa: S603 - a probe of this test's own
            [sys.executable, "-c", "import sys; from agtool._store import SqliteStore; "
             "print(SqliteStore(sys.argv[1]).lookup(sys.argv[2]).state)", str(path), key],
            capture_output=True, text=True, check=True)
        return done.stdout.strip()

    with pytest.raises(KeyboardInterrupt):
        place(gate)
    store.fail.clear()
    assert seen_elsewhere() == "pending"  # the owner lives: nothing else can tell
    assert place(gate, run_id="run-2")["ok"]  # the store answers this process again
    assert seen_elsewhere() == "unknown"
