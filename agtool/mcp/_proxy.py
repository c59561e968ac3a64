"""A gate in front of an existing MCP server: its own schemas, enforced before it runs.

The upstream server is started as a stdio subprocess and asked for its tools.
Each tool's ``inputSchema`` and ``outputSchema`` go through the import path
that refuses what it cannot enforce (``agtool._jsonschema.import_tool``), its
annotations give its effect and risk, and its gate body is a ``tools/call``
to the upstream. A tool whose schema cannot be enforced is hidden, unless it
is named in ``trust_tools``: then it is passed through ungated. Both are said
on the ``agtool`` logger, which ``agtool mcp proxy`` prints to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server.lowlevel import Server

from .._errors import UpstreamError, UpstreamUnavailable
from .._gate import Gate
from .._jsonschema import SchemaError, import_tool, tool_definition
from .._records import CallRecord
from ._serve import Forward, build_server

__all__ = ["DEFAULT_UPSTREAM_TIMEOUT", "UPSTREAM_TOOL_ERROR", "Upstream",
           "gated_table", "proxy_server"]

_log = logging.getLogger("agtool")
#: The status an upstream tool's own error (``isError``) is answered with: a
#: refusal by the upstream, not a transport failure, so never retried blindly.
UPSTREAM_TOOL_ERROR = 422
#: Seconds an upstream call may take before it is answered ``timeout``: an upstream
#: that never answers must not hold the client's call open for ever.
DEFAULT_UPSTREAM_TIMEOUT = 60.0
# What an MCP tool listing may carry that the importer reads; the rest
# (``execution``, ``icons``, ``_meta``) validates nothing.
_LISTED_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def _cause(exc: BaseException) -> str:
    """The first real failure inside ``exc``, which a task group may have wrapped."""
    inner = getattr(exc, "exceptions", None)
    while inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return f"{type(exc).__name__}: {exc}"


class Upstream:
    """The upstream MCP server, started as a subprocess for the life of an ``async with``."""

    def __init__(self, command: Sequence[str]) -> None:
        if not command:
            raise ValueError("the upstream server's command is empty")
        self.command = list(command)
        self.session: ClientSession | None = None
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Upstream:
        # The whole environment, as any wrapper passes it on: the upstream's keys live there.
        params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                       env=dict(os.environ))
        try:
            read, write = await self._stack.enter_async_context(stdio_client(params))
            session = await self._stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
        except Exception as exc:  # a missing command, a crash, a server that is not MCP
            await self._close_quietly()
            raise UpstreamUnavailable(f"the upstream server {self.command[0]!r} did not start "
                                      f"as an MCP server ({_cause(exc)})") from None
        self.session = session
        return self

    async def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):  # the start-up failure is the news, not this
            await self._stack.aclose()

    async def __aexit__(self, *exc: object) -> None:
        self.session = None
        await self._stack.aclose()

    async def tools(self) -> list[types.Tool]:
        """Every tool the upstream lists, page after page."""
        session = self._live()
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            try:
                page = await session.list_tools(params=None if cursor is None else
                                                types.PaginatedRequestParams(cursor=cursor))
            except Exception as exc:  # an upstream whose listing fails has nothing to gate
                raise UpstreamUnavailable(f"the upstream server {self.command[0]!r} did not "
                                          f"list its tools ({_cause(exc)})") from None
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One upstream ``tools/call``, as the upstream answered it."""
        return await self._live().call_tool(name, arguments)

    def body(self, name: str) -> Any:
        """The gate body of upstream tool ``name``: its checked args, sent on as they are."""
        async def call_upstream(**arguments: Any) -> Any:
            try:
                result = await self.call(name, arguments)
            except (OSError, EOFError) as exc:
                raise ConnectionError(f"upstream {name!r}: {exc}") from exc
            if result.is_error:
                raise UpstreamError(UPSTREAM_TOOL_ERROR, _text_of(result))
            return _value_of(result)

        call_upstream.__name__ = f"upstream_{name}"
        return call_upstream

    def _live(self) -> ClientSession:
        if self.session is None:
            raise RuntimeError("the upstream server is not running; use `async with`")
        return self.session


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _value_of(result: types.CallToolResult) -> Any:
    """The result as the gate checks it: structured content, or the JSON its text holds."""
    if result.structured_content is not None:
        return result.structured_content
    text = _text_of(result)
    try:
        return json.loads(text)
    except ValueError:
        return {"text": text}  # the gate refuses it unless the contract asks for an object


def gated_table(upstream: Upstream, listed: Sequence[types.Tool], *,
                trust_tools: Collection[str] = (),
                effects: Mapping[str, str | Mapping[str, Any]] | None = None,
                sensitive: Mapping[str, Collection[str]] | None = None,
                timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT,
                ) -> tuple[dict[str, dict[str, Any]], dict[str, types.Tool]]:
    """The contract table of the upstream's tools, and the tools passed through ungated.

    ``effects`` overrides a tool's effect as ``load_tools`` does; ``sensitive``
    names, per tool, top-level arguments or returned keys to redact. Each tool
    gets ``timeout`` (seconds) unless its ``effects`` entry sets one.
    """
    names = {tool.name for tool in listed}
    for label, given in (("--trust-tool", trust_tools), ("--effect", effects or {}),
                         ("--sensitive", sensitive or {})):
        for name in given:
            if name not in names:
                raise SchemaError("upstream", name, "", f"is named by {label} but the upstream "
                                  f"server lists no such tool")
    table: dict[str, dict[str, Any]] = {}
    passed: dict[str, types.Tool] = {}
    for index, tool in enumerate(listed):
        if tool.name in trust_tools:
            _log.warning("tool %r is passed through ungated (--trust-tool): its arguments are "
                         "not checked, its writes not keyed", tool.name)
            passed[tool.name] = tool
            continue
        listing = {key: value for key, value in tool.model_dump(
            by_alias=True, exclude_none=True, mode="json").items() if key in _LISTED_KEYS}
        try:
            definition = tool_definition(listing, "upstream", f"/tools/{index}")
            entry = import_tool(definition, upstream.body(tool.name),
                                (effects or {}).get(tool.name), "upstream")
            _mark_sensitive(entry, tool.name, (sensitive or {}).get(tool.name, ()))
            if timeout is not None:
                entry.setdefault("timeout", timeout)
        except SchemaError as exc:
            _log.warning("tool %r is hidden: its schema cannot be enforced (%s); name it with "
                         "--trust-tool to pass it through ungated", tool.name, exc)
            continue
        table[tool.name] = entry
    return table, passed


def _mark_sensitive(entry: dict[str, Any], tool: str, fields: Collection[str]) -> None:
    for field in fields:
        specs = [specs for specs in (entry["args"], entry["returns"]) if field in specs]
        if not specs:
            raise SchemaError("upstream", tool, "", f"--sensitive names {field!r}, which is "
                              f"neither an argument nor a returned key")
        for found in specs:
            found[field] = {**found[field], "sensitive": True}


def proxy_server(upstream: Upstream, gate: Gate, passed: Mapping[str, types.Tool],
                 name: str = "agtool-proxy",
                 timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT) -> Server[Any]:
    """The server the client talks to: the gate's tools, and the passed-through ones.

    A passed-through call is recorded too, to the gate's sink, with no args
    digest (nothing says which of its arguments are sensitive) and the
    reason ``"ungated"``; it too is answered an error after ``timeout`` seconds.
    """
    async def forward(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        started = time.perf_counter()
        try:
            with anyio.fail_after(timeout):
                result = await upstream.call(tool, arguments)
        except Exception as exc:  # an ungated tool's failure is still answered, not raised
            text = types.TextContent(type="text", text=f"upstream failed: {type(exc).__name__}")
            result = types.CallToolResult(content=[text], is_error=True)
        record = CallRecord(
            request_id=f"ungated_{secrets.token_hex(6)}", tool=tool, ok=not result.is_error,
            code="UPSTREAM_ERROR" if result.is_error else "", reason="ungated",
            latency_ms=(time.perf_counter() - started) * 1000, memo_hit=False, replayed=False,
            args_digest="", contract_hash="")
        try:
            if gate.records is not None:
                gate.records(record)
        except Exception:  # as in the gate: a broken sink breaks no call
            _log.exception("call record of %s not written", tool)
        return result

    forwarded: dict[str, tuple[types.Tool, Forward]] = {
        tool_name: (tool, forward) for tool_name, tool in passed.items()}
    return build_server(gate, name=name, forwarded=forwarded)
