"""Authority, decided in code: the caller's scope and approvals of exact arguments.

A scope is the set of risk levels a caller may use. The gate's own scope is
checked when the gate is made; a scope given with one call is read here, once,
and refused whole (``auth:bad_scope``) unless it is a set, frozenset, list or
tuple of known risk names: a ``str`` is never searched for a substring and a
``dict`` is never read for its truth values. Approvals are read only for the
tools that need one, and anything that is not an ``Approval`` (``None``, a
raising iterable) simply approves nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._contract import RISKS

__all__ = ["Approval", "approved", "gate_scope", "read_scope"]

_RISKS = frozenset(RISKS)
#: The collections a per-call scope may be given as: their iteration is their contents.
_SCOPE_TYPES = (set, frozenset, list, tuple)


@dataclass(frozen=True)
class Approval:
    """A person's approval of a call: the tool and a digest of its exact arguments.

    Made by ``Gate.approve`` from the arguments that were shown (or from a
    dry run's plan: ``Approval(plan["tool"], plan["args_digest"])``); a call
    with any other arguments (another recipient, another text) is not
    covered. With ``run_id`` and ``step_id`` it covers that one step only, so
    the same payment approved once cannot be made again in another step.
    """

    tool: str
    args_digest: str
    by: str = ""
    run_id: str = ""  #: ``""``: any run
    step_id: str = ""  #: ``""``: any step

    def covers(self, tool: str, args_digest: str, run_id: object, step_id: object) -> bool:
        """Whether this approval lets that call through."""
        return (bool(args_digest) and self.tool == tool and self.args_digest == args_digest
                and self.run_id in ("", run_id) and self.step_id in ("", step_id))


def read_scope(scope: Collection[str]) -> frozenset[str] | None:
    """A per-call scope as the risk levels it grants, or ``None`` if it is malformed."""
    builtin: Any = next((kind for kind in _SCOPE_TYPES if isinstance(scope, kind)), None)
    if builtin is None:
        return None
    try:
        # The builtin's own iteration: a subclass's __iter__ or __contains__ is not asked.
        levels = frozenset(builtin.__iter__(scope))
    except Exception:  # an element whose hash raises
        return None
    # Exact strs only: a str subclass could compare equal to a level it is not.
    if not levels <= _RISKS or any(type(level) is not str for level in levels):
        return None
    return levels


def gate_scope(scope: Collection[str]) -> frozenset[str]:
    """A gate's own scope, checked when it is made: ``ValueError`` says what is wrong."""
    if isinstance(scope, (str, Mapping)) or not all(isinstance(s, str) for s in scope):
        raise ValueError(f"scope must be a collection of risk level names, got {scope!r}")
    unknown = sorted(set(scope) - _RISKS)
    if unknown:
        raise ValueError(f"scope names unknown risk levels {unknown}; expected {list(RISKS)}")
    return frozenset(scope)


def approved(tool: str, exact: str, approvals: Iterable[Approval], run_id: object,
             step_id: object) -> bool:
    """Whether one of ``approvals`` covers this exact call; never raises."""
    try:
        return any(type(approval) is Approval and approval.covers(tool, exact, run_id, step_id)
                   for approval in approvals)
    except Exception:  # approvals that cannot be read approve nothing
        return False
