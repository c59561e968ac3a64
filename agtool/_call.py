"""One call as a value, and what the lookup answers for a name with no tool to run.

The gate's four entry points (``call_tool``, ``call_for_model`` and their
async twins) take the same keywords; each packs what it was given into one
``Call`` and hands that down, so the steps read one value instead of nine
parameters, and nothing can be passed in the wrong place.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from ._reasons import BAD_CONTRACT, UNKNOWN_TOOL

__all__ = ["BROKEN", "UNKNOWN", "Call", "Refusal"]


class Call(NamedTuple):
    """One call as its caller made it: frozen, slotted, and not yet checked.

    A ``NamedTuple`` rather than a frozen dataclass: it is made on every call
    that leaves a tool's compiled read, and a frozen dataclass costs about a
    microsecond to make, a tuple a fifth of that.
    """

    name: object  #: the tool's name as called (anything: the lookup refuses what is no name)
    args: object  #: the args as given; the steps take their checked snapshot
    echo: Mapping[str, object] | None = None  #: the values the model was given, for echo args
    scope: Collection[str] | None = None  #: the caller's risk levels; ``None``: the gate's own
    run_id: Any = None
    step_id: Any = None
    approvals: Iterable[Any] = ()  #: ``Approval`` s or their tokens, verified by the steps
    dry_run: bool = False


class Refusal:
    """What the lookup answers for a name with no tool to run: the reason, as a value."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason  #: ``unknown_tool`` or ``bad_contract``

    def __repr__(self) -> str:
        return f"Refusal({self.reason!r})"


#: No tool of that name (or a name that is no ``str``).
UNKNOWN = Refusal(UNKNOWN_TOOL)
#: An entry that was changed after registration into one that is not a valid contract.
BROKEN = Refusal(BAD_CONTRACT)
