"""Attacks on the write path: lost replies, spent tokens, taken-over keys, settling after a body."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agtool import Gate

SECRET = "write-path-secret-0123456789abcdef"  # noqa: S105 - a test's own secret
ARGS_SPEC: dict[str, Any] = {"order": {"type": "str", "min_len": 1}}
RETURNS: dict[str, Any] = {"order": {"type": "str"}}


class World:
    """A payment system: every body run is one payment; reconcile asks it by order."""

    def __init__(self, script: list[BaseException] | None = None) -> None:
        self.paid: list[str] = []
        self.script = list(script or [])

    def pay(self, order: str) -> dict[str, Any]:
        self.paid.append(order)
        if self.script:
            raise self.script.pop(0)
        return {"order": order}

    def find(self, order: str) -> dict[str, Any] | None:
        return {"order": order} if order in self.paid else None


def test_reused_single_use_token_on_unknown_key_does_not_free_it() -> None:
    """Promise 1: a body that started is never run again on a guess.

    The first call's body pays and is cancelled: its key is unknown. A retry
    with the same (now spent) single-use approval takes the key over to
    reconcile, is refused ``auth:approval`` in ``_spent`` -- which *releases*
    the key (DELETE where state = 'pending'), dropping the unknown outcome.
    A fresh approval then claims the key as new and pays a second time.
    """
    world = World([asyncio.CancelledError()])
    table = {"pay": {"fn": world.pay, "args": ARGS_SPEC, "returns": RETURNS, "effect": "write",
                     "risk": "irreversible", "key_args": ["order"], "reconcile": world.find}}
    gate = Gate(table, scope={"irreversible"}, secret=SECRET, pending_wait=0.05)
    args = {"order": "A-1"}
    first = gate.approve("pay", args, single_use=True)
    with pytest.raises(asyncio.CancelledError):
        gate.call_tool("pay", args, run_id="r", step_id="s", approvals=[first])
    assert len(world.paid) == 1
    retry = gate.call_tool("pay", args, run_id="r", step_id="s", approvals=[first])
    assert retry["ok"] is False
    # The unknown outcome must still be on record for the operator (or for reconcile).
    assert gate.store.lookup(str(gate.idempotency_key("pay", args, "r", "s"))) is not None
    fresh = gate.approve("pay", args, single_use=True)
    gate.call_tool("pay", args, run_id="r", step_id="s", approvals=[fresh])
    assert len(world.paid) == 1, "the payment was made twice for one key"


class Hostile(dict[str, Any]):
    """A dict whose ``items`` raises: the result check passes it, redaction does not."""

    def __init__(self, exc: BaseException, **fields: Any) -> None:
        super().__init__(**fields)
        self.exc = exc

    def items(self) -> Any:
        raise self.exc


def _secret_table(world: list[str], value: dict[str, Any]) -> dict[str, Any]:
    def pay(order: str) -> dict[str, Any]:
        world.append(order)
        return value

    return {"pay": {"fn": pay, "args": ARGS_SPEC, "effect": "write", "key_args": ["order"],
                    "returns": {"order": {"type": "str"},
                                "card": {"type": "str", "sensitive": True}}}}


def test_settling_a_write_never_raises_nor_leaves_it_pending() -> None:
    """Promises 6 and 2: the gate never raises an ``Exception``; no key is left silently pending.

    The body pays and returns a value that passes the result check, but whose
    ``items`` raises: ``store_outcome`` calls ``redact_value`` outside every
    ``try``, so ``call_tool`` raises ``RuntimeError`` and the key stays
    ``pending`` under a live owner (every repeat: ``write:in_progress``).
    """
    paid: list[str] = []
    gate = Gate(_secret_table(paid, Hostile(RuntimeError("boom"), order="A", card="4111-1111")),
                scope={"reversible_write"}, secret=SECRET, pending_wait=0.05)
    answer = gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s")
    assert answer["error"] == "write:unknown"
    stored = gate.store.lookup(str(gate.idempotency_key("pay", {"order": "A"}, "r", "s")))
    assert stored is not None
    assert stored.state == "unknown"


def test_base_exception_after_the_body_marks_the_key_unknown() -> None:
    """Promise 1: "a BaseException during or after the body leaves the key unknown".

    A ``KeyboardInterrupt`` raised while the write is being settled (here from
    the returned value, while it is redacted for the store) propagates, but the
    key is left ``pending`` instead of ``unknown``: ``_ran`` only guards
    ``call()``, not ``_answered``/``conclude``/``_kept``.
    """
    paid: list[str] = []
    gate = Gate(_secret_table(paid, Hostile(KeyboardInterrupt(), order="A", card="4111-1111")),
                scope={"reversible_write"}, secret=SECRET, pending_wait=0.05)
    with pytest.raises(KeyboardInterrupt):
        gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s")
    stored = gate.store.lookup(str(gate.idempotency_key("pay", {"order": "A"}, "r", "s")))
    assert stored is not None
    assert stored.state == "unknown"


def test_connection_refused_after_the_effect_does_not_free_the_key() -> None:
    """Promise 1: a key is freed only when it is *known* that nothing happened.

    ``_not_applied`` guesses that a ``ConnectionRefusedError`` (or an
    ``upstream:429``) means the body had no effect, and releases the key. A
    body that paid and then failed to reach its receipt service pays again
    on the retry. (``NotApplied`` is the explicit way to say nothing happened.)
    """
    world = World([ConnectionRefusedError("receipt service down")])
    table = {"pay": {"fn": world.pay, "args": ARGS_SPEC, "returns": RETURNS, "effect": "write",
                     "key_args": ["order"]}}
    gate = Gate(table, scope={"reversible_write"}, secret=SECRET, pending_wait=0.05)
    gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s")
    gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s")
    assert len(world.paid) == 1, "a retry paid a second time"


def test_lease_expiry_of_a_live_owner_on_this_host_never_reruns() -> None:
    """Promise 1 ("lease expiry while the owner still runs").

    ``DEFAULT_LEASE`` says a lease decides only "on a machine that cannot see
    whether its owner still runs", but ``abandoned`` takes an expired lease as
    abandonment even when ``owner_alive`` is True (same process here). A second
    caller takes the key over, its reconcile (asked while the first body is
    still running) finds nothing yet, and the body runs a second time.
    """
    import threading

    started, go = threading.Event(), threading.Event()
    paid: list[str] = []

    def pay(order: str) -> dict[str, Any]:
        started.set()
        go.wait(10)
        paid.append(order)
        return {"order": order}

    def find(order: str) -> dict[str, Any] | None:
        return {"order": order} if order in paid else None

    table = {"pay": {"fn": pay, "args": ARGS_SPEC, "returns": RETURNS, "effect": "write",
                     "key_args": ["order"], "reconcile": find}}
    gate = Gate(table, scope={"reversible_write"}, secret=SECRET, pending_wait=0.05, lease=0)
    first = threading.Thread(target=gate.call_tool, args=("pay", {"order": "A"}),
                             kwargs={"run_id": "r", "step_id": "s"})
    first.start()
    try:
        assert started.wait(10)
        second = threading.Thread(target=gate.call_tool, args=("pay", {"order": "A"}),
                                  kwargs={"run_id": "r", "step_id": "s"})
        second.start()
        second.join(0.5)  # the second call either waits (right) or runs its own body (wrong)
    finally:
        go.set()
        first.join(10)
        second.join(10)
    assert len(paid) == 1, "the body ran twice while its first run was still going"


def test_sequential_timed_async_calls_are_never_busy() -> None:
    """Promise 5: ``timeout:busy`` only "when every worker is stuck".

    On the async path the caller resumes (``asyncio.wrap_future``) before the
    worker's ``finally`` gives its slot back, so with ``workers=1`` a plain
    sequence of fast timed calls -- never two at once -- is refused busy.
    """
    def look(q: str) -> dict[str, Any]:
        return {"q": q}

    table = {"look": {"fn": look, "args": {"q": {"type": "str"}},
                      "returns": {"q": {"type": "str"}}, "timeout": 30.0, "ttl": 0}}
    gate = Gate(table, workers=1)

    async def calls() -> list[str]:
        return [(await gate.acall_tool("look", {"q": str(i)}))["error"] for i in range(300)]

    assert set(asyncio.run(calls())) == {""}


def test_a_reconcile_answering_junk_leaves_the_key_unknown() -> None:
    """Promise 2: the caller is told ``write:unknown`` unless the outcome is known.

    A reconcile that answers something that is neither ``None`` nor a value
    of the write's contract (here ``False``, a natural "not found") has not
    said whether the effect happened. ``_reconcile_answered`` concludes it like
    a body's value: the key is settled ``done`` with ``result:shape`` for ever,
    drops out of ``store.pending()``, and nobody learns the payment's fate.
    """
    world = World([asyncio.CancelledError()])
    table = {"pay": {"fn": world.pay, "args": ARGS_SPEC, "returns": RETURNS, "effect": "write",
                     "key_args": ["order"], "reconcile": lambda order: False}}
    gate = Gate(table, scope={"reversible_write"}, secret=SECRET, pending_wait=0.05)
    with pytest.raises(asyncio.CancelledError):
        gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s")
    answer = gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s")
    assert answer["error"] == "write:unknown"
    assert [entry.state for entry in gate.store.pending()] == ["unknown"]


def test_a_timed_async_write_keeps_its_outcome_after_the_loop_ends() -> None:
    """Promise 2: no outcome lost (the sync path keeps it: its worker settles the key).

    On the async path a timed sync write runs on the pool, but its outcome is
    stored by a background *task*. When ``asyncio.run`` ends (the agent's run
    is over) the task is cancelled and marks the key unknown; the body then
    finishes on its worker and its value is dropped: every retry answers
    ``write:unknown`` and needs an operator, for a payment whose outcome the
    process held.
    """
    import threading
    import time

    go, finished = threading.Event(), threading.Event()
    paid: list[str] = []

    def pay(order: str) -> dict[str, Any]:
        go.wait(10)
        paid.append(order)
        finished.set()
        return {"order": order}

    table = {"pay": {"fn": pay, "args": ARGS_SPEC, "returns": RETURNS, "effect": "write",
                     "key_args": ["order"], "timeout": 0.05}}
    gate = Gate(table, scope={"reversible_write"}, secret=SECRET, pending_wait=0.05)
    answer = asyncio.run(gate.acall_tool("pay", {"order": "A"}, run_id="r", step_id="s"))
    assert answer["error"] == "timeout"
    go.set()
    assert finished.wait(10)
    key = str(gate.idempotency_key("pay", {"order": "A"}, "r", "s"))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stored = gate.store.lookup(key)
        if stored is not None and stored.state == "done":
            break
        time.sleep(0.01)
    assert gate.call_tool("pay", {"order": "A"}, run_id="r", step_id="s") == {
        "ok": True, "value": {"order": "A"}, "error": ""}
    assert paid == ["A"]


def test_sqlite_take_over_never_takes_a_claim_renewed_meanwhile() -> None:
    """Promise 1 (take_over races), and "the same guarantees" as ``PostgresStore``.

    ``SqliteStore.take_over`` reads the row, then updates ``WHERE owner = ?
    AND state = ?``. Postgres also pins ``lease_until``; SQLite does not, so if
    the abandoned claim's owner released and claimed the key again between the
    read and the update (a gate's owner name is the same for all its calls),
    the racer takes over a live, fresh claim whose body is about to run.
    """
    from agtool import SqliteStore

    class Paused(SqliteStore):
        meanwhile: Any = None

        def _row(self, key: str) -> Any:
            row = super()._row(key)
            if self.meanwhile is not None:
                work, self.meanwhile = self.meanwhile, None
                work()
            return row

    store = Paused()
    assert store.claim("k", "pay", "d", "owner-a", 0.0).state == "run"  # its lease is out

    def owner_a_claims_again() -> None:
        assert store.release("k", "owner-a")
        assert store.claim("k", "pay", "d", "owner-a", 300.0).state == "run"

    store.meanwhile = owner_a_claims_again
    assert store.take_over("k", "owner-b", 300.0) is False
    stored = store.lookup("k")
    assert stored is not None
    assert stored.owner == "owner-a"
