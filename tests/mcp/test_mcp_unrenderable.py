"""A result with no JSON text, served over MCP: a tool error with its own reason, never a
JSON-RPC internal error, and the server goes on answering.

The server is ``agtool mcp serve`` as a real stdio subprocess behind the official client
(and, in the fast loop, the same server in process); its table is
``tests/fixtures/unrenderable_table.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures.unrenderable_table import RESULTS, TOOLS
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from agtool import Gate
from agtool.mcp import ERROR_META, server

ROOT = Path(__file__).resolve().parents[2]
TABLE = "tests.fixtures.unrenderable_table:TOOLS"
#: Seconds a whole scenario may take before it fails as a hang.
SCENARIO_TIMEOUT = 60


def run(scenario: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            return await scenario()

    return anyio.run(bounded)


def assert_unrenderable(result: Any) -> None:
    """A tool error whose structured error, in ``_meta`` and in the text, names the reason."""
    assert result.is_error is True
    assert result.structured_content is None
    error = result.meta[ERROR_META]
    assert error["details"] == {"reason": "result:unrenderable"}
    assert (error["code"], error["retryable"]) == ("BAD_RESULT", False)
    assert json.loads(result.content[0].text)["error"] == error


def test_unrenderable_results_are_tool_errors_in_process() -> None:
    """Each unrenderable result is a tool error; the plain tool after them still answers."""
    async def scenario() -> list[Any]:
        async with Client(server(Gate(TOOLS))) as client:
            return [await client.call_tool(name, {}) for name in (*RESULTS, "plain")]

    *refused, plain = run(scenario)
    for result in refused:
        assert_unrenderable(result)
    assert plain.structured_content == {"value": 1}


@pytest.mark.slow
def test_unrenderable_results_are_tool_errors_over_stdio() -> None:
    """The same through ``agtool mcp serve`` as a subprocess and the official stdio client."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "agtool._cli", "mcp", "serve", "--table", TABLE],
                                   cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})

    async def scenario() -> list[Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return [await session.call_tool(name, {}) for name in (*RESULTS, "plain")]

    *refused, plain = run(scenario)
    assert len(refused) == len(RESULTS)
    for result in refused:
        assert_unrenderable(result)
    assert plain.structured_content == {"value": 1}
