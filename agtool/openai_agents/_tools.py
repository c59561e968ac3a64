"""A gate's table as OpenAI Agents ``FunctionTool`` s, and a guardrail for tools an agent has.

``function_tools(gate)`` makes one ``FunctionTool`` per table entry: its
``params_json_schema`` is the gate's (``tool_spec(..., "openai")``: strict
exactly when strict mode can say the contract, with the optional keys typed
nullable, which the gate reads as "not given"), and its ``on_invoke_tool``
hands the model's raw JSON to ``Gate.acall_for_model`` and the answer back
as JSON text. The SDK's ``function_tool`` would run ``"5"`` as 5, ``True``
as 1 and drop an extra argument; here none of that reaches a body. A tool
whose contract needs an approval interrupts the run for a person
(``needs_approval``) when its args pass the gate's checks, and the gate still
runs it only with ``gate.approve`` of its exact args among the adapter's
``approvals``: the SDK's approval is by call id.

``gate_guardrail(gate)`` is a tool input guardrail for tools the agent
already has: it checks the raw JSON against the table (whitelist, authority,
args) without running anything, and rejects a call with the structured error.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from agents import FunctionTool, Tool, ToolGuardrailFunctionOutput, ToolInputGuardrail
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData

from .. import _engine_keys as keys_for
from .._adapter_io import answer_text, model_args
from .._authority import Approval
from .._gate import Gate
from .._jsonschema import tool_spec

__all__ = ["function_tools", "gate_guardrail"]


class _Invoke:
    """``on_invoke_tool`` of one gated tool: the model's raw JSON through the gate."""

    def __init__(self, gate: Gate, name: str, scope: Collection[str] | None,
                 approvals: Iterable[Approval], run_id: str | None,
                 step_id: str | None) -> None:
        self.gate, self.name, self.scope, self.approvals = gate, name, scope, approvals
        self.run_id, self.step_id = run_id, step_id

    async def __call__(self, ctx: ToolContext[Any], raw_json: str) -> str:
        keys = keys_for.openai_agents(ctx, self.run_id)
        answer = await self.gate.acall_for_model(
            self.name, model_args(raw_json), scope=self.scope, approvals=self.approvals,
            run_id=keys["run_id"], step_id=keys["step_id"] if self.step_id is None
            else self.step_id)
        return answer_text(answer)


class _NeedsApproval:
    """``needs_approval`` of a tool whose contract needs one: a person is asked only about a
    call the gate would otherwise run, never about args it refuses anyway."""

    def __init__(self, gate: Gate, name: str, scope: Collection[str] | None) -> None:
        self.gate, self.name, self.scope = gate, name, scope

    async def __call__(self, ctx: object, params: dict[str, Any], call_id: str) -> bool:
        answer = await self.gate.acall_for_model(self.name, params, scope=self.scope,
                                                 dry_run=True)
        return bool(answer["ok"])


def function_tools(gate: Gate, names: Iterable[str] | None = None, *,
                   scope: Collection[str] | None = None,
                   approvals: Iterable[Approval] = (), run_id: str | None = None,
                   step_id: str | None = None) -> list[Tool]:
    """``FunctionTool`` s for ``names`` (default: every tool) of ``gate``'s table.

    Typed as the SDK's ``Tool``, which ``Agent(tools=...)`` takes.

    ``Agent(name=..., tools=function_tools(gate))``. ``scope`` and ``approvals``
    are the caller's authority (default: the gate's scope, no approvals);
    ``approvals`` is read on every call, so an approval appended after a person
    said yes takes effect when the run resumes. The run id is ``run_id``, else the
    run config's ``group_id``; the step id the tool-call id unless ``step_id`` is
    given (a fixed one keys a write by its run and business key alone). A write
    called with no run id is refused ``write:no_key``.
    """
    if not isinstance(gate, Gate):
        raise TypeError(f"function_tools needs an agtool.Gate, got {type(gate).__name__}")
    tools: list[Tool] = []
    for name in gate.table if names is None else names:
        contract = gate.contract(name) if type(name) is str else None
        if contract is None:
            raise ValueError(f"{name!r} is not a valid tool of this gate's table")
        spec = tool_spec(gate.table, contract.name, "openai")["function"]
        tools.append(FunctionTool(
            name=contract.name, description=contract.description,
            params_json_schema=spec["parameters"], strict_json_schema=spec["strict"],
            on_invoke_tool=_Invoke(gate, contract.name, scope, approvals, run_id, step_id),
            needs_approval=_NeedsApproval(gate, contract.name, scope)
            if contract.needs_approval else False))
    return tools


def gate_guardrail(gate: Gate, *, scope: Collection[str] | None = None
                   ) -> ToolInputGuardrail[Any]:
    """A tool input guardrail that lets a call through only if the gate would run it.

    ``function_tool(f, tool_input_guardrails=[gate_guardrail(gate)])``. The tool's
    name is looked up in ``gate``'s table (a tool it does not name is rejected),
    then ``scope`` (default: the gate's) and the raw args are checked, as a dry
    run: nothing runs, nothing is remembered and no write is keyed. A refusal is
    ``reject_content`` with the structured error, which the model is handed in
    place of the tool's output; ``output_info`` holds the gate's answer.
    """
    if not isinstance(gate, Gate):
        raise TypeError(f"gate_guardrail needs an agtool.Gate, got {type(gate).__name__}")

    async def agtool_gate(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        call = data.context
        answer = await gate.acall_for_model(call.tool_name, model_args(call.tool_arguments),
                                            scope=scope, dry_run=True)
        if answer["ok"]:
            return ToolGuardrailFunctionOutput.allow()
        return ToolGuardrailFunctionOutput.reject_content(answer_text(answer), answer)

    return ToolInputGuardrail(agtool_gate)
