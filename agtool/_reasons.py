"""The reason vocabulary: every string the gate can answer with is built here.

A reason is short, stable and safe to show to a model: it says which check
failed and on which argument, never a message or a traceback.

- ``validate_args`` answers ``""`` or ``<check>:<arg>`` (``allowed:region``),
  ``unknown_tool``, ``not_object`` or ``bad_contract``.
- ``validate_result`` answers ``""`` or one of ``RESULT_CHECKS``.
- ``call_tool`` prefixes them by stage: ``args:…``, ``result:…``, or
  ``raised:<ExceptionClassName>`` when the body raised. Calls that touch the
  world add ``auth:scope:<risk>`` and ``auth:approval`` (refused before the
  body), ``write:no_key``, ``write:conflict``, ``write:in_progress`` and
  ``write:store`` (the idempotency store), ``timeout`` (the body overran the
  contract's ``timeout``) and ``upstream:<status>`` or ``upstream:connection``
  (the body met a transport failure).
- The agent graph adds its own, each of which ends a run: ``order:not_object``,
  ``model:no_tool_call``, ``model:raised:<ExceptionClassName>``,
  ``repair:none`` (no rule fixes the reason) and ``repair:repeat`` (the fixed
  call was already made).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "AGENT_STAGES",
    "ARG_CHECKS",
    "ARG_REASONS",
    "RESULT_CHECKS",
    "STAGES",
    "WRITE_REASONS",
    "Reason",
    "parse_reason",
]

#: The checks made on each argument (the gate may meet them in another order).
ARG_CHECKS = (
    "missing",
    "unexpected",
    "type",
    "allowed",
    "min",
    "max",
    "min_len",
    "max_len",
    "pattern",
    "echo",
)
#: Reasons about the call as a whole, not one argument.
ARG_REASONS = ("unknown_tool", "not_object", "bad_contract")
#: Checks made on a returned value.
RESULT_CHECKS = ("shape", "empty", "too_big", "range")
#: Prefixes of ``call_tool``'s ``error``.
STAGES = ("args", "result", "raised", "auth", "write", "timeout", "upstream")
#: Reasons of the idempotency store, each refusing to run a write body.
WRITE_REASONS = ("write:no_key", "write:conflict", "write:in_progress", "write:store")
WRITE_NO_KEY, WRITE_CONFLICT, WRITE_IN_PROGRESS, WRITE_STORE = WRITE_REASONS
AUTH_SCOPE = "auth:scope"  #: followed by ``:<risk>``, the level the caller's scope lacks
AUTH_APPROVAL = "auth:approval"
TIMEOUT = "timeout"
UPSTREAM = "upstream"  #: followed by ``:<HTTP status>`` or ``:connection``

UNKNOWN_TOOL, NOT_OBJECT, BAD_CONTRACT = ARG_REASONS

#: Stages of the agent graph's own reasons; one of them as the last error ends a run.
AGENT_STAGES = ("order", "model", "repair")
ORDER_NOT_OBJECT = "order:not_object"
MODEL_NO_TOOL_CALL = "model:no_tool_call"
MODEL_RAISED = "model:raised"  #: followed by ``:<ExceptionClassName>``
REPAIR_NONE = "repair:none"
REPAIR_REPEAT = "repair:repeat"
SHAPE, EMPTY, TOO_BIG, RANGE = RESULT_CHECKS


class Reason(NamedTuple):
    """A gate error split into its parts: ``args:min:limit`` -> ``("args", "min", "limit")``."""

    stage: str
    check: str
    arg: str


def parse_reason(error: str) -> Reason:
    """Split a ``call_tool`` error into stage, check and argument.

    ``raised:KeyError`` gives ``("raised", "KeyError", "")``; ``""`` gives
    ``("", "", "")``. Argument names may themselves contain colons: only the
    first two are separators.
    """
    stage, _, rest = error.partition(":")
    check, _, arg = rest.partition(":")
    return Reason(stage, check, arg)
