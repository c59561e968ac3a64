"""Gating the tool calls of an agent whatever its tools: the agent's own tool is the body.

``GateWrapper`` has the ``wrap_tool_call`` / ``awrap_tool_call`` hooks of
LangGraph's ``ToolNode`` (and of ``langchain.agents`` middleware). Each call
goes through a gate over the caller's table in which every ``fn`` is a
stand-in (``_Body``): the gate looks the tool up, authorizes, checks the
args, consults the memo or claims the write's key, and only then calls the
stand-in, which hands the checked args to the agent's own tool (the
``handler``). What the tool answered is checked against the return contract,
and the model is handed the gate's answer as a ``ToolMessage``.

A name the table does not hold is refused with the gate's ``UNKNOWN_TOOL``
answer and nothing runs: the table is a whitelist. What the tool answered is
read as LangChain made it: the ``artifact`` when it has one, else the content
parsed as JSON when it is JSON, else the content; a ``ToolMessage`` with
``status="error"`` is a body that raised (``raised:ToolFailed``), and a
``Command`` keeps no dict contract. An ``interrupt()`` inside the tool
propagates, and a write it stopped has its key freed for the resumed run.
A contract's ``timeout`` holds on both paths: the gate runs a timed sync
body in a thread that carries the caller's context, where the call's tool is found.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from .._authority import Approval
from .._errors import NotApplied, ToolFailed
from .._gate import Gate
from .._shadow import shadow_gate
from ._answer import Caller, tool_message

__all__ = ["GateWrapper"]

Handler = Callable[[ToolCallRequest], "ToolMessage | Command[Any]"]
AsyncHandler = Callable[[ToolCallRequest], "Awaitable[ToolMessage | Command[Any]]"]

#: The agent's tool for the call under way, as ``(tool name, args -> value)``.
_BOUND: ContextVar[tuple[object, Callable[[dict[str, Any]], Any]] | None] = ContextVar(
    "agtool_lc_bound", default=None)


class _Bubble(NotApplied):
    """Carries LangGraph's interrupt through the gate, which lets only a ``BaseException`` by:
    the tool stopped before its effect, and the resumed run calls it again from its start."""

    def __init__(self, signal: GraphBubbleUp) -> None:
        super().__init__()
        self.signal = signal


class _Body:
    """A table entry's ``fn``: calls the agent's tool bound to the call under way."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, /, **args: Any) -> Any:
        bound = _BOUND.get()
        if bound is None or bound[0] != self.name:
            raise RuntimeError(f"{self.name} was called outside an agent's call of it")
        return bound[1](args)


def _shadow(gate: Gate) -> Gate:
    """A gate over ``gate``'s table whose bodies are the agent's tools (``shadow_gate``)."""
    return shadow_gate(gate, _Body)


def result_value(result: object) -> Any:
    """What the agent's tool answered, as its return contract is checked against it."""
    if not isinstance(result, ToolMessage):
        return result  # a Command: no dict contract keeps it
    if result.status == "error":
        raise ToolFailed(f"{result.name} answered an error")
    if result.artifact is not None:
        return result.artifact
    content = result.content
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


class GateWrapper:
    """``wrap_tool_call`` / ``awrap_tool_call`` that put ``gate`` in front of every tool call.

    ``gate`` is the caller's: its table says which tools may run and what each
    takes and returns; its ``fn`` s are not called, the agent's own tools are.
    The calls go through ``self.gate``, a gate over the same table sharing the
    caller's write store and records (ask it for ``stats``). ``scope``,
    ``approvals`` and ``run_id`` as in ``gated_tools``.
    """

    def __init__(self, gate: Gate, *, scope: Collection[str] | None = None,
                 approvals: Iterable[Approval] = (), run_id: str | None = None) -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"the gate must be an agtool.Gate, got {type(gate).__name__}")
        self.gate = _shadow(gate)
        self._caller = Caller(scope, approvals, run_id)

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolMessage:
        call = request.tool_call
        name, args, call_id = call.get("name"), call.get("args"), call.get("id")
        def body(checked: dict[str, Any]) -> Any:
            return result_value(_handled(handler, request, checked))

        scope, approvals, run_id, step_id = self._caller.for_call(_config(request), call_id)
        with _bound(name, body):
            answer = self.gate.call_for_model(name, args, scope=scope, run_id=run_id,
                                              step_id=step_id, approvals=approvals)
        return tool_message(answer, call_id, name)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: AsyncHandler) -> ToolMessage:
        call = request.tool_call
        name, args, call_id = call.get("name"), call.get("args"), call.get("id")

        async def body(checked: dict[str, Any]) -> Any:
            try:
                result = await handler(_checked_request(request, checked))
            except GraphBubbleUp as signal:
                raise _Bubble(signal) from None
            return result_value(result)

        scope, approvals, run_id, step_id = self._caller.for_call(_config(request), call_id)
        with _bound(name, body):
            answer = await self.gate.acall_for_model(name, args, scope=scope, run_id=run_id,
                                                     step_id=step_id, approvals=approvals)
        return tool_message(answer, call_id, name)


@contextmanager
def _bound(name: object, body: Callable[[dict[str, Any]], Any]) -> Iterator[None]:
    """The agent's tool bound for the call under way; LangGraph's interrupt let out as it was."""
    token = _BOUND.set((name, body))
    try:
        yield
    except _Bubble as bubble:
        raise bubble.signal from None
    finally:
        _BOUND.reset(token)


def _handled(handler: Handler, request: ToolCallRequest, checked: dict[str, Any]) -> object:
    try:
        return handler(_checked_request(request, checked))
    except GraphBubbleUp as signal:
        raise _Bubble(signal) from None


def _checked_request(request: ToolCallRequest, checked: dict[str, Any]) -> ToolCallRequest:
    """The call with the checked args; an id that is not a str becomes ``""``, so the
    agent's tool still answers a ``ToolMessage`` (with no id it answers a bare value,
    which ``ToolNode`` raises on)."""
    call_id = request.tool_call.get("id")
    return request.override(tool_call={**request.tool_call, "args": checked,
                                       "id": call_id if type(call_id) is str else ""})


def _config(request: ToolCallRequest) -> object:
    return getattr(request.runtime, "config", None)



