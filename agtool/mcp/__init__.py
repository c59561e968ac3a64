"""Gated tools over MCP: serve a contract table, or put a gate in front of an MCP server.

::

    agtool mcp serve --table myapp.tools:TOOLS            # stdio
    agtool mcp serve --table myapp.tools:TOOLS --http --port 8000
    agtool mcp proxy -- python their_server.py
    agtool mcp proxy --url http://127.0.0.1:9000/mcp
    agtool mcp pin --pins pins.json -- python their_server.py
    MCPServer("app", middleware=[agtool.mcp.middleware(TOOLS)])   # in process

``server(gate_or_table)`` is the low-level MCP ``Server`` both commands run:
tools listed with the schemas the gate enforces and annotations from each
tool's effect and risk (``mcp_annotations``), every ``tools/call`` answered
by ``Gate.acall_for_model`` (structured content on success, ``isError`` with
the structured error on failure). ``proxy(command)`` serves the tools of an
upstream MCP server through a gate built from the upstream's own schemas.
How a call's run and step (and so a write's idempotency key) are read from
MCP is in ``agtool.mcp._serve``: ``_meta["agtool/run_id"]``, kept apart per
client, or the session, else a run per request; ``_meta["agtool/step_id"]``
or the business key alone. ``middleware(gate_or_table)`` answers the same
calls inside an ``MCPServer`` someone already has. Over HTTP
(``serve_http``, ``aproxy(http=...)``) the door of ``agtool.mcp._http``
checks bearer tokens and Origin.

This module needs the ``mcp`` extra (``pip install 'agtool-gate[mcp]'``).
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401 - imported for the one-line error below
except ImportError:
    raise ImportError("agtool.mcp needs the mcp extra: pip install 'agtool-gate[mcp]'") from None

import contextlib
import signal
import sys
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
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
from ._http import HttpDoor, HttpOptions, check_binding
from ._middleware import GateMiddleware, RateMiddleware
from ._pins import write_pins
from ._proxy import (
    DEFAULT_UPSTREAM_TIMEOUT,
    UPSTREAM_TOOL_ERROR,
    Served,
    Upstream,
    proxy_server,
    serve_upstream,
)
from ._rates import Rates
from ._serve import (
    APPROVAL_META,
    DEFAULT_STEP,
    ERROR_META,
    RUN_ID_META,
    STEP_ID_META,
    build_server,
    result_of,
)
from ._stdio import stdio_lines
from ._upstream import DEFAULT_RESTARTS

__all__ = [
    "APPROVAL_META",
    "DEFAULT_RESTARTS",
    "DEFAULT_STEP",
    "DEFAULT_UPSTREAM_TIMEOUT",
    "ERROR_META",
    "IMPORTED_EFFECTS",
    "RUN_ID_META",
    "STEP_ID_META",
    "UPSTREAM_TOOL_ERROR",
    "GateMiddleware",
    "HttpOptions",
    "Rates",
    "UpstreamUnavailable",
    "apin",
    "aproxy",
    "aserve_http",
    "aserve_stdio",
    "mcp_annotations",
    "middleware",
    "pin",
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
           on_loop: Collection[str] = (), rates: Rates | None = None,
           **gate_options: Any) -> Server[Any]:
    """The low-level MCP ``Server`` of a gate (or of ``Gate(table, **gate_options)``).

    The caller's scope is the gate's (``DEFAULT_SCOPE``, public reads, unless
    the gate was made with another). A tool that needs an approval asks a
    person over MCP elicitation when the client shows forms, else answers
    ``APPROVAL_REQUIRED`` saying how an operator approves. ``on_loop`` names
    sync reads cheap enough to run on the event loop; ``rates`` limits calls
    per tool and client.
    """
    return build_server(_gate_of(gate_or_table, gate_options), name=name, on_loop=on_loop,
                        rates=rates)


def middleware(gate_or_table: Gate | Mapping[str, Mapping[str, Any]], *,
               on_loop: Collection[str] = (), rates: Rates | None = None,
               **gate_options: Any) -> GateMiddleware:
    """The gate as MCP SDK middleware: ``MCPServer("app", middleware=[middleware(TOOLS)])``.

    Calls of the table's tools are answered through the gate, as ``agtool mcp
    serve`` answers them, and listed with its schemas; the server's other
    tools and messages pass on untouched.
    """
    return GateMiddleware(_gate_of(gate_or_table, gate_options), on_loop=on_loop, rates=rates)


async def aserve_stdio(mcp_server: Server[Any], stdin: Any = None, stdout: Any = None) -> None:
    """Serve ``mcp_server`` over this process's stdin and stdout until the client leaves.

    ``stdin`` (an async iterable of lines) and ``stdout`` (async ``write`` and
    ``flush``) replace the SDK's own reader of fd 0 and writer of fd 1.
    """
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        try:
            await mcp_server.run(read, write, mcp_server.create_initialization_options())
        finally:
            # While serving, the SDK points fd 1 away from the wire; what a body printed
            # may still sit in sys.stdout's buffer, and must leave now, not onto the wire.
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stdout.flush()


def serve_stdio(gate_or_table: Gate | Mapping[str, Mapping[str, Any]], *,
                name: str = "agtool", on_loop: Collection[str] = (), rates: Rates | None = None,
                **gate_options: Any) -> None:
    """Serve a gated table over stdio (blocks): ``serve_stdio(Gate(TOOLS))``."""
    anyio.run(aserve_stdio, server(gate_or_table, name=name, on_loop=on_loop, rates=rates,
                                   **gate_options))


async def aserve_http(mcp_server: Server[Any], http: HttpOptions) -> None:
    """Serve ``mcp_server`` over streamable HTTP at ``http://host:port/mcp`` until stopped.

    Refuses (``ValueError``) to bind anything but loopback without a token.
    """
    import uvicorn  # the SDK's own dependency; only HTTP serving needs it

    check_binding(http)
    app = HttpDoor(mcp_server.streamable_http_app(host=http.host), http)
    config = uvicorn.Config(app, host=http.host, port=http.port, log_level="warning")
    serving = uvicorn.Server(config)
    try:
        await serving.serve()
    finally:
        await _stop_now(serving)


#: Seconds the app's lifespan (the SDK's session manager) may take to end after a cancel.
LIFESPAN_ENDS_WITHIN = 5.0


async def _stop_now(serving: Any) -> None:
    """What uvicorn's own shutdown does, at once. Cancelled (the caller's task group ended),
    uvicorn skips it, and would leave the port listening, its connections open and the app's
    lifespan running (the SDK's session manager, each call's task in it, a tool body in
    that), until the process ends. After uvicorn's own shutdown, nothing is left to do."""
    for listener in getattr(serving, "servers", ()):
        listener.close()
    for connection in list(serving.server_state.connections):
        # Closed, not drained as uvicorn would: a cancel means the caller is gone, and a
        # client that never sends the rest of a request would hold its connection for ever.
        connection.transport.close()
    lifespan = getattr(serving, "lifespan", None)
    ended = getattr(lifespan, "shutdown_event", None)
    if lifespan is None or ended is None or ended.is_set() or serving.force_exit:
        return  # a forced exit (a second Ctrl-C) skips the app's shutdown, as uvicorn does
    with anyio.move_on_after(LIFESPAN_ENDS_WITHIN, shield=True):
        await lifespan.shutdown()


def serve_http(gate_or_table: Gate | Mapping[str, Mapping[str, Any]], *,
               host: str = "127.0.0.1", port: int = 8000, name: str = "agtool",
               tokens: Mapping[str, str] | None = None, allow_origins: Collection[str] = (),
               on_loop: Collection[str] = (), rates: Rates | None = None,
               **gate_options: Any) -> None:
    """Serve a gated table over streamable HTTP at ``http://host:port/mcp`` (blocks).

    ``tokens`` maps a client's name to the bearer token it must send; off
    loopback at least one is required. ``allow_origins`` are the browser
    origins allowed besides loopback ones (on loopback).
    """
    http = HttpOptions(host, port, dict(tokens or {}), tuple(allow_origins))
    check_binding(http)  # before the table's gate is made: nothing starts on a refusal
    anyio.run(aserve_http, server(gate_or_table, name=name, on_loop=on_loop, rates=rates,
                                  **gate_options), http)


async def aproxy(command: Sequence[str] = (), *, url: str | None = None,
                 env: Collection[str] = (), pins: str | None = None,
                 restarts: int = DEFAULT_RESTARTS,
                 scope: Collection[str] = DEFAULT_SCOPE,
                 trust_tools: Collection[str] = (),
                 effects: Mapping[str, str | Mapping[str, Any]] | None = None,
                 sensitive: Mapping[str, Collection[str]] | None = None,
                 records: RecordSink | None = None, store: WriteStore | str | None = None,
                 timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT,
                 name: str = "agtool-proxy", http: HttpOptions | None = None,
                 rates: Rates | None = None, memo: Mapping[str, float] | None = None) -> None:
    """Serve the tools of an MCP server through a gate, over stdio (or streamable HTTP with
    ``http``, behind the door of ``aserve_http``), until the client leaves.

    The upstream is ``command``, started as a stdio subprocess with the SDK's
    default environment plus the variables ``env`` names, or the streamable
    HTTP server at ``url``. Contracts come from the upstream's own schemas
    (``import_tool``); a tool whose schema cannot be enforced is hidden unless
    named in ``trust_tools``, which passes it through ungated. Effects and
    risks come from its annotations (``IMPORTED_EFFECTS``) unless ``effects``
    says otherwise; ``sensitive`` names fields to redact, per tool. With
    ``pins`` (a file ``pin`` wrote), a tool not pinned there, or different
    from its pin, is hidden; without it, a tool that changes after start-up
    is. Every call is recorded to ``records``. An upstream call still
    unanswered after ``timeout`` seconds is answered an error. A lost upstream
    is restarted at most ``restarts`` times a minute. An upstream that does
    not start or list its tools raises ``UpstreamUnavailable`` before anything
    is served, and one lost for good raises it then. No upstream read is
    remembered unless ``memo`` names it with its seconds, and any write through
    the proxy forgets every remembered read.
    """
    if http is not None:
        check_binding(http)  # before the upstream is started
    async with Upstream(command, url=url, env=env, restarts=restarts) as upstream:
        served = Served(upstream, trust_tools, effects or {}, sensitive or {}, timeout, pins,
                        memo=memo or {})
        served.admit(upstream.listed)
        upstream.on_listing = served.relisted
        gate = _traced(Gate(served.table, scope=scope, records=records, store=store))
        served.forget = gate.clear
        mcp_server = proxy_server(upstream, gate, served, name=name, timeout=timeout)
        if rates is not None:
            mcp_server.middleware.append(RateMiddleware(rates))
        with _stopping_on_signals(upstream):
            if http is not None:
                await serve_upstream(upstream, mcp_server,
                                     lambda served: aserve_http(served, http))
                return
            async with stdio_lines() as (stdin, stdout):
                await serve_upstream(upstream, mcp_server,
                                     lambda served: aserve_stdio(served, stdin, stdout))


@contextlib.contextmanager
def _stopping_on_signals(upstream: Upstream) -> Iterator[None]:
    """SIGTERM and SIGHUP end the upstream at once, then the proxy, as SIGINT does.

    Whoever started the proxy may kill it right after: the upstream, in a process
    group of its own, must not outlive it blocked in a call.
    """
    def stop(number: int, frame: object) -> None:
        upstream.stop()
        raise SystemExit(128 + number)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


async def apin(command: Sequence[str] = (), pins: str = "", *, url: str | None = None,
               env: Collection[str] = ()) -> dict[str, str]:
    """Pin every tool the upstream lists now in the file ``pins``; the pins written."""
    async with Upstream(command, url=url, env=env, restarts=0) as upstream:
        return write_pins(pins, upstream.listed)


def pin(command: Sequence[str], pins: str, **options: Any) -> dict[str, str]:
    """``apin`` for a synchronous caller."""
    written: dict[str, str] = anyio.run(_run_pin, list(command), pins, options)
    return written


async def _run_pin(command: list[str], pins: str, options: dict[str, Any]) -> dict[str, str]:
    return await apin(command, pins, **options)


def proxy(command: Sequence[str] = (), **options: Any) -> None:
    """``aproxy`` for a synchronous caller (blocks): ``proxy(["python", "server.py"])``."""
    anyio.run(_run_proxy, list(command), options)


async def _run_proxy(command: list[str], options: dict[str, Any]) -> None:
    await aproxy(command, **options)
