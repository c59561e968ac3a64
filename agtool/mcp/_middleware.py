"""A gate inside an MCP server someone already has: ``MCPServer(middleware=[...])``.

The SDK's context-tier middleware sees every inbound message before the
server validates it. For a ``tools/call`` of a tool in the gate's table it
answers the call itself, exactly as ``agtool mcp serve`` does (``Dispatch``):
the raw arguments go to the gate, never through the server's own pydantic
model, which would coerce ``"5"`` to 5 and drop unknown arguments. A
``tools/list`` lists those tools with the gate's schemas and annotations, in
the server's own order. Every other message, and every tool the table does
not name, goes on to the server untouched.

FastMCP 1.x's ``add_middleware`` is not part of the installed SDK (mcp 2.x
removed ``mcp.server.fastmcp``), so there is nothing to plug into there.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from typing import Any

import mcp.types as types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

from .._gate import Gate
from ._rates import Rates
from ._serve import Dispatch, client_of, result_of

__all__ = ["GateMiddleware", "RateMiddleware"]


class GateMiddleware(ServerMiddleware[Any]):
    """Context-tier MCP middleware answering the gate's tools through the gate."""

    def __init__(self, gate: Gate, *, on_loop: Collection[str] = (),
                 rates: Rates | None = None) -> None:
        self.dispatch = Dispatch(gate, on_loop=on_loop, rates=rates)
        self.gate = gate

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if ctx.method == "tools/call" and params.get("name") in self.gate.table:
            call = types.CallToolRequestParams.model_validate(
                {**params, "arguments": None})  # the raw arguments go to the gate below
            arguments = params.get("arguments")
            meta = params.get("_meta")
            # Not made a dict here: arguments that are no object are the gate's to refuse.
            return await self.dispatch.call(
                ctx, str(params["name"]), {} if arguments is None else arguments,
                meta if isinstance(meta, Mapping) else {}, call)
        result = await call_next(ctx)
        if ctx.method == "tools/list":
            return self._listed(result)
        return result

    def _listed(self, result: HandlerResult) -> HandlerResult:
        """The server's listing with each gated tool replaced by the gate's own."""
        listing = (result if isinstance(result, types.ListToolsResult)
                   else types.ListToolsResult.model_validate(result or {"tools": []}))
        gated = {tool.name: tool for tool in self.dispatch.tools()}
        tools = [gated.pop(tool.name, tool) for tool in listing.tools]
        # Gated tools the server does not list come last, on its last page.
        listing.tools = tools + ([] if listing.next_cursor else list(gated.values()))
        return listing


class RateMiddleware(ServerMiddleware[Any]):
    """``--rate`` for a server built elsewhere (the proxy's): a ``tools/call`` over its
    tool's limit for this client is answered ``RATE_LIMITED`` before anything runs."""

    def __init__(self, rates: Rates) -> None:
        self.rates = rates
        self.own = "connection:" + secrets.token_hex(8)

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        name = params.get("name")
        if ctx.method == "tools/call" and isinstance(name, str):
            wait = self.rates.take(name, client_of(ctx, self.own))
            if wait:
                return result_of(self.rates.refusal(name, wait))
        return await call_next(ctx)
