"""The MCP server ``bench/bench_proxy.py`` calls, directly and through ``agtool mcp proxy``.

``python bench/_mcp_upstream_server.py`` serves over stdio; with ``--http PORT`` over
streamable HTTP at ``http://127.0.0.1:PORT/mcp``. One tool, ``stock_level(sku)``, a
public read with an output schema, on the SDK's high-level ``MCPServer``, as a typical
Python MCP server is written.
"""

from __future__ import annotations

import sys
from typing import TypedDict

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("bench-upstream", log_level="WARNING")


class Level(TypedDict):
    sku: str
    level: int


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def stock_level(sku: str) -> Level:
    """The stock level of a product."""
    return {"sku": sku, "level": len(sku)}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import uvicorn

        uvicorn.run(app.streamable_http_app(host="127.0.0.1"), host="127.0.0.1",
                    port=int(sys.argv[2]), log_level="warning")
    else:
        app.run()
