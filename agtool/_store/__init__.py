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

import os

from .base import (
    CONFLICT,
    DONE,
    PENDING,
    RUN,
    UNKNOWN,
    Claim,
    StoredWrite,
    WriteStore,
    decode_outcome,
    encode_outcome,
)
from .owners import new_owner, orphan, owner_alive
from .sqlite import SqliteStore

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
    "orphan",
    "owner_alive",
]



def open_store(where: str | os.PathLike[str]) -> WriteStore:
    """The store at ``where``: a ``postgresql://`` URL, else the path of a SQLite file."""
    text = os.fspath(where)
    if text.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore  # psycopg only for those who use it

        return PostgresStore(text)
    return SqliteStore(text)
