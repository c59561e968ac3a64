"""One contract, every store: ``SqliteStore`` in memory and in a file, and ``PostgresStore``.

The write state machine drives a store through claim, take_over, finish,
release, mark_unknown, lookup, pending, resolve, forget and use_once, with
owners that are alive, dead (the pid of a process that has exited) and on
another host, and leases that are long or already over (a lease of 0 ends
when it starts: a lease has run out once the clock reaches its end). A plain
dict model is the oracle. The properties beside it pin what the machine
cannot see one step at a time: races between connections, refused
outcomes, and exact round trips.

Keys, tools, digests and owners are strings made up here: a store knows
nothing of gates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _owners import exited_owner
from _pg import own_table, postgres_url
from _race import race
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agtool._store import SqliteStore, encode_outcome, new_owner, owner_alive

KINDS = ["sqlite-memory", "sqlite-file", "postgres"]
LONG = 3600.0
OVER = 0.0  # ends when it starts


@pytest.fixture(scope="module", params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which store a test runs on; the Postgres one skips (fails in CI) without a server."""
    if request.param == "postgres":
        postgres_url()
    return str(request.param)


@contextlib.contextmanager
def backing(kind: str) -> Iterator[Callable[[], Any]]:
    """A fresh, empty place to keep writes, as a function that opens a store on it.

    Each call opens another connection to the same place (another process's
    worth), except in memory, where there is only the one store.
    """
    opened: list[Any] = []
    if kind == "sqlite-memory":
        only = SqliteStore()
        opened.append(only)
        yield lambda: only
        only.close()
        return
    with contextlib.ExitStack() as stack:
        if kind == "sqlite-file":
            path = os.path.join(stack.enter_context(tempfile.TemporaryDirectory()), "w.sqlite")

            def open_one() -> Any:
                opened.append(SqliteStore(path))
                return opened[-1]
        else:
            from agtool._store.postgres import PostgresStore

            url = postgres_url()
            table = stack.enter_context(own_table(url))

            def open_one() -> Any:
                opened.append(PostgresStore(url, table=table))
                return opened[-1]
        try:
            yield open_one
        finally:
            for store in opened:
                store.close()


def dead_owner() -> str:
    """An owner on this host whose process has exited (and been reaped)."""
    owner = exited_owner()
    assert owner_alive(owner) is False
    return owner


ALIVE = new_owner()
OTHER_ALIVE = new_owner()
ELSEWHERE = "another-host.example:4242:far"  # only its lease can say it is gone
DEAD = dead_owner()
OWNERS = [ALIVE, OTHER_ALIVE, ELSEWHERE, DEAD]
MACHINE_KEYS = ("k1", "k2", "k3")

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)  # no lone surrogates
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10)
OUTCOMES = st.builds(lambda ok, value: {"ok": ok, "value": value,
                                        "error": "" if ok else "raised:ValueError"},
                     st.booleans(), JSON)


def same_outcome(got: dict[str, Any] | None, expected: dict[str, Any] | None) -> bool:
    """Equal as JSON text: ``1``, ``1.0`` and ``True`` are three outcomes, and order counts."""
    if got is None or expected is None:
        return got is expected
    return encode_outcome(got) == encode_outcome(expected)


# -- The write state machine ---------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """The model's row: the state as stored, not as seen."""

    tool: str
    digest: str
    state: str
    owner: str
    lease: float
    outcome: dict[str, Any] | None
    order: int  # when it was first claimed, among this run's claims

    def abandoned(self) -> bool:
        # On this host the process decides, never the clock; elsewhere only the lease can.
        return self.state == "pending" and (
            self.owner == DEAD or (self.owner == ELSEWHERE and self.lease == OVER))

    def seen(self) -> str:
        return "unknown" if self.abandoned() else self.state


class WriteMachine(RuleBasedStateMachine):
    """Every transition of the protocol against a dict of ``Row``s."""

    kind = "sqlite-memory"

    def __init__(self) -> None:
        super().__init__()
        self._backing = backing(self.kind)
        self._open = self._backing.__enter__()
        self.stores = [self._open(), self._open()]
        self.rows: dict[str, Row] = {}
        self.tokens: set[str] = set()
        self.claims = 0

    def teardown(self) -> None:
        self._backing.__exit__(None, None, None)

    keys = st.sampled_from(MACHINE_KEYS)
    what = st.sampled_from([("place", "d1"), ("place", "d2"), ("cancel", "d1")])
    owners = st.sampled_from(OWNERS)
    leases = st.sampled_from([LONG, OVER])
    via = st.integers(0, 1)
    outcomes = Bundle("outcomes")

    @rule(target=outcomes, outcome=OUTCOMES)
    def make_outcome(self, outcome: dict[str, Any]) -> dict[str, Any]:
        return outcome

    @rule(key=keys, what=what, owner=owners, lease=leases, via=via)
    def claim(self, key: str, what: tuple[str, str], owner: str, lease: float, via: int) -> None:
        got = self.stores[via].claim(key, what[0], what[1], owner, lease)
        row = self.rows.get(key)
        if row is None:
            self.claims += 1
            self.rows[key] = Row(what[0], what[1], "pending", owner, lease, None, self.claims)
            expected = ("run", None)
        elif (row.tool, row.digest) != what:
            expected = ("conflict", None)
        elif row.state == "done":
            expected = ("done", row.outcome)
        elif row.state == "pending" and row.owner == owner:
            expected = ("run", None)  # its own claim again: an insert retried after it landed
        elif row.seen() == "unknown":
            row.state = "unknown"  # the claim that notices an abandoned claim turns it so
            expected = ("unknown", None)
        else:
            expected = ("pending", None)
        assert got.state == expected[0]
        assert same_outcome(got.outcome, expected[1])

    @rule(key=keys, owner=owners, lease=leases, via=via)
    def take_over(self, key: str, owner: str, lease: float, via: int) -> None:
        got = self.stores[via].take_over(key, owner, lease)
        row = self.rows.get(key)
        if row is not None and row.state == "pending" and row.owner == owner:
            assert got is True  # its own take-over, landed before a retry of it: unchanged
            return
        expected = row is not None and row.seen() == "unknown"
        if expected:
            assert row is not None
            row.state, row.owner, row.lease = "pending", owner, lease
        assert got is expected

    @rule(key=keys, owner=owners, outcome=outcomes, via=via)
    def finish(self, key: str, owner: str, outcome: dict[str, Any], via: int) -> None:
        got = self.stores[via].finish(key, owner, outcome)
        row = self.rows.get(key)
        # Also over its own claim turned unknown, as long as nobody took it over.
        expected = row is not None and row.state != "done" and row.owner == owner
        if expected:
            assert row is not None
            row.state, row.outcome = "done", outcome
        # Its own finish, landed before a retry of it: the same outcome is what is kept.
        landed = row is not None and row.state == "done" and row.owner == owner and (
            same_outcome(row.outcome, outcome))
        assert got is (expected or landed)

    @rule(key=keys, owner=owners, via=via)
    def release(self, key: str, owner: str, via: int) -> None:
        got = self.stores[via].release(key, owner)
        expected = self._held(key, owner)
        if expected:
            del self.rows[key]
        assert got is (expected or key not in self.rows)  # a release landed before: gone

    @rule(key=keys, owner=owners, via=via)
    def mark_unknown(self, key: str, owner: str, via: int) -> None:
        got = self.stores[via].mark_unknown(key, owner)
        row = self.rows.get(key)
        landed = row is not None and row.state == "unknown" and row.owner == owner
        expected = self._held(key, owner)
        if expected:
            self.rows[key].state = "unknown"
        assert got is (expected or landed)  # its own mark, landed before a retry of it

    def _held(self, key: str, owner: str) -> bool:
        # Stored pending by this owner, even past its lease: nobody has taken it yet.
        row = self.rows.get(key)
        return row is not None and row.state == "pending" and row.owner == owner

    @rule(key=keys, outcome=outcomes, via=via)
    def resolve(self, key: str, outcome: dict[str, Any], via: int) -> None:
        got = self.stores[via].resolve(key, outcome)
        row = self.rows.get(key)
        expected = row is not None and row.state != "done"
        if expected:
            assert row is not None
            row.state, row.outcome = "done", outcome
        assert got is expected

    @rule(key=keys, via=via)
    def forget(self, key: str, via: int) -> None:
        assert self.stores[via].forget(key) is (self.rows.pop(key, None) is not None)

    @rule(token=st.sampled_from(["t1", "t2", "t3"]), via=via)
    def use_once(self, token: str, via: int) -> None:
        # Far from expiry, so pruning (allowed past it) cannot answer for the store.
        got = self.stores[via].use_once(token, 4_000_000_000.0)
        assert got is (token not in self.tokens)
        self.tokens.add(token)

    @precondition(lambda self: self.kind != "sqlite-memory")
    @rule(via=via)
    def reopen(self, via: int) -> None:
        """A store opened anew on the same file or table sees every key as it was."""
        self.stores[via] = self._open()

    @rule(key=keys, via=via)
    def lookup(self, key: str, via: int) -> None:
        got = self.stores[via].lookup(key)
        row = self.rows.get(key)
        if row is None:
            assert got is None
            return
        assert got is not None
        assert (got.key, got.tool, got.args_digest, got.state, got.owner) == (
            key, row.tool, row.digest, row.seen(), row.owner)
        assert same_outcome(got.outcome, row.outcome)

    @invariant()
    def pending_lists_what_is_open(self) -> None:
        listed = self.stores[0].pending()
        expected = {key: row for key, row in self.rows.items() if row.state != "done"}
        assert {write.key: write.state for write in listed} == {
            key: row.seen() for key, row in expected.items()}
        assert all(write.outcome is None for write in listed)
        # Oldest claim first: an earlier claim never comes after a later one, unless the
        # clock read the same time for both (then by key).
        stamps = [(write.claimed_at, write.key) for write in listed]
        assert stamps == sorted(stamps)
        orders = [expected[write.key].order for write in listed]
        for before, after in itertools.pairwise(listed):
            if before.claimed_at != after.claimed_at:
                assert expected[before.key].order < expected[after.key].order, orders


@pytest.mark.slow
def test_write_state_machine(kind: str) -> None:
    """Every store follows the model through any sequence of the protocol's operations."""
    machine = type(f"WriteMachine_{kind.replace('-', '_')}", (WriteMachine,), {"kind": kind})
    run_state_machine_as_test(machine, settings=settings())


# -- Properties ----------------------------------------------------------------------------


@given(outcome=OUTCOMES, by_resolve=st.booleans())
def test_outcomes_come_back_exactly(kind: str, outcome: dict[str, Any], by_resolve: bool) -> None:
    """An exact JSON envelope, kept by finish or resolve, is what claim, lookup and a store
    opened anew answer: same types, same key order."""
    with backing(kind) as open_store:
        store = open_store()
        store.claim("k", "place", "d1", ALIVE, LONG)
        kept = store.resolve("k", outcome) if by_resolve else store.finish("k", ALIVE, outcome)
        assert kept
        other = open_store()
        answer = other.claim("k", "place", "d1", OTHER_ALIVE, LONG)
        assert answer.state == "done"
        assert same_outcome(answer.outcome, outcome)
        stored = other.lookup("k")
        assert stored is not None
        assert same_outcome(stored.outcome, outcome)


class Text(str):
    pass


@pytest.mark.parametrize("value", [
    pytest.param((1, 2), id="tuple"),
    pytest.param({1: "a"}, id="int-key"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(float("inf"), id="inf"),
    pytest.param({1, 2}, id="set"),
    pytest.param(b"raw", id="bytes"),
    pytest.param(Text("a"), id="str-subclass"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param(10**5000, id="int-too-long"),
    pytest.param(object(), id="object"),
])
@pytest.mark.parametrize("by_resolve", [False, True], ids=["finish", "resolve"])
def test_outcomes_that_would_not_come_back_are_refused(kind: str, value: Any,
                                                       by_resolve: bool) -> None:
    """An outcome with no exact JSON form raises ``ValueError`` and leaves the key pending by
    its owner, so the gate can still say what happened to it."""
    outcome = {"ok": True, "value": {"kept": 1, "odd": value}, "error": ""}
    with backing(kind) as open_store:
        store = open_store()
        store.claim("k", "place", "d1", ALIVE, LONG)
        keep = (lambda: store.resolve("k", outcome)) if by_resolve else (
            lambda: store.finish("k", ALIVE, outcome))
        with pytest.raises(ValueError, match="not storable exactly"):
            keep()
        stored = store.lookup("k")
        assert stored is not None
        assert (stored.state, stored.owner, stored.outcome) == ("pending", ALIVE, None)
        assert store.mark_unknown("k", ALIVE)


def test_outcome_nested_past_the_limit_is_refused(kind: str) -> None:
    """A value nested deeper than a store reads back is refused, not kept as something else."""
    deep: Any = "leaf"
    for _ in range(200):
        deep = [deep]
    with backing(kind) as open_store:
        store = open_store()
        store.claim("k", "place", "d1", ALIVE, LONG)
        with pytest.raises(ValueError, match="deeper"):
            store.finish("k", ALIVE, {"ok": True, "value": deep, "error": ""})


RACERS = 8


def test_racing_claims_give_exactly_one_run(kind: str) -> None:
    """Eight connections (one store in memory) racing for each new key: one run per key,
    and the key is pending by the one that won."""
    with backing(kind) as open_store:
        stores = [open_store() for _ in range(RACERS)]
        owners = [new_owner() for _ in range(RACERS)]
        for key in ("k1", "k2", "k3"):
            states = race(RACERS, lambda i, key=key: stores[i].claim(
                key, "place", "d1", owners[i], LONG).state)
            assert sorted(states) == ["pending"] * (RACERS - 1) + ["run"]
            stored = stores[0].lookup(key)
            assert stored is not None
            assert stored.owner == owners[states.index("run")]


@pytest.mark.parametrize("abandon", ["mark_unknown", "lease", "dead-owner"])
def test_racing_take_overs_give_exactly_one_owner(kind: str, abandon: str) -> None:
    """Of eight connections taking over one unknown (or abandoned) key, exactly one does,
    and the key is then pending by it."""
    with backing(kind) as open_store:
        stores = [open_store() for _ in range(RACERS)]
        first = {"dead-owner": DEAD, "lease": ELSEWHERE}.get(abandon, ALIVE)
        stores[0].claim("k", "place", "d1", first, OVER if abandon == "lease" else LONG)
        if abandon == "mark_unknown":
            assert stores[0].mark_unknown("k", ALIVE)
        owners = [new_owner() for _ in range(RACERS)]
        won = race(RACERS, lambda i: stores[i].take_over("k", owners[i], LONG))
        assert won.count(True) == 1
        stored = stores[0].lookup("k")
        assert stored is not None
        assert (stored.state, stored.owner) == ("pending", owners[won.index(True)])


def test_racing_uses_of_one_token_give_exactly_one_true(kind: str) -> None:
    """A single-use token presented on eight connections at once is accepted once."""
    with backing(kind) as open_store:
        stores = [open_store() for _ in range(RACERS)]
        for token in ("a", "b"):
            used = race(RACERS, lambda i, token=token: stores[i].use_once(token, 4e9))
            assert used.count(True) == 1


@pytest.mark.parametrize("holder", [ALIVE, ELSEWHERE], ids=["alive-here", "other-host"])
def test_a_live_claim_is_pending_to_everyone_else(kind: str, holder: str) -> None:
    """A claim in its lease, by a live owner or one on another host, is pending to every
    other caller: they cannot finish, release, mark or take it over."""
    with backing(kind) as open_store:
        store, other = open_store(), open_store()
        store.claim("k", "place", "d1", holder, LONG)
        outcome = {"ok": True, "value": 1, "error": ""}
        assert other.claim("k", "place", "d1", OTHER_ALIVE, LONG).state == "pending"
        assert not other.take_over("k", OTHER_ALIVE, LONG)
        assert not other.finish("k", OTHER_ALIVE, outcome)
        assert not other.release("k", OTHER_ALIVE)
        assert not other.mark_unknown("k", OTHER_ALIVE)
        stored = other.lookup("k")
        assert stored is not None
        assert (stored.state, stored.owner, stored.outcome) == ("pending", holder, None)
        assert store.finish("k", holder, outcome)


@pytest.mark.parametrize("gone", ["lease", "dead-owner"])
def test_an_abandoned_claim_is_unknown_and_never_run_again(kind: str, gone: str) -> None:
    """A claim whose lease ran out or whose owner died reads unknown to lookup, pending and
    every later claim; no claim answers run for it, until an operator forgets it."""
    with backing(kind) as open_store:
        store = open_store()
        owner = DEAD if gone == "dead-owner" else ELSEWHERE
        assert store.claim("k", "place", "d1", owner, OVER if gone == "lease" else LONG
                           ).state == "run"
        stored = store.lookup("k")
        assert stored is not None
        assert stored.state == "unknown"
        assert [write.key for write in store.pending() if write.state == "unknown"] == ["k"]
        for _ in range(3):
            assert store.claim("k", "place", "d1", ALIVE, LONG).state == "unknown"
        assert store.forget("k")
        assert store.claim("k", "place", "d1", ALIVE, LONG).state == "run"


def test_a_lease_is_measured_from_the_claim(kind: str) -> None:
    """``lease_until`` is ``claimed_at`` plus the lease, on the store's one clock."""
    with backing(kind) as open_store:
        store = open_store()
        store.claim("k", "place", "d1", ALIVE, 90.0)
        stored = store.lookup("k")
        assert stored is not None
        assert stored.lease_until - stored.claimed_at == pytest.approx(90.0, abs=1e-3)
