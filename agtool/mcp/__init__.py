"""Gated tools over MCP: serve a contract table, or put a gate in front of an MCP server.

::

    agtool mcp serve --table myapp.tools:TOOLS            # stdio
    agtool mcp serve --table myapp.tools:TOOLS --http --port 8000
    agtool mcp proxy -- python their_server.py

``server(gate_or_table)`` is the low-level MCP ``Server`` both commands run:
tools listed with the schemas the gate enforces and annotations from each
tool's effect and risk (``mcp_annotations``), every ``tools/call`` answered
by ``Gate.acall_for_model`` (structured content on success, ``isError`` with
the structured error on failure). ``proxy(command)`` serves the tools of an
upstream MCP server through a gate built from the upstream's own schemas.
How a call's run and step (and so a write's idempotency key) are read from
MCP is in ``agtool.mcp._serve``: ``_meta["agtool/run_id"]`` or the session,
and ``_meta["agtool/step_id"]`` or the business key alone.

This module needs the ``mcp`` extra (``pip install 'agtool-gate[mcp]'``).
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401 - imported for the one-line error below
except ImportError:
    raise ImportError("agtool.mcp needs the mcp extra: pip install 'agtool-gate[mcp]'") from None

import contextlib
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .._errors import UpstreamUnavailable
from .._gate import DEFAULT_SCOPE, Gate
from .._jsonschema import IMPORTED_EFFECTS, mcp_annotations
from .._records import RecordSink
from .._store import WriteStore
from ..otel import instrument  # the MCP SDK needs opentelemetry-api: this always imports
from ._proxy import (
    DEFAULT_UPSTREAM_TIMEOUT,
    UPSTREAM_TOOL_ERROR,
    Upstream,
    gated_table,
    proxy_server,
)
from ._serve import DEFAULT_STEP, RUN_ID_META, STEP_ID_META, build_server, result_of

__all__ = [
    "DEFAULT_STEP",
    "DEFAULT_UPSTREAM_TIMEOUT",
    "IMPORTED_EFFECTS",
    "RUN_ID_META",
    "STEP_ID_META",
    "UPSTREAM_TOOL_ERROR",
    "UpstreamUnavailable",
    "aproxy",
    "aserve_stdio",
    "mcp_annotations",
    "proxy",
    "result_of",
    "serve_http",
    "serve_stdio",
    "server",
]


def _gate_of(gate_or_table: Gate | Mapping[str, Mapping[str, Any]],
             options: Mapping[str, Any]) -> Gate:
    if isinstance(gate_or_table, Gate):
        if options:
            raise TypeError(f"gate options {sorted(options)} are for a table; this gate has its "
                            f"own")
        return gate_or_table
    return _traced(Gate(gate_or_table, **options))


def _traced(gate: Gate) -> Gate:
    """A gate made here, traced when OpenTelemetry is configured (a gate passed in is the
    caller's to instrument)."""
    instrument(gate)
    return gate


def server(gate_or_table: Gate | Mapping[str, Mapping[str, Any]], *, name: str = "agtool",
           **gate_options: Any) -> Server[Any]:
    """The low-level MCP ``Server`` of a gate (or of ``Gate(table, **gate_options)``).

    The caller's scope is the gate's (``DEFAULT_SCOPE``, public reads, unless
    the gate was made with another). A tool that needs an approval answers
    ``APPROVAL_REQUIRED``: no approval travels over MCP.
    """
    return build_server(_gate_of(gate_or_table, gate_options), name=name)


async def aserve_stdio(mcp_server: Server[Any]) -> None:
    """Serve ``mcp_server`` over this process's stdin and stdout until the client leaves."""
    async with stdio_server() as (read, write):
        try:
            await mcp_server.run(read, write, mcp_server.create_initialization_options())
        finally:
            # While serving, the SDK points fd 1 away from the wire; what a body printed
            # may still sit in sys.stdout's buffer, and must leave now, not onto the wire.
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stdout.flush()


def serve_stdio(gate_or_table: Gate | Mapping[str, Mapping[str, Any]], *,
                name: str = "agtool", **gate_options: Any) -> None:
    """Serve a gated table over stdio (blocks): ``serve_stdio(Gate(TOOLS))``."""
    anyio.run(aserve_stdio, server(gate_or_table, name=name, **gate_options))


def serve_http(gate_or_table: Gate | Mapping[str, Mapping[str, Any]], *,
               host: str = "127.0.0.1", port: int = 8000, name: str = "agtool",
               **gate_options: Any) -> None:
    """Serve a gated table over streamable HTTP at ``http://host:port/mcp`` (blocks)."""
    import uvicorn  # the SDK's own dependency; only HTTP serving needs it

    app = server(gate_or_table, name=name, **gate_options).streamable_http_app(host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")


async def aproxy(command: Sequence[str], *, scope: Collection[str] = DEFAULT_SCOPE,
                 trust_tools: Collection[str] = (),
                 effects: Mapping[str, str | Mapping[str, Any]] | None = None,
                 sensitive: Mapping[str, Collection[str]] | None = None,
                 records: RecordSink | None = None, store: WriteStore | str | None = None,
                 timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT,
                 name: str = "agtool-proxy") -> None:
    """Start ``command`` as an MCP server and serve its tools over stdio through a gate.

    Contracts come from the upstream's own schemas (``import_tool``); a tool
    whose schema cannot be enforced is hidden unless named in
    ``trust_tools``, which passes it through ungated. Effects and risks come
    from its annotations (``IMPORTED_EFFECTS``) unless ``effects`` says
    otherwise; ``sensitive`` names fields to redact, per tool. Every call is
    recorded to ``records``. An upstream call still unanswered after
    ``timeout`` seconds is answered an error. An upstream that does not start
    or list its tools raises ``UpstreamUnavailable`` before anything is served.
    """
    async with Upstream(command) as upstream:
        table, passed = gated_table(upstream, await upstream.tools(), trust_tools=trust_tools,
                                    effects=effects, sensitive=sensitive, timeout=timeout)
        gate = _traced(Gate(table, scope=scope, records=records, store=store))
        await aserve_stdio(proxy_server(upstream, gate, passed, name=name, timeout=timeout))


def proxy(command: Sequence[str], **options: Any) -> None:
    """``aproxy`` for a synchronous caller (blocks): ``proxy(["python", "server.py"])``."""
    anyio.run(_run_proxy, list(command), options)


async def _run_proxy(command: list[str], options: dict[str, Any]) -> None:
    await aproxy(command, **options)
