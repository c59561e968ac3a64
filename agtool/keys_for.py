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

from ._engine_keys import StepKeys, dbos, openai_agents, pydantic_ai, temporal

__all__ = ["StepKeys", "dbos", "openai_agents", "pydantic_ai", "temporal"]
