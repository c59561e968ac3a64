"""A lax MCP server, as the SDK's high-level server makes one: it coerces and drops.

``count_items(limit=True)`` runs with ``limit == 1``, and an argument it does not
name is dropped, so a mistaken call looks like a success. Every body run appends
a line to the file named by ``LAX_RUNS``, so a test can tell whether a body ran.
Run as ``python tests/_lax_server.py``: a stdio MCP server.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import TypedDict

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("lax")


class Count(TypedDict):
    limit: int
    region: str


def _ran(tool: str, **args: object) -> None:
    with open(os.environ["LAX_RUNS"], "a") as runs:
        runs.write(json.dumps({"tool": tool, **args}) + "\n")


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def count_items(limit: int, region: str = "seoul") -> Count:
    """Count the items in a region."""
    _ran("count_items", limit=limit, region=region)
    return {"limit": limit, "region": region}


@app.tool()
def delete_everything(confirm: bool) -> str:
    """No annotations: MCP's defaults make it a destructive write."""
    _ran("delete_everything", confirm=confirm)
    return "deleted"


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def days_until(day: datetime.date) -> str:
    """A ``format: date`` argument: a keyword the gate cannot check, so no exact contract."""
    _ran("days_until", day=str(day))
    return str((day - datetime.date(2026, 1, 1)).days)


if __name__ == "__main__":
    app.run()
