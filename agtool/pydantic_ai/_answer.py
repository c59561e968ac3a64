"""What the pydantic-ai adapters share: who is calling, and how a gate's answer is handed on.

Authority comes from code: the scope and approvals an adapter was built with,
and the approvals an application puts in ``DeferredToolResults.metadata``
for one call (under ``APPROVALS_KEY``) when a person approved it. The run id
and step id of a write are the conversation id and the tool-call id
(``keys_for.pydantic_ai``), or the adapter's own.

A success is the gate's answer, which pydantic-ai hands the model as JSON. A
failure is raised as pydantic-ai expects: an argument the model can fix, or a
call worth repeating (``retryable``), as ``ModelRetry`` (a retry prompt,
counted against the tool's retry budget); any other failure as
``ToolFailed`` (the model sees it and adapts; no retry is asked for); an
``APPROVAL_REQUIRED`` as ``ApprovalRequired``, which defers the call to a
person. Each carries the structured error as JSON.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from pydantic_ai import ApprovalRequired, ModelRetry, RunContext, ToolFailed

from .. import _engine_keys as keys_for
from .._adapter_io import answer_text
from .._authority import Approval

__all__ = ["APPROVALS_KEY", "ARGS_KEY", "ERROR_KEY", "Caller", "settled"]

#: The key of ``DeferredToolResults.metadata[tool_call_id]`` that holds a call's approvals
#: (``Gate.approve`` of the args that will run, or their tokens).
APPROVALS_KEY = "agtool_approvals"
#: The keys of ``DeferredToolRequests.metadata[tool_call_id]`` that hold the gate's error and
#: the exact args an approval must be of.
ERROR_KEY = "agtool_error"
ARGS_KEY = "agtool_args"


@dataclass(frozen=True)
class Caller:
    """The authority and keys a call runs with."""

    scope: Collection[str] | None = None
    approvals: Iterable[Approval] = ()
    run_id: str | None = None
    step_id: str | None = None

    def for_call(self, ctx: RunContext[Any]) -> dict[str, Any]:
        """``scope``, ``approvals``, ``run_id`` and ``step_id`` for the call ``ctx`` is of."""
        keys = keys_for.pydantic_ai(ctx)
        return {"scope": self.scope, "approvals": _approvals(self.approvals, ctx),
                "run_id": keys["run_id"] if self.run_id is None else self.run_id,
                "step_id": keys["step_id"] if self.step_id is None else self.step_id}


def _approvals(own: Iterable[Approval], ctx: RunContext[Any]
               ) -> Iterable[Approval]:
    """The adapter's approvals, and the ones the application gave this call on resuming it."""
    metadata = ctx.tool_call_metadata
    given = metadata.get(APPROVALS_KEY) if isinstance(metadata, Mapping) else None
    if given is None:
        return own
    if isinstance(given, (str, Approval)):
        given = (given,)
    return chain(own, given) if isinstance(given, (list, tuple)) else own


def settled(answer: dict[str, Any], args: object) -> dict[str, Any]:
    """``answer`` if the gate answered ``ok``; otherwise the exception pydantic-ai expects.

    A deferral's metadata holds the args the call was made with (``ARGS_KEY``):
    on a resumed call they are the ``override_args``, while pydantic-ai's deferred
    call part still shows the model's, so an approver reads what would run there.
    """
    if answer.get("ok"):
        return answer
    error = answer.get("error") or {}
    if error.get("code") == "APPROVAL_REQUIRED":
        raise ApprovalRequired(metadata={ERROR_KEY: error, ARGS_KEY: args})
    if error.get("code") == "INVALID_ARGUMENT" or error.get("retryable"):
        raise ModelRetry(answer_text(answer))
    raise ToolFailed(answer_text(answer))
