"""The gate: the one door every tool call passes through.

``Gate`` is a thin facade over the chain of steps in ``_steps``: look the
tool up, authorize, snapshot and check the args, plan, approve, consult the
memo or claim the write's key, run the body, check the result, remember,
answer and record. It always answers ``{"ok", "value", "error"}`` and never
raises: a failure is a value whose ``error`` is a reason from ``_reasons``.
``call_for_model`` answers the same call in the form a model is handed;
``acall_tool`` and ``acall_for_model`` are the async twins, through the same
steps. What a gate answers without making a call (contracts, keys, checks,
approvals, counters) it inherits from ``Queries`` (``_queries``).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from itertools import count
from typing import Any, NamedTuple

from ._answers import error_code, model_answer
from ._authority import Approval, gate_scope
from ._call import Call, Refusal
from ._contract import check_table
from ._keys import bind_store, gate_keys
from ._lookup import Registry
from ._memo import DEFAULT_MEMO_BYTES, DEFAULT_MEMO_SIZE, DEFAULT_MEMO_TTL, Memo
from ._outcome import Envelope, Outcome, failure
from ._pool import BodyPool
from ._queries import Queries
from ._reasons import GATE_CLOSED
from ._records import RecordSink, record_call, records_asked, shown_tool
from ._steps import Entries, Runtime, Tool, call_async, call_sync
from ._store import SqliteStore, WriteStore, open_store

__all__ = ["DEFAULT_LEASE", "DEFAULT_SCOPE", "DEFAULT_WORKERS", "Gate"]

_log = logging.getLogger("agtool")
#: The scope of a caller that was given none: public reads only. Every other
#: risk level must be granted in code, by whoever knows who the caller is.
DEFAULT_SCOPE: frozenset[str] = frozenset({"read_public"})
#: Seconds a write's claim holds: a pending key older than this, on a machine that
#: cannot see whether its owner still runs, is taken to be abandoned (unknown).
DEFAULT_LEASE = 300.0
#: Worker threads per gate for sync bodies with a timeout.
DEFAULT_WORKERS = 8
#: What a closed gate answers every call with (``Gate.close``).
_CLOSED = Refusal(GATE_CLOSED)


class Entered(NamedTuple):
    """What the gate's general path, or its recorder, came to for one call."""

    outcome: Outcome
    request_id: str
    tool: Tool | Refusal


def _for_model(entered: Entered, args: object) -> dict[str, Any]:
    """A call's outcome in the form handed to a model (``call_for_model``)."""
    tool = entered.tool
    if isinstance(tool, Refusal):
        return model_answer(entered.outcome, None, args, entered.request_id)
    return model_answer(entered.outcome, tool.contract, args, entered.request_id, tool.redacts)


class Gate(Queries):
    """A call gate over one contract table, with its own memo, counters and write store.

    The table is validated here (``ContractError`` names the tool, the field and
    the problem) and kept by reference: tools added to it, or entries replaced
    in it, are validated when first called and take effect on that call. An
    entry changed in place deeper than its ``fn``, ``args`` and ``returns``
    is seen after ``refresh()``.

    ``scope`` is the risk levels a call may use when it names none
    (``DEFAULT_SCOPE``: public reads). ``store`` keeps write outcomes by
    idempotency key: a ``WriteStore``, the path of a SQLite file (default: a
    private in-memory SQLite, which a restarted process does not see), or a
    ``postgresql://`` URL for a ``PostgresStore`` shared by several machines.
    A write's claim holds for ``lease`` seconds: make it longer than the
    slowest write body. Sync bodies with a timeout run on ``workers`` threads
    of this gate's own; when every one is still busy with a body that overran,
    a further timed call answers ``timeout:busy`` at once.
    ``records`` receives one ``CallRecord`` per call; records also go to the
    ``agtool.calls`` logger at INFO when a level is set on it (or on ``agtool``),
    never because the root logger's level lets them through. ``pending_wait``
    is how long a call waits for the same write running elsewhere before
    answering ``write:in_progress``.
    The memo keeps at most ``memo_size`` successes and ``memo_bytes`` bytes of
    their keys (which hold the arguments) and values, as they weigh in memory
    (least recently used out first; one heavier than the whole budget is not
    kept), each for its contract's ``ttl`` or else ``memo_ttl`` seconds, by
    ``clock``.

    ``close()`` (or leaving ``with Gate(...) as gate:``) stops the gate's
    workers, an idle one at once, a busy one when its body returns, and
    forgets the memo; every later call is answered ``gate:closed``, never
    raised. The write store is left open: a write still running on a worker
    stores its outcome. A gate nobody holds any more is collected, and its
    idle workers exit then.

    ``secret`` (bytes or str, at least 16 bytes) keys every args digest the
    gate shows and signs its approvals. Without it: the ``AGTOOL_SECRET``
    environment variable, else the secret of another gate on the same store
    object, else the key file beside a SQLite file store (``<path>.key``,
    made ``0600`` with 32 random bytes on first use), else, for an in-memory
    store, a fresh random one. Any other store (a server store several
    machines share) needs ``secret=`` or ``AGTOOL_SECRET``: ``ValueError``.
    A store records which secrets made its keys: a gate without each of them
    is refused (``SecretMismatch``, a ``ValueError``) unless it is given the
    old ones as ``old_secrets`` (or ``AGTOOL_OLD_SECRETS``, comma-separated):
    keys and approvals made with them are then still found and honoured, and
    new ones are made with ``secret``.
    """

    def __init__(self, table: Mapping[str, Mapping[str, Any]], *,
                 scope: Collection[str] = DEFAULT_SCOPE,
                 store: WriteStore | str | os.PathLike[str] | None = None,
                 records: RecordSink | None = None, pending_wait: float = 2.0,
                 memo_size: int = DEFAULT_MEMO_SIZE, memo_ttl: float = DEFAULT_MEMO_TTL,
                 memo_bytes: int = DEFAULT_MEMO_BYTES,
                 clock: Callable[[], float] = time.monotonic, lease: float = DEFAULT_LEASE,
                 workers: int = DEFAULT_WORKERS, secret: bytes | str | None = None,
                 old_secrets: Iterable[bytes | str] | None = None) -> None:
        contracts = check_table(table)
        self._scope = gate_scope(scope)
        for name, seconds in (("memo_ttl", memo_ttl), ("lease", lease)):
            if type(seconds) not in (int, float) or not seconds >= 0:
                raise ValueError(f"{name} must be a non-negative number, got {seconds!r}")
        opened: WriteStore | None = None
        if isinstance(store, (str, os.PathLike)):
            opened = store = open_store(store)
        self._store = store
        try:
            self._keys = gate_keys(secret, self._store, old_secrets)
            if self._store is not None:
                bind_store(self._store, self._keys)  # refused if its keys need another secret
        except ValueError:
            if opened is not None:
                opened.close()  # opened here for nothing: a server store needs a secret
            raise
        pool = BodyPool(workers)
        self._store_lock = threading.Lock()
        self.cache = Memo(memo_size, clock=clock, max_bytes=memo_bytes)
        self._closed = False
        self._ids = count(1)
        self._id_prefix = "req_" + secrets.token_hex(4) + "_"
        self._runtime = Runtime(self.cache, lambda: self.store, float(memo_ttl), pending_wait,
                                float(lease), pool, self._keys, table, self._entries())
        self.records = records
        self._tools = Registry(table, contracts, self._scope, self._runtime)
        #: The tools by name, as the registry compiled them: what a call is routed by.
        self._routes = self._tools.compiled

    @property
    def records(self) -> RecordSink | None:
        """What receives one ``CallRecord`` per call; ``None``: only the ``agtool.calls`` log."""
        sink: RecordSink | None = self._runtime.records
        return sink

    @records.setter
    def records(self, sink: RecordSink | None) -> None:
        self._runtime.records = sink  # read there by every tool's entry, on every call

    @property
    def pending_wait(self) -> float:
        return self._runtime.pending_wait

    @pending_wait.setter
    def pending_wait(self, seconds: float) -> None:
        self._runtime.pending_wait = seconds

    @property
    def memo_ttl(self) -> float:
        """Seconds a read's success is remembered when its contract names no ``ttl``."""
        return self._runtime.ttl

    @property
    def store(self) -> WriteStore:
        """The write store; the default in-memory one is made when a write first needs it."""
        with self._store_lock:  # two threads must not make two stores
            if self._store is None:
                self._store = SqliteStore()
                # A gate made over this store (``store=gate.store``) digests as this one.
                bind_store(self._store, self._keys)
            return self._store

    # -- calls ---------------------------------------------------------------------------------
    # Each entry point routes a call by name to the tool's own entry for it, which takes the
    # tool's compiled read or hands the call, as one ``Call``, to ``_enter`` / ``_aenter``
    # (see ``_steps.Tool``); a name the gate has not compiled goes there at once.

    def call_tool(
        self, name: object, args: object, echo: Mapping[str, object] | None = None, *,
        scope: Collection[str] | None = None, run_id: str | None = None,
        step_id: str | None = None, approvals: Iterable[Approval] = (), dry_run: bool = False,
    ) -> Envelope:
        """Run one call through the gate; never raises. ``echo`` as in ``validate_args``.

        ``scope`` (default: the gate's) is the risk levels this caller may use:
        a set, frozenset, list or tuple of names from ``RISKS``; anything else
        is refused as ``auth:bad_scope``. Write tools need ``run_id`` and
        ``step_id``: with the business key they make the idempotency key, and
        a repeat of a key answers the first outcome without running the body.
        A read's ``run_id`` scopes its memo to that run. ``approvals`` are the
        caller's ``Approval`` s (or their ``str`` tokens), each verified with the
        gate's secret; tools of risk ``external_effect`` or ``irreversible`` run
        only with a valid one for these exact arguments (and this run and step,
        if it is bound to them).
        ``dry_run`` checks everything but the approval and answers the plan
        instead of running. ``KeyboardInterrupt`` and other ``BaseException`` s
        raised by the body propagate.
        """
        tool = self._routes.get(name) if type(name) is str else None
        if tool is None:
            return self._call_tool(Call(name, args, echo, scope, run_id, step_id, approvals,
                                        dry_run))
        entry = tool.call_tool  # read, then called: a method load of a slot is not specialised
        envelope: Envelope = entry(args, echo, scope, run_id, step_id, approvals, dry_run)
        return envelope

    async def acall_tool(
        self, name: object, args: object, echo: Mapping[str, object] | None = None, *,
        scope: Collection[str] | None = None, run_id: str | None = None,
        step_id: str | None = None, approvals: Iterable[Approval] = (), dry_run: bool = False,
    ) -> Envelope:
        """``call_tool`` for async callers: the same steps and answers, bodies awaited.

        An ``async def`` body is awaited, under an asyncio timeout when its
        contract has one; a sync body runs in a worker thread, so the event
        loop is never blocked. ``asyncio.CancelledError`` propagates.
        """
        tool = self._routes.get(name) if type(name) is str else None
        if tool is None:
            return await self._acall_tool(Call(name, args, echo, scope, run_id, step_id,
                                               approvals, dry_run))
        entry = tool.acall_tool
        envelope: Envelope = await entry(args, echo, scope, run_id, step_id, approvals, dry_run)
        return envelope

    def call_for_model(
        self, name: object, args: object, echo: Mapping[str, object] | None = None, *,
        scope: Collection[str] | None = None, run_id: str | None = None,
        step_id: str | None = None, approvals: Iterable[Approval] = (), dry_run: bool = False,
    ) -> dict[str, Any]:
        """``call_tool``, answered in the form handed to a model; never raises.

        Success: ``{"ok": True, "data", "source", "request_id"}``, with the
        values the return contract marks sensitive redacted and ``source``
        naming the tool, where its output comes from and how far it is
        trusted (untrusted output carries a note that it is data, not
        instructions). Failure: ``{"ok": False, "error": {"code", "retryable",
        "message", "details"}, "request_id"}`` (see ``model_error``).
        """
        tool = self._routes.get(name) if type(name) is str else None
        if tool is None:
            return self._call_for_model(Call(name, args, echo, scope, run_id, step_id,
                                             approvals, dry_run))
        entry = tool.call_for_model
        answer: dict[str, Any] = entry(args, echo, scope, run_id, step_id, approvals, dry_run)
        return answer

    async def acall_for_model(
        self, name: object, args: object, echo: Mapping[str, object] | None = None, *,
        scope: Collection[str] | None = None, run_id: str | None = None,
        step_id: str | None = None, approvals: Iterable[Approval] = (), dry_run: bool = False,
    ) -> dict[str, Any]:
        """``call_for_model`` for async callers, as ``acall_tool`` is to ``call_tool``."""
        tool = self._routes.get(name) if type(name) is str else None
        if tool is None:
            return await self._acall_for_model(Call(name, args, echo, scope, run_id, step_id,
                                                    approvals, dry_run))
        entry = tool.acall_for_model
        answer: dict[str, Any] = await entry(args, echo, scope, run_id, step_id, approvals,
                                             dry_run)
        return answer

    def close(self) -> None:
        """Stop this gate's workers and forget its memo; every later call is answered
        ``gate:closed``. Idempotent; the write store is left open (see the class)."""
        self._closed = True
        self._routes = {}  # every call now takes the general path, which refuses it
        self._runtime.pool.close()
        self.cache.clear()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the general path: one Call, through every step, recorded --------------------------------

    def _enter(self, call: Call) -> Entered:
        """The sync path of a call no compiled read answers: lookup, the steps, the record."""
        if self._closed:
            return self._refused_closed(call.name)
        found = self._tools.lookup(call.name)
        request_id, started = self._start()
        outcome = call_sync(self._runtime, found, call)
        self._record(request_id, call.name, found, outcome, started)
        return Entered(outcome, request_id, found)

    async def _aenter(self, call: Call) -> Entered:
        """``_enter`` on the async path."""
        if self._closed:
            return self._refused_closed(call.name)
        found = self._tools.lookup(call.name)
        request_id, started = self._start()
        outcome = await call_async(self._runtime, found, call)
        self._record(request_id, call.name, found, outcome, started)
        return Entered(outcome, request_id, found)

    def _refused_closed(self, name: object) -> Entered:
        request_id, started = self._start()
        outcome = Outcome(failure(GATE_CLOSED))
        self._record(request_id, name, _CLOSED, outcome, started)
        return Entered(outcome, request_id, _CLOSED)

    def _recorded(self, tool: Tool, args: object, echo: object, run_id: object) -> Entered:
        """A plain call answered by the tool's compiled read, with its record."""
        started = time.perf_counter()
        outcome: Outcome = tool.fast(args, echo, run_id)  # type: ignore[misc]
        request_id = f"{self._id_prefix}{next(self._ids)}"
        self._record(request_id, tool.name, tool, outcome, started)
        return Entered(outcome, request_id, tool)

    def _recorded_envelope(self, tool: Tool, args: object, echo: object,
                           run_id: object) -> Envelope:
        started = time.perf_counter()
        outcome: Outcome = tool.fast(args, echo, run_id)  # type: ignore[misc]
        self._record(f"{self._id_prefix}{next(self._ids)}", tool.name, tool, outcome, started)
        return outcome.envelope

    async def _arecorded(self, tool: Tool, args: object, echo: object,
                         run_id: object) -> Entered:
        started = time.perf_counter()
        outcome: Outcome = await tool.afast(args, echo, run_id)  # type: ignore[misc]
        request_id = f"{self._id_prefix}{next(self._ids)}"
        self._record(request_id, tool.name, tool, outcome, started)
        return Entered(outcome, request_id, tool)

    def _call_tool(self, call: Call) -> Envelope:
        return self._enter(call).outcome.envelope

    def _call_for_model(self, call: Call) -> dict[str, Any]:
        return _for_model(self._enter(call), call.args)

    async def _acall_tool(self, call: Call) -> Envelope:
        return (await self._aenter(call)).outcome.envelope

    async def _acall_for_model(self, call: Call) -> dict[str, Any]:
        return _for_model(await self._aenter(call), call.args)

    def _entries(self) -> Entries:
        """What a tool's entries hand the calls they do not answer themselves: this gate's."""
        async def arecorded_envelope(tool: Tool, args: object, echo: object,
                                     run_id: object) -> Envelope:
            return (await self._arecorded(tool, args, echo, run_id)).outcome.envelope

        async def arecorded_for_model(tool: Tool, args: object, echo: object,
                                      run_id: object) -> dict[str, Any]:
            return _for_model(await self._arecorded(tool, args, echo, run_id), args)

        def recorded_for_model(tool: Tool, args: object, echo: object,
                               run_id: object) -> dict[str, Any]:
            return _for_model(self._recorded(tool, args, echo, run_id), args)

        return Entries(
            general={"call_tool": self._call_tool, "call_for_model": self._call_for_model,
                     "acall_tool": self._acall_tool, "acall_for_model": self._acall_for_model},
            recorded={"call_tool": self._recorded_envelope, "call_for_model": recorded_for_model,
                      "acall_tool": arecorded_envelope, "acall_for_model": arecorded_for_model},
            ids=(self._id_prefix, self._ids))

    # -- counters and memory -------------------------------------------------------------------

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        for counts in list(self._tools.counts.values()):
            counts.reset()

    def clear(self) -> None:
        """Forget every remembered value (the write store keeps its outcomes)."""
        self.cache.clear()

    def refresh(self) -> None:
        """Revalidate the whole table now; raises ``ContractError`` if it is malformed."""
        self._tools.refresh()
        self.cache.clear()

    # -- one call, recorded --------------------------------------------------------------------

    def _start(self) -> tuple[str, float]:
        return f"{self._id_prefix}{next(self._ids)}", time.perf_counter()

    def _record(self, request_id: str, name: object, found: Tool | Refusal, outcome: Outcome,
                started: float) -> None:
        """One ``CallRecord`` per call, when anyone listens; a broken sink breaks nothing."""
        sink = self._runtime.records  # what the ``records`` property reads, read once
        if sink is None and not records_asked():
            return
        latency_ms = (time.perf_counter() - started) * 1000
        tool = None if isinstance(found, Refusal) else found
        reason = outcome.envelope["error"]
        try:
            record_call(sink, request_id,
                        shown_tool(name) if tool is None else tool.shown_name,
                        "" if tool is None else tool.hash,
                        tool.contract if tool is not None and tool.redacts_args else None,
                        error_code(reason) if reason else "", outcome, latency_ms, self._keys)
        except Exception:
            _log.exception("call record of %s not written", shown_tool(name))

