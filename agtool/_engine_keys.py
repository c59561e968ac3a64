"""A write's run id and step id read from a durable engine's or a framework's own ids.

The functions behind ``agtool.keys_for`` (which documents them), in the core so that
the framework adapters read their keys here too.
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
