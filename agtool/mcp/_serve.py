"""A gate served as an MCP server: its table as tools, every call through the gate.

Built on the SDK's low-level ``Server``, so each tool is listed with exactly
the schemas the gate enforces and the arguments reach the gate as the client
sent them: no SDK model parses, coerces or drops them first.

Whose run a call belongs to (``run_of``), for its writes and its memo:

- a run the client names, ``_meta["agtool/run_id"]``, is kept apart per
  client: prefixed by the authenticated client (``--token-env``'s variable),
  else by the protocol session, else by the HTTP connection, else (stdio, in
  process) by this server's one connection. Two clients naming the same run
  never share a key.
- else the protocol session (``Mcp-Session-Id`` of a 2025 handshake client);
- else each request is a run of its own: a write asked twice runs twice,
  never answered from another client's write. A read with no run is
  remembered gate-wide, as any caller of this gate may make it.

A call's ``step_id`` is ``_meta["agtool/step_id"]``, or else ``DEFAULT_STEP``:
JSON-RPC request ids differ on every retry, so a write repeated in the same
run with the same business key (``key_args``, by default all arguments) is
recognised as a retry and answered from the write store. That is the one key
a model's retry needs: the host names the run, the business key the write.

A call that touches the write store (a write, an approval) runs off the
event loop when its body is sync, so one slow key never stalls another
session; a sync read named in ``on_loop`` runs on the loop, through the
gate's compiled fast path, with no hop to a worker thread.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import ListenHandler

from .._adapter_io import rendered
from .._authority import Approval
from .._contract import Spec
from .._gate import Gate
from .._jsonschema import tool_spec
from .._records import REDACTED
from .._run import is_async_body
from ._approval import ElicitedApproval
from ._changes import ListChanges
from ._rates import Rates

__all__ = ["APPROVAL_META", "DEFAULT_STEP", "ERROR_META", "PRINCIPAL_SCOPE_KEY", "RUN_ID_META",
           "STEP_ID_META", "Dispatch", "build_server", "gated_tools", "result_of", "run_of"]

_log = logging.getLogger("agtool")

#: ``_meta`` keys a client may set on ``tools/call`` to name its run and its step.
RUN_ID_META = "agtool/run_id"
STEP_ID_META = "agtool/step_id"
#: The ``_meta`` key of an approval token (``Gate.approve``) an operator issued for a call.
APPROVAL_META = "agtool/approval"
#: The ``_meta`` key of a refusal's structured error (``{"code", "retryable", ...}``).
ERROR_META = "agtool/error"
#: The step of a call that names none: the run and the business key then make the key.
DEFAULT_STEP = "tools/call"
#: Where the HTTP door (``agtool.mcp._http``) leaves the authenticated client in the ASGI scope.
PRINCIPAL_SCOPE_KEY = "agtool.principal"

#: A tool served beside the gated ones, answered by its own handler (the proxy's opt-outs).
Forward = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


def gated_tools(gate: Gate) -> list[types.Tool]:
    """The gate's tools as MCP lists them: schemas and annotations from the contracts.

    A returned value marked ``sensitive`` goes out as ``"[redacted]"``, so its
    ``outputSchema`` says only that it is there: a client validating the
    structured content against the listed schema must not refuse the redaction.
    An entry that no longer makes a tool (replaced by a broken one after
    start-up) is left out, with a warning naming it: the others are listed.
    """
    tools = []
    for name in list(gate.table):
        try:
            tools.append(_listed(gate, name))
        except Exception as exc:  # one broken entry must not hide every other tool
            _log.warning("tool %r is not listed: its entry is broken (%s)", name, exc)
    return tools


def _listed(gate: Gate, name: str) -> types.Tool:
    spec = tool_spec(gate.table, name, "mcp")
    contract = gate.contract(name)
    if contract is not None:
        _open_redacted(spec["outputSchema"], contract.returns)
    return types.Tool.model_validate(spec)


def _open_redacted(schema: dict[str, Any], specs: Mapping[str, Spec]) -> None:
    properties = schema.get("properties", {})
    for key, spec in specs.items():
        if key in properties:
            properties[key] = _opened(properties[key], spec)


def _opened(node: dict[str, Any], spec: Spec) -> dict[str, Any]:
    if spec.sensitive:
        return {"description": f"Sensitive: shown as {REDACTED!r}.", "x-agtool-sensitive": True}
    if isinstance(spec.item, Spec) and "items" in node:
        node["items"] = _opened(node["items"], spec.item)
    elif isinstance(spec.item, Mapping) and "items" in node:
        _open_redacted(node["items"], spec.item)
    return node


def result_of(answer: Mapping[str, Any]) -> types.CallToolResult:
    """A ``call_for_model`` answer as a tool result every MCP client can read.

    Success: ``structuredContent`` is the value (sensitive fields redacted),
    what the listed ``outputSchema`` describes. Failure: ``isError``, the
    structured error in ``_meta["agtool/error"]``, and no
    ``structuredContent``: the error envelope never fits a tool's success
    ``outputSchema``, and TypeScript SDK 1.x clients validate it even when
    ``isError`` is set, throwing ``-32602`` instead of handing the model the
    error. The text block is the whole answer in JSON either way, so a host
    that shows the model text only still shows the source and trust of the
    output, or the error's code, message and fields. An answer with no JSON text
    is the error ``result:unrenderable`` (``rendered``), never a JSON-RPC error;
    the structured content is read back from the text, so that it holds only
    what JSON (and so the SDK's serializer) can write.
    """
    answer, shown = rendered(dict(answer), default=str)
    text = types.TextContent(type="text", text=shown)
    if answer.get("ok"):
        return types.CallToolResult(content=[text], structured_content=json.loads(shown)["data"])
    return types.CallToolResult(content=[text], is_error=True,
                                _meta={ERROR_META: answer.get("error")})


# -- whose run a call is -----------------------------------------------------------------------

def run_of(ctx: Any, meta: Mapping[str, Any], own: str, *, writes: bool) -> str | None:
    """The run of one ``tools/call`` (see the module's docstring); ``None``: a read, gate-wide."""
    named = _given(meta, RUN_ID_META)
    if named:
        # A JSON list: no run id a client picks can be made to look like another client's.
        return json.dumps([client_of(ctx, own), named])
    session = _session_of(ctx)
    if session:
        return session
    return "mcp-request:" + secrets.token_hex(8) if writes else None


def client_of(ctx: Any, own: str) -> str:
    """Who is calling, as far as this server can tell: the authenticated client, else the
    protocol session, else the HTTP connection, else this server's own one connection."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    principal = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, Mapping) else None
    if isinstance(principal, str) and principal:
        return "client:" + principal
    session = _session_of(ctx)
    if session:
        return session
    peer = getattr(request, "client", None)
    if peer is not None:
        return f"connection:{getattr(peer, 'host', '')}:{getattr(peer, 'port', '')}"
    return own


def _given(meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    return value if type(value) is str else ""


def _session_of(ctx: Any) -> str:
    """The streamable HTTP session of this request, ``""`` on stdio or sessionless HTTP."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    session = headers.get("mcp-session-id") if headers is not None else None
    return f"mcp-session:{session}" if isinstance(session, str) and session else ""


# -- one call ------------------------------------------------------------------------------------

class Dispatch:
    """What ``mcp serve``, the proxy and the in-process middleware answer one ``tools/call`` with.

    ``on_loop`` names sync reads cheap enough to run on the event loop (their
    compiled fast path, no worker thread); ``rates`` limits calls per tool and
    client; a tool that needs an approval asks a human over MCP elicitation
    when the client can show a form (``ElicitedApproval``).
    """

    def __init__(self, gate: Gate, *, forwarded: Mapping[str, tuple[types.Tool, Forward]]
                 | None = None, on_loop: Collection[str] = (), rates: Rates | None = None,
                 operator_hints: bool = True) -> None:
        unknown = sorted(set(on_loop) - set(gate.table))
        if unknown:
            raise ValueError(f"on_loop names {unknown[0]!r}, which the table does not have")
        self.gate = gate
        # Live, not a copy: the proxy changes its listing in place as the upstream's changes.
        self.forwarded = forwarded if forwarded is not None else {}
        self.on_loop = frozenset(on_loop)
        self.rates = rates
        self.operator_hints = operator_hints
        self.approvals = ElicitedApproval(gate)
        # stdio and in-process serve one connection per server: its run ids are its own.
        self.own = "connection:" + secrets.token_hex(8)

    def tools(self) -> list[types.Tool]:
        return gated_tools(self.gate) + [tool for tool, _ in self.forwarded.values()]

    async def call(self, ctx: Any, name: str, arguments: dict[str, Any],
                   meta: Mapping[str, Any], params: Any = None
                   ) -> types.CallToolResult | types.InputRequiredResult:
        gate = self.gate
        if name in self.forwarded and name not in gate.table:
            return await self.forwarded[name][1](name, arguments)
        if self.rates is not None:
            wait = self.rates.take(name, client_of(ctx, self.own))
            if wait:
                return result_of(self.rates.refusal(name, wait))
        contract = gate.contract(name)
        stores = contract is not None and (contract.effect == "write" or contract.needs_approval)
        run_id = run_of(ctx, meta, self.own, writes=stores)
        step_id = _given(meta, STEP_ID_META) or DEFAULT_STEP
        approvals = [Approval(token)] if (token := _given(meta, APPROVAL_META)) else []
        if contract is not None and contract.needs_approval and not approvals:
            asked = await self.approvals.ask(ctx, name, arguments, run_id, step_id, params)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            approvals = [Approval(token) for token in asked]
        sync_body = contract is not None and not is_async_body(contract.fn)
        untimed = contract is not None and contract.timeout is None
        if sync_body and stores:
            # The whole call, store and body, on a worker thread: the loop serves the others
            # while this one waits on a slow or locked key. Not cancelled half-way: a write
            # that started settles its key before the cancellation is let through.
            answer = await anyio.to_thread.run_sync(_call_sync, gate, name, arguments, run_id,
                                                    step_id, approvals)
        elif sync_body and untimed and name in self.on_loop:
            # Declared cheap: the compiled fast path on the loop, no hop to a worker thread.
            # (Not a timed body: waiting out its timeout here would hold the loop that long.)
            answer = gate.call_for_model(name, arguments, run_id=run_id, step_id=step_id)
        else:
            answer = await gate.acall_for_model(name, arguments, run_id=run_id,
                                                step_id=step_id, approvals=approvals)
        return self._result(answer, contract, elicits=self.approvals.can_ask(ctx))

    def _result(self, answer: dict[str, Any], contract: Any, *,
                elicits: bool) -> types.CallToolResult:
        if self.operator_hints and not answer.get("ok"):
            _hint(answer, contract, elicits)
        return result_of(answer)


def _call_sync(gate: Gate, name: str, arguments: dict[str, Any], run_id: str | None,
               step_id: str, approvals: list[Approval]) -> dict[str, Any]:
    return gate.call_for_model(name, arguments, run_id=run_id, step_id=step_id,
                               approvals=approvals)


def _hint(answer: dict[str, Any], contract: Any, elicits: bool) -> None:
    """Say, in a refusal of authority, what lets the call through: the operator's flag."""
    error = answer.get("error") or {}
    reason = str((error.get("details") or {}).get("reason", ""))
    if reason.startswith("auth:scope:"):
        risk = reason.split(":", 2)[2]
        error["message"] = (f"{error.get('message', '')}; the server's operator allows "
                            f"{risk} tools by starting it with --scope {risk}")
    elif reason == "auth:approval" and contract is not None:
        how = ("the approval prompt was declined or not answered" if elicits else
               "this client cannot show an approval prompt (MCP elicitation, form mode)")
        error["message"] = (f"{error.get('message', '')}; {how}: a person approves it in a "
                            f"client that shows MCP elicitation forms, or the operator "
                            f"passes an approval of these exact arguments (Gate.approve, "
                            f"signed with the server's secret) in _meta['agtool/approval']")


def build_server(gate: Gate, *, name: str = "agtool",
                 forwarded: Mapping[str, tuple[types.Tool, Forward]] | None = None,
                 on_loop: Collection[str] = (), rates: Rates | None = None,
                 changes: ListChanges | None = None) -> Server[Any]:
    """A low-level MCP ``Server`` whose tools are the gate's (and ``forwarded`` ones, ungated).

    With ``changes``, it serves ``subscriptions/listen`` and says ``tools.listChanged``:
    ``changes.tell()`` reaches every client that listens, or listed on an earlier version.
    """
    dispatch = Dispatch(gate, forwarded=forwarded, on_loop=on_loop, rates=rates)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        if changes is not None:
            changes.listed(ctx.session)
        return types.ListToolsResult(tools=dispatch.tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult:
        arguments: dict[str, Any] = {} if params.arguments is None else params.arguments
        return await dispatch.call(ctx, params.name, arguments, params.meta or {}, params)

    if changes is None:
        return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)
    server: Server[Any] = Server(name, on_list_tools=list_tools, on_call_tool=call_tool,
                                 on_subscriptions_listen=ListenHandler(changes.bus))
    # Earlier versions read listChanged from the options every transport asks for.
    server.create_initialization_options = functools.partial(  # type: ignore[method-assign]
        server.create_initialization_options, NotificationOptions(tools_changed=True))
    return server
