"""A person's approval over MCP elicitation (form mode), bound to the exact arguments.

A tool of risk ``external_effect`` or ``irreversible`` runs only with an
approval of its exact arguments (``Gate.approve``). Over MCP, when the client
said it can show a form (``capabilities.elicitation``), the server asks:

- a 2026-07-28 client (no back-channel) is answered an ``InputRequiredResult``
  whose ``request_state`` is the gate's signed, single-use approval of these
  arguments, valid for ``APPROVAL_SECONDS``; the client shows the form and
  calls again with the person's answer. Only an ``accept`` with
  ``approve: true`` hands the token to the gate, which checks that it covers
  exactly the arguments of this call (other arguments are refused) and spends
  it once.
- a client with a back-channel (a 2025 handshake) is sent ``elicitation/create``
  during the call, and the approval is issued only when the person accepts.

The plan shown is the gate's ``dry_run``: sensitive arguments redacted. A
client that cannot show a form is answered ``APPROVAL_REQUIRED``, with a
message that says how an operator approves instead.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError, NoBackChannelError

from .._gate import Gate

__all__ = ["APPROVAL_INPUT", "APPROVAL_SECONDS", "ElicitedApproval"]

_log = logging.getLogger("agtool")
#: The key of the approval form among an ``InputRequiredResult``'s requests.
APPROVAL_INPUT = "agtool/approval"
#: Seconds an approval asked for over MCP stays valid: the person's answer must come back.
APPROVAL_SECONDS = 600.0
_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this call",
                               "description": "Run it with exactly the arguments shown."}},
    "required": ["approve"],
}


class ElicitedApproval:
    """Asks a person, over the MCP client, to approve one call of a gate's tool."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def can_ask(self, ctx: Any) -> bool:
        """Whether this client declared it shows elicitation forms (form mode, the default)."""
        session = getattr(ctx, "session", None)
        try:
            capabilities = session.client_capabilities if session is not None else None
        except Exception:  # a context without a connection (a test double) cannot ask
            return False
        elicitation = getattr(capabilities, "elicitation", None)
        if elicitation is None:
            return False
        # The spec: a client that names neither mode supports form mode.
        return elicitation.form is not None or elicitation.url is None

    async def ask(self, ctx: Any, name: str, arguments: dict[str, Any], run_id: str | None,
                  step_id: str, params: Any) -> list[str] | types.InputRequiredResult:
        """The approvals this call goes on with (none: refused), or the form to show first."""
        if not self.can_ask(ctx):
            return []
        plan = self.gate.call_for_model(name, arguments, run_id=run_id, step_id=step_id,
                                        dry_run=True)
        if not plan.get("ok"):
            return []  # refused for its arguments or its scope: nothing to approve
        responses = getattr(params, "input_responses", None) or {}
        if APPROVAL_INPUT in responses:  # the second round of a 2026-07-28 client
            state = getattr(params, "request_state", None)
            # The gate checks the token: signed by it, for this tool and these exact args.
            return [state] if _accepted(responses[APPROVAL_INPUT]) and isinstance(
                state, str) else []
        try:
            return await self._elicited(ctx, name, arguments, plan["data"])
        except NoBackChannelError:  # 2026-07-28: no server-to-client request mid-call
            return self._input_round(name, arguments, plan["data"])

    def _input_round(self, name: str, arguments: dict[str, Any],
                     plan: dict[str, Any]) -> types.InputRequiredResult:
        token = self._issue(name, arguments)
        return types.InputRequiredResult(
            input_requests={APPROVAL_INPUT: types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=_message(plan),
                                                     requested_schema=_FORM))},
            request_state=token)

    async def _elicited(self, ctx: Any, name: str, arguments: dict[str, Any],
                        plan: dict[str, Any]) -> list[str]:
        try:
            answer = await ctx.session.elicit_form(_message(plan), _FORM,
                                                   related_request_id=ctx.request_id)
        except NoBackChannelError:
            raise
        except MCPError as exc:  # the client refused or failed the request
            _log.warning("approval of %s not asked over MCP elicitation (%s)", name, exc)
            return []
        return [self._issue(name, arguments)] if _accepted(answer) else []

    def _issue(self, name: str, arguments: dict[str, Any]) -> str:
        approval = self.gate.approve(name, arguments, by="mcp-elicitation",
                                     expires_in=APPROVAL_SECONDS, single_use=True)
        return str(approval.token)


def _accepted(answer: object) -> bool:
    content = getattr(answer, "content", None)
    return (getattr(answer, "action", None) == "accept" and isinstance(content, dict)
            and content.get("approve") is True)


def _message(plan: dict[str, Any]) -> str:
    """What the person is shown: the tool, its risk, and the arguments (sensitive redacted)."""
    shown = json.dumps(plan.get("args"), ensure_ascii=False, sort_keys=True, default=str)
    return (f"Approve {plan.get('tool')} ({plan.get('risk')})? It will run with exactly "
            f"these arguments: {shown}")
