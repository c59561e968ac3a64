"""agtool at the door of OpenAI Agents SDK agents.

- ``function_tools(gate)``: the gate's table as ``FunctionTool`` s,
  ``Agent(name=..., tools=function_tools(gate))``; the model is shown the
  schema the gate enforces (strict where the contract allows), and its raw
  JSON reaches the gate unparsed by the SDK.
- ``gate_guardrail(gate)``: for tools the agent already has,
  ``function_tool(f, tool_input_guardrails=[gate_guardrail(gate)])``; a check
  of the raw JSON against the table that rejects with the structured error.

A refusal is handed to the model as the gate's structured error, never
raised into the run. A write is keyed by the run id (``run_id=``, else the
run config's ``group_id``) and the tool-call id, so a call retried under the
same id runs once.

Needs the ``openai-agents`` extra (``pip install 'agtool-gate[openai-agents]'``).
"""

from __future__ import annotations

try:
    import agents as _sdk  # noqa: F401 - imported for the one-line error below
except ImportError:
    raise ImportError("agtool.openai_agents needs the openai-agents extra: "
                      "pip install 'agtool-gate[openai-agents]'") from None

from ._tools import function_tools, gate_guardrail

__all__ = ["function_tools", "gate_guardrail"]
