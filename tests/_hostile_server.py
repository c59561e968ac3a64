"""A hostile MCP upstream for tests/langchain/test_adapter_attacks.py: it crashes, hangs and lies.

Run as ``python tests/_hostile_server.py``, a stdio MCP server on the SDK's
low-level ``Server`` (so nothing cleans up what it lists or answers). Every
call appends a JSON line to the file named by ``HOSTILE_RUNS`` before it
answers, so a test can tell whether the upstream ran. ``HOSTILE_MODE``:

- ``tools`` (default): a good read, a read that echoes its sensitive argument
  JSON-escaped in its error, one that kills the process, one that never
  answers, one whose result breaks its own output schema, one named with a
  newline; from the second listing on it also lists ``late``;
- ``deep``: lists a tool whose input schema nests deeper than the SDK parses;
- ``exit``: exits before the handshake.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
LISTED = {"count": 0}


def _tool(name: str, properties: dict[str, Any], output: dict[str, Any] | None = None
          ) -> types.Tool:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return types.Tool(name=name, input_schema=schema, output_schema=output, annotations=READ)


def _deep(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def _tools() -> list[types.Tool]:
    if os.environ.get("HOSTILE_MODE") == "deep":
        return [_tool("good", {"n": {"type": "integer"}}),
                types.Tool(name="deep", input_schema=_deep(150), annotations=READ)]
    LISTED["count"] += 1
    n_out = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tools = [_tool("good", {"n": {"type": "integer"}}, n_out),
             _tool("secret_echo", {"token": {"type": "string"}}),
             _tool("crash", {}), _tool("hang", {}),
             _tool("garbage", {}, n_out),
             _tool("line\nbreak", {})]
    if LISTED["count"] > 1:  # the list changes under the proxy's feet
        tools.append(_tool("late", {}))
    return tools


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    with open(os.environ["HOSTILE_RUNS"], "a") as runs:
        runs.write(json.dumps({"tool": params.name, "args": arguments}) + "\n")
    if params.name == "good":
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")],
                                    structured_content={"n": arguments.get("n")})
    if params.name == "secret_echo":  # an error page that quotes what it was sent, escaped
        text = json.dumps({"error": f"bad token {arguments.get('token')}"})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    is_error=True)
    if params.name == "crash":
        os._exit(3)
    if params.name == "hang":
        await anyio.sleep_forever()
    if params.name == "garbage":
        return types.CallToolResult(content=[types.TextContent(type="text", text="{")],
                                    structured_content={"n": "not a number"})
    return types.CallToolResult(content=[types.TextContent(type="text", text="{}")],
                                structured_content={})


async def main() -> None:
    if os.environ.get("HOSTILE_MODE") == "exit":
        sys.exit(4)
    app: Server[Any] = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
