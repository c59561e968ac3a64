"""A gate's table as a pydantic-ai toolset: the model sees the gate's schema, the gate its args.

``GatedToolset`` is a leaf ``AbstractToolset``. Each tool's definition carries
``to_json_schema`` of its contract (``strict`` when OpenAI's strict mode can
say it exactly), and its args validator hands the model's arguments on
unchanged: pydantic-ai's lax validation would run ``"5"`` as 5 and ``True``
as 1, so nothing is validated before the gate. Every call is
``Gate.acall_for_model``, answered as ``_answer.settled`` says.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from .._adapter_io import model_args
from .._authority import Approval
from .._gate import Gate
from .._jsonschema import openai_strict_problems, to_json_schema
from ._answer import Caller, settled

__all__ = ["GatedToolset", "gate_tool_def", "gated_toolset"]


class _AsSent:
    """An args validator that validates nothing: the gate sees what the model sent."""

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> Any:
        return model_args(input)

    def validate_python(self, input: Any, **_: Any) -> Any:
        return input


AS_SENT = _AsSent()


def gate_tool_def(gate: Gate, name: str, description: str = "") -> ToolDefinition | None:
    """The pydantic-ai definition of ``name`` as the gate enforces it; ``None`` if the table
    has no valid entry for it."""
    contract = gate.contract(name)
    if contract is None:
        return None
    schema = {key: value for key, value in to_json_schema(gate.table, name).items()
              if key != "$schema"}  # the provider fixes the dialect, as on export
    return ToolDefinition(name=name, description=contract.description or description,
                          parameters_json_schema=schema,
                          strict=not openai_strict_problems(gate.table, name))


class GatedToolset(AbstractToolset[Any]):
    """The tools of a gate's table, each call gated; see ``gated_toolset``."""

    def __init__(self, gate: Gate, names: Iterable[str] | None = None, *, caller: Caller,
                 max_retries: int | None = None, id: str | None = "agtool") -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"gated_toolset needs an agtool.Gate, got {type(gate).__name__}")
        self.gate = gate
        self._caller = caller
        self._max_retries = max_retries
        self._id = id
        self._defs: dict[str, ToolDefinition] = {}
        for name in gate.table if names is None else names:
            made = gate_tool_def(gate, name) if type(name) is str else None
            if made is None:
                raise ValueError(f"{name!r} is not a valid tool of this gate's table")
            self._defs[name] = made

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        retries = ctx.max_retries if self._max_retries is None else self._max_retries
        return {name: ToolsetTool(toolset=self, tool_def=tool_def, max_retries=retries,
                                  args_validator=AS_SENT)
                for name, tool_def in self._defs.items()}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        answer = await self.gate.acall_for_model(name, tool_args, **self._caller.for_call(ctx))
        return settled(answer, tool_args)


def gated_toolset(gate: Gate, names: Iterable[str] | None = None, *,
                  scope: Collection[str] | None = None,
                  approvals: Iterable[Approval] = (), run_id: str | None = None,
                  step_id: str | None = None, max_retries: int | None = None,
                  id: str | None = "agtool") -> GatedToolset:
    """``names`` (default: every tool) of ``gate``'s table as a pydantic-ai toolset.

    ``Agent(model, toolsets=[gated_toolset(gate)])``. ``scope`` and ``approvals``
    are the caller's authority (default: the gate's scope, no approvals);
    ``approvals`` is read on every call, and a call resumed after a person
    approved it also gets those in its ``DeferredToolResults.metadata``
    (``APPROVALS_KEY``). The run id is the conversation's (else the run's) id
    unless ``run_id`` is given, the step id the tool-call id unless ``step_id``
    is (a fixed one keys a write by its run and business key alone).
    ``max_retries`` is each tool's retry budget (default: the agent's);
    ``id`` names the toolset for durable execution.
    """
    return GatedToolset(gate, names, caller=Caller(scope, approvals, run_id, step_id),
                        max_retries=max_retries, id=id)
