"""What every write store is: the protocol, the states of a key, and outcomes kept exactly."""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple, Protocol

__all__ = ["CONFLICT", "DONE", "MAX_DEPTH", "PENDING", "RUN", "UNKNOWN", "Claim", "StoredWrite",
           "WriteStore", "decode_outcome", "encode_outcome", "listed_row", "stored_write"]

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


def _unstorable(why: str) -> ValueError:
    return ValueError(f"outcome not storable exactly: {why}")


def listed_row(row: tuple[Any, ...]) -> tuple[str, StoredWrite | str] | None:
    """A row for an operator's listing: ``(key, the write)`` if it is open, ``(key, why it
    is damaged)`` if it cannot be read, ``None`` for a done row that reads back whole."""
    key = row[0] if isinstance(row[0], str) else repr(row[0])
    if row[3] not in (PENDING, DONE, UNKNOWN):
        return key, f"damaged: its state is {row[3]!r}"
    for name, value in (("claimed_at", row[5]), ("lease_until", row[7])):
        if type(value) not in (int, float) or not math.isfinite(value) or abs(value) > 1e11:
            return key, f"damaged: its {name} is {value!r}"[:200]
    try:
        stored = stored_write(row)
    except (ValueError, TypeError, RecursionError) as exc:
        return key, f"damaged: its outcome cannot be read ({type(exc).__name__})"
    if not all(isinstance(field, str) for field in (stored.tool, stored.owner)):
        return key, "damaged: its tool or owner is not text"
    return None if stored.state == DONE else (key, stored)


def stored_write(row: tuple[Any, ...]) -> StoredWrite:
    outcome = None if row[4] is None else decode_outcome(row[4])
    return StoredWrite(row[0], row[1], row[2], row[3], outcome, row[5], row[6], row[7])
