"""The run id and step id of a write, from the ids a durable engine or framework already has.

A write's idempotency key is the run id, the step id and the business key
(the contract's ``key_args``). Each function here answers the first two as
``{"run_id", "step_id"}``, to pass on as they are::

    gate.call_tool("issue_refund", args, **keys_for.dbos())

The one rule: **an engine's retry keeps the step id; a model's re-prompt mints
a new call id.** A DBOS step or a Temporal activity that is retried after a
crash runs again under the same ids, so its second run is answered from the
write store. A model that is asked again and makes the same call again gives
it a new tool-call id, which is a new step: only the business key can tell
that it is the same refund. So a write a model may repeat names its
``key_args`` and is called with one fixed step id for the run (the adapters'
``step_id=`` option, or the tool's name), so that the run and the business key
alone make its key.

- ``dbos()``: the workflow id and the step's function id (``DBOS.workflow_id``,
  ``DBOS.step_id``), inside a DBOS step.
- ``temporal()``: the workflow id and the activity id (``activity.info()``),
  inside a Temporal activity; both stay the same across its retries.
- ``pydantic_ai(ctx)``: the conversation id (else the run id) and the
  tool-call id of a pydantic-ai ``RunContext``; the conversation id, because a
  run resumed after an approval is a new run of the same conversation with
  the same tool-call id (pydantic-ai refuses to reuse a run id).
- ``openai_agents(ctx, run_id)``: ``run_id`` (else the run config's
  ``group_id``) and the tool-call id of an OpenAI Agents ``ToolContext``.
- LangGraph needs none: ``agtool.langchain`` reads the ``thread_id`` and the
  tool-call id itself.

Each needs only its engine's package, imported when it is called.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["StepKeys", "dbos", "openai_agents", "pydantic_ai", "temporal"]


class StepKeys(TypedDict):
    """A write's run id and step id, as ``Gate.call_tool`` takes them."""

    run_id: str | None
    step_id: str | None


def _text(value: object) -> str | None:
    """An id as the gate keys it: a non-empty str, else none (an int id as its digits)."""
    if type(value) is int:
        return str(value)
    return value if type(value) is str and value else None


def dbos() -> StepKeys:
    """``DBOS.workflow_id`` and ``DBOS.step_id`` of the step under way.

    Outside a workflow both are ``None``, and a write is refused ``write:no_key``.
    """
    try:
        from dbos import DBOS
    except ImportError:
        raise ImportError("agtool.keys_for.dbos needs the dbos package: pip install dbos"
                          ) from None
    return {"run_id": _text(DBOS.workflow_id), "step_id": _text(DBOS.step_id)}


def temporal() -> StepKeys:
    """The workflow id and activity id of the Temporal activity under way."""
    try:
        from temporalio import activity
    except ImportError:
        raise ImportError("agtool.keys_for.temporal needs the temporalio package: "
                          "pip install temporalio") from None
    info = activity.info()
    return {"run_id": _text(info.workflow_id), "step_id": _text(info.activity_id)}


def pydantic_ai(ctx: Any) -> StepKeys:
    """The conversation id (else the run id) and tool-call id of a pydantic-ai ``RunContext``."""
    conversation = _text(getattr(ctx, "conversation_id", None))
    run_id = conversation if conversation is not None else _text(getattr(ctx, "run_id", None))
    return {"run_id": run_id, "step_id": _text(getattr(ctx, "tool_call_id", None))}


def openai_agents(ctx: Any, run_id: str | None = None) -> StepKeys:
    """``run_id`` (else the run config's ``group_id``) and the tool-call id of an OpenAI
    Agents ``ToolContext``; the SDK itself names no run that outlives a process."""
    if run_id is None:
        run_id = _text(getattr(getattr(ctx, "run_config", None), "group_id", None))
    return {"run_id": run_id, "step_id": _text(getattr(ctx, "tool_call_id", None))}
