"""SqliteStore: claim states, finish, lookup, release, forget, persistence and atomic claims.

Keys, tools and digests here are plain strings made up by the tests: the store
knows nothing of gates, so nothing is taken from one.
"""

from __future__ import annotations

import json
import pathlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _race import race
from hypothesis import given
from hypothesis import strategies as st

from agtool import Claim, SqliteStore, StoredWrite
from agtool._store import encode_outcome, new_owner

OWNER = new_owner()
OTHER = new_owner()  #: another claim of this process: it finds OWNER's claims pending
LEASE = 300.0

OUTCOME: dict[str, Any] = {"ok": True, "value": {"order": "A-1", "rows": [1, 2.5, None]},
                           "error": ""}


@pytest.fixture
def store() -> Iterator[SqliteStore]:
    opened = SqliteStore()
    yield opened
    opened.close()


# -- Claim states --------------------------------------------------------------------------------


def test_new_key_is_run(store: SqliteStore) -> None:
    """The first claim of a key owns it."""
    assert store.claim("k", "place", "d1", OWNER, LEASE) == Claim("run", None)


def test_claimed_key_is_pending_for_the_same_tool_and_args(store: SqliteStore) -> None:
    """A second claim of an unfinished key, same tool and args, is told to wait."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    assert store.claim("k", "place", "d1", OTHER, LEASE) == Claim("pending", None)
    assert store.claim("k", "place", "d1", OTHER, LEASE).state == "pending"  # and stays so


@pytest.mark.parametrize("finished", [False, True], ids=["pending", "done"])
@pytest.mark.parametrize(("tool", "digest"), [("place", "d2"), ("cancel", "d1"),
                                              ("cancel", "d2")],
                         ids=["other-args", "other-tool", "both"])
def test_key_claimed_with_other_args_or_tool_is_a_conflict(store: SqliteStore, finished: bool,
                                                            tool: str, digest: str) -> None:
    """Another tool or args digest under a used key conflicts, pending or done."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    if finished:
        store.finish("k", OWNER, OUTCOME)
    assert store.claim("k", tool, digest, OTHER, LEASE) == Claim("conflict", None)
    state = store.claim("k", "place", "d1", OTHER, LEASE).state
    assert state == ("done" if finished else "pending")


def test_finished_key_is_done_with_its_outcome(store: SqliteStore) -> None:
    """After ``finish`` every claim of the key answers ``done`` and the outcome, equal but fresh."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    store.finish("k", OWNER, OUTCOME)
    first = store.claim("k", "place", "d1", OWNER, LEASE)
    assert first == Claim("done", OUTCOME)
    assert first.outcome is not None
    first.outcome["value"]["order"] = "scribbled"
    assert store.claim("k", "place", "d1", OWNER, LEASE) == Claim("done", OUTCOME)


def test_keys_are_independent(store: SqliteStore) -> None:
    """Claiming, finishing or releasing one key does nothing to another."""
    store.claim("a", "place", "d1", OWNER, LEASE)
    store.claim("b", "place", "d1", OWNER, LEASE)
    store.finish("a", OWNER, OUTCOME)
    store.release("b", OWNER)
    assert store.claim("a", "place", "d1", OWNER, LEASE).state == "done"
    assert store.claim("b", "place", "d1", OWNER, LEASE).state == "run"
    assert store.claim("c", "place", "d1", OWNER, LEASE).state == "run"


# -- Lookup, release, forget ---------------------------------------------------------------------


def test_lookup_shows_the_entry(store: SqliteStore) -> None:
    """``lookup`` gives key, tool, digest, state, outcome and when it was claimed."""
    assert store.lookup("k") is None
    before = time.time()
    store.claim("k", "place", "d1", OWNER, LEASE)
    after = time.time()
    pending = store.lookup("k")
    assert pending is not None
    assert pending[:5] == ("k", "place", "d1", "pending", None)
    assert before - 1 <= pending.claimed_at <= after + 1
    store.finish("k", OWNER, OUTCOME)
    assert pending.owner == OWNER
    assert before + LEASE - 1 <= pending.lease_until <= after + LEASE + 1
    assert store.lookup("k") == StoredWrite("k", "place", "d1", "done", OUTCOME,
                                            pending.claimed_at, OWNER, pending.lease_until)


def test_release_frees_a_pending_key(store: SqliteStore) -> None:
    """A released key is gone, and the next claim owns it again."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    store.release("k", OWNER)
    assert store.lookup("k") is None
    assert store.claim("k", "place", "d2", OWNER, LEASE).state == "run"  # even with other args


def test_release_leaves_a_done_key_alone(store: SqliteStore) -> None:
    """Releasing a finished key keeps its outcome: a late release never undoes a write."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    store.finish("k", OWNER, OUTCOME)
    store.release("k", OWNER)
    stored = store.lookup("k")
    assert stored is not None
    assert (stored.state, stored.outcome) == ("done", OUTCOME)
    assert store.claim("k", "place", "d1", OWNER, LEASE) == Claim("done", OUTCOME)


def test_release_and_finish_of_an_unknown_key_do_nothing(store: SqliteStore) -> None:
    """Neither creates an entry for a key that was never claimed."""
    store.release("nobody", OWNER)
    store.finish("nobody", OWNER, OUTCOME)
    assert store.lookup("nobody") is None
    assert store.claim("nobody", "place", "d1", OWNER, LEASE).state == "run"


@pytest.mark.parametrize("finished", [False, True], ids=["pending", "done"])
def test_forget_drops_a_key_in_any_state(store: SqliteStore, finished: bool) -> None:
    """``forget`` removes a pending or done key and says so; the key can be claimed anew."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    if finished:
        store.finish("k", OWNER, OUTCOME)
    assert store.forget("k") is True
    assert store.lookup("k") is None
    assert store.forget("k") is False
    assert store.claim("k", "place", "d2", OWNER, LEASE).state == "run"


def test_forget_of_an_unknown_key_is_false(store: SqliteStore) -> None:
    """Nothing to forget answers False."""
    assert store.forget("never") is False


# -- Persistence ---------------------------------------------------------------------------------


def test_entries_outlive_the_store_object(tmp_path: pathlib.Path) -> None:
    """A new ``SqliteStore`` over the same file sees done, pending and conflicting keys."""
    path = tmp_path / "writes.sqlite"
    first = SqliteStore(path)
    first.claim("done", "place", "d1", OWNER, LEASE)
    first.finish("done", OWNER, OUTCOME)
    first.claim("pending", "place", "d1", OWNER, LEASE)
    first.claim("freed", "place", "d1", OWNER, LEASE)
    first.release("freed", OWNER)
    first.close()

    second = SqliteStore(str(path))
    assert second.path == str(path)
    assert second.claim("done", "place", "d1", OWNER, LEASE) == Claim("done", OUTCOME)
    assert second.claim("done", "place", "d9", OWNER, LEASE).state == "conflict"
    assert second.claim("pending", "place", "d1", OTHER, LEASE).state == "pending"
    assert second.claim("freed", "place", "d1", OWNER, LEASE).state == "run"
    second.close()


def test_two_open_stores_on_one_file_see_each_other(tmp_path: pathlib.Path) -> None:
    """Two stores open at once on one file (two processes' worth) share every key."""
    path = tmp_path / "writes.sqlite"
    left, right = SqliteStore(path), SqliteStore(path)
    assert left.claim("k", "place", "d1", OWNER, LEASE).state == "run"
    assert right.claim("k", "place", "d1", OTHER, LEASE).state == "pending"
    left.finish("k", OWNER, OUTCOME)
    assert right.claim("k", "place", "d1", OWNER, LEASE) == Claim("done", OUTCOME)
    assert right.forget("k")
    assert left.lookup("k") is None
    left.close()
    right.close()


def test_memory_stores_are_separate() -> None:
    """Each ``":memory:"`` store is its own: a key claimed in one is new in another."""
    one, other = SqliteStore(), SqliteStore(":memory:")
    assert one.claim("k", "place", "d1", OWNER, LEASE).state == "run"
    assert other.claim("k", "place", "d1", OWNER, LEASE).state == "run"
    one.close()
    other.close()


# -- What an outcome comes back as ---------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)  # no lone surrogates
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10)


@given(value=JSON, ok=st.booleans())
def test_json_outcomes_come_back_exactly(value: Any, ok: bool) -> None:
    """Any JSON value, stored as an outcome, is what ``claim`` and ``lookup`` answer later."""
    store = SqliteStore()
    outcome = {"ok": ok, "value": value, "error": "" if ok else "raised:ValueError"}
    store.claim("k", "place", "d1", OWNER, LEASE)
    store.finish("k", OWNER, outcome)
    assert store.claim("k", "place", "d1", OWNER, LEASE) == Claim("done", outcome)
    stored = store.lookup("k")
    assert stored is not None
    assert stored.outcome == outcome
    store.close()


class Sku:
    def __repr__(self) -> str:
        return "Sku('A-1')"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [
    pytest.param({1, 2}, id="set"),
    pytest.param(b"\x00raw", id="bytes"),
    pytest.param(Sku(), id="object"),
    pytest.param(3 + 4j, id="complex"),
    pytest.param((1, 2), id="tuple"),
    pytest.param({(1, 2): "x"}, id="tuple-dict-key"),
    pytest.param({1: "a", "1": "b"}, id="colliding-keys"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(float("inf"), id="inf"),
    pytest.param(10**5000, id="int-too-long-to-print"),
    pytest.param(nested(101), id="nested-101"),
    pytest.param(nested(10**5), id="nested-1e5"),
    pytest.param(type("Text", (str,), {})("x"), id="str-subclass"),
    pytest.param(type("Row", (dict,), {})(a=1), id="dict-subclass"),
    pytest.param(True.__class__, id="a-class"),
])
def test_an_outcome_that_would_not_come_back_exactly_is_refused(store: SqliteStore,
                                                                 value: Any) -> None:
    """``finish`` refuses (``ValueError``) what JSON would hand back as something else, and the
    key stays as it was: the gate leaves it unknown rather than replay a changed value."""
    store.claim("k", "place", "d1", OWNER, LEASE)
    with pytest.raises(ValueError, match="not storable exactly"):
        store.finish("k", OWNER, {"ok": True, "value": {"kept": 1, "odd": value}, "error": ""})
    with pytest.raises(ValueError, match="not storable exactly"):
        encode_outcome({"ok": True, "value": value, "error": ""})
    stored = store.lookup("k")
    assert stored is not None
    assert (stored.state, stored.outcome) == ("pending", None)


@pytest.mark.parametrize("value", [
    pytest.param(2**70, id="huge-int"),
    pytest.param(-(10**4000), id="long-int"),
    pytest.param(-0.0, id="negative-zero"),
    pytest.param(nested(90), id="nested-90"),
    pytest.param("\u2028\x00\U0001f600", id="odd-text"),
])
def test_an_outcome_of_exact_json_values_comes_back_with_its_types(store: SqliteStore,
                                                                    value: Any) -> None:
    """What JSON can hold comes back as it went in, down to the type and sign of each number."""
    outcome = {"ok": True, "value": value, "error": ""}
    store.claim("k", "place", "d1", OWNER, LEASE)
    assert store.finish("k", OWNER, outcome)
    stored = store.lookup("k")
    assert stored is not None
    assert repr(stored.outcome) == repr(outcome)


def test_a_file_from_before_leases_is_read_and_its_pending_keys_are_unknown(
        tmp_path: pathlib.Path) -> None:
    """A store file written before claims had owners opens; its done keys replay, and a key it
    left pending (its owner unknowable) reads unknown: never run again on a guess."""
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE agtool_writes (key TEXT PRIMARY KEY, tool TEXT NOT NULL,"
                " args_digest TEXT NOT NULL, state TEXT NOT NULL, outcome BLOB,"
                " claimed_at REAL NOT NULL)")
    old.execute("INSERT INTO agtool_writes VALUES ('done', 'place', 'd1', 'done', ?, 1.0)",
                (json.dumps(OUTCOME),))
    old.execute("INSERT INTO agtool_writes VALUES ('left', 'place', 'd1', 'pending', NULL, 1.0)")
    old.commit()
    old.close()
    store = SqliteStore(path)
    assert store.claim("done", "place", "d1", OWNER, LEASE) == Claim("done", OUTCOME)
    assert store.claim("left", "place", "d1", OWNER, LEASE) == Claim("unknown", None)
    assert [(entry.key, entry.state) for entry in store.pending()] == [("left", "unknown")]
    store.close()


# -- Atomic claims -------------------------------------------------------------------------------


def claim_together(stores: list[SqliteStore], key: str) -> list[str]:
    """Every store claims ``key`` from its own thread at once; the states they were answered."""
    return race(len(stores),
                lambda i: stores[i].claim(key, "place", "d1", new_owner(), LEASE).state)


def test_claim_from_many_threads_gives_exactly_one_run(store: SqliteStore) -> None:
    """Sixteen threads racing for each of several keys on one store: one ``run`` per key."""
    for key in ("k1", "k2", "k3"):
        states = claim_together([store] * 16, key)
        assert sorted(states) == ["pending"] * 15 + ["run"]


def test_claim_from_many_connections_gives_exactly_one_run(tmp_path: pathlib.Path) -> None:
    """Eight stores (eight connections) on one file racing for each key: one ``run`` per key."""
    path = tmp_path / "writes.sqlite"
    SqliteStore(path).close()
    stores = [SqliteStore(path) for _ in range(8)]
    for key in ("k1", "k2", "k3"):
        states = claim_together(stores, key)
        assert sorted(states) == ["pending"] * 7 + ["run"]
    for opened in stores:
        opened.close()


def test_opening_a_new_file_waits_for_another_writer(tmp_path: pathlib.Path) -> None:
    """A store opened while another connection holds the new file's write lock (as a second
    process does while it creates the store) waits for ``busy_timeout`` instead of failing."""
    path = tmp_path / "writes.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE IF NOT EXISTS agtool_writes (key TEXT PRIMARY KEY, tool TEXT,"
                  " args_digest TEXT, state TEXT, outcome BLOB, claimed_at REAL)")
    releaser = threading.Timer(0.2, lambda: other.execute("COMMIT"))
    releaser.start()
    try:
        opened = SqliteStore(path, busy_timeout=5.0)
        assert opened.claim("k", "place", "d1", OWNER, LEASE).state == "run"
        opened.close()
    finally:
        releaser.join()
        other.close()


def test_a_file_locked_past_the_busy_timeout_is_an_error_at_once(tmp_path: pathlib.Path) -> None:
    """Opening a store on a new file another writer holds longer than ``busy_timeout`` raises
    ``sqlite3.OperationalError`` (a configuration problem, met when the gate is made)."""
    path = tmp_path / "held.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError):
            SqliteStore(path, busy_timeout=0.05)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


class ReleasedInBetween(SqliteStore):
    """A store whose first read after a refused insert finds the key gone (another caller
    released it in between), as can happen between two processes."""

    def __init__(self) -> None:
        super().__init__()
        self.raced = False

    def _row(self, key: str) -> StoredWrite | None:
        if not self.raced:
            self.raced = True
            self.release(key, OWNER)
            return None
        return super()._row(key)


def test_a_key_released_between_insert_and_read_is_claimed_again() -> None:
    """The claim that loses a race with a release tries again and owns the key."""
    store = ReleasedInBetween()
    assert store.claim("k", "place", "d1", OWNER, LEASE).state == "run"
    assert store.claim("k", "place", "d1", OWNER, LEASE).state == "run"
    assert store.raced
