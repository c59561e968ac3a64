"""A ``WriteStore`` in PostgreSQL, for agents on several machines sharing idempotency keys.

The table has the same columns as ``SqliteStore``'s and every transition is
one conditional SQL statement, so the guarantees are the same: of callers
racing to claim a new key (``INSERT ... ON CONFLICT DO NOTHING``) or to take
over an unknown one (``UPDATE ... WHERE owner = <the owner read>``) exactly
one wins, and an owner's ``finish``, ``release`` or ``mark_unknown`` changes
the key only while that owner still holds it (``finish`` also once its own
claim was turned unknown, as long as nobody took it over).

One clock judges every lease: the database's (``clock_timestamp()``). Claim
times, lease ends and the expiry checks are all read from it, so machines
whose clocks disagree never see each other's leases run out early.
``StoredWrite.claimed_at`` and ``lease_until`` are the database's epoch
seconds. Whether an owner's process died is still asked on its own host
(``owner_alive``).

psycopg is imported when a store is made, so agtool imports without it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

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

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

__all__ = ["PostgresStore"]

_T = TypeVar("_T")

#: A plain lowercase name, short enough that the derived names stay under PostgreSQL's 63.
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}\Z")

#: A used approval token is pruned this long after it expired by the database's clock: a
#: gate whose clock runs behind the database's by less than this cannot see a pruned
#: token as still valid, and so cannot accept it twice.
TOKEN_GRACE = 300.0

_NOW = "extract(epoch FROM clock_timestamp())::float8"
_COLUMNS = "key, tool, args_digest, state, outcome, claimed_at, owner, lease_until"


class PostgresStore:
    """A ``WriteStore`` in one PostgreSQL table, shared by every process that opens it.

    ``url`` is a libpq connection string (``postgresql://user@host:port/db``).
    The tables (``table`` and ``<table>_tokens``) are made if missing.
    Threads share a pool of at most ``pool_size`` connections, each in
    autocommit. A connection found broken is replaced and the statement run
    once more; every statement is conditional and names its owner, so one
    that did land before the break is never applied twice, and its repeat
    recognises it as this owner's own and answers what the first would have
    (a claim ``RUN``, a take-over or a finish ``True``).
    Any other failure raises ``psycopg.Error``: the gate turns it into a reason.
    """

    def __init__(self, url: str, *, table: str = "agtool_writes", pool_size: int = 4,
                 connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the dev and CI installs have it
            raise ImportError("PostgresStore needs psycopg 3: pip install 'agtool-gate[postgres]'"
                              ) from exc
        if not isinstance(table, str) or not _TABLE_NAME.match(table):
            raise ValueError(f"table must be a lowercase SQL name of at most 48 characters,"
                             f" not {table!r}")
        if type(pool_size) is not int or pool_size < 1:
            raise ValueError(f"pool_size must be an int of at least 1, not {pool_size!r}")
        self.table = table
        self._psycopg = psycopg
        self._sql = _Statements(table)

        def connect() -> psycopg.Connection[tuple[Any, ...]]:
            return psycopg.connect(url, autocommit=True,
                                   connect_timeout=max(1, round(connect_timeout)))

        self._pool = _Pool(connect, pool_size)
        self._call(self._create_tables)

    def __repr__(self) -> str:
        # Never the url: it may carry a password.
        return f"PostgresStore(table={self.table!r})"

    # -- the protocol ------------------------------------------------------------------------

    def claim(self, key: str, tool: str, args_digest: str, owner: str, lease: float) -> Claim:
        return self._call(lambda db: self._claim(db, key, tool, args_digest, owner, lease))

    def _claim(self, db: psycopg.Connection[Any], key: str, tool: str, args_digest: str,
               owner: str, lease: float) -> Claim:
        while True:
            if db.execute(self._sql.insert, (key, tool, args_digest, owner, lease)).rowcount:
                return Claim(RUN)
            stored, now = self._row(db, key)
            if stored is None:
                continue  # released between the insert and the read: try to own it again
            claim = claim_of(stored, tool, args_digest, owner, now)
            if claim.state != ABANDONED:
                return claim
            if db.execute(self._sql.abandon, (key, stored.owner, stored.lease_until)).rowcount:
                return Claim(UNKNOWN)
            # The owner settled it, or it was forgotten, between the read and the update.

    def take_over(self, key: str, owner: str, lease: float) -> bool:
        def work(db: psycopg.Connection[Any]) -> bool:
            stored, now = self._row(db, key)
            if landed(stored, owner, PENDING):
                return True  # this owner's own take-over, landed before its reply was lost
            if stored is None or not may_take_over(stored, now):
                return False
            # Conditional on what was read: of racers, one changes the row.
            return bool(db.execute(self._sql.take_over, (owner, lease, key, stored.owner,
                                                         stored.state, stored.lease_until)
                                   ).rowcount)

        return self._call(work)

    def finish(self, key: str, owner: str, outcome: dict[str, Any]) -> bool:
        text = encode_outcome(outcome)  # refused before the database is asked anything
        return self._settle(self._sql.finish, (text, key, owner), key, owner, DONE, outcome)

    def release(self, key: str, owner: str) -> bool:
        return self._settle(self._sql.release, (key, owner), key, owner, None)

    def mark_unknown(self, key: str, owner: str) -> bool:
        return self._settle(self._sql.mark_unknown, (key, owner), key, owner, UNKNOWN)

    def lookup(self, key: str) -> StoredWrite | None:
        stored, now = self._call(lambda db: self._row(db, key))
        return None if stored is None else as_seen(stored, now)

    def pending(self) -> list[StoredWrite]:
        rows = self._call(lambda db: db.execute(self._sql.pending).fetchall())
        return [as_seen(stored_write(row), row[-1]) for row in rows]

    def listing(self) -> list[tuple[str, StoredWrite | str]]:
        """Every open key as seen, and every row that cannot be read, for an operator."""
        rows = self._call(lambda db: db.execute(self._sql.every).fetchall())
        listed = [(entry, row[-1]) for row in rows
                  if (entry := listed_row(row[:-1])) is not None]
        return [(key, as_seen(write, now) if isinstance(write, StoredWrite) else write)
                for (key, write), now in listed]

    def resolve(self, key: str, outcome: dict[str, Any]) -> bool:
        text = encode_outcome(outcome)
        return self._changed(self._sql.resolve, (text, key))

    def forget(self, key: str) -> bool:
        return self._changed(self._sql.forget, (key,))

    def use_once(self, token_id: str, expires_at: float) -> bool:
        def work(db: psycopg.Connection[Any]) -> bool:
            db.execute(self._sql.prune_tokens, (TOKEN_GRACE,))
            return bool(db.execute(self._sql.use_token, (token_id, expires_at)).rowcount)

        return self._call(work)

    def marks(self) -> dict[str, str]:
        """What the store records about itself: which secrets made its keys (``_keys``)."""
        rows = self._call(lambda db: db.execute(self._sql.marks).fetchall())
        return dict(rows)

    def add_mark(self, name: str, value: str) -> None:
        """Record ``name`` (a mark already there is kept as it was)."""
        self._changed(self._sql.add_mark, (name, value))

    def close(self) -> None:
        """Close every connection; the database keeps every outcome."""
        self._pool.close()

    # -- plumbing ----------------------------------------------------------------------------

    def _create_tables(self, db: psycopg.Connection[Any]) -> None:
        # CREATE ... IF NOT EXISTS is not safe against itself: two processes making the
        # table at once can both pass the check, and one fails. A transaction-scoped
        # advisory lock on the table's name puts them in line.
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            for statement in self._sql.schema:
                db.execute(statement)

    def _row(self, db: psycopg.Connection[Any], key: str) -> tuple[StoredWrite | None, float]:
        """The key's row as stored (not as seen), and the database's clock when it was read."""
        row = db.execute(self._sql.select, (key,)).fetchone()
        if row is None:
            return None, 0.0
        return stored_write(row), row[-1]

    def _settle(self, statement: sql.Composed, params: tuple[Any, ...], key: str, owner: str,
                state: str | None, outcome: dict[str, Any] | None = None) -> bool:
        """An owner's transition; on a retry after a lost reply, whether the first landed."""
        def work(db: psycopg.Connection[Any]) -> bool:
            if db.execute(statement, params).rowcount:
                return True
            return landed(self._row(db, key)[0], owner, state, outcome)

        return self._call(work)

    def _changed(self, statement: sql.Composed, params: tuple[Any, ...]) -> bool:
        return bool(self._call(lambda db: db.execute(statement, params).rowcount))

    def _call(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``work`` on a pooled connection; on one found broken, once more on a new one."""
        db = self._pool.take()
        try:
            try:
                return work(db)
            except self._psycopg.OperationalError:
                if not db.broken:
                    raise
                db.close()
                db = self._pool.connect()
                return work(db)
        finally:
            self._pool.give_back(db)


class _Statements:
    """The store's SQL for one table, composed once."""

    def __init__(self, table: str) -> None:
        from psycopg import sql

        names = {"t": sql.Identifier(table), "tokens": sql.Identifier(f"{table}_tokens"),
                 "marks": sql.Identifier(f"{table}_marks"),
                 "open": sql.Identifier(f"{table}_open"), "now": sql.SQL(_NOW),
                 "columns": sql.SQL(_COLUMNS)}

        def q(text: str) -> sql.Composed:
            return sql.SQL(text).format(**names)

        self.schema = [
            q("CREATE TABLE IF NOT EXISTS {t} ("
              " key TEXT PRIMARY KEY, tool TEXT NOT NULL, args_digest TEXT NOT NULL,"
              " state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'unknown')),"
              " outcome TEXT, claimed_at DOUBLE PRECISION NOT NULL, owner TEXT NOT NULL,"
              " lease_until DOUBLE PRECISION NOT NULL)"),
            q("CREATE INDEX IF NOT EXISTS {open} ON {t} (claimed_at, key) WHERE state <> 'done'"),
            q("CREATE TABLE IF NOT EXISTS {tokens} ("
              " token_id TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL)"),
            q("CREATE TABLE IF NOT EXISTS {marks} (name TEXT PRIMARY KEY, value TEXT NOT NULL)"),
        ]
        self.marks = q("SELECT name, value FROM {marks}")
        self.add_mark = q("INSERT INTO {marks} (name, value) VALUES (%s, %s)"
                          " ON CONFLICT (name) DO NOTHING")
        self.insert = q("INSERT INTO {t} ({columns})"
                        " SELECT %s, %s, %s, 'pending', NULL, now.t, %s, now.t + %s"
                        " FROM (SELECT {now} AS t) AS now ON CONFLICT (key) DO NOTHING")
        self.select = q("SELECT {columns}, {now} FROM {t} WHERE key = %s")
        self.every = q("SELECT {columns}, {now} FROM {t} ORDER BY claimed_at, key")
        self.pending = q("SELECT {columns}, {now} FROM {t} WHERE state <> 'done'"
                         " ORDER BY claimed_at, key")
        # The lease end read is part of the condition: a claim renewed meanwhile is not
        # abandoned, even by the same owner.
        self.abandon = q("UPDATE {t} SET state = 'unknown' WHERE key = %s AND owner = %s"
                         " AND state = 'pending' AND lease_until = %s")
        self.take_over = q("UPDATE {t} SET state = 'pending', owner = %s, lease_until = {now} + %s"
                           " WHERE key = %s AND owner = %s AND state = %s AND lease_until = %s")
        # Also over the owner's own claim turned unknown when its lease ran out: nobody took
        # it over, and this is the outcome it was waiting for (as SqliteStore does).
        self.finish = q("UPDATE {t} SET state = 'done', outcome = %s"
                        " WHERE key = %s AND owner = %s AND state <> 'done'")
        self.release = q("DELETE FROM {t} WHERE key = %s AND owner = %s AND state = 'pending'")
        self.mark_unknown = q("UPDATE {t} SET state = 'unknown'"
                              " WHERE key = %s AND owner = %s AND state = 'pending'")
        self.resolve = q("UPDATE {t} SET state = 'done', outcome = %s"
                         " WHERE key = %s AND state <> 'done'")
        self.forget = q("DELETE FROM {t} WHERE key = %s")
        self.prune_tokens = q("DELETE FROM {tokens} WHERE expires_at < {now} - %s")
        self.use_token = q("INSERT INTO {tokens} (token_id, expires_at) VALUES (%s, %s)"
                           " ON CONFLICT (token_id) DO NOTHING")


class _Pool:
    """At most ``size`` connections, each lent to one caller at a time."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], size: int) -> None:
        self.connect = connect
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._closed = False

    def take(self) -> psycopg.Connection[Any]:
        self._slots.acquire()
        try:
            with self._lock:
                if self._closed:
                    raise ValueError("the store is closed")
                idle = self._idle.pop() if self._idle else None
            return idle if idle is not None else self.connect()
        except BaseException:
            self._slots.release()
            raise

    def give_back(self, db: psycopg.Connection[Any]) -> None:
        with self._lock:
            keep = not self._closed and not db.closed and not db.broken
            if keep:
                self._idle.append(db)
        if not keep:
            db.close()
        self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for db in idle:
            db.close()

