"""What the LangChain adapters share: who is calling, and the message an answer becomes.

Authority comes from code, never from the model: the scope, approvals and
run id an adapter was built with, which the code that invokes the agent may
replace for one run through ``config["configurable"]`` (``agtool_scope``,
``agtool_approvals``); the run id is the conversation's ``thread_id`` when
the config names one. The tool-call id is the step id, so a retried write
with the same id is answered from the write store instead of running again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage

from .._adapter_io import rendered
from .._answers import model_error
from .._authority import Approval
from .._reasons import NOT_OBJECT, UNKNOWN_TOOL

__all__ = ["APPROVALS_KEY", "SCOPE_KEY", "Caller", "refused", "tool_message", "unknown_tool"]

#: ``config["configurable"]`` keys that set the scope and approvals of one run.
SCOPE_KEY = "agtool_scope"
APPROVALS_KEY = "agtool_approvals"


@dataclass(frozen=True)
class Caller:
    """The authority a call runs with when its config names none."""

    scope: Collection[str] | None = None
    approvals: Iterable[Approval] = ()
    run_id: str | None = None

    def for_call(self, config: object, call_id: object
                 ) -> tuple[Collection[str] | None, Iterable[Approval], str | None, str | None]:
        """``(scope, approvals, run_id, step_id)`` for the tool call ``call_id`` made under
        ``config``; a call without a usable id has no step id, so a write is not keyed."""
        configurable = _configurable(config)
        scope = configurable.get(SCOPE_KEY, self.scope)
        approvals = configurable.get(APPROVALS_KEY, self.approvals)
        thread = configurable.get("thread_id")
        run_id = self.run_id if thread is None else thread if type(thread) is str else str(thread)
        step_id = call_id if type(call_id) is str and call_id else None
        return scope, approvals, run_id, step_id


def _configurable(config: object) -> Mapping[str, Any]:
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    return configurable if isinstance(configurable, Mapping) else {}


def tool_message(answer: dict[str, Any], call_id: object, name: object) -> ToolMessage:
    """The ``ToolMessage`` a model is handed for a gate's answer; ``status`` says which.
    An answer with no JSON text is handed over as ``result:unrenderable`` (``rendered``)."""
    answer, content = rendered(answer)
    return ToolMessage(content, tool_call_id=call_id if type(call_id) is str else "",
                       name=name if type(name) is str else None,
                       status="success" if answer.get("ok") else "error", artifact=answer)


def refused(args: object) -> dict[str, Any] | None:
    """The answer to a call refused before any tool is looked at, or ``None``.

    A call of a tool the agent was not given is ``UNKNOWN_TOOL``; args that are
    not a dict are ``args:not_object``, answered here because LangGraph's
    ``ToolNode`` raises on them before a tool is reached.
    """
    reason = None if isinstance(args, dict) else NOT_OBJECT
    return None if reason is None else {
        "ok": False, "error": model_error("args:" + reason, None, args), "request_id": ""}


def unknown_tool(args: object) -> dict[str, Any]:
    """The answer to a call of a tool the agent was not given."""
    return {"ok": False, "error": model_error("args:" + UNKNOWN_TOOL, None, args), "request_id": ""}
