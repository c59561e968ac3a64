"""``SqliteStore``: the embedded default, one SQLite file."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

from .base import (
    DONE,
    PENDING,
    RUN,
    UNKNOWN,
    Claim,
    StoredWrite,
    encode_outcome,
    listed_row,
    stored_write,
)
from .owners import ABANDONED, as_seen, claim_of, landed, may_take_over

__all__ = ["SqliteStore"]

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
_MARKS = """
CREATE TABLE IF NOT EXISTS agtool_marks (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
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
            self._db.execute(_MARKS)
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
        if landed(stored, owner, PENDING):
            return True  # this owner's own take-over, landed before a retry of it
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
                              (text, key, owner))) or landed(self._row(key), owner, DONE,
                                                             outcome)

    def release(self, key: str, owner: str) -> bool:
        return bool(self._run("DELETE FROM agtool_writes WHERE key = ? AND owner = ?"
                              " AND state = 'pending'", (key, owner))) or landed(
            self._row(key), owner, None)

    def mark_unknown(self, key: str, owner: str) -> bool:
        return bool(self._run("UPDATE agtool_writes SET state = 'unknown'"
                              " WHERE key = ? AND owner = ? AND state = 'pending'",
                              (key, owner))) or landed(self._row(key), owner, UNKNOWN)

    def lookup(self, key: str) -> StoredWrite | None:
        stored = self._row(key)
        return None if stored is None else as_seen(stored, time.time())

    def _row(self, key: str) -> StoredWrite | None:
        with self._lock:
            row = self._db.execute(
                "SELECT key, tool, args_digest, state, outcome, claimed_at, owner, lease_until"
                " FROM agtool_writes WHERE key = ?", (key,)).fetchone()
        return None if row is None else stored_write(row)

    def pending(self) -> list[StoredWrite]:
        with self._lock:
            rows = self._db.execute(
                "SELECT key, tool, args_digest, state, outcome, claimed_at, owner, lease_until"
                " FROM agtool_writes WHERE state != 'done' ORDER BY claimed_at, key").fetchall()
        now = time.time()
        return [as_seen(stored_write(row), now) for row in rows]

    def listing(self) -> list[tuple[str, StoredWrite | str]]:
        """Every open key as seen, and every row that cannot be read, for an operator."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, tool, args_digest, state, outcome, claimed_at, owner, lease_until"
                " FROM agtool_writes ORDER BY rowid").fetchall()
        now = time.time()
        listed = [entry for entry in map(listed_row, rows) if entry is not None]
        return [(key, as_seen(row, now) if isinstance(row, StoredWrite) else row)
                for key, row in listed]

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

    def marks(self) -> dict[str, str]:
        """What the store records about itself: which secrets made its keys (``_keys``)."""
        with self._lock:
            return dict(self._db.execute("SELECT name, value FROM agtool_marks").fetchall())

    def add_mark(self, name: str, value: str) -> None:
        """Record ``name`` (a mark already there is kept as it was)."""
        self._run("INSERT OR IGNORE INTO agtool_marks (name, value) VALUES (?, ?)",
                  (name, value))

    def close(self) -> None:
        """Close the connection; the file keeps every outcome."""
        with self._lock:
            self._db.close()
