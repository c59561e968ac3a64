"""The MCP proxy and server in this process, with a global SDK tracer provider: spans as JSON.

Run by ``test_otel_mcp.py`` in a process of its own, since a global provider, once
set, stays for the life of the process. A client calls the proxy (built as
``agtool mcp proxy`` builds it) under a span of its own, once with good and once
with refused arguments; the upstream answers with the ``traceparent`` it was sent.
Then a client calls ``agtool.mcp.server(table)`` (what ``agtool mcp serve`` runs)
once. Prints ``{"answers": [...], "spans": [...], "serve_spans": [...]}`` on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agtool import Gate
from agtool.mcp import _traced, server
from agtool.mcp._proxy import Upstream, gated_table, proxy_server

EXPORTER = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)  # before any gate: _traced reads it

UPSTREAM = [sys.executable, str(Path(__file__).with_name("_traced_upstream.py"))]


async def scenario() -> list[Any]:
    async with Upstream(UPSTREAM) as upstream:
        table, passed = gated_table(upstream, await upstream.tools())
        gate = _traced(Gate(table))
        async with Client(proxy_server(upstream, gate, passed)) as client:
            with trace.get_tracer("agent").start_as_current_span("agent turn"):
                good = await client.call_tool("whoami", {"name": "ann"})
                refused = await client.call_tool("whoami", {"name": 7})
    # A refusal's envelope is its JSON text (no structuredContent: a TypeScript client
    # would check that against the tool's output schema); a success is structured.
    return [{"is_error": bool(answer.is_error),
             "structured": answer.structured_content if not answer.is_error
             else json.loads(answer.content[0].text)}
            for answer in (good, refused)]


def served_table() -> dict[str, Any]:
    return {"shout": {"fn": lambda text: {"text": text.upper()},
                      "args": {"text": {"type": "str"}}, "returns": {"text": {"type": "str"}}}}


async def serve_scenario() -> None:
    async with Client(server(served_table())) as client:
        with trace.get_tracer("agent").start_as_current_span("agent turn"):
            await client.call_tool("shout", {"text": "hi"})


def span_json(span: Any) -> dict[str, Any]:
    return {"name": span.name, "kind": span.kind.name, "trace_id": f"{span.context.trace_id:032x}",
            "span_id": f"{span.context.span_id:016x}", "status": span.status.status_code.name,
            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
            "attributes": dict(span.attributes or {})}


answers = anyio.run(scenario)
proxied = [span_json(span) for span in EXPORTER.get_finished_spans()]
EXPORTER.clear()
anyio.run(serve_scenario)
print(json.dumps({"answers": answers, "spans": proxied,
                  "serve_spans": [span_json(span) for span in EXPORTER.get_finished_spans()]}))
