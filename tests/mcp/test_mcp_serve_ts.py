"""`agtool mcp serve` read by the official TypeScript SDK client (npm
``@modelcontextprotocol/sdk`` 1.x, run by Node), and by the Python one.

TypeScript 1.x clients validate ``structuredContent`` against a tool's
``outputSchema`` even when ``isError`` is set, and throw ``-32602``
(typescript-sdk issues 2748, 1943): a refusal that carried its error envelope
there never reached the model. The SDK is installed by
``tests/thirdparty/install.sh`` into ``.thirdparty/npm``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from thirdparty.servers import HOW_TO_INSTALL, TS_SDK

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_TABLE = "tests.fixtures.mcp_table:TOOLS"
SCENARIO_TIMEOUT = 120
NODE = shutil.which("node")
SERVER = [sys.executable, "-m", "agtool._cli", "mcp", "serve", "--table", FIXTURE_TABLE,
          "--scope", "read_public", "--scope", "reversible_write"]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search_tickets", {"status": "open", "limit": 1}),
    ("search_tickets", {"status": "open", "limit": True}),  # refused: True is no int
    ("search_tickets", {"status": "opened", "limit": 1}),  # refused: no such status
    ("send_sms", {"to": "+821012345678", "text": "hi"}),
]

needs_ts_sdk = pytest.mark.skipif(
    NODE is None or not (TS_SDK / "package.json").exists(),
    reason=f"needs node and the npm TypeScript SDK in {TS_SDK} ({HOW_TO_INSTALL})")


def ts_client_answers() -> tuple[list[str], list[dict[str, Any]]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGTOOL_TS_SDK": str(TS_SDK),
           "AGTOOL_TS_SERVER": json.dumps(SERVER), "AGTOOL_TS_CALLS": json.dumps(CALLS)}
    done = subprocess.run([str(NODE), str(Path(__file__).with_name("ts_client.mjs"))],  # noqa: S603
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=SCENARIO_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    first, *rest = [json.loads(line) for line in done.stdout.splitlines()]
    return first["listed"], rest


@pytest.mark.slow
@needs_ts_sdk
def test_the_typescript_client_hands_refusals_back_instead_of_throwing() -> None:
    """Every refusal reaches the TypeScript client as an isError result whose text holds the
    structured error, and _meta too; a success keeps its structuredContent."""
    listed, answers = ts_client_answers()
    assert listed == ["search_tickets", "customer", "send_sms"]
    assert [sorted(answer) for answer in answers] == [["result"]] * 4, answers
    good, bool_limit, bad_status, sms = (answer["result"] for answer in answers)
    assert good["structuredContent"] == {"tickets": [{"id": "T-1",
                                                      "title": "Refund not received"}]}
    assert sms["structuredContent"] == {"sent": 1}
    for refused, reason in ((bool_limit, "args:type:limit"), (bad_status, "args:allowed:status")):
        assert refused["isError"] is True
        assert "structuredContent" not in refused
        error = json.loads(refused["content"][0]["text"])["error"]
        assert error["details"]["reason"] == reason
        assert refused["_meta"]["agtool/error"] == error


@pytest.mark.slow
def test_the_python_client_reads_the_same_refusals() -> None:
    """The official Python client's call_tool, which checks results against the listed
    outputSchema, hands back the same refusals with the error in _meta and the text."""
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], cwd=str(ROOT),
                                   env={"PYTHONPATH": str(ROOT)})

    async def scenario() -> list[Any]:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            async with stdio_client(params) as (read, write), ClientSession(read,
                                                                            write) as session:
                await session.initialize()
                await session.list_tools()
                return [await session.call_tool(name, args) for name, args in CALLS]

    good, bool_limit, bad_status, sms = anyio.run(scenario)
    assert good.structured_content["tickets"][0]["id"] == "T-1"
    assert sms.structured_content == {"sent": 1}
    for refused, reason in ((bool_limit, "args:type:limit"), (bad_status, "args:allowed:status")):
        assert refused.is_error is True
        assert refused.structured_content is None
        assert refused.meta["agtool/error"]["details"]["reason"] == reason
        assert json.loads(refused.content[0].text)["error"] == refused.meta["agtool/error"]
