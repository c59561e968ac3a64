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
  ``write:store`` (the idempotency store), ``write:unknown`` (a write body
  started and its outcome is not known: it is never run again on a guess, and
  an operator resolves it), ``timeout`` (the body overran the contract's
  ``timeout``), ``timeout:busy`` (every worker for timed bodies is stuck) and
  ``upstream:<status>`` or ``upstream:connection`` (the body met a transport
  failure). A server's rate limit answers ``rate:limited`` before the gate is
  asked. A caller's malformed scope is ``auth:bad_scope``; an ``async def``
  tool called through the sync ``call_tool`` inside a running event loop is
  ``async:loop_running``. A result that passed its contract but has no text a
  model can be handed (a value whose ``repr`` raises, a key JSON cannot write,
  a list that holds itself, an int past Python's int-to-str limit) is
  ``result:unrenderable``, answered by ``call_for_model`` and the adapters; a
  call on a closed gate is ``gate:closed``.
- The agent graph adds its own, each of which ends a run: ``order:not_object``,
  ``model:no_tool_call``, ``model:raised:<ExceptionClassName>``,
  ``repair:none`` (no rule fixes the reason) and ``repair:repeat`` (the fixed
  call was already made).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "AGENT_STAGES",
    "ARG_CHECKS",
    "ARG_REASONS",
    "RESULT_CHECKS",
    "STAGES",
    "WRITE_REASONS",
    "Reason",
    "named",
    "parse_reason",
    "shown",
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
    "format",
    "echo",
    "schema",
)
#: A rule of an imported JSON Schema the other checks have no name for (``multipleOf``,
#: ``not``, ``dependentRequired``, ...), broken by an argument (``schema:<arg>``) or by
#: the arguments as a whole (``schema`` alone).
ARG_SCHEMA = "schema"
#: Reasons about the call as a whole, not one argument.
ARG_REASONS = ("unknown_tool", "not_object", "bad_contract")
#: Checks made on a returned value.
RESULT_CHECKS = ("shape", "empty", "too_big", "range")
#: A result that passed its contract but cannot be written for a model (see the module's
#: docstring): answered by ``call_for_model`` and the adapters, never raised.
RESULT_UNRENDERABLE = "result:unrenderable"
#: A call on a gate after ``Gate.close()``: nothing is looked up, claimed or run.
GATE_CLOSED = "gate:closed"
#: Prefixes of ``call_tool``'s ``error``.
STAGES = ("args", "result", "raised", "auth", "write", "timeout", "upstream", "async", "gate")
#: Reasons of the idempotency store, each refusing to run a write body.
WRITE_REASONS = ("write:no_key", "write:conflict", "write:in_progress", "write:store",
                 "write:unknown")
WRITE_NO_KEY, WRITE_CONFLICT, WRITE_IN_PROGRESS, WRITE_STORE, WRITE_UNKNOWN = WRITE_REASONS
AUTH_SCOPE = "auth:scope"  #: followed by ``:<risk>``, the level the caller's scope lacks
AUTH_APPROVAL = "auth:approval"
#: A per-call scope that is not a collection of known risk levels (a str, a dict, an
#: unknown name): refused whole, never read as a substring or a truth value.
AUTH_BAD_SCOPE = "auth:bad_scope"
#: The sync ``call_tool`` on an ``async def`` tool while an event loop runs in this
#: thread: the body cannot be awaited here without blocking that loop.
ASYNC_LOOP_RUNNING = "async:loop_running"
TIMEOUT = "timeout"
#: Every worker that runs timed sync bodies is still busy (with bodies that overran):
#: the body was not started, and the same call may be tried again shortly.
TIMEOUT_BUSY = "timeout:busy"
UPSTREAM = "upstream"  #: followed by ``:<HTTP status>`` or ``:connection``
#: A server's rate limit for this tool and caller is spent (``agtool mcp serve --rate``):
#: the body was not run, and the same call may be made again after ``retry_after``. The
#: server's reason, answered before the gate is asked: not a stage of the gate's own.
RATE_LIMITED = "rate:limited"

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


#: How many characters of a name chosen by the caller are echoed.
SHOWN_CHARS = 64
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(name: str) -> str:
    """``name`` as it may be echoed in a reason, a record, a log line or a message.

    A name comes from the model: control characters, line separators and
    other unprintable characters are escaped (``\\n``, ``\\x1b``, ``\\u2028``) so
    that it cannot forge a log line, and past ``SHOWN_CHARS`` it is cut and
    marked with ``...#`` and a digest of the whole name, so two long names
    stay apart while the echo stays short. An ordinary name is returned as it
    is; only a long one is read whole, once, by the digest.
    """
    head = name[:SHOWN_CHARS + 1]
    if not head.isprintable():
        head = "".join(char if char.isprintable() else _escape(char) for char in head)
    if len(head) <= SHOWN_CHARS and len(name) <= SHOWN_CHARS:
        return head
    mark = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{head[:SHOWN_CHARS]}...#{mark}"


def named(names: Iterable[object], arg: str) -> str | None:
    """The name among ``names`` that a reason's ``arg`` echoes (see ``shown``), if any."""
    return next((name for name in names if type(name) is str and shown(name) == arg), None)


def _escape(char: str) -> str:
    escaped = _ESCAPES.get(char)
    if escaped is not None:
        return escaped
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
