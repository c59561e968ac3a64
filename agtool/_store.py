"""Where write tools' outcomes are kept, by idempotency key.

The gate claims a key before a write body runs and stores the outcome after,
so a repeat of the key, from a retry, another thread, another process or a
restarted one, gets the first outcome back instead of a second write.

A key is in one of three states. ``pending``: claimed by an owner, under a
lease, while its body runs. ``done``: its outcome is kept. ``unknown``: a
body started and nobody knows what it came to (it was interrupted, its
outcome could not be stored, or its owner died or overran its lease). A
store never runs an unknown key again by itself: the gate reconciles it
when the contract says how, and otherwise an operator resolves or forgets
it (``pending()``, ``resolve``, ``forget``; ``agtool writes``).

``WriteStore`` is the whole interface; ``SqliteStore`` is the embedded
default and ``PostgresStore`` the shared one for agents on several machines.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import sqlite3
import threading
import time
from typing import Any, NamedTuple, Protocol

__all__ = [
    "CONFLICT",
    "DONE",
    "PENDING",
    "RUN",
    "UNKNOWN",
    "Claim",
    "SqliteStore",
    "StoredWrite",
    "WriteStore",
    "decode_outcome",
    "encode_outcome",
    "new_owner",
    "open_store",
    "owner_alive",
]

#: ``Claim.state``: the caller now owns the key and must run the body, then settle it.
RUN = "run"
#: ``Claim.state`` and ``StoredWrite.state``: the outcome is kept; ``Claim.outcome`` is it.
DONE = "done"
#: ``Claim.state`` and ``StoredWrite.state``: a live owner holds the key and has not finished.
PENDING = "pending"
#: ``Claim.state``: the key was claimed with another tool or other arguments.
CONFLICT = "conflict"
#: ``Claim.state`` and ``StoredWrite.state``: a body started and its outcome is not known.
UNKNOWN = "unknown"


class Claim(NamedTuple):
    """The answer to ``WriteStore.claim``: a state, and the stored outcome when ``DONE``."""

    state: str
    outcome: dict[str, Any] | None = None


class StoredWrite(NamedTuple):
    """One key as the store holds it."""

    key: str
    tool: str
    args_digest: str
    state: str  #: ``"pending"``, ``"done"`` or ``"unknown"`` (an abandoned claim reads unknown)
    outcome: dict[str, Any] | None  #: the envelope the write answered, once done
    claimed_at: float  #: seconds since the epoch
    owner: str  #: who claimed it, as ``new_owner`` names it
    lease_until: float  #: seconds since the epoch; a pending claim past it is abandoned


class WriteStore(Protocol):
    """What the gate needs from a store of write outcomes.

    Every transition is atomic across every caller sharing the store: of
    callers racing to claim a new key, or to take over an unknown one,
    exactly one wins. The owner-taking methods change a key only while that
    owner still holds it pending, and answer whether they did.
    """

    def claim(self, key: str, tool: str, args_digest: str, owner: str, lease: float) -> Claim:
        """Own a new ``key`` for ``lease`` seconds (``RUN``), or say what it is.

        ``DONE``, ``PENDING``, ``UNKNOWN`` (also for a pending claim whose lease
        ran out or whose owner died: it is turned unknown) or ``CONFLICT``.
        """
        ...

    def take_over(self, key: str, owner: str, lease: float) -> bool:
        """Own an unknown (or abandoned) key again, to reconcile it; one racer wins."""
        ...

    def finish(self, key: str, owner: str, outcome: dict[str, Any]) -> bool:
        """Keep ``outcome`` (an envelope of exact JSON values) as the answer to every repeat."""
        ...

    def release(self, key: str, owner: str) -> bool:
        """Drop an owned claim whose body is known not to have had any effect."""
        ...

    def mark_unknown(self, key: str, owner: str) -> bool:
        """Mark an owned claim as having an outcome nobody knows."""
        ...

    def lookup(self, key: str) -> StoredWrite | None:
        """The key's entry, or ``None`` if it was never claimed (or was released or forgotten)."""
        ...

    def pending(self) -> list[StoredWrite]:
        """Every key that is pending or unknown, oldest claim first."""
        ...

    def resolve(self, key: str, outcome: dict[str, Any]) -> bool:
        """An operator's answer for a pending or unknown key: it is done with ``outcome``."""
        ...

    def forget(self, key: str) -> bool:
        """Drop ``key`` whatever its state, for an operator who checked the world by hand."""
        ...

    def use_once(self, token_id: str, expires_at: float) -> bool:
        """``True`` the first time ``token_id`` is seen, ``False`` ever after (until it expires)."""
        ...

    def close(self) -> None:
        """Let go of the store's connections."""
        ...


# -- shared by every store -------------------------------------------------------------------

_HOST = socket.gethostname()


def new_owner() -> str:
    """A name for one claim: its host and process, and a token of its own."""
    return f"{_HOST}:{os.getpid()}:{secrets.token_hex(8)}"


#: Claims of this process that it let go of without settling them, by (owner, key):
#: the store failed to mark them unknown or to release them. Their owner lives on, but
#: nothing runs under them any more, so they are abandoned.
_ORPHANED: set[tuple[str, str]] = set()
_ORPHANED_LOCK = threading.Lock()


def orphan(owner: str, key: str) -> None:
    """Say that this process will do nothing more under its claim of ``key``."""
    with _ORPHANED_LOCK:
        _ORPHANED.add((owner, key))


def owner_alive(owner: str) -> bool | None:
    """Whether ``owner``'s process still runs: known only on its own host (else ``None``)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != _HOST or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process: alive
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    # A process killed but not yet reaped by its parent still answers kill(pid, 0).
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def abandoned(owner: str, key: str, lease_until: float, now: float) -> bool:
    """Whether a pending claim's owner is gone, as far as can be known from here.

    On the owner's own host its process decides, never the clock: a dead process
    has abandoned it, a live one has not (a body may run past any lease), unless
    it is this very process and it said so (``orphan``). On another host, where
    nothing can be seen, the lease decides.
    """
    alive = owner_alive(owner)
    if alive is None:
        return now >= lease_until
    if not alive:
        return True
    with _ORPHANED_LOCK:
        return (owner, key) in _ORPHANED


#: ``claim_of``'s answer for a pending claim whose owner is gone: the store turns the row
#: unknown (if it is still as read) and answers ``UNKNOWN``; never a state a caller sees.
ABANDONED = "abandoned"


def claim_of(stored: StoredWrite, tool: str, args_digest: str, owner: str,
             now: float) -> Claim:
    """What a claim finding ``stored`` under its key answers; the same for every store."""
    if stored.tool != tool or stored.args_digest != args_digest:
        return Claim(CONFLICT)
    if stored.state == DONE:
        return Claim(DONE, stored.outcome)
    if stored.state == UNKNOWN:
        return Claim(UNKNOWN)
    if stored.owner == owner:
        return Claim(RUN)  # this very claim's insert, landed before a retry of it
    if abandoned(stored.owner, stored.key, stored.lease_until, now):
        return Claim(ABANDONED)
    return Claim(PENDING)


def may_take_over(stored: StoredWrite, now: float) -> bool:
    """Whether ``stored`` is a key to take over: unknown, or pending by an owner who is gone."""
    if stored.state == DONE:
        return False
    return stored.state == UNKNOWN or abandoned(stored.owner, stored.key, stored.lease_until,
                                                now)


#: Deeper outcomes are refused: JSON libraries, and Python, recurse to read them.
MAX_DEPTH = 100
#: Python writes at most 4300 decimal digits of an int (about 14,280 bits).
_MAX_INT_BITS = 14_000


def encode_outcome(outcome: dict[str, Any]) -> str:
    """``outcome`` as JSON text that reads back exactly, or ``ValueError`` saying why not.

    Only exact JSON values are kept: ``dict`` with ``str`` keys, ``list``,
    ``str``, ``int``, finite ``float``, ``bool`` and ``None``, and no
    subclasses. A tuple would come back a list, an int key a str, and two
    keys that JSON spells alike would merge: such an outcome is refused
    rather than replayed as something else.
    """
    _check_exact(outcome, 0)
    return json.dumps(outcome, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def decode_outcome(text: str | bytes) -> dict[str, Any]:
    """What ``encode_outcome`` wrote."""
    value = json.loads(text)
    if type(value) is not dict:
        raise ValueError("a stored outcome is not a JSON object")
    return value


def _check_exact(value: object, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _unstorable(f"nested deeper than {MAX_DEPTH}")
    kind = type(value)
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _unstorable(f"a key of type {type(key).__name__}")
            _check_exact(item, depth + 1)
    elif kind is list:
        for item in value:  # type: ignore[attr-defined]
            _check_exact(item, depth + 1)
    elif kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _unstorable("a float that is not finite")
    elif kind is int:
        if value.bit_length() > _MAX_INT_BITS:  # type: ignore[attr-defined]
            raise _unstorable("an int too long to write")
    elif kind is str:
        try:
            value.encode("utf-8")  # type: ignore[attr-defined]
        except UnicodeEncodeError:
            raise _unstorable("a str with a lone surrogate") from None
    elif value is not None and kind is not bool:
        raise _unstorable(f"a value of type {kind.__name__}")


def open_store(where: str | os.PathLike[str]) -> WriteStore:
    """The store at ``where``: a ``postgresql://`` URL, else the path of a SQLite file."""
    text = os.fspath(where)
    if text.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresStore  # psycopg only for those who use it

        return PostgresStore(text)
    return SqliteStore(text)


def _unstorable(why: str) -> ValueError:
    return ValueError(f"outcome not storable exactly: {why}")


# -- SQLite ----------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agtool_writes (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    claimed_at REAL NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    lease_until REAL NOT NULL DEFAULT 0
)
"""
_TOKENS = """
CREATE TABLE IF NOT EXISTS agtool_used_tokens (
    token_id TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
)
"""


class SqliteStore:
    """A ``WriteStore`` in one SQLite file (``":memory:"`` lasts as long as the object).

    Threads share one connection behind a lock; processes open their own, and
    each transition is one SQL statement, so SQLite's file locking makes it
    atomic between them. Leases are judged by this machine's clock.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *,
                 busy_timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None,
                                   check_same_thread=False)
        with self._lock:
            if self.path != ":memory:":
                self._use_wal(busy_timeout)
            self._db.execute(_SCHEMA)
            self._db.execute(_TOKENS)
            self._add_lease_columns()

    def _add_lease_columns(self) -> None:
        # A file written before claims had owners: its pending keys read as abandoned.
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(agtool_writes)")}
        for column, kind in (("owner", "TEXT NOT NULL DEFAULT ''"),
                             ("lease_until", "REAL NOT NULL DEFAULT 0")):
            if column not in columns:
                self._db.execute(f"ALTER TABLE agtool_writes ADD COLUMN {column} {kind}")

    def _use_wal(self, busy_timeout: float) -> None:
        # WAL lets readers in other processes go on while one claims. Switching a
        # new file to it fails at once, not after the busy timeout, while another
        # process holds the file's write lock: wait for that process here.
        deadline = time.monotonic() + busy_timeout
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _run(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._lock:
            return self._db.execute(sql, params).rowcount

    def claim(self, key: str, tool: str, args_digest: str, owner: str, lease: float) -> Claim:
        while True:
            now = time.time()
            if self._run("INSERT OR IGNORE INTO agtool_writes (key, tool, args_digest, state,"
                         " outcome, claimed_at, owner, lease_until)"
                         " VALUES (?, ?, ?, 'pending', NULL, ?, ?, ?)",
                         (key, tool, args_digest, now, owner, now + lease)):
                return Claim(RUN)
            stored = self._row(key)
            if stored is None:
                continue  # released between the insert and the read: try to own it again
            claim = claim_of(stored, tool, args_digest, owner, now)
            if claim.state != ABANDONED:
                return claim
            # Turned unknown only if it is still as read: its owner may have settled it.
            if self._run("UPDATE agtool_writes SET state = 'unknown' WHERE key = ?"
                         " AND owner = ? AND state = 'pending' AND lease_until = ?",
                         (key, stored.owner, stored.lease_until)):
                return Claim(UNKNOWN)

    def take_over(self, key: str, owner: str, lease: float) -> bool:
        stored = self._row(key)
        if stored is None or not may_take_over(stored, time.time()):
            return False
        # Conditional on the row as read: of racers, one changes it, and a claim renewed
        # meanwhile (released and claimed again by the same owner) is not taken.
        return bool(self._run(
            "UPDATE agtool_writes SET state = 'pending', owner = ?, lease_until = ?"
            " WHERE key = ? AND owner = ? AND state = ? AND lease_until = ?",
            (owner, time.time() + lease, key, stored.owner, stored.state,
             stored.lease_until)))

    def finish(self, key: str, owner: str, outcome: dict[str, Any]) -> bool:
        text = encode_outcome(outcome)
        # Also over its own claim turned unknown when its lease ran out: nobody took it over,
        # and this is the outcome it was waiting for.
        return bool(self._run("UPDATE agtool_writes SET state = 'done', outcome = ?"
                              " WHERE key = ? AND owner = ? AND state != 'done'",
                              (text, key, owner)))

    def release(self, key: str, owner: str) -> bool:
        return bool(self._run("DELETE FROM agtool_writes WHERE key = ? AND owner = ?"
                              " AND state = 'pending'", (key, owner)))

    def mark_unknown(self, key: str, owner: str) -> bool:
        return bool(self._run("UPDATE agtool_writes SET state = 'unknown'"
                              " WHERE key = ? AND owner = ? AND state = 'pending'",
                              (key, owner)))

    def lookup(self, key: str) -> StoredWrite | None:
        stored = self._row(key)
        return None if stored is None else _as_seen(stored, time.time())

    def _row(self, key: str) -> StoredWrite | None:
        with self._lock:
            row = self._db.execute(
                "SELECT key, tool, args_digest, state, outcome, claimed_at, owner, lease_until"
                " FROM agtool_writes WHERE key = ?", (key,)).fetchone()
        return None if row is None else _stored(row)

    def pending(self) -> list[StoredWrite]:
        with self._lock:
            rows = self._db.execute(
                "SELECT key, tool, args_digest, state, outcome, claimed_at, owner, lease_until"
                " FROM agtool_writes WHERE state != 'done' ORDER BY claimed_at, key").fetchall()
        now = time.time()
        return [_as_seen(_stored(row), now) for row in rows]

    def resolve(self, key: str, outcome: dict[str, Any]) -> bool:
        text = encode_outcome(outcome)
        return bool(self._run("UPDATE agtool_writes SET state = 'done', outcome = ?"
                              " WHERE key = ? AND state != 'done'", (text, key)))

    def forget(self, key: str) -> bool:
        return bool(self._run("DELETE FROM agtool_writes WHERE key = ?", (key,)))

    def use_once(self, token_id: str, expires_at: float) -> bool:
        with self._lock:
            self._db.execute("DELETE FROM agtool_used_tokens WHERE expires_at < ?",
                             (time.time(),))
            return bool(self._db.execute(
                "INSERT OR IGNORE INTO agtool_used_tokens (token_id, expires_at) VALUES (?, ?)",
                (token_id, expires_at)).rowcount)

    def close(self) -> None:
        """Close the connection; the file keeps every outcome."""
        with self._lock:
            self._db.close()


def _stored(row: tuple[Any, ...]) -> StoredWrite:
    outcome = None if row[4] is None else decode_outcome(row[4])
    return StoredWrite(row[0], row[1], row[2], row[3], outcome, row[5], row[6], row[7])


def _as_seen(stored: StoredWrite, now: float) -> StoredWrite:
    """A pending claim whose owner is gone reads as what it is: unknown."""
    if stored.state == PENDING and abandoned(stored.owner, stored.key, stored.lease_until, now):
        return stored._replace(state=UNKNOWN)
    return stored
