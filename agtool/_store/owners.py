"""Whose claim a key is, and whether that owner still runs."""

from __future__ import annotations

import os
import secrets
import socket
import threading

from .base import CONFLICT, DONE, PENDING, RUN, UNKNOWN, Claim, StoredWrite

__all__ = ["ABANDONED", "abandoned", "as_seen", "claim_of", "may_take_over", "new_owner",
           "orphan", "owner_alive"]

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


def as_seen(stored: StoredWrite, now: float) -> StoredWrite:
    """A pending claim whose owner is gone reads as what it is: unknown."""
    if stored.state == PENDING and abandoned(stored.owner, stored.key, stored.lease_until, now):
        return stored._replace(state=UNKNOWN)
    return stored
