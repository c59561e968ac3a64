"""Where write tools' outcomes are kept, by idempotency key.

The gate claims a key before a write body runs and stores the outcome after,
so a repeat of the key, from a retry, another thread, another process or a
restarted one, gets the first outcome back instead of a second write.
``WriteStore`` is the whole interface; ``SqliteStore`` is the default, and a
shared server store (for agents spread over several machines) only needs the
same five methods with the same atomic ``claim``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any, NamedTuple, Protocol

__all__ = [
    "CONFLICT",
    "DONE",
    "PENDING",
    "RUN",
    "Claim",
    "SqliteStore",
    "StoredWrite",
    "WriteStore",
]

#: ``Claim.state``: the caller now owns the key and must run the body, then finish or release.
RUN = "run"
#: ``Claim.state``: the key was done before; ``Claim.outcome`` is what it answered.
DONE = "done"
#: ``Claim.state``: another caller owns the key and has not finished (or died while owning it).
PENDING = "pending"
#: ``Claim.state``: the key was claimed with other arguments.
CONFLICT = "conflict"


class Claim(NamedTuple):
    """The answer to ``WriteStore.claim``: a state, and the stored outcome when ``DONE``."""

    state: str
    outcome: dict[str, Any] | None = None


class StoredWrite(NamedTuple):
    """One key as the store holds it."""

    key: str
    tool: str
    args_digest: str
    state: str  #: ``"pending"`` or ``"done"``
    outcome: dict[str, Any] | None  #: the envelope the write answered, once done
    claimed_at: float  #: seconds since the epoch


class WriteStore(Protocol):
    """What the gate needs from a store of write outcomes.

    ``claim`` must be atomic across every caller sharing the store: of callers
    racing for a new key exactly one gets ``RUN``.
    """

    def claim(self, key: str, tool: str, args_digest: str) -> Claim:
        """Own ``key`` (``RUN``), or say why not: ``DONE``, ``PENDING`` or ``CONFLICT``."""
        ...

    def finish(self, key: str, outcome: dict[str, Any]) -> None:
        """Keep ``outcome`` (a ``call_tool`` envelope) as the answer to every repeat of ``key``."""
        ...

    def release(self, key: str) -> None:
        """Give up a claimed key that did not finish, so that a retry may run the body again."""
        ...

    def lookup(self, key: str) -> StoredWrite | None:
        """The key's entry, or ``None`` if it was never claimed (or was released)."""
        ...

    def forget(self, key: str) -> bool:
        """Drop ``key`` whatever its state, for an operator who checked the world by hand."""
        ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS agtool_writes (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome BLOB,
    claimed_at REAL NOT NULL
)
"""


class SqliteStore:
    """A ``WriteStore`` in one SQLite file (``":memory:"`` lasts as long as the object).

    Threads share one connection behind a lock; processes open their own and
    SQLite's file locking makes ``claim`` atomic between them. Outcomes are
    stored as JSON: a write should answer JSON values; otherwise a repeat gets
    the JSON form (a tuple comes back a list, a non-str key its ``repr``, any
    other object its ``repr``).
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

    def claim(self, key: str, tool: str, args_digest: str) -> Claim:
        while True:
            with self._lock:
                inserted = self._db.execute(
                    "INSERT OR IGNORE INTO agtool_writes (key, tool, args_digest, state, outcome,"
                    " claimed_at) VALUES (?, ?, ?, 'pending', NULL, ?)",
                    (key, tool, args_digest, time.time())).rowcount
            if inserted:
                return Claim(RUN)
            stored = self.lookup(key)
            if stored is None:
                continue  # released between the insert and the read: try to own it again
            if stored.tool != tool or stored.args_digest != args_digest:
                return Claim(CONFLICT)
            if stored.state == DONE:
                return Claim(DONE, stored.outcome)
            return Claim(PENDING)

    def finish(self, key: str, outcome: dict[str, Any]) -> None:
        blob = json.dumps(_as_json(outcome, 0), default=repr)
        with self._lock:
            self._db.execute("UPDATE agtool_writes SET state = 'done', outcome = ? WHERE key = ?",
                             (blob, key))

    def release(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM agtool_writes WHERE key = ? AND state = 'pending'",
                             (key,))

    def lookup(self, key: str) -> StoredWrite | None:
        with self._lock:
            row = self._db.execute(
                "SELECT key, tool, args_digest, state, outcome, claimed_at FROM agtool_writes"
                " WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        outcome = None if row[4] is None else json.loads(row[4])
        return StoredWrite(row[0], row[1], row[2], row[3], outcome, row[5])

    def forget(self, key: str) -> bool:
        with self._lock:
            return bool(self._db.execute("DELETE FROM agtool_writes WHERE key = ?",
                                         (key,)).rowcount)

    def close(self) -> None:
        """Close the connection; the file keeps every outcome."""
        with self._lock:
            self._db.close()


def _as_json(value: Any, depth: int) -> Any:
    """``value`` with what JSON cannot hold made JSON: lists for tuples, ``repr`` for keys."""
    if depth > _MAX_DEPTH:
        return repr(value)
    if type(value) is int and value.bit_length() > _MAX_INT_BITS:
        return hex(value)  # json.dumps, like repr, refuses an int this long
    if isinstance(value, dict):
        return {key if isinstance(key, (str, int, float, bool)) or key is None else repr(key):
                _as_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(item, depth + 1) for item in value]
    return value


_MAX_DEPTH = 64
#: Python prints at most 4300 decimal digits of an int (about 14,000 bits).
_MAX_INT_BITS = 14_000
