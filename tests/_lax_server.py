"""A lax MCP server, as the SDK's high-level server makes one: it coerces and drops.

``count_items(limit=True)`` runs with ``limit == 1``, and an argument it does not
name is dropped, so a mistaken call looks like a success. ``stock_level``
returns a level above the ``maximum`` its own ``outputSchema`` states (a bound
written into the schema that pydantic does not enforce). Every body run appends
a line to the file named by ``LAX_RUNS`` (when set), so a test can tell whether
a body ran. Run as ``python tests/_lax_server.py``: a stdio MCP server.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Annotated, TypedDict

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

app = MCPServer("lax")


class Count(TypedDict):
    limit: int
    region: str


class Stock(TypedDict):
    # Stated in the schema, never checked: the SDK serves whatever the body returns.
    level: Annotated[int, Field(json_schema_extra={"minimum": 0, "maximum": 100})]


def _ran(tool: str, **args: object) -> None:
    path = os.environ.get("LAX_RUNS")
    if path:
        with open(path, "a") as runs:
            runs.write(json.dumps({"tool": tool, **args}) + "\n")


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def count_items(limit: int, region: str = "seoul") -> Count:
    """Count the items in a region."""
    _ran("count_items", limit=limit, region=region)
    return {"limit": limit, "region": region}


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def stock_level(sku: str) -> Stock:
    """The stock level of a product, in percent of its shelf."""
    _ran("stock_level", sku=sku)
    return {"level": 100 + len(sku)}


@app.tool()
def delete_everything(confirm: bool) -> str:
    """No annotations: MCP's defaults make it a destructive write."""
    _ran("delete_everything", confirm=confirm)
    return "deleted"


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def days_until(day: Annotated[datetime.date, Field(
        json_schema_extra={"not": {"$ref": "https://example.com/holiday.json"}})]) -> str:
    """A remote ``$ref`` beside ``format: date``: a schema the gate cannot read without the
    network, so no exact contract."""
    _ran("days_until", day=str(day))
    return str((day - datetime.date(2026, 1, 1)).days)


if __name__ == "__main__":
    app.run()
