"""``GateCapability``: the gate in front of an agent's own pydantic-ai tools.

``Agent(model, tools=[...], capabilities=[GateCapability(gate)])``. The
table is the whitelist and the contracts; the agent's tools are the bodies:

- ``prepare_tools`` shows the model each tool the table names with the
  table's schema, and hides every other function tool (it cannot be called);
- ``wrap_tool_validate`` hands the model's raw args on without pydantic's
  lax validation, which would turn ``"5"`` into 5 and ``True`` into 1;
- ``wrap_tool_execute`` calls a shadow of the gate (``agtool._shadow``) whose
  body is the agent's own tool: it runs only with checked args, its answer is
  checked against the return contract, a write runs once per key, and the
  answer is handed on as ``_answer.settled`` says.

A retry request or deferral the tool raises itself reaches pydantic-ai as
the tool raised it, its write's key freed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import ApprovalRequired, CallDeferred, ModelRetry, RunContext, ToolFailed
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler, WrapToolValidateHandler
from pydantic_ai.exceptions import ToolFailedError, ToolRetryError
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition

from .._adapter_io import model_args
from .._authority import Approval
from .._gate import Gate
from .._shadow import Escape, bound, shadow
from ._answer import Caller, settled
from ._toolset import gate_tool_def

__all__ = ["GateCapability"]

#: What an agent's tool may raise to steer pydantic-ai: let out as it was raised.
_SIGNALS = (ModelRetry, ToolFailed, CallDeferred, ApprovalRequired, ToolRetryError,
            ToolFailedError)


@dataclass
class GateCapability(AbstractCapability[Any]):
    """Gates every function-tool call of a pydantic-ai agent, whatever its tools.

    ``gate``'s table says which tools may run and what each takes and returns;
    its ``fn`` s are not called, the agent's tools are. ``scope``,
    ``approvals``, ``run_id`` and ``step_id`` as in ``gated_toolset``.
    ``self.shadow`` is the gate the calls go through (ask it for ``stats``);
    it shares ``gate``'s write store, records and secret, so ``gate.approve``
    makes approvals it accepts.
    """

    gate: Gate = field(kw_only=False)
    scope: Collection[str] | None = None
    approvals: Iterable[Approval] = ()
    run_id: str | None = None
    step_id: str | None = None
    shadow: Gate = field(init=False, repr=False)
    _caller: Caller = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.gate, Gate):
            raise TypeError(f"GateCapability needs an agtool.Gate, got "
                            f"{type(self.gate).__name__}")
        self.shadow = shadow(self.gate)
        self._caller = Caller(self.scope, self.approvals, self.run_id, self.step_id)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a gate, which no agent spec can name

    async def prepare_tools(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
                            ) -> list[ToolDefinition]:
        shown = []
        for tool_def in tool_defs:
            gated = gate_tool_def(self.gate, tool_def.name, tool_def.description or "")
            if gated is not None:
                shown.append(replace(tool_def, description=gated.description,
                                     parameters_json_schema=gated.parameters_json_schema,
                                     strict=gated.strict))
        return shown

    async def wrap_tool_validate(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                 tool_def: ToolDefinition, args: str | dict[str, Any],
                                 handler: WrapToolValidateHandler) -> dict[str, Any]:
        raw = model_args(args)
        if isinstance(raw, dict):
            return raw  # checked by the gate, at execution, before the tool runs
        # Not an object: the gate refuses it, and pydantic-ai is handed that refusal now.
        answer = await self.shadow.acall_for_model(tool_def.name, raw,
                                                   **self._caller.for_call(ctx))
        return settled(answer, raw)

    async def wrap_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                tool_def: ToolDefinition, args: dict[str, Any],
                                handler: WrapToolExecuteHandler) -> Any:
        async def body(checked: dict[str, Any]) -> Any:
            try:
                return await handler(checked)
            except _SIGNALS as signal:
                raise Escape(signal) from None

        with bound(tool_def.name, body):
            answer = await self.shadow.acall_for_model(tool_def.name, args,
                                                       **self._caller.for_call(ctx))
        return settled(answer, args)
