"""Per-tool counters: what the gate did with each tool's calls.

The gate's steps add to a ``Counts``; ``ToolStats`` is the frozen snapshot a
caller reads. The harness checks these numbers against bodies that count
their own runs, so every step that runs, skips or refuses a body counts here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Counts", "ToolStats"]


@dataclass(frozen=True)
class ToolStats:
    """Counts for one tool since the gate was made (or ``reset_stats``)."""

    runs: int = 0  #: times the body was called (a body that raised counts)
    hits: int = 0  #: calls answered from the memo, body not run
    blocked: int = 0  #: calls refused on their arguments, body not run
    bad_results: int = 0  #: calls whose returned value was refused
    raised: int = 0  #: calls whose body raised
    denied: int = 0  #: calls refused on scope or approval, body not run
    replayed: int = 0  #: writes answered from the idempotency store, body not run
    timed_out: int = 0  #: calls answered ``timeout`` while the body ran on
    evicted: int = 0  #: remembered values dropped to keep the memo within its size
    expired: int = 0  #: remembered values dropped because their time to live ran out
    unknown: int = 0  #: writes whose outcome became unknown (interrupted, or not storable)
    reconciled: int = 0  #: unknown writes settled by the contract's ``reconcile``


_FIELDS = tuple(field.name for field in fields(ToolStats))


class Counts:
    """The live counters behind one tool's ``ToolStats``; plain ints, bumped in place."""

    __slots__ = ("bad_results", "blocked", "denied", "evicted", "expired", "hits", "raised",
                 "reconciled", "replayed", "runs", "timed_out", "unknown")
    runs: int
    hits: int
    blocked: int
    bad_results: int
    raised: int
    denied: int
    replayed: int
    timed_out: int
    evicted: int
    expired: int
    unknown: int
    reconciled: int

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        for name in _FIELDS:
            setattr(self, name, 0)

    def snapshot(self) -> ToolStats:
        return ToolStats(*(getattr(self, name) for name in _FIELDS))
