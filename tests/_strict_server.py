"""A strict MCP server for tests/harness/test_mcp_check.py: it holds its tools to their own schemas.

Run as ``python tests/_strict_server.py``, a stdio MCP server on the SDK's
low-level ``Server``. Every call's arguments are validated against the
tool's ``inputSchema`` (closed objects, Draft 2020-12, by ``jsonschema``)
before the body runs, and every result against its ``outputSchema`` before
it is sent; either failure is answered ``isError``. ``cancel_order`` is a
destructive write. Every body run appends a line to the file named by
``STRICT_RUNS`` (when set). With ``STRICT_MODE=crash`` it exits instead of
answering a call its schema refuses.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp.types as types
from jsonschema import Draft202012Validator
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True,
                              open_world_hint=False)


def _object(properties: dict[str, Any], required: list[str], *,
            closed: bool = True) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {**schema, "additionalProperties": False} if closed else schema


ORDER = _object({"id": {"type": "string", "pattern": "^ORD-[0-9]{4}$"},
                 "total_cents": {"type": "integer", "minimum": 0}},
                ["id", "total_cents"], closed=False)
TOOLS = {
    "search_orders": types.Tool(
        name="search_orders", description="A customer's orders by status.",
        input_schema=_object({
            "status": {"type": "string", "enum": ["open", "shipped", "returned"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 5},
            "customer": {"type": "string", "pattern": "^c-[0-9]{1,6}$"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
                     "maxItems": 3},
        }, ["status", "limit"]),
        output_schema=_object({"orders": {"type": "array", "items": ORDER, "minItems": 1,
                                          "maxItems": 5}}, ["orders"], closed=False),
        annotations=READ),
    "get_price": types.Tool(
        name="get_price", description="The price of a quantity of one product.",
        input_schema=_object({
            "sku": {"type": "string", "minLength": 2, "maxLength": 12},
            "currency": {"type": "string", "enum": ["KRW", "USD"]},
            "weight_kg": {"type": "number", "minimum": 0, "maximum": 50},
            "gift": {"type": "boolean"},
        }, ["sku", "currency", "weight_kg"]),
        output_schema=_object({"sku": {"type": "string"},
                               "cents": {"type": "integer", "minimum": 0}},
                              ["sku", "cents"], closed=False),
        annotations=READ),
    "cancel_order": types.Tool(
        name="cancel_order", description="Cancel an order.",
        input_schema=_object({"order_id": {"type": "string", "pattern": "^ORD-[0-9]{4}$"}},
                             ["order_id"]),
        output_schema=_object({"cancelled": {"type": "boolean"}}, ["cancelled"],
                              closed=False),
        annotations=WRITE),
}
VALIDATORS = {name: (Draft202012Validator(tool.input_schema),
                     Draft202012Validator(tool.output_schema))
              for name, tool in TOOLS.items()}


def _body(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "search_orders":
        orders = [{"id": f"ORD-{number:04d}", "total_cents": 1000 * number}
                  for number in range(1, args["limit"] + 1)]
        return {"orders": orders}
    if name == "get_price":
        cents = round(args["weight_kg"] * (1300 if args["currency"] == "KRW" else 1))
        return {"sku": args["sku"], "cents": cents}
    return {"cancelled": True}


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=True)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=list(TOOLS.values()))


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in TOOLS:
        return _error(f"no tool {params.name!r}")
    arguments = params.arguments or {}
    check_args, check_result = VALIDATORS[params.name]
    problems = [error.message for error in check_args.iter_errors(arguments)]
    if problems and os.environ.get("STRICT_MODE") == "crash":
        os._exit(3)  # a server that dies on bad input: the harness must say which call
    if problems:
        return _error("invalid arguments: " + "; ".join(problems))
    path = os.environ.get("STRICT_RUNS")
    if path:
        with open(path, "a") as runs:
            runs.write(json.dumps({"tool": params.name, "args": arguments}) + "\n")
    result = _body(params.name, arguments)
    problems = [error.message for error in check_result.iter_errors(result)]
    if problems:  # never sent: a result outside the schema is an error, not an answer
        return _error("invalid result: " + "; ".join(problems))
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(result))],
                                structured_content=result)


def build_server() -> Server[Any]:
    """The strict server, for a client in this process or for ``main``."""
    return Server("strict", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    app = build_server()
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
