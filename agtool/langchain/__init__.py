"""agtool at the door of LangChain and LangGraph agents.

Three ways in, each one or two lines of glue:

- ``gated_tools(gate)``: the gate's table as LangChain tools, for
  ``create_agent(model, tools=gated_tools(gate))`` or a ``ToolNode``; the
  model is shown exactly the schema the gate enforces.
- ``GateMiddleware(gate)``: for an agent that already has its tools,
  ``create_agent(model, tools, middleware=[GateMiddleware(gate)])``; the
  table is the whitelist and the contracts, the agent's tools the bodies.
  Needs the ``langchain`` extra (``pip install 'agtool-gate[langchain]'``).
- ``gated_tool_node(gate, tools=None)``: a LangGraph ``ToolNode`` for a
  hand-built graph, over the gate's tools or gating the tools given.

Every call of a turn is gated on its own, sync or async, and every failure
comes back as a ``ToolMessage`` with ``status="error"`` holding the gate's
structured error: nothing is raised into the agent (an ``interrupt()`` and a
cancellation still propagate). The tool-call id is the step id and the
config's ``thread_id`` the run id, so a retried write runs once. Authority
is the code's: ``scope=``, ``approvals=``, or per run
``config["configurable"]["agtool_scope" | "agtool_approvals"]``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest

from .._authority import Approval
from .._errors import ToolFailed
from .._gate import Gate
from ._answer import APPROVALS_KEY, SCOPE_KEY, refused, tool_message, unknown_tool
from ._tools import GatedTool, gated_tools
from ._wrap import AsyncHandler, GateWrapper, Handler

if TYPE_CHECKING:
    from ._middleware import GateMiddleware

__all__ = ["APPROVALS_KEY", "SCOPE_KEY", "GateMiddleware", "GateWrapper", "GatedTool",
           "ToolFailed", "gated_tool_node", "gated_tools"]


def __getattr__(name: str) -> Any:
    if name == "GateMiddleware":  # imported on first use: only it needs the langchain extra
        from ._middleware import GateMiddleware
        return GateMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gated_tool_node(gate: Gate, tools: Sequence[BaseTool] | None = None, *,
                    scope: Collection[str] | None = None, approvals: Iterable[Approval] = (),
                    run_id: str | None = None, name: str = "tools") -> ToolNode:
    """A LangGraph ``ToolNode`` whose every call is gated.

    Without ``tools``, it runs ``gated_tools(gate)``, and a call of a name it
    does not have is answered ``UNKNOWN_TOOL``. With ``tools`` (LangChain tools
    you already have), the gate wraps them as ``GateMiddleware`` does: the
    table says which may run and what they take and return.
    """
    if tools is not None:
        wrapper = GateWrapper(gate, scope=scope, approvals=approvals, run_id=run_id)
        return ToolNode(tools, name=name, wrap_tool_call=wrapper.wrap_tool_call,
                        awrap_tool_call=wrapper.awrap_tool_call)
    return ToolNode(gated_tools(gate, scope=scope, approvals=approvals, run_id=run_id),
                    name=name, wrap_tool_call=_known_only, awrap_tool_call=_aknown_only)


def _known_only(request: ToolCallRequest, handler: Handler) -> Any:
    """A call the node cannot make is answered as the gate would, not raised or put in prose."""
    call = request.tool_call
    args = call.get("args")
    answer = unknown_tool(args) if request.tool is None else refused(args)
    if answer is not None:
        return tool_message(answer, call.get("id"), call.get("name"))
    return handler(request)


async def _aknown_only(request: ToolCallRequest, handler: AsyncHandler) -> Any:
    if request.tool is None or not isinstance(request.tool_call.get("args"), dict):
        return _known_only(request, _never)
    return await handler(request)


def _never(request: ToolCallRequest) -> Any:  # pragma: no cover - never reached
    raise AssertionError("_known_only answers such a call without a handler")


