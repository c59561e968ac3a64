"""A gate in front of an existing MCP server: its own schemas, enforced before it runs.

The upstream server (``agtool.mcp._upstream``) is asked for its tools. Each
tool's ``inputSchema`` and ``outputSchema`` go through the import path that
refuses what it cannot enforce (``agtool._jsonschema.import_tool``), its
annotations give its effect and risk, and its gate body is a ``tools/call``
to the upstream. ``Served`` decides, for each listing, what the client sees:

- a tool whose schema cannot be enforced is hidden, unless it is named in
  ``trust_tools``: then it is passed through ungated;
- a tool its pins do not allow (``agtool.mcp._pins``) is hidden until it is
  pinned again;
- a tool's name is served as ``shown`` makes any name a caller chose
  (control characters escaped, at most ``SHOWN_CHARS`` characters), and a
  tool whose served name another one already has is hidden.

Each decision is said on the ``agtool`` logger, which ``agtool mcp proxy``
prints to stderr. The upstream lists again when it says its tools changed, or
after it was restarted, and the decisions are made again on that listing.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server

from .._errors import ContractError, SchemaError
from .._gate import Gate
from .._jsonschema import import_tool, tool_definition
from .._reasons import SHOWN_CHARS, shown
from .._records import CallRecord
from ._changes import ListChanges
from ._pins import hidden_by_pins, read_pins, tool_digest
from ._serve import Forward, build_server
from ._upstream import (
    UPSTREAM_TOOL_ERROR,
    Upstream,
    UpstreamUnavailable,
    cause_of,
)

__all__ = ["DEFAULT_UPSTREAM_TIMEOUT", "UPSTREAM_TOOL_ERROR", "Served", "Upstream",
           "UpstreamUnavailable", "gated_table", "proxy_server", "serve_upstream"]

_log = logging.getLogger("agtool")
#: Seconds an upstream call may take before it is answered ``timeout``: an upstream
#: that never answers must not hold the client's call open for ever.
DEFAULT_UPSTREAM_TIMEOUT = 60.0
# What an MCP tool listing may carry that the importer reads; the rest
# (``execution``, ``icons``, ``_meta``) validates nothing.
_LISTED_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations",
                "execution")
_cause = cause_of  # the name agtool._mcp_check imports


@dataclass
class Served:
    """What the proxy serves of the upstream's listings: gated tools, passed ones, hidden ones.

    ``table`` is the gate's table and ``forwarded`` the passed-through tools;
    both are changed in place by ``admit``, so a gate and a server built on
    them follow each listing. ``pins`` is a pins file, read again on each
    listing; without it, the first listing is what later ones must match.
    """

    upstream: Upstream
    trust_tools: Collection[str] = ()
    effects: Mapping[str, str | Mapping[str, Any]] = field(default_factory=dict)
    sensitive: Mapping[str, Collection[str]] = field(default_factory=dict)
    timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT
    pins: str | None = None
    #: Seconds each named read is remembered (``--memo NAME=SECONDS``); no other is.
    memo: Mapping[str, float] = field(default_factory=dict)
    #: Called before and after each gated write: the gate forgets what it remembered of the
    #: upstream's reads (``aproxy`` sets it to ``Gate.clear``).
    forget: Callable[[], None] = field(default=lambda: None)
    #: The gate's record sink, for the passed-through calls (``proxy_server`` sets it).
    records: Any = None
    table: dict[str, dict[str, Any]] = field(default_factory=dict)
    forwarded: dict[str, tuple[types.Tool, Forward]] = field(default_factory=dict)
    #: Why each upstream tool not served is hidden, by its upstream name.
    hidden: dict[str, str] = field(default_factory=dict)
    #: Where the proxy's own clients hear that what it serves changed (``relisted``).
    changes: ListChanges = field(default_factory=ListChanges)
    _digests: dict[str, str] = field(default_factory=dict)  # served name -> what is served
    _at_start: dict[str, str] | None = None

    def admit(self, listed: Sequence[types.Tool]) -> None:
        """Decide, for this listing, what is served; the first call also checks option names."""
        first = self._at_start is None
        if first:
            _check_named(listed, self.trust_tools, self.effects, self.sensitive, self.memo)
        hidden = self._unpinned(listed)
        table: dict[str, dict[str, Any]] = {}
        forwarded: dict[str, tuple[types.Tool, Forward]] = {}
        digests: dict[str, str] = {}
        for index, tool in enumerate(listed):
            name, digest = shown(tool.name), tool_digest(tool)
            if tool.name in hidden:
                continue
            if name in digests:
                hidden[tool.name] = f"its name is served as {name!r}, which another tool has"
                continue
            kept = self._kept(name, digest)
            try:
                admitted = kept if kept is not None else self._imported(tool, index, name)
            except SchemaError as exc:
                hidden[tool.name] = (f"keyword {_keyword_of(exc)!r} cannot be enforced ({exc}); "
                                     f"name it with --trust-tool to pass it through ungated")
                continue
            (forwarded if isinstance(admitted, tuple) else table)[name] = admitted  # type: ignore[assignment]
            digests[name] = digest
        self._say(hidden, {tool.name for tool in listed})
        _replace(self.table, table)
        _replace(self.forwarded, forwarded)
        self.hidden, self._digests = hidden, digests
        if first:
            self._at_start = {tool.name: tool_digest(tool) for tool in listed}

    async def relisted(self, listed: Sequence[types.Tool]) -> None:
        """``admit`` a listing after the first; if what is served changed (a tool hidden,
        served again, or new), the proxy's listening clients are told: list_changed."""
        before = dict(self._digests)
        self.admit(listed)
        if self._digests != before:
            await self.changes.tell()

    def _unpinned(self, listed: Sequence[types.Tool]) -> dict[str, str]:
        pins = None
        if self.pins is not None:
            try:
                pins = read_pins(self.pins)
            except ValueError as exc:
                if self._at_start is None:
                    raise SchemaError("upstream", "", "", str(exc)) from None
                _log.error("%s: every tool is hidden until it can be read", exc)
                return {tool.name: "its pins file cannot be read" for tool in listed}
        return hidden_by_pins(listed, pins, self._at_start, self.pins or "")

    def _kept(self, name: str, digest: str) -> dict[str, Any] | tuple[types.Tool, Forward] | None:
        """What is served under ``name`` now, if the listing of it did not change."""
        if self._digests.get(name) != digest:
            return None
        return self.table.get(name) or self.forwarded.get(name)

    def _imported(self, tool: types.Tool, index: int, name: str
                  ) -> dict[str, Any] | tuple[types.Tool, Forward]:
        if name != tool.name:
            _log.warning("an upstream tool is served as %r: its own name has characters a "
                         "model or a log must not read as they are, or more than %d", name,
                         SHOWN_CHARS)
        if tool.name in self.trust_tools:
            _log.warning("tool %r is passed through ungated (--trust-tool): its arguments are "
                         "not checked, its writes not keyed", name)
            return tool.model_copy(update={"name": name}), self._forward(tool.name)
        entry = _gated_entry(self.upstream, tool, index, self.effects.get(tool.name),
                             self.sensitive.get(tool.name, ()), self.timeout)
        _remember_for(entry, tool.name, self.memo.get(tool.name))
        if entry.get("effect") == "write":
            entry["fn"] = self.forgetting(entry["fn"])
        return entry

    def forgetting(self, body: Any) -> Any:
        """``body`` (a write's), forgetting every remembered read before and after it runs.

        After, even when it fails: a write that timed out may have happened all the same.
        """
        async def write_upstream(**arguments: Any) -> Any:
            self.forget()
            try:
                return await body(**arguments)
            finally:
                self.forget()

        write_upstream.__name__ = body.__name__
        return write_upstream

    def _forward(self, upstream_name: str) -> Forward:
        async def forward(served_name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            return await _forwarded_call(self.upstream, upstream_name, served_name, arguments,
                                         self.timeout, self.records)
        return forward

    def _say(self, hidden: Mapping[str, str], listed: Collection[str]) -> None:
        """Each change of what is hidden, once: a tool hidden anew, or served again."""
        for name, why in hidden.items():
            if self.hidden.get(name) != why:
                _log.warning("tool %r is hidden: %s", shown(name), why)
        for name in self.hidden.keys() - hidden.keys():
            if name in listed:
                _log.warning("tool %r is served again", shown(name))


def _replace(live: dict[str, Any], new: Mapping[str, Any]) -> None:
    """Make ``live`` equal ``new`` in place, in the listing's order, with the same entries
    where they did not change (a compiled contract stays compiled)."""
    if list(live) != list(new):
        live.clear()
        live.update(new)
        return
    for name, value in new.items():
        if live[name] is not value:
            live[name] = value


def _check_named(listed: Sequence[types.Tool], trust_tools: Collection[str],
                 effects: Mapping[str, Any], sensitive: Mapping[str, Any],
                 memo: Mapping[str, Any]) -> None:
    names = {tool.name for tool in listed}
    for label, given in (("--trust-tool", trust_tools), ("--effect", effects),
                         ("--sensitive", sensitive), ("--memo", memo)):
        for name in given:
            if name not in names:
                raise SchemaError("upstream", name, "", f"is named by {label} but the upstream "
                                  f"server lists no such tool")


def _gated_entry(upstream: Upstream, tool: types.Tool, index: int,
                 effect: str | Mapping[str, Any] | None, sensitive: Collection[str],
                 timeout: float | None) -> dict[str, Any]:
    """The contract entry of one upstream tool; ``SchemaError`` if it cannot be enforced."""
    listing = {key: value for key, value in tool.model_dump(
        by_alias=True, exclude_none=True, mode="json").items() if key in _LISTED_KEYS}
    # Imported under the name it is served as, so that every line the import says about it
    # is one line of at most a few dozen characters of its name; the body calls the real one.
    listing["name"] = shown(tool.name)
    definition = tool_definition(listing, "upstream", f"/tools/{index}")
    entry = import_tool(definition, upstream.body(tool.name), effect, "upstream")
    _mark_sensitive(entry, listing["name"], sensitive)
    if timeout is not None and entry.get("effect") != "read":
        # A write's body gives up by itself: its outcome is then marked unknown at once,
        # where past the gate's own timeout it would run on, in progress, for ever.
        entry["fn"] = upstream.body(tool.name, entry.pop("timeout", timeout))
    elif timeout is not None:
        entry.setdefault("timeout", timeout)
    return entry


def gated_table(upstream: Upstream, listed: Sequence[types.Tool], *,
                trust_tools: Collection[str] = (),
                effects: Mapping[str, str | Mapping[str, Any]] | None = None,
                sensitive: Mapping[str, Collection[str]] | None = None,
                timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT,
                memo: Mapping[str, float] | None = None,
                ) -> tuple[dict[str, dict[str, Any]], dict[str, types.Tool]]:
    """The contract table of the upstream's tools, and the tools passed through ungated.

    ``effects`` overrides a tool's effect as ``load_tools`` does; ``sensitive``
    names, per tool, top-level arguments or returned keys to redact. Each tool
    gets ``timeout`` (seconds) unless its ``effects`` entry sets one. One
    listing, decided as ``Served.admit`` decides it.
    """
    served = Served(upstream, trust_tools, effects or {}, sensitive or {}, timeout,
                    memo=memo or {})
    served.admit(listed)
    return dict(served.table), {name: tool for name, (tool, _) in served.forwarded.items()}


def _keyword_of(exc: SchemaError) -> str:
    """The keyword a refusal names: the last step of its JSON pointer."""
    step = exc.field.rsplit("/", 1)[-1]
    return step.replace("~1", "/").replace("~0", "~") or "(schema)"


def _remember_for(entry: dict[str, Any], tool: str, seconds: float | None) -> None:
    if seconds is None:
        return
    if entry.get("effect") != "read":
        # Not a SchemaError, which would hide the tool: the operator's mistake, said at once.
        raise ContractError(tool, "--memo", "names a tool that writes: a write is never "
                            "remembered (--effect NAME=read if it only reads)")
    entry["ttl"] = seconds


def _mark_sensitive(entry: dict[str, Any], tool: str, fields: Collection[str]) -> None:
    for name in fields:
        specs = [specs for specs in (entry["args"], entry["returns"]) if name in specs]
        if not specs:
            raise SchemaError("upstream", tool, "", f"--sensitive names {name!r}, which is "
                              f"neither an argument nor a returned key")
        for found in specs:
            found[name] = {**found[name], "sensitive": True}


async def _forwarded_call(upstream: Upstream, upstream_name: str, served_name: str,
                          arguments: dict[str, Any], timeout: float | None,
                          records: Any) -> types.CallToolResult:
    """A passed-through call: answered (an error after ``timeout``), recorded, never raised."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            result = await upstream.call(upstream_name, arguments)
    except Exception as exc:  # an ungated tool's failure is still answered, not raised
        text = types.TextContent(type="text", text=f"upstream failed: {type(exc).__name__}")
        result = types.CallToolResult(content=[text], is_error=True)
    record = CallRecord(
        request_id=f"ungated_{secrets.token_hex(6)}", tool=served_name, ok=not result.is_error,
        code="UPSTREAM_ERROR" if result.is_error else "", reason="ungated",
        latency_ms=(time.perf_counter() - started) * 1000, memo_hit=False, replayed=False,
        args_digest="", contract_hash="")
    try:
        if records is not None:
            records(record)
    except Exception:  # as in the gate: a broken sink breaks no call
        _log.exception("call record of %s not written", served_name)
    return result


def proxy_server(upstream: Upstream, gate: Gate, passed: Served | Mapping[str, types.Tool],
                 name: str = "agtool-proxy",
                 timeout: float | None = DEFAULT_UPSTREAM_TIMEOUT) -> Server[Any]:
    """The server the client talks to: the gate's tools, and the passed-through ones.

    A passed-through call is recorded too, to the gate's sink, with no args
    digest (nothing says which of its arguments are sensitive) and the
    reason ``"ungated"``; it too is answered an error after ``timeout`` seconds.
    Given ``Served``, the tools listed follow each listing of the upstream.
    """
    if isinstance(passed, Served):
        passed.records = gate.records
        return build_server(gate, name=name, forwarded=passed.forwarded,
                            changes=passed.changes)
    static = Served(upstream, trust_tools=tuple(passed), timeout=timeout)
    static.records = gate.records
    forwarded = {tool_name: (tool, static._forward(tool_name)) for tool_name, tool in
                 passed.items()}
    return build_server(gate, name=name, forwarded=forwarded)


async def serve_upstream(upstream: Upstream, mcp_server: Server[Any],
                         serve: Any) -> None:
    """Run ``serve(mcp_server)`` until it returns, or until the upstream is lost for good.

    The latter raises ``UpstreamUnavailable``, so that the proxy exits non-zero.
    """
    async with anyio.create_task_group() as group:
        async def watch() -> None:
            await upstream.gone.wait()
            group.cancel_scope.cancel()

        async def run() -> None:
            await serve(mcp_server)
            group.cancel_scope.cancel()

        group.start_soon(watch)
        group.start_soon(run)
    if upstream.gone.is_set():
        raise UpstreamUnavailable(f"the upstream server {upstream.label!r} was lost and "
                                  f"could not be restarted")
