"""What a call comes to: the envelope ``call_tool`` answers, and the outcome around it.

The lowest layer of the gate: every step builds its answer from here.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypedDict

__all__ = ["ANSWERED", "HIT", "PLAN", "REPLAY", "Envelope", "Outcome", "failure", "success"]


class Envelope(TypedDict):
    """What ``call_tool`` answers, always with exactly these three keys."""

    ok: bool
    value: Any
    error: str


#: ``Outcome.how``: the body ran, or the call was refused before it could.
ANSWERED = ""
#: ``Outcome.how``: answered from the memo; the body did not run.
HIT = "hit"
#: ``Outcome.how``: a write answered from its idempotency store; the body did not run.
REPLAY = "replay"
#: ``Outcome.how``: a dry run's plan; nothing ran.
PLAN = "plan"


class Outcome(NamedTuple):
    """How one call ended: its envelope, how it was answered, and details for a model."""

    envelope: Envelope
    how: str = ANSWERED
    #: What a model may be told beyond the reason (an upstream's status and excerpt).
    details: dict[str, Any] | None = None
    #: The checked snapshot of the args; ``None`` when the call ended before it was taken.
    args: dict[str, Any] | None = None


def failure(reason: str) -> Envelope:
    return {"ok": False, "value": None, "error": reason}


def success(value: object) -> Envelope:
    return {"ok": True, "value": value, "error": ""}
