"""Whose claim a key is, and whether that owner still runs.

An owner names one claim of one process: the process's random token (made
anew in every process, a forked child included, so a restarted process never
reuses one), the claim's own token, and where the process can be found: the
kernel's boot id, its PID namespace, its PID in it and its start time. A host
name and a PID alone are not an identity: replicas sharing a hostname each in
their own PID namespace have the same PIDs, and a container restarted as
PID 1 follows a crashed PID 1.

Liveness is decided from what this process can see, never guessed:

- an owner of this very process is alive (unless it said it gave up, ``orphan``);
- an owner in this boot and this PID namespace is alive while a process of its
  PID with its start time runs (a zombie is dead); this process's own PID under
  another token is a predecessor (an ``exec`` or a PID 1 restarted): dead;
- anywhere else (another machine, another PID namespace, no ``/proc``, an owner
  named before these fields existed) nothing can be seen: the lease decides.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from typing import Any

from .base import CONFLICT, DONE, PENDING, RUN, UNKNOWN, Claim, StoredWrite, encode_outcome

__all__ = ["ABANDONED", "Owner", "abandoned", "as_seen", "claim_of", "landed", "may_take_over",
           "new_owner", "orphan", "owner_alive", "parse_owner"]

_HOST = socket.gethostname()
#: An owner's fields after the host, joined by ":" (a host name may itself hold one).
_FIELDS = 6


class Owner:
    """One owner name read back: ``None`` fields were not readable where it was made."""

    __slots__ = ("boot", "claim", "host", "pid", "pid_ns", "process", "start")

    def __init__(self, host: str, pid: int, process: str, claim: str, boot: str,
                 pid_ns: str, start: str) -> None:
        self.host = host
        self.pid = pid
        self.process = process  #: the random token of the claiming process
        self.claim = claim  #: the random token of the claim itself
        self.boot = boot  #: the kernel's boot id, ``""`` if unreadable
        self.pid_ns = pid_ns  #: the inode of the PID namespace, ``""`` if unreadable
        self.start = start  #: the process's start time in clock ticks since boot, or ``""``


class _Self:
    """This process's identity: read once per process, and again in a forked child."""

    __slots__ = ("boot", "pid", "pid_ns", "start", "token")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.token = secrets.token_hex(8)
        self.boot = _read_text("/proc/sys/kernel/random/boot_id")
        self.pid_ns = _pid_namespace("/proc/self/ns/pid")
        self.start = start_time(self.pid) if self.boot else ""


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii") as source:
            return source.read().strip()
    except (OSError, ValueError):
        return ""


def _pid_namespace(path: str) -> str:
    try:
        return str(os.stat(path).st_ino)
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name; ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except FileNotFoundError:
        return None
    except OSError:
        return []  # there but unreadable: nothing to conclude from
    # The command name (field 2) is in parentheses and may hold spaces and ")".
    return text.rsplit(b")", 1)[-1].split()


def start_time(pid: int) -> str:
    """Field 22 of ``/proc/<pid>/stat``: when the process started, in ticks since boot."""
    fields = _stat_fields(pid)
    # After the name come field 3 (the state) on; field 22 is the 20th of those.
    return fields[19].decode("ascii") if fields and len(fields) > 19 else ""


_SELF = _Self()


def _forked() -> None:
    global _SELF
    _SELF = _Self()  # a child is another process: a token and a PID of its own
    with _ORPHANED_LOCK:
        _ORPHANED.clear()


def new_owner() -> str:
    """A name for one claim: its process's identity, and a token of its own."""
    me = _SELF
    return ":".join((_HOST, str(me.pid), me.token, secrets.token_hex(8), me.boot, me.pid_ns,
                     me.start))


def parse_owner(owner: str) -> Owner | None:
    """The fields of an owner ``new_owner`` made; ``None`` for any other text."""
    parts = owner.rsplit(":", _FIELDS)
    if len(parts) != _FIELDS + 1 or not parts[1].isdigit() or not parts[2] or not parts[3]:
        return None
    host, pid, process, claim, boot, pid_ns, start = parts
    return Owner(host, int(pid), process, claim, boot, pid_ns, start)


#: Claims of this process that it let go of without settling them, by (owner, key):
#: the store failed to mark them unknown or to release them. Their owner lives on, but
#: nothing runs under them any more, so they are abandoned.
_ORPHANED: set[tuple[str, str]] = set()
_ORPHANED_LOCK = threading.Lock()
os.register_at_fork(after_in_child=_forked)


def orphan(owner: str, key: str) -> None:
    """Say that this process will do nothing more under its claim of ``key``."""
    with _ORPHANED_LOCK:
        _ORPHANED.add((owner, key))


def owner_alive(owner: str) -> bool | None:
    """Whether ``owner``'s process still runs; ``None`` where that cannot be seen from here."""
    named = parse_owner(owner)
    me = _SELF
    if named is None:
        return None
    if named.process == me.token:
        return True
    if not (named.boot and named.pid_ns and named.start) or named.boot != me.boot \
            or named.pid_ns != me.pid_ns:
        return None  # another machine, boot or PID namespace: its processes are not ours
    if named.pid == me.pid:
        return False  # this PID in this namespace is this process: the owner came before it
    fields = _stat_fields(named.pid)
    if fields is None:
        return False
    if len(fields) <= 19:
        return True  # there, and unreadable: never taken for dead
    if fields[19].decode("ascii", "replace") != named.start:
        return False  # the PID was reused by a later process
    return fields[0] != b"Z"  # killed, not yet reaped by its parent: dead


def abandoned(owner: str, key: str, lease_until: float, now: float) -> bool:
    """Whether a pending claim's owner is gone, as far as can be known from here.

    Where its process can be seen, the process decides, never the clock: a dead
    process has abandoned it, a live one has not (a body may run past any
    lease), unless it is this very process and it said so (``orphan``). Where
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


def landed(stored: StoredWrite | None, owner: str, state: str | None,
           outcome: dict[str, Any] | None = None) -> bool:
    """Whether ``owner``'s transition to ``state`` (``None``: the key dropped) is what the
    store now holds: a statement that landed before its reply was lost, recognised on the
    retry as this owner's own, so the retry answers what the first attempt did."""
    if state is None:
        return stored is None
    if stored is None or stored.owner != owner or stored.state != state:
        return False
    return outcome is None or (stored.outcome is not None
                               and encode_outcome(stored.outcome) == encode_outcome(outcome))
