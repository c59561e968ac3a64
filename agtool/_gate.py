"""The gate: the one door every tool call passes through.

``Gate`` is a thin facade over the chain of steps in ``_steps``: look the
tool up, authorize, snapshot and check the args, plan, approve, consult the
memo or claim the write's key, run the body, check the result, remember,
answer and record. It always answers ``{"ok", "value", "error"}`` and never
raises: a failure is a value whose ``error`` is a reason from ``_reasons``.
``call_for_model`` answers the same call in the form a model is handed;
``acall_tool`` and ``acall_for_model`` are the async twins, through the same
steps.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from itertools import count
from typing import Any

from ._answers import error_code, model_answer
from ._authority import Approval
from ._compile import UNDECLARED, plain_dict
from ._contract import RISKS, ToolContract, check_table
from ._lookup import Registry
from ._memo import DEFAULT_MEMO_SIZE, DEFAULT_MEMO_TTL, Memo, cache_key
from ._outcome import HIT, REPLAY, Envelope, Outcome, failure
from ._records import (
    CallRecord,
    RecordSink,
    args_digest,
    digest,
    records_log,
    shown_tool,
)
from ._stats import ToolStats
from ._steps import Held, Ready, Runtime, Tool, arun, prepare, reclaim, run_sync
from ._store import SqliteStore, WriteStore
from ._writes import write_key

__all__ = ["DEFAULT_SCOPE", "Gate"]

_log = logging.getLogger("agtool")
_INFO = logging.INFO
#: The scope of a caller that was given none: public reads only. Every other
#: risk level must be granted in code, by whoever knows who the caller is.
DEFAULT_SCOPE: frozenset[str] = frozenset({"read_public"})
#: How often a caller waiting on a write running elsewhere looks again.
_POLL_SECONDS = 0.01


class Gate:
    """A call gate over one contract table, with its own memo, counters and write store.

    The table is validated here (``ContractError`` names the tool, the field and
    the problem) and kept by reference: tools added to it, or entries replaced
    in it, are validated when first called and take effect on that call. An
    entry changed in place deeper than its ``fn``, ``args`` and ``returns``
    is seen after ``refresh()``.

    ``scope`` is the risk levels a call may use when it names none
    (``DEFAULT_SCOPE``: public reads). ``store`` keeps write outcomes by
    idempotency key: a ``WriteStore``, or the path of a SQLite file (default: a
    private in-memory SQLite, which a restarted process does not see).
    ``records`` receives one ``CallRecord`` per call; records also go to the
    ``agtool.calls`` logger at INFO. ``pending_wait`` is how long a call waits
    for the same write running elsewhere before answering ``write:in_progress``.
    The memo keeps at most ``memo_size`` successes (least recently used out
    first), each for its contract's ``ttl`` or else ``memo_ttl`` seconds, by
    ``clock``.
    """

    def __init__(self, table: Mapping[str, Mapping[str, Any]], *,
                 scope: Collection[str] = DEFAULT_SCOPE,
                 store: WriteStore | str | os.PathLike[str] | None = None,
                 records: RecordSink | None = None, pending_wait: float = 2.0,
                 memo_size: int = DEFAULT_MEMO_SIZE, memo_ttl: float = DEFAULT_MEMO_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        contracts = check_table(table)
        if isinstance(scope, (str, Mapping)) or not all(isinstance(s, str) for s in scope):
            raise ValueError(f"scope must be a collection of risk level names, got {scope!r}")
        unknown = sorted(set(scope) - set(RISKS))
        if unknown:
            raise ValueError(f"scope names unknown risk levels {unknown}; expected {list(RISKS)}")
        if type(memo_ttl) not in (int, float) or not memo_ttl >= 0:
            raise ValueError(f"memo_ttl must be a non-negative number, got {memo_ttl!r}")
        self._scope = frozenset(scope)
        self._store = SqliteStore(store) if isinstance(store, (str, os.PathLike)) else store
        self._store_lock = threading.Lock()
        self.records = records
        self.cache = Memo(memo_size, clock=clock)
        self._runtime = Runtime(self.cache, lambda: self.store, float(memo_ttl), pending_wait)
        self._tools = Registry(table, contracts, self._scope, self._runtime)
        self._ids = count(1)
        self._id_prefix = "req_" + secrets.token_hex(4) + "_"

    @property
    def table(self) -> Mapping[str, Mapping[str, Any]]:
        """The contract table, as given: the gate follows changes made to it."""
        return self._tools.table

    @property
    def scope(self) -> frozenset[str]:
        """The risk levels a call may use when it names none."""
        return self._scope

    @property
    def pending_wait(self) -> float:
        return self._runtime.pending_wait

    @pending_wait.setter
    def pending_wait(self, seconds: float) -> None:
        self._runtime.pending_wait = seconds

    @property
    def store(self) -> WriteStore:
        """The write store; the default in-memory one is made when a write first needs it."""
        with self._store_lock:  # two threads must not make two stores
            if self._store is None:
                self._store = SqliteStore()
            return self._store

    # -- reading the contract ------------------------------------------------------------------

    def contract(self, name: str) -> ToolContract | None:
        """The validated contract of ``name``, or ``None`` if the table has no valid entry."""
        tool = self._tools.lookup(name)
        return None if isinstance(tool, str) else tool.contract

    def cache_key(self, name: str, args: object, run_id: str | None = None,
                  echo: Mapping[str, object] | None = None) -> Hashable | None:
        """The memo key of a call in run ``run_id``; ``None`` when it cannot be remembered exactly.

        The contract's hash is part of it, so a changed contract never answers
        from what the old one remembered. ``echo`` as in ``validate_args``: args
        that do not pass are keyed apart from every call that does.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, str):
            return cache_key(name, args, "", run_id)
        snapshot = tool.snapshot(args, echo)
        if isinstance(snapshot, str):  # never remembered: keyed as any value would be
            return cache_key(name, args, tool.hash, run_id)
        try:
            return tool.key_of(snapshot, run_id)
        except Exception:
            return None

    def validate_args(self, name: object, args: object,
                      echo: Mapping[str, object] | None = None) -> str:
        """``""`` if ``fn(**args)`` may run, otherwise one reason naming a real defect.

        ``echo`` holds the values the model was given for the contract's echo
        arguments (a request id); each must come back verbatim.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, str):
            return tool
        snapshot = tool.snapshot(args, echo)
        return snapshot if type(snapshot) is str else ""

    def validate_result(self, name: object, value: object) -> str:
        """``""`` if ``value`` keeps the return contract, else shape, empty, too_big or range.

        A name with no valid entry gives ``unknown_tool`` or ``bad_contract``.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, str):
            return tool
        reason = tool.result_reason(value)
        return "" if reason == UNDECLARED else reason

    def approve(self, name: str, args: Mapping[str, Any], by: str = "", *, run_id: str = "",
                step_id: str = "") -> Approval:
        """An approval of calling ``name`` with exactly ``args`` (as shown to the approver).

        ``run_id`` and ``step_id`` narrow it to that step; by default any step
        with the same arguments is covered.
        """
        # Digested as the gate digests a call: from the dict's own storage, as a plain copy.
        plain = plain_dict(args) if isinstance(args, dict) else args
        return Approval(name, digest(plain), by, run_id, step_id)

    def idempotency_key(self, name: str, args: object, run_id: str, step_id: str) -> str | None:
        """The key a write is stored under: run id, step id, tool and its business key.

        The business key is a digest of the contract's ``key_args`` (all args if
        it names none), so a sensitive order id never appears in the store's keys.
        ``None`` for a tool that is not a valid write or for args that do not pass.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, str) or not tool.writes:
            return None
        if not isinstance(args, dict):
            return None
        # The key is a digest of values: a plain copy digests as the checked snapshot does.
        snapshot = plain_dict(args)
        return write_key(name, tool.contract.key_args, snapshot,
                         digest(snapshot), run_id, step_id)

    # -- calls ---------------------------------------------------------------------------------

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
        caller's ``Approval`` s; tools of risk ``external_effect`` or
        ``irreversible`` run only with one for these exact arguments.
        ``dry_run`` checks everything but the approval and answers the plan
        instead of running. ``KeyboardInterrupt`` and other ``BaseException`` s
        raised by the body propagate.
        """
        found = self._tools.lookup(name)
        if self.records is None and not records_log.isEnabledFor(_INFO):
            if isinstance(found, str):
                return failure("args:" + found)
            fast = found.fast
            if fast is not None and scope is None and not dry_run and found.in_gate_scope:
                return fast(args, echo, run_id)
        return self._recorded(name, found, args, echo, scope, run_id, step_id, approvals,
                              dry_run)[2].envelope

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
        return (await self._arecorded(name, self._tools.lookup(name), args, echo, scope, run_id,
                                      step_id, approvals, dry_run))[2].envelope

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
        request_id, tool, outcome = self._recorded(name, self._tools.lookup(name), args, echo,
                                                   scope, run_id, step_id, approvals, dry_run)
        return model_answer(outcome, None if tool is None else tool.contract, args, request_id)

    async def acall_for_model(
        self, name: object, args: object, echo: Mapping[str, object] | None = None, *,
        scope: Collection[str] | None = None, run_id: str | None = None,
        step_id: str | None = None, approvals: Iterable[Approval] = (), dry_run: bool = False,
    ) -> dict[str, Any]:
        """``call_for_model`` for async callers, as ``acall_tool`` is to ``call_tool``."""
        request_id, tool, outcome = await self._arecorded(
            name, self._tools.lookup(name), args, echo, scope, run_id, step_id, approvals,
            dry_run)
        return model_answer(outcome, None if tool is None else tool.contract, args, request_id)

    # -- counters and memory -------------------------------------------------------------------

    def stats(self, name: str) -> ToolStats:
        """A snapshot of ``name``'s counters (all zero for a tool never called)."""
        counts = self._tools.counts.get(name)
        return ToolStats() if counts is None else counts.snapshot()

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

    def _recorded(self, name: object, found: Tool | str, args: object, echo: object,
                  scope: Collection[str] | None, run_id: object, step_id: object,
                  approvals: Iterable[Approval], dry_run: bool
                  ) -> tuple[str, Tool | None, Outcome]:
        request_id, started = self._start()
        step = self._begin(found, args, echo, scope, run_id, step_id, approvals, dry_run)
        while isinstance(step, Held):
            time.sleep(_POLL_SECONDS)
            step = reclaim(self._runtime, step)
        outcome = run_sync(self._runtime, step) if isinstance(step, Ready) else step
        return self._finish(request_id, name, found, outcome, started)

    async def _arecorded(self, name: object, found: Tool | str, args: object, echo: object,
                         scope: Collection[str] | None, run_id: object, step_id: object,
                         approvals: Iterable[Approval], dry_run: bool
                         ) -> tuple[str, Tool | None, Outcome]:
        request_id, started = self._start()
        step = self._begin(found, args, echo, scope, run_id, step_id, approvals, dry_run)
        while isinstance(step, Held):
            await asyncio.sleep(_POLL_SECONDS)
            step = reclaim(self._runtime, step)
        outcome = await arun(self._runtime, step) if isinstance(step, Ready) else step
        return self._finish(request_id, name, found, outcome, started)

    def _start(self) -> tuple[str, float]:
        return f"{self._id_prefix}{next(self._ids)}", time.perf_counter()

    def _begin(self, found: Tool | str, args: object, echo: object,
               scope: Collection[str] | None, run_id: object, step_id: object,
               approvals: Iterable[Approval], dry_run: bool) -> Outcome | Held | Ready:
        if isinstance(found, str):
            return Outcome(failure("args:" + found))
        return prepare(self._runtime, found, args, echo, scope, run_id, step_id, approvals,
                       dry_run)

    def _finish(self, request_id: str, name: object, found: Tool | str, outcome: Outcome,
                started: float) -> tuple[str, Tool | None, Outcome]:
        tool = None if isinstance(found, str) else found
        self._record(request_id, name, tool, outcome, started)
        return request_id, tool, outcome

    def _record(self, request_id: str, name: object, tool: Tool | None, outcome: Outcome,
                started: float) -> None:
        """One ``CallRecord`` per call, when anyone listens; a broken sink breaks nothing."""
        if self.records is None and not records_log.isEnabledFor(_INFO):
            return
        try:
            self._emit(request_id, name, tool, outcome, (time.perf_counter() - started) * 1000)
        except Exception:
            _log.exception("call record of %s not written", shown_tool(name))

    def _emit(self, request_id: str, name: object, tool: Tool | None, outcome: Outcome,
              latency_ms: float) -> None:
        envelope = outcome.envelope
        reason = envelope["error"]
        # Only checked args are digested: a refusal costs nothing in the size of what it refused.
        digested = "" if outcome.args is None else args_digest(
            None if tool is None else tool.contract, outcome.args)
        record = CallRecord(
            request_id=request_id, tool=shown_tool(name), ok=envelope["ok"],
            code=error_code(reason), reason=reason, latency_ms=round(latency_ms, 3),
            memo_hit=outcome.how == HIT, replayed=outcome.how == REPLAY,
            args_digest=digested, contract_hash="" if tool is None else tool.hash)
        records_log.info("%s %s %s", record.request_id, record.tool, reason or "ok",
                         extra={"agtool_record": record.as_dict()})
        if self.records is not None:
            self.records(record)
