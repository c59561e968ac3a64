"""Replies lost between a commit and the caller, on the real PostgreSQL server.

How the reply is lost: the store's connections are wrapped (``psycopg.connect``
is replaced for the test by a function that wraps the real connection). When a
chosen statement has run, and so committed (the store runs in autocommit), the
wrapper terminates that very backend with ``pg_terminate_backend`` from a side
connection, waits until the server has dropped it, and then touches the dead
connection, so the store sees what a client whose reply was cut sees: a broken
connection raising ``OperationalError`` with the statement already landed. The
store replaces the connection and asks again, as it would in production; what
the retry answers is what these tests check, through a real gate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from _owners import exited_owner
from _pg import postgres_store, postgres_url

from agtool import Gate
from agtool._store.postgres import PostgresStore

SECRET = "lost-replies-secret-0123456789"  # noqa: S105 - a test's own secret
ARGS = {"order": "A-1", "qty": 1}
#: The statements a test can cut the reply of, by a fragment of their SQL.
CLAIM, TAKE_OVER, FINISH, MARK_UNKNOWN = ("INSERT INTO", "SET state = 'pending'",
                                          "SET state = 'done'", "SET state = 'unknown'")
PATIENCE = 30.0


class Cuts:
    """Which statements' replies are still to be cut, and how many were."""

    def __init__(self) -> None:
        self.armed: list[str] = []
        self.cut: list[str] = []


class CuttingConnection:
    """A psycopg connection whose chosen statements commit and then lose their reply."""

    def __init__(self, real: psycopg.Connection[Any], cuts: Cuts,
                 side: Callable[[], psycopg.Connection[Any]]) -> None:
        self._real = real
        self._cuts = cuts
        self._side = side

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __enter__(self) -> CuttingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self._real.close()

    def execute(self, query: Any, params: Any = None) -> Any:
        answer = self._real.execute(query, params)
        text = query.as_string(self._real) if hasattr(query, "as_string") else str(query)
        for fragment in self._cuts.armed:
            if fragment in text and answer.rowcount:  # it changed a row: it landed
                self._cuts.armed.remove(fragment)
                self._cuts.cut.append(fragment)
                self._terminate()
                self._real.execute("SELECT 1")  # the dead connection: OperationalError
                raise AssertionError("a terminated backend answered")  # pragma: no cover
        return answer

    def _terminate(self) -> None:
        pid = self._real.info.backend_pid
        with self._side() as side:
            side.execute("SELECT pg_terminate_backend(%s)", (pid,))
            deadline = time.monotonic() + PATIENCE
            while side.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                               (pid,)).fetchone():
                assert time.monotonic() < deadline, "the backend outlived its termination"
                time.sleep(0.01)


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
def cuts(url: str, monkeypatch: pytest.MonkeyPatch) -> Cuts:
    cuts = Cuts()
    real_connect = psycopg.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        return CuttingConnection(real_connect(*args, **kwargs), cuts,
                                 lambda: real_connect(url, autocommit=True))

    monkeypatch.setattr(psycopg, "connect", connect)
    return cuts


@pytest.fixture
def store(url: str, cuts: Cuts) -> Iterator[PostgresStore]:
    with postgres_store(url) as made:
        yield made


class Body:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, order: str, qty: int) -> dict[str, Any]:
        self.runs += 1
        return {"order": order, "serial": self.runs}


def gate_over(store: PostgresStore, body: Callable[..., Any], **entry: Any) -> Gate:
    table = {"place": {"fn": body, "args": {"order": {"type": "str"}, "qty": {"type": "int"}},
                       "returns": {"order": {"type": "str"}, "serial": {"type": "int"}},
                       "effect": "write", **entry}}
    return Gate(table, scope={"reversible_write"}, store=store, secret=SECRET,
                pending_wait=0.05)


def place(gate: Gate) -> dict[str, Any]:
    return dict(gate.call_tool("place", dict(ARGS), run_id="run-1", step_id="step-1"))


def ok(serial: int) -> dict[str, Any]:
    return {"ok": True, "value": {"order": "A-1", "serial": serial}, "error": ""}


def test_a_lost_claim_reply_is_this_claims_own_and_runs_once(store: PostgresStore,
                                                               cuts: Cuts) -> None:
    """The claim's insert commits, its reply is cut: the retry finds its own claim and runs
    the body, once."""
    body = Body()
    gate = gate_over(store, body)
    cuts.armed.append(CLAIM)
    assert place(gate) == ok(1)
    assert cuts.cut == [CLAIM]
    assert place(gate) == ok(1)
    assert body.runs == 1


def test_a_lost_take_over_reply_reconciles_never_runs_blind(store: PostgresStore,
                                                             cuts: Cuts) -> None:
    """The take-over's update commits, its reply is cut: the retry recognises the take-over
    as its own and reconciles (asked once); the body is not run a second time."""
    body, asked = Body(), []
    gate = gate_over(store, body, reconcile=lambda order, qty: asked.append(order) or {
        "order": order, "serial": 41})
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    digest = gate.call_tool("place", dict(ARGS), dry_run=True)["value"]["args_digest"]
    assert store.claim(key, "place", digest, exited_owner(), 300.0).state == "run"
    cuts.armed.append(TAKE_OVER)
    assert place(gate) == ok(41)
    assert cuts.cut == [TAKE_OVER]
    assert (body.runs, asked) == (0, ["A-1"])
    assert place(gate) == ok(41)


def test_a_lost_finish_reply_reads_back_what_was_kept(store: PostgresStore,
                                                      cuts: Cuts) -> None:
    """The finish's update commits, its reply is cut: the caller is answered the outcome
    kept, not ``write:unknown``, and repeats replay it."""
    body = Body()
    gate = gate_over(store, body)
    cuts.armed.append(FINISH)
    assert place(gate) == ok(1)
    assert cuts.cut == [FINISH]
    assert gate.stats("place").unknown == 0
    assert place(gate) == ok(1)
    assert body.runs == 1


def test_a_claim_cut_on_every_attempt_is_given_back(store: PostgresStore, cuts: Cuts) -> None:
    """The claim commits and both the reply and the retry's reply are cut: the call answers
    ``write:store`` and gives the key back (nothing ran), never leaves it pending."""
    body = Body()
    gate = gate_over(store, body)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    cuts.armed.extend([CLAIM, CLAIM])  # the retry's insert finds the row: it changes nothing
    original = store.claim

    def claim_then_fail(*args: Any) -> Any:
        original(*args)
        raise psycopg.OperationalError("the reply of the claim was lost twice")

    store.claim = claim_then_fail  # type: ignore[method-assign]
    assert place(gate)["error"] == "write:store"
    assert store.lookup(key) is None
    store.claim = original  # type: ignore[method-assign]
    assert place(gate) == ok(1)
    assert body.runs == 1


def test_a_lost_mark_unknown_reply_is_unknown(store: PostgresStore, cuts: Cuts) -> None:
    """An interrupted body's key is marked unknown; the mark's reply is cut: the key is
    unknown (not pending under this live process) and answers ``write:unknown``."""
    def interrupted(order: str, qty: int) -> dict[str, Any]:
        raise KeyboardInterrupt

    gate = gate_over(store, interrupted)
    key = gate.idempotency_key("place", ARGS, "run-1", "step-1")
    assert key is not None
    cuts.armed.append(MARK_UNKNOWN)
    with pytest.raises(KeyboardInterrupt):
        place(gate)
    assert cuts.cut == [MARK_UNKNOWN]
    entry = store.lookup(key)
    assert entry is not None
    assert entry.state == "unknown"
    assert place(gate)["error"] == "write:unknown"
