"""``GateMiddleware``: the gate as a ``langchain.agents`` middleware, in front of every tool.

Only this module needs the ``langchain`` extra; the rest of ``agtool.langchain``
needs langchain-core and langgraph alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
except ImportError:  # tests hide the package to see this
    raise ImportError(
        "agtool.langchain.GateMiddleware needs the langchain extra: "
        "pip install 'agtool-gate[langchain]'") from None

from langchain_core.messages import ToolMessage

from .._authority import Approval
from .._gate import Gate
from ._answer import Caller
from ._tools import gated_tool
from ._wrap import AsyncHandler, GateWrapper, Handler

__all__ = ["GateMiddleware"]

#: The tools shown to the model are never run: ToolNode runs the agent's own by name.
_SHOWN_ONLY = Caller()


class GateMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Gates every tool call of a ``create_agent`` agent, whatever its tools.

    ``gate``'s table is a whitelist and the contracts: a tool it does not name
    is refused (``UNKNOWN_TOOL``) and never runs; a tool it names is called
    with the checked args and its answer checked (see ``GateWrapper``). A
    failure reaches the model as a ``ToolMessage`` with ``status="error"``,
    never as an exception. ``scope``, ``approvals`` and ``run_id`` as in
    ``gated_tools``. ``self.gate`` is the gate the calls go through.

    The model is shown what the gate enforces: each agent tool the table
    names is bound with the table's JSON Schema instead of its own, and an
    agent tool the table does not name is not shown at all (a provider's
    built-in tools, given as dicts, are left as they are).
    """

    def __init__(self, gate: Gate, *, scope: Collection[str] | None = None,
                 approvals: Iterable[Approval] = (), run_id: str | None = None) -> None:
        super().__init__()
        self._wrapper = GateWrapper(gate, scope=scope, approvals=approvals, run_id=run_id)
        self.gate = self._wrapper.gate

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> Any:
        return handler(self._shown(request))

    async def awrap_model_call(
            self, request: ModelRequest[Any],
            handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]) -> Any:
        return await handler(self._shown(request))

    def _shown(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with each agent tool replaced by the gate's view of it, or left out."""
        shown: list[Any] = []
        for tool in request.tools:
            if isinstance(tool, dict):
                shown.append(tool)
                continue
            gated = gated_tool(self.gate, tool.name, _SHOWN_ONLY, tool.description)
            if gated is not None:
                shown.append(gated)
        return request.override(tools=shown)

    def wrap_tool_call(self, request: Any, handler: Handler) -> ToolMessage:
        return self._wrapper.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any,
                              handler: AsyncHandler) -> ToolMessage:
        return await self._wrapper.awrap_tool_call(request, handler)
