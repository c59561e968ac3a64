"""An MCP server that answers each call with the W3C trace context it was sent in ``_meta``.

One read-only tool, ``whoami(name)``, whose structured answer holds the
``traceparent`` its request carried (``""`` if none), so a test can tell whether
a proxy in front of it passed the caller's trace on. Run as a stdio server.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="whoami", description="Echo the caller's trace context.",
    input_schema={"type": "object", "properties": {"name": {"type": "string"}},
                  "required": ["name"], "additionalProperties": False},
    output_schema={"type": "object", "properties": {"name": {"type": "string"},
                                                     "traceparent": {"type": "string"}},
                   "required": ["name", "traceparent"]},
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False))


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    meta: Any = params.meta or {}
    seen = meta.get("traceparent") or ""
    answer = {"name": (params.arguments or {}).get("name", ""), "traceparent": seen}
    return types.CallToolResult(content=[types.TextContent(type="text", text=seen)],
                                structured_content=answer)


async def main() -> None:
    server = Server("traced-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.clear()  # its own spans are not what the test reads
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
