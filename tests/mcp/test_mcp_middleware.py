"""The gate as MCP SDK middleware, inside an ``MCPServer`` someone already has.

One line, ``MCPServer("shop", middleware=[middleware(TOOLS)])``: the table's
tools answer as ``agtool mcp serve`` answers them, the server's others pass.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

from agtool.mcp import middleware, server

SCENARIO_TIMEOUT = 30
CALLS: list[tuple[str, Any]] = [
    ("search_tickets", {"status": "open", "limit": 1}),
    ("search_tickets", {"status": "open", "limit": "2"}),  # the SDK's model would coerce it
    ("search_tickets", {"status": "open", "limit": 2, "team": "x"}),  # ... and drop team
    ("search_tickets", {"status": "opened", "limit": 1}),
    ("search_tickets", {"limit": 1}),
]


def tools(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    def search_tickets(status: str, limit: int) -> dict[str, Any]:
        runs.append({"status": status, "limit": limit})
        return {"tickets": [{"id": "T-1"}, {"id": "T-2"}][:limit]}

    return {"search_tickets": {
        "fn": search_tickets,
        "args": {"status": {"type": "str", "allowed": ["open", "closed"]},
                 "limit": {"type": "int", "min": 1, "max": 20}},
        "returns": {"tickets": {"type": "list", "item": {"id": {"type": "str"}}}}}}


def shop(table: dict[str, dict[str, Any]]) -> MCPServer:
    """The app's own server, its tools registered as ever; the gate is the one line."""
    app = MCPServer("shop", log_level="WARNING", middleware=[middleware(table)])
    app.tool()(table["search_tickets"]["fn"])

    @app.tool()
    def ping() -> str:
        return "pong"

    return app


def answers(target: Any) -> tuple[dict[str, Any], list[Any]]:
    async def scenario() -> tuple[dict[str, Any], list[Any]]:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            async with Client(target) as client:
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                return listed, [await client.call_tool(name, args) for name, args in CALLS]

    return anyio.run(scenario)


def comparable(result: Any) -> tuple[Any, ...]:
    """A result without its request id, which differs on every call."""
    text = json.loads(result.content[0].text)
    text.pop("request_id", None)
    return result.is_error, result.structured_content, text, (result.meta or {}).get(
        "agtool/error")


def test_alone_the_servers_own_model_coerces_and_drops() -> None:
    """The oracle for the next test: without the gate, "2" runs as 2 and team is dropped."""
    runs: list[dict[str, Any]] = []
    app = MCPServer("shop", log_level="WARNING")
    app.tool()(tools(runs)["search_tickets"]["fn"])
    _, results = answers(app)
    assert {"status": "open", "limit": 2} in runs
    assert not results[1].is_error
    assert not results[2].is_error


def test_the_middleware_answers_the_tables_tools_as_mcp_serve_does() -> None:
    """The same listing schema and the same answers as `server(Gate(TOOLS))`, call for call;
    the refused calls never reach the body, and the server's own tool still answers."""
    runs: list[dict[str, Any]] = []
    table = tools(runs)
    listed, results = answers(shop(table))
    served_runs: list[dict[str, Any]] = []
    served_listed, served = answers(server(tools(served_runs)))
    assert [comparable(result) for result in results] == [comparable(r) for r in served]
    assert runs == served_runs == [{"status": "open", "limit": 1}]
    assert listed["search_tickets"].input_schema == served_listed["search_tickets"].input_schema
    assert listed["search_tickets"].input_schema["additionalProperties"] is False
    assert "ping" in listed
    reasons = [(result.meta or {}).get("agtool/error", {}).get("details", {}).get("reason")
               for result in results]
    assert reasons == [None, "args:type:limit", "args:unexpected:team", "args:allowed:status",
                       "args:missing:status"]

    async def ping() -> Any:
        async with Client(shop(tools([]))) as client:
            return await client.call_tool("ping", {})

    assert anyio.run(ping).content[0].text == "pong"
