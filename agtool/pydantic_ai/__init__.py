"""agtool at the door of pydantic-ai agents.

Two ways in, one line each:

- ``gated_toolset(gate)``: the gate's table as a toolset,
  ``Agent(model, toolsets=[gated_toolset(gate)])``; the model is shown exactly
  the schema the gate enforces.
- ``GateCapability(gate)``: for an agent that already has its tools,
  ``Agent(model, tools=[...], capabilities=[GateCapability(gate)])``; the
  table is the whitelist and the contracts, the agent's tools the bodies.

The model's args reach the gate as it sent them (no ``"5"`` run as 5, no
``True`` as 1, an extra argument refused). A refusal it can fix is a retry
prompt (``ModelRetry``) holding the structured error, any other failure a
``ToolFailed``, and an ``APPROVAL_REQUIRED`` defers the call to a person
(``ApprovalRequired`` -> ``DeferredToolRequests``). A person's approval is
the gate's: ``gate.approve(name, args)`` of the args that will run, handed
back in ``DeferredToolResults.metadata[call_id][APPROVALS_KEY]``, so a call
resumed with other args (``ToolApproved(override_args=...)``) is deferred
again for those. A write is keyed by the conversation id and the tool-call
id, so a call retried under the same id runs once.

Needs the ``pydantic-ai`` extra (``pip install 'agtool-gate[pydantic-ai]'``).
"""

from __future__ import annotations

try:
    import pydantic_ai as _sdk  # noqa: F401 - imported for the one-line error below
except ImportError:
    raise ImportError("agtool.pydantic_ai needs the pydantic-ai extra: "
                      "pip install 'agtool-gate[pydantic-ai]'") from None

from ._answer import APPROVALS_KEY, ARGS_KEY, ERROR_KEY
from ._capability import GateCapability
from ._toolset import GatedToolset, gated_toolset

__all__ = ["APPROVALS_KEY", "ARGS_KEY", "ERROR_KEY", "GateCapability", "GatedToolset",
           "gated_toolset"]
