"""An MCP upstream that answers in every shape the proxy must map: errors, text, pages.

Run as ``python tests/_erring_server.py``, a stdio MCP server on the SDK's
low-level ``Server``. It lists its tools two to a page (``nextCursor``), so a
reader that stops at the first page misses some. Its tools, all reads:

- ``crash()`` raises ``MCPError(INTERNAL_ERROR)``: the upstream's body may have run;
- ``refuse()`` raises ``MCPError(INVALID_PARAMS)``: a request the upstream refused;
- ``slow()`` raises ``MCPError(REQUEST_TIMEOUT)``: the upstream says it gave up;
- ``closed()`` raises ``MCPError(CONNECTION_CLOSED)`` and keeps serving;
- ``tool_error()`` answers ``isError`` with the text ``"no such order"``;
- ``text(value)`` answers ``value`` as its only text block, no structured content.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
NAMES = ("crash", "refuse", "slow", "closed", "tool_error", "text")
#: The MCP error each raising tool answers with.
CODES = {"crash": types.INTERNAL_ERROR, "refuse": types.INVALID_PARAMS,
         "slow": types.REQUEST_TIMEOUT, "closed": types.CONNECTION_CLOSED}
PAGE = 2


def _tool(name: str) -> types.Tool:
    properties = {"value": {"type": "string"}} if name == "text" else {}
    return types.Tool(name=name, description=f"The {name} tool.",
                      input_schema={"type": "object", "properties": properties,
                                    "additionalProperties": False},
                      annotations=READ)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                     ) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    return types.ListToolsResult(tools=[_tool(name) for name in NAMES[start:end]],
                                 next_cursor=str(end) if end < len(NAMES) else None)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name in CODES:
        raise MCPError(CODES[params.name], f"{params.name} failed upstream")
    if params.name == "tool_error":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="no such order")], is_error=True)
    value = str((params.arguments or {}).get("value", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)])


async def main() -> None:
    app: Server[Any] = Server("erring", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
