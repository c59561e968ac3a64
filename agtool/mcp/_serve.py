"""A gate served as an MCP server: its table as tools, every call through the gate.

Built on the SDK's low-level ``Server``, so each tool is listed with exactly
the schemas the gate enforces and the arguments reach the gate as the client
sent them: no SDK model parses, coerces or drops them first.

A call's ``run_id`` is the client's ``_meta["agtool/run_id"]``, or else its
MCP session (the ``Mcp-Session-Id`` of streamable HTTP), or else the
server's own id (stdio serves one connection per process). Its ``step_id``
is ``_meta["agtool/step_id"]``, or else ``DEFAULT_STEP``: JSON-RPC request
ids differ on every retry, so a write repeated in the same run with the same
business key (``key_args``, by default all arguments) is recognised as a
retry and answered from the write store.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server

from .._contract import Spec
from .._gate import Gate
from .._jsonschema import tool_spec
from .._records import REDACTED

__all__ = ["DEFAULT_STEP", "RUN_ID_META", "STEP_ID_META", "build_server", "gated_tools",
           "result_of"]

#: ``_meta`` keys a client may set on ``tools/call`` to name its run and its step.
RUN_ID_META = "agtool/run_id"
STEP_ID_META = "agtool/step_id"
#: The step of a call that names none: the run and the business key then make the key.
DEFAULT_STEP = "tools/call"

#: A tool served beside the gated ones, answered by its own handler (the proxy's opt-outs).
Forward = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


def gated_tools(gate: Gate) -> list[types.Tool]:
    """The gate's tools as MCP lists them: schemas and annotations from the contracts.

    A returned value marked ``sensitive`` goes out as ``"[redacted]"``, so its
    ``outputSchema`` says only that it is there: a client validating the
    structured content against the listed schema must not refuse the redaction.
    """
    tools = []
    for name in gate.table:
        spec = tool_spec(gate.table, name, "mcp")
        contract = gate.contract(name)
        if contract is not None:
            _open_redacted(spec["outputSchema"], contract.returns)
        tools.append(types.Tool.model_validate(spec))
    return tools


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
    """A ``call_for_model`` answer as a tool result: structured content and a text block.

    Success: ``structuredContent`` is the value (sensitive fields redacted), what
    the listed ``outputSchema`` describes. Failure: ``isError`` and the whole
    answer, with its structured ``error``. The text block is the whole answer
    in JSON either way, so a host that shows the model text only still shows
    the source and trust of the output, or the error's code and fields.
    """
    text = types.TextContent(type="text", text=json.dumps(answer, ensure_ascii=False,
                                                           default=str))
    if answer.get("ok"):
        return types.CallToolResult(content=[text], structured_content=answer.get("data"))
    return types.CallToolResult(content=[text], structured_content=dict(answer),
                                is_error=True)


def build_server(gate: Gate, *, name: str = "agtool",
                 forwarded: Mapping[str, tuple[types.Tool, Forward]] | None = None
                 ) -> Server[Any]:
    """A low-level MCP ``Server`` whose tools are the gate's (and ``forwarded`` ones, ungated)."""
    extra = forwarded if forwarded is not None else {}  # live: the proxy's listing may change
    own_run = "mcp-" + secrets.token_hex(8)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=gated_tools(gate) + [tool for tool, _ in
                                                               extra.values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        arguments: dict[str, Any] = {} if params.arguments is None else params.arguments
        if params.name in extra and params.name not in gate.table:
            return await extra[params.name][1](params.name, arguments)
        meta: Mapping[str, Any] = params.meta or {}
        run_id = _given(meta, RUN_ID_META) or _session_of(ctx) or own_run
        step_id = _given(meta, STEP_ID_META) or DEFAULT_STEP
        answer = await gate.acall_for_model(params.name, arguments, run_id=run_id,
                                            step_id=step_id)
        return result_of(answer)

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _given(meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    return value if type(value) is str else ""


def _session_of(ctx: Any) -> str:
    """The streamable HTTP session of this request, ``""`` on stdio or stateless HTTP."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    session = headers.get("mcp-session-id") if headers is not None else None
    return f"mcp-session:{session}" if isinstance(session, str) and session else ""
