"""agtool.otel over MCP: the proxy continues a caller's trace from ``_meta.traceparent``,
passes it upstream, and puts agtool's attributes on the MCP SDK's own server span.

Each runs in processes of its own (a global tracer provider, once set, stays for
the process): the real ``agtool mcp proxy`` command driven by the official client,
in front of a real upstream that answers with the trace context it was sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
UPSTREAM = [sys.executable, str(HERE / "_traced_upstream.py")]
#: A caller's trace context, as a W3C traceparent: version, trace id, parent span id, flags.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


def upstream_saw(**env: str) -> str:
    """The traceparent the upstream was sent for one call through `agtool mcp proxy`."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "agtool._cli", "mcp", "proxy", "--", *UPSTREAM],
        cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), **env})

    async def scenario() -> Any:
        with open(os.devnull, "w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                return await session.call_tool("whoami", {"name": "ann"},
                                               meta={"traceparent": TRACEPARENT})

    result = anyio.run(scenario)
    assert not result.is_error, result
    seen: str = result.structured_content["traceparent"]
    return seen


@pytest.mark.slow
def test_the_proxy_passes_the_callers_trace_upstream_without_a_provider() -> None:
    """With no provider in the proxy, the caller's traceparent reaches the upstream as sent:
    the trace is carried through, and nothing is made of it on the way."""
    assert upstream_saw() == TRACEPARENT


@pytest.mark.slow
def test_the_proxy_continues_the_callers_trace_with_a_provider() -> None:
    """With an SDK provider in the proxy, the upstream sees the caller's trace id under a
    span of the proxy's own (a new parent id): the proxy's spans are in the caller's trace."""
    version, trace_id, parent, _ = upstream_saw(
        OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider").split("-")
    assert (version, trace_id) == ("00", TRACE_ID)
    assert parent != CALLER_SPAN
    assert int(parent, 16) != 0


@pytest.fixture(scope="module")
def in_process_spans() -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 - this directory's own scenario
        [sys.executable, str(HERE / "_proxy_spans.py")], capture_output=True, text=True,
        timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


@pytest.mark.slow
def test_in_the_proxy_a_call_is_one_span_the_sdks_own_with_agtools_attributes(
        in_process_spans: dict[str, Any]) -> None:
    """The proxy's gate adds its attributes to the MCP SDK's ``tools/call whoami`` server
    span (no ``execute_tool`` span of its own), in the client's trace, and the upstream call
    is a child of it; a refused call's code survives the SDK's own ``error.type``."""
    seen = in_process_spans
    good, refused = seen["answers"]
    spans = seen["spans"]
    (turn,) = [span for span in spans if span["name"] == "agent turn"]
    gated = [span for span in spans if "agtool.request_id" in span["attributes"]]
    assert [span["name"] for span in gated] == ["tools/call whoami"] * 2
    assert not [span for span in spans if span["name"].startswith("execute_tool")]
    assert {span["kind"] for span in gated} == {"SERVER"}
    assert {span["trace_id"] for span in gated} == {turn["trace_id"]}
    ok, failed = (span["attributes"] for span in gated)
    assert ok["agtool.request_id"] != failed["agtool.request_id"]
    assert failed["agtool.request_id"] == refused["structured"]["request_id"]
    assert failed["agtool.code"] == "INVALID_ARGUMENT"
    assert failed["agtool.reason"] == "args:type:name"
    assert "error.type" not in ok
    (upstream_call,) = [span for span in spans if span["name"] == "MCP send tools/call whoami"]
    assert upstream_call["parent_id"] == gated[0]["span_id"]
    # What the upstream was sent is that client span of the proxy's, in the caller's trace.
    sent = good["structured"]["traceparent"].split("-")
    assert sent[1:3] == [turn["trace_id"], upstream_call["span_id"]]


@pytest.mark.slow
def test_the_server_agtool_mcp_serve_runs_instruments_the_gate_it_makes(
        in_process_spans: dict[str, Any]) -> None:
    """``agtool.mcp.server(table)`` makes its gate and instruments it (a provider is set):
    the call's one span is the SDK's, with agtool's attributes, in the client's trace."""
    spans = in_process_spans["serve_spans"]
    (turn,) = [span for span in spans if span["name"] == "agent turn"]
    (gated,) = [span for span in spans if "agtool.request_id" in span["attributes"]]
    assert gated["name"] == "tools/call shout"
    assert gated["trace_id"] == turn["trace_id"]
    assert gated["attributes"]["agtool.memo_hit"] is False
    assert gated["attributes"]["gen_ai.tool.name"] == "shout"
