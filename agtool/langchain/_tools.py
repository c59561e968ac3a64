"""A gate's table as LangChain tools: the model sees the gate's schema, the gate sees its args.

``GatedTool`` is a ``BaseTool`` whose ``args_schema`` is the JSON Schema the
gate enforces (``to_json_schema``, as exported), given to LangChain as a
dict: LangChain neither validates nor coerces the args of a dict schema, so
the gate gets them exactly as the model sent them (``"5"`` stays a string,
an extra argument stays there to be refused). Every call goes through
``Gate.call_for_model`` (``acall_for_model`` on the async path) and comes back
as a ``ToolMessage`` whose ``status`` says whether the gate answered ``ok``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from contextvars import ContextVar
from typing import Any

from langchain_core.tools import BaseTool

from .._authority import Approval
from .._gate import Gate
from .._jsonschema import to_json_schema
from ._answer import Caller, tool_message

__all__ = ["GatedTool", "gated_tool", "gated_tools"]

#: The tool call (``None`` for bare args) and config of the invocation under way.
#: LangChain hands ``_run`` only the args: a ``config`` parameter on ``_run``
#: would be filled in over a model argument of that name.
_CALL: ContextVar[tuple[dict[str, Any] | None, object]] = ContextVar(
    "agtool_lc_call", default=(None, None))


class GatedTool(BaseTool):
    """One tool of a gate's table, as a LangChain tool; it never raises at the agent.

    Invoked with a tool call, it answers a ``ToolMessage`` (``status="error"``
    on any failure, with the structured error as content and the gate's
    answer as ``artifact``); invoked with bare args, the answer dict itself.
    """

    gate: Gate
    caller: Caller = Caller()

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        call = input if _is_tool_call(input) else None
        args = input if call is None else call.get("args")
        token = _CALL.set((call, config))
        try:
            if not _keyword_args(args):  # LangChain would raise: the gate refuses it
                return self._answer(args)
            return super().invoke(input, config, **kwargs)
        finally:
            _CALL.reset(token)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        call = input if _is_tool_call(input) else None
        args = input if call is None else call.get("args")
        token = _CALL.set((call, config))
        try:
            if not _keyword_args(args):
                return await self._aanswer(args)
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _CALL.reset(token)

    # Positional-only ``self`` and no named parameters: an argument the model
    # calls ``self``, ``config`` or ``run_manager`` reaches the gate like any other.
    def _run(self, /, *_: Any, **args: Any) -> Any:
        return self._answer(args)

    async def _arun(self, /, *_: Any, **args: Any) -> Any:
        return await self._aanswer(args)

    def _answer(self, args: object) -> Any:
        call, config = _CALL.get()
        call_id = None if call is None else call.get("id")
        scope, approvals, run_id, step_id = self.caller.for_call(config, call_id)
        answer = self.gate.call_for_model(self.name, args, scope=scope, run_id=run_id,
                                          step_id=step_id, approvals=approvals)
        return answer if call is None else tool_message(answer, call_id, self.name)

    async def _aanswer(self, args: object) -> Any:
        call, config = _CALL.get()
        call_id = None if call is None else call.get("id")
        scope, approvals, run_id, step_id = self.caller.for_call(config, call_id)
        answer = await self.gate.acall_for_model(self.name, args, scope=scope, run_id=run_id,
                                                 step_id=step_id, approvals=approvals)
        return answer if call is None else tool_message(answer, call_id, self.name)


def _is_tool_call(value: object) -> bool:
    """Whether a tool was invoked with a model's tool call (its id may be ``None``)."""
    return isinstance(value, dict) and value.get("type") == "tool_call"


def _keyword_args(args: object) -> bool:
    """Whether LangChain may unpack ``args`` into ``_run``: a plain dict of plain str keys.

    Anything else (a non-str key, a dict subclass whose ``keys`` may lie) goes
    straight to the gate, which snapshots it once, instead of raising in LangChain.
    """
    return type(args) is dict and all(type(key) is str for key in args)




def gated_tools(gate: Gate, names: Iterable[str] | None = None, *,
                scope: Collection[str] | None = None, approvals: Iterable[Approval] = (),
                run_id: str | None = None) -> list[GatedTool]:
    """LangChain tools for ``names`` (default: every tool) of ``gate``'s table.

    ``scope`` and ``approvals`` are the caller's authority (default: the
    gate's scope, no approvals); ``approvals`` is read on every call, so a
    list the application appends to after a person approves takes effect on
    the next call. A run's config may replace both (``agtool_scope``,
    ``agtool_approvals`` in ``configurable``). The run id is the config's
    ``thread_id``, else ``run_id``; the step id is the tool-call id. A write
    called with neither run id is refused ``write:no_key``.
    """
    if not isinstance(gate, Gate):
        raise TypeError(f"gated_tools needs an agtool.Gate, got {type(gate).__name__}")
    caller = Caller(scope, approvals, run_id)
    tools = []
    for name in gate.table if names is None else names:
        made = gated_tool(gate, name, caller)
        if made is None:
            raise ValueError(f"{name!r} is not a valid tool of this gate's table")
        tools.append(made)
    return tools


def gated_tool(gate: Gate, name: object, caller: Caller, description: str = ""
               ) -> GatedTool | None:
    """``name`` of ``gate``'s table as a ``GatedTool``; ``None`` if it has no valid entry."""
    contract = gate.contract(name) if type(name) is str else None
    if contract is None:
        return None
    schema = {key: value for key, value in to_json_schema(gate.table, contract.name).items()
              if key != "$schema"}  # the provider fixes the dialect, as on export
    return GatedTool(name=contract.name, description=contract.description or description,
                     args_schema=schema, gate=gate, caller=caller)
