"""The chain of one call, step by step, and the tool each step works on.

    authorize -> snapshot and check the args -> plan (dry run) -> approval
    -> memo, or write-once -> run (``run_sync`` / ``arun``) -> check the result
    -> remember -> answer

``prepare`` takes a call as far as the body: it answers an ``Outcome`` when
the call ends there (refused, planned, remembered, replayed), ``Held`` when a
write's key is held elsewhere (the caller waits, as its path allows, and
calls ``reclaim``), or ``Ready`` when the body is to run. ``run_sync`` and
``arun`` run it, on the sync and async paths, and ``conclude`` checks what
came back. Both paths go through these same steps.

Each tool has one entry per gate entry point (``Tool.call_tool`` and the
others), which the gate routes a call to by name. A plain read (no write, no
approval, no timeout, in the gate's own scope) gets its steps compiled into
one function when its contract is compiled (``_fastpath``): its entries take
that compiled read for a plain call, and hand anything else to the gate's
general path (``Entries``), which comes here with a ``Call``. Every other
tool's entries go there straight away.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import threading
import time
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any, Literal, overload

from ._answers import is_retryable, marks_sensitive, transport_failure
from ._authority import Approval, approved, read_scope, spend_once
from ._call import Call, Refusal
from ._compile import (
    UNDECLARED,
    compile_arg_check,
    compile_copy,
    compile_result_check,
    compile_weigh,
)
from ._contract import ToolContract
from ._errors import NotApplied
from ._fastpath import Guard, compile_key_call, compile_model_entry, compile_read
from ._hop import in_thread
from ._keys import Keys
from ._memo import MISS, Memo, compile_key, freeze, thaw
from ._outcome import HIT, PLAN, REPLAY, Envelope, Outcome, failure, success
from ._pool import BodyPool
from ._reasons import (
    ARG_SCHEMA,
    ASYNC_LOOP_RUNNING,
    AUTH_APPROVAL,
    AUTH_BAD_SCOPE,
    AUTH_SCOPE,
    NOT_OBJECT,
    SHAPE,
    TIMEOUT,
    TIMEOUT_BUSY,
    WRITE_CONFLICT,
    WRITE_IN_PROGRESS,
    WRITE_NO_KEY,
    WRITE_STORE,
    WRITE_UNKNOWN,
    shown,
)
from ._records import contract_hash, redact_args
from ._run import (
    BUSY,
    LOOP_RUNNING,
    TIMED_OUT,
    Busy,
    LoopRunning,
    TimedOut,
    await_body,
    finish_here,
    is_async_body,
    run_body,
    within,
)
from ._scrub import NO_SECRETS, call_secrets, log_scrubbed
from ._stats import Counts
from ._store import CONFLICT, DONE, RUN, UNKNOWN, WriteStore, new_owner
from ._writes import (
    mark_unknown,
    release,
    rotated_key,
    store_outcome,
    stored_envelope,
    write_key,
)

__all__ = ["ENTRY_POINTS", "POLL_SECONDS", "Entries", "Held", "Ready", "Runtime", "Tool", "arun",
           "call_async", "call_sync", "conclude", "prepare", "reclaim", "run_sync"]

_log = logging.getLogger("agtool")
#: How often a caller waiting on a write running elsewhere looks again.
POLL_SECONDS = 0.01


#: The gate's entry points, each a ``Tool`` attribute: its own entry for that entry point.
ENTRY_POINTS = ("call_tool", "call_for_model", "acall_tool", "acall_for_model")


class Entries:
    """The gate's own answers for what a tool's entry does not answer itself.

    ``general[point](call)`` answers a ``Call`` by the general steps, as
    ``point`` answers (an envelope, or a model's answer; a coroutine for the
    async points). ``recorded[point](tool, args, echo, run_id)`` answers a
    plain call by the tool's compiled read, with a record. ``ids`` is the prefix
    and the counter of the gate's request ids.
    """

    __slots__ = ("general", "ids", "recorded")

    def __init__(self, general: Mapping[str, Callable[[Call], Any]],
                 recorded: Mapping[str, Callable[..., Any]],
                 ids: tuple[str, Iterator[int]]) -> None:
        self.general = general
        self.recorded = recorded
        self.ids = ids


class Runtime:
    """What every call of one gate shares: its memo, its write store, its workers, its defaults."""

    __slots__ = ("background", "entries", "keys", "lease", "memo", "pending_wait", "pool",
                 "records", "store", "table", "ttl")

    def __init__(self, memo: Memo, store: Callable[[], WriteStore], ttl: float,
                 pending_wait: float, lease: float, pool: BodyPool, keys: Keys,
                 table: Mapping[str, Any], entries: Entries) -> None:
        self.table = table  #: the gate's table, as given: entries are checked against it
        self.entries = entries
        #: The gate's ``records`` sink, read by every tool entry: ``None`` records nothing.
        self.records: Any = None
        self.keys = keys  #: the gate's secret's keys: digests, memo keys, approvals
        self.memo = memo
        self.store = store  #: the store, made when a write first needs it
        self.ttl = ttl  #: seconds a value is remembered when its contract names no ttl
        self.pending_wait = pending_wait
        #: How long a claim holds, seen from another host, before it is taken as abandoned.
        self.lease = lease
        self.pool = pool  #: the workers of timed sync bodies
        #: Async writes running on past their caller's timeout, kept until they settle.
        self.background: set[asyncio.Task[Any]] = set()


class Tool:
    """One table entry compiled: its contract, its checks, its counters, its entries."""

    __slots__ = ("acall_for_model", "acall_tool", "afast", "args", "call_for_model",
                 "call_tool", "check_args", "check_result", "contract", "copy_result", "counts",
                 "entry", "fast", "fn", "hash", "in_gate_scope", "is_async", "key_call", "key_of",
                 "name", "needs_approval", "redacts", "redacts_args", "returns", "risk",
                 "shown_name", "timeout", "ttl", "weigh_result", "writes")
    #: Its entry for each of the gate's entry points (``ENTRY_POINTS``), called with the
    #: gate's keywords in ``Call``'s order: ``(args, echo, scope, run_id, step_id, approvals,
    #: dry_run)``; an async point's answers a coroutine.
    call_tool: Callable[..., Any]
    call_for_model: Callable[..., Any]
    acall_tool: Callable[..., Any]
    acall_for_model: Callable[..., Any]

    def __init__(self, entry: Mapping[str, Any], contract: ToolContract, counts: Counts,
                 scope: frozenset[str], runtime: Runtime) -> None:
        self.entry = entry
        self.fn: Callable[..., Any] = contract.fn
        self.args = entry["args"]  #: the table's own objects, to see when they are swapped
        self.returns = entry["returns"]
        self.contract = contract
        self.name = contract.name
        self.shown_name = shown(contract.name)  #: the name as records show it
        self.counts = counts
        self.hash = contract_hash(contract)
        self.check_args = _checked_apart(compile_arg_check(contract.args),
                                         contract.args_schema_check)
        self.check_result = _result_checked_apart(compile_result_check(contract.returns),
                                                  contract.result_schema_check)
        #: Whether the source schema says more than the specs: checked apart, after them.
        apart = contract.args_schema_check is not None or contract.result_schema_check is not None
        self.writes = contract.effect == "write"
        self.needs_approval = contract.needs_approval
        self.timeout = contract.timeout
        self.risk = contract.risk
        self.in_gate_scope = contract.risk in scope  #: the gate's scope never changes
        #: Seconds a success is remembered; 0 for a tool that is never remembered.
        self.ttl = 0.0 if self.writes else runtime.ttl if contract.ttl is None else contract.ttl
        self.is_async = is_async_body(self.fn)
        self.copy_result = compile_copy(contract.returns)
        #: The weight of a copy ``copy_result`` made, as the compiled read weighs it.
        self.weigh_result = compile_weigh(contract.returns)
        #: Whether a model's answer must have sensitive returned values taken out.
        self.redacts = marks_sensitive(contract.returns)
        #: Whether a call record's digest must be taken with sensitive args taken out.
        self.redacts_args = marks_sensitive(contract.args)
        # Sensitive args are keyed by a keyed digest: a memo key never holds them in clear.
        self.key_of = compile_key(self.name, self.hash, contract.args,
                                  runtime.keys.digest if self.redacts_args else None)
        #: ``key_call(args, echo, run_id)``: the check and the key in one (``REFUSED`` for
        #: args that do not pass); ``None`` for sensitive args, keyed by their digest.
        self.key_call = None if self.redacts_args or apart else \
            compile_key_call(contract, self.hash)
        #: The plain read's steps compiled into one function (``_fastpath``), answering the
        #: ``Outcome`` (sync or async, as the body is); ``None`` where they do not apply.
        #: (An async body's sync entries take the general steps, which run it to its end.)
        self.fast: Callable[..., Any] | None = None
        #: ``fast`` for the async entry points: ``fast`` itself for an async body; for a
        #: sync one, a coroutine that runs only the body in a worker thread.
        self.afast: Callable[..., Any] | None = None
        # Only for a caller in the gate's own scope, which never changes.
        # (Nor for sensitive args: the compiled key would hold them; ``key_of`` does not.)
        # (Nor where the schema is checked apart: the compiled read knows only the specs.)
        if self.in_gate_scope and not (self.writes or self.needs_approval or self.redacts_args
                                       or self.timeout is not None or apart):
            self.fast = self._compiled(runtime, None, self.is_async)
            self.afast = self.fast if self.is_async else self._compiled(runtime, None, True)
        for point in ENTRY_POINTS:
            setattr(self, point, self._entry(runtime, point))

    def _compiled(self, runtime: Runtime, guard: Guard | None, asynchronous: bool
                  ) -> Callable[..., Any]:
        return compile_read(
            self.contract, self.hash, self.counts, runtime.memo, self.ttl, self.copy_result,
            is_async=asynchronous, guard=guard,
            hop=in_thread if asynchronous and not self.is_async else None,
            raised=lambda snapshot, exc: _raised(runtime, Ready(self, snapshot, None, None), exc),
            handed_back=lambda snapshot, key, value: _ran(
                runtime, Ready(self, snapshot, key, None), lambda: finish_here(value)))

    def _entry(self, runtime: Runtime, point: str) -> Callable[..., Any]:
        """This tool's entry for the gate's entry point ``point`` (see ``ENTRY_POINTS``)."""
        entries = runtime.entries
        general = entries.general[point]
        asynchronous = point.startswith("a")
        fast = self.afast if asynchronous else self.fast
        if fast is None or (self.is_async and not asynchronous):
            return _general_entry(self.name, general)
        guard = Guard(runtime.table, self.entry, runtime, general,
                      functools.partial(entries.recorded[point], self))
        if point.endswith("for_model"):
            return compile_model_entry(self.contract, fast, guard, entries.ids,
                                       self.redacts, is_async=asynchronous)
        return self._compiled(runtime, guard, asynchronous)

    def snapshot(self, args: object, echo: object) -> dict[str, Any] | str:
        """The checked plain copy of ``args`` the body runs on, or a reason."""
        try:
            snapshot: dict[str, Any] | str = self.check_args(args, echo)
        except Exception:  # an object that cannot be read cleanly is not an object of args
            return NOT_OBJECT
        return snapshot

    def memo_key(self, snapshot: dict[str, Any], run_id: object) -> Hashable | None:
        """The memo key of a checked snapshot in run ``run_id``; ``None`` if it has none."""
        try:
            key = self.key_of(snapshot, run_id)
            hash(key)  # a run_id that cannot be hashed: no key
        except Exception:  # a value nobody can key is simply not remembered
            return None
        return key

    def result_reason(self, value: object) -> str:
        """``""``, ``UNDECLARED`` or the reason a returned value is refused."""
        try:
            reason: str = self.check_result(value)
        except Exception:  # a value whose own methods raise has no shape to trust
            return SHAPE
        return reason


def _checked_apart(check: Callable[..., Any],
                   schema_check: Callable[[dict[str, Any]], str | None] | None
                   ) -> Callable[..., Any]:
    """``check``, and then the source schema's own check of what it let through."""
    if schema_check is None:
        return check

    def check_args(args: object, echo: object = None) -> Any:
        snapshot = check(args, echo)
        if isinstance(snapshot, str):
            return snapshot
        arg = schema_check(snapshot)
        if arg is None:
            return snapshot
        return f"{ARG_SCHEMA}:{shown(arg)}" if arg else ARG_SCHEMA

    return check_args


def _result_checked_apart(check: Callable[[Any], str], schema_check: Callable[[Any], bool] | None
                          ) -> Callable[[Any], str]:
    """``check``, and then the source schema's own check of a value it passed."""
    if schema_check is None:
        return check

    def check_result(value: Any) -> str:
        reason = check(value)
        if reason not in ("", UNDECLARED) or schema_check(value):
            return reason
        return SHAPE

    return check_result


class Ready:
    """A call cleared to run its body: the checked snapshot and where its outcome goes."""

    __slots__ = ("args", "key", "owner", "reconciling", "tool", "write_key")

    def __init__(self, tool: Tool, args: dict[str, Any], key: Hashable | None,
                 write_key: str | None, reconciling: bool = False, owner: str = "") -> None:
        self.tool = tool
        self.args = args
        self.key = key  #: the memo key of a read, if it can be remembered
        self.write_key = write_key  #: the idempotency key this call has claimed
        self.owner = owner  #: whom the claim of ``write_key`` belongs to: this call
        #: Whether the key's outcome is unknown: ask the contract's ``reconcile`` first.
        self.reconciling = reconciling


class Held:
    """A write whose key another caller holds: look again after a pause, up to a deadline."""

    __slots__ = ("args", "deadline", "exact", "key", "owner", "spend", "tool")

    def __init__(self, tool: Tool, args: dict[str, Any], exact: str, key: str,
                 deadline: float, spend: tuple[str, float | None] | None = None) -> None:
        self.tool = tool
        self.args = args
        self.exact = exact
        self.key = key
        #: ``time.monotonic()`` past which a key still held answers ``write:in_progress``.
        self.deadline = deadline
        #: The single-use approval this write is let through by: spent only when the body is
        #: to run, so that a retry of a write already made is answered its outcome.
        self.spend = spend
        #: Each call claims as an owner of its own: a retried insert that landed is its own.
        self.owner = new_owner()


def _general_entry(name: str, general: Callable[[Call], Any]) -> Callable[..., Any]:
    """A tool entry that hands every call to the gate's general path."""
    def entry(args: object, echo: Mapping[str, object] | None, scope: Collection[str] | None,
              run_id: object, step_id: object, approvals: Iterable[Approval],
              dry_run: bool) -> Any:
        return general(Call(name, args, echo, scope, run_id, step_id, approvals, dry_run))
    return entry


def call_sync(runtime: Runtime, tool: Tool | Refusal, call: Call) -> Outcome:
    """The whole chain of one call on the sync path, from what the lookup found."""
    if isinstance(tool, Refusal):
        return Outcome(failure("args:" + tool.reason))
    step = prepare(runtime, tool, call)
    while isinstance(step, Held):
        time.sleep(POLL_SECONDS)
        step = reclaim(runtime, step)
    return run_sync(runtime, step) if isinstance(step, Ready) else step


async def call_async(runtime: Runtime, tool: Tool | Refusal, call: Call) -> Outcome:
    """The whole chain of one call on the async path, from what the lookup found.

    A write's steps that ask the write store (its claim, its settling) run on a
    worker thread: a store that is slow or locked for one key holds that call
    only, never the event loop every other call of the process runs on.
    """
    if isinstance(tool, Refusal):
        return Outcome(failure("args:" + tool.reason))
    step = await _claimed_off_loop(runtime, functools.partial(prepare, runtime, tool, call)) \
        if tool.writes else prepare(runtime, tool, call)
    while isinstance(step, Held):  # only a write's key is ever held
        await asyncio.sleep(POLL_SECONDS)
        step = await _claimed_off_loop(runtime, functools.partial(reclaim, runtime, step))
    return await arun(runtime, step) if isinstance(step, Ready) else step


async def _claimed_off_loop(runtime: Runtime, claim: Callable[[], Outcome | Held | Ready]
                            ) -> Outcome | Held | Ready:
    """``claim()`` on a worker thread; a key it claimed for a caller cancelled meanwhile is
    freed (nothing ran under it), so that a retry may run the write."""
    lock = threading.Lock()
    handed: list[Outcome | Held | Ready] = []
    abandoned = False

    def claim_or_free() -> Outcome | Held | Ready:
        step = claim()
        with lock:
            if not abandoned:
                handed.append(step)
                return step
        if isinstance(step, Ready):
            _nothing_ran(runtime, step)
        return step

    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(None, claim_or_free)
    try:
        return await asyncio.shield(work)
    except BaseException:
        with lock:
            abandoned = True
        if handed and isinstance(handed[0], Ready):
            loop.run_in_executor(None, _nothing_ran, runtime, handed[0])
        raise


# -- before the body -------------------------------------------------------------------------

def prepare(runtime: Runtime, tool: Tool, call: Call) -> Outcome | Held | Ready:
    """Every step before the body: an answer, a held write, or a call ready to run."""
    counts = tool.counts
    refusal = _authorize(tool, call.scope)
    if refusal:
        counts.denied += 1
        return Outcome(failure(refusal))
    snapshot = tool.snapshot(call.args, call.echo)
    if isinstance(snapshot, str):
        counts.blocked += 1
        return Outcome(failure("args:" + snapshot))
    run_id = call.run_id
    if call.dry_run:
        return Outcome(success(_plan(runtime, tool, snapshot)), PLAN, None, snapshot)
    # The keyed digest of the args: what an approval and a write's key are bound to.
    exact = runtime.keys.digest(snapshot) if tool.needs_approval or tool.writes else ""
    approval: bool | tuple[str, float | None] = True
    if tool.needs_approval:
        approval = _approval(runtime, tool, exact, call.approvals, run_id, call.step_id,
                             snapshot)
        if approval is False:
            counts.denied += 1
            return Outcome(failure(AUTH_APPROVAL), args=snapshot)
    if tool.writes:
        key = write_key(runtime.keys, tool.name, tool.contract.key_args, snapshot, exact,
                        run_id, call.step_id)
        if key is None or not exact:
            return Outcome(failure(WRITE_NO_KEY), args=snapshot)
        if runtime.keys.earlier:  # a write made before the secret changed is found by its key
            found = rotated_key(runtime.keys, runtime.store, tool.name, tool.contract.key_args,
                                snapshot, key, exact, run_id, call.step_id)
            if found is None:
                return Outcome(failure(WRITE_STORE), args=snapshot)
            key, exact = found
        deadline = time.monotonic() + runtime.pending_wait
        return reclaim(runtime, Held(tool, snapshot, exact, key, deadline,
                                     approval if isinstance(approval, tuple) else None))
    memo_key = tool.memo_key(snapshot, run_id) if tool.ttl > 0 else None
    if memo_key is not None:
        frozen = runtime.memo.get(memo_key)
        if frozen is not MISS:
            counts.hits += 1
            return Outcome(success(thaw(frozen)), HIT, None, snapshot)
    return Ready(tool, snapshot, memo_key, None)


def _approval(runtime: Runtime, tool: Tool, exact: str, approvals: Iterable[Approval],
              run_id: object, step_id: object,
              args: dict[str, Any]) -> bool | tuple[str, float | None]:
    """``False`` if no approval covers this call, else ``True``, or, for a write let through
    by a single-use token, that token: spent only once its key is claimed to run."""
    deferred: list[tuple[str, float | None]] = []

    def spend(token_id: str, expires_at: float | None) -> bool:
        if tool.writes:  # spent in reclaim, once the key is claimed to run
            deferred.append((token_id, expires_at))
            return True
        return spend_once(runtime.store(), token_id, expires_at)

    if not approved(runtime.keys, tool.name, exact, approvals, run_id, step_id, spend, args):
        return False
    return deferred[0] if deferred else True


def _authorize(tool: Tool, scope: Collection[str] | None) -> str:
    """``""``, or why this caller may not use this tool: authority before the args."""
    if scope is None:
        return "" if tool.in_gate_scope else f"{AUTH_SCOPE}:{tool.risk}"
    levels = read_scope(scope)
    if levels is None:
        return AUTH_BAD_SCOPE
    return "" if tool.risk in levels else f"{AUTH_SCOPE}:{tool.risk}"


def reclaim(runtime: Runtime, held: Held) -> Outcome | Held | Ready:
    """Claim a write's key: run it (``Ready``), replay it, or find it held or in conflict.

    A key still held past the wait answers ``write:in_progress``; before then the
    caller pauses, as its path allows, and calls again with what this answered.
    """
    tool = held.tool
    store: WriteStore | None = None
    try:
        store = runtime.store()
        claim = store.claim(held.key, tool.name, held.exact, held.owner, runtime.lease)
    except Exception as exc:
        _log.error("idempotency store failed to claim %s (%s)", held.key, type(exc).__name__)
        if store is not None:  # a claim that landed before the failure: nothing ran under it
            release(store, held.key, held.owner)
        return Outcome(failure(WRITE_STORE), args=held.args)
    if claim.state == RUN:
        return _spent(runtime, held, taken_over=False) or Ready(
            tool, held.args, None, held.key, owner=held.owner)
    if claim.state == DONE:
        replayed = stored_envelope(claim.outcome)
        if replayed is None:  # the store, not the write, is broken
            _log.error("idempotency store answered %r with a malformed outcome", held.key)
            return Outcome(failure(WRITE_STORE), args=held.args)
        tool.counts.replayed += 1
        return Outcome(replayed, REPLAY, None, held.args)
    if claim.state == CONFLICT:
        return Outcome(failure(WRITE_CONFLICT), args=held.args)
    if claim.state == UNKNOWN:
        if tool.contract.reconcile is None:
            return Outcome(failure(WRITE_UNKNOWN), args=held.args)
        try:
            taken = store.take_over(held.key, held.owner, runtime.lease)
        except Exception as exc:
            _log.error("idempotency store failed to take over %s (%s)", held.key,
                       type(exc).__name__)
            mark_unknown(store, held.key, held.owner)  # a take-over that landed: unknown again
            return Outcome(failure(WRITE_STORE), args=held.args)
        if taken:
            return _spent(runtime, held, taken_over=True) or Ready(
                tool, held.args, None, held.key, reconciling=True, owner=held.owner)
        # Another caller is reconciling it now: wait for its outcome as for a pending key.
    if time.monotonic() >= held.deadline:
        return Outcome(failure(WRITE_IN_PROGRESS), args=held.args)
    return held


def _spent(runtime: Runtime, held: Held, *, taken_over: bool) -> Outcome | None:
    """Spend the write's single-use approval now that its body is to run; refuse if it was."""
    if held.spend is None or spend_once(runtime.store(), *held.spend):
        return None
    # Used before (by another call, or another key). Nothing ran under this claim: a new
    # key is given back; a key taken over stays as unknown as it was.
    settle = mark_unknown if taken_over else release
    settle(runtime.store(), held.key, held.owner)
    held.tool.counts.denied += 1
    return Outcome(failure(AUTH_APPROVAL), args=held.args)


# -- the body, and after it ------------------------------------------------------------------

def run_sync(runtime: Runtime, ready: Ready) -> Outcome:
    """Run the body on this thread (within its timeout, if it has one) and conclude."""
    tool = ready.tool
    reconcile = tool.contract.reconcile
    if ready.reconciling and reconcile is not None:
        found = _reconcile_answered(runtime, ready, _reconciled(
            runtime, ready, lambda: run_body(reconcile, ready.args)))
        if found is not None:
            return found
    timeout = tool.timeout
    if timeout is None:
        return _ran(runtime, ready, _body_call(ready))
    if ready.write_key is not None:
        # On a timeout the write runs on and stores its outcome: a retry finds it by its key.
        done = within(runtime.pool, timeout, lambda: _ran(runtime, ready, _body_call(ready)))
        if done is BUSY:
            return _busy(runtime, ready)
        return _timed_out(ready) if done is TIMED_OUT else done  # type: ignore[return-value]
    body = _body_call(ready)
    # A read's late value is dropped: only a value that came in time is remembered.
    return _ran(runtime, ready, lambda: within(runtime.pool, timeout, body))


def _body_call(ready: Ready) -> Callable[[], Any]:
    fn, args = ready.tool.fn, ready.args
    return lambda: run_body(fn, args)


@overload
def _ran(runtime: Runtime, ready: Ready, call: Callable[[], Any]) -> Outcome: ...


@overload
def _ran(runtime: Runtime, ready: Ready, call: Callable[[], Any], *,
         hand_back: Literal[True]) -> Outcome | _HandedBack: ...


def _ran(runtime: Runtime, ready: Ready, call: Callable[[], Any], *,
         hand_back: bool = False) -> Outcome | _HandedBack:
    """The ``Outcome`` of ``call()``, the body's run; with ``hand_back``, an awaitable it
    answers is handed back unsettled (``_HandedBack``), for the caller's loop to await."""
    counts = ready.tool.counts
    counts.runs += 1
    try:
        value = call()
    except BaseException as exc:
        return _body_raised(runtime, ready, exc)
    if hand_back and inspect.isawaitable(value):
        return _HandedBack(value)
    return _settled(runtime, ready, lambda: _answered(runtime, ready, value))


def _body_raised(runtime: Runtime, ready: Ready, exc: BaseException) -> Outcome:
    """A body's exception, on either path: an ``Exception`` is answered; a ``BaseException``
    propagates, its write's key freed (``NotApplied``) or left unknown."""
    if isinstance(exc, Exception):
        return _settled(runtime, ready, lambda: _raised(runtime, ready, exc))
    if isinstance(exc, NotApplied):
        _nothing_ran(runtime, ready)
    else:
        _interrupted(runtime, ready)
    raise exc


def _settled(runtime: Runtime, ready: Ready, settle: Callable[[], Outcome]) -> Outcome:
    """``settle()``, which concludes a body that ran; if even that is interrupted (a value
    whose methods raise a ``BaseException`` as it is read), the write's key is left unknown,
    not pending: the body has run."""
    try:
        return settle()
    except BaseException:
        _interrupted(runtime, ready)  # a key already settled is not changed by it
        raise


def _reconciled(runtime: Runtime, ready: Ready, call: Callable[[], Any]) -> object:
    """What the contract's ``reconcile`` answered: a value, ``None``, or ``_NOT_KNOWN``."""
    try:
        return call()
    except Exception as exc:
        return _unreconciled(ready, exc)
    except BaseException:
        _interrupted(runtime, ready)
        raise


def _unreconciled(ready: Ready, exc: Exception) -> _NotKnown:
    _log.error("reconcile of %s under %s raised %s: left unknown", ready.tool.shown_name,
               ready.write_key, type(exc).__name__)
    return _NOT_KNOWN


def _reconcile_answered(runtime: Runtime, ready: Ready, found: object) -> Outcome | None:
    """The answer of a reconciled write, or ``None`` when its body is to run after all."""
    ready.reconciling = False
    if found is None:
        return None  # nothing happened: this caller owns the key and runs the body
    tool = ready.tool
    if found is _NOT_KNOWN or isinstance(found, (TimedOut, Busy, LoopRunning)):
        _mark_unknown(runtime, ready)
        return Outcome(failure(WRITE_UNKNOWN), args=ready.args)
    reason = tool.result_reason(found)
    if reason and reason != UNDECLARED:
        # Not a value of the write: the world's answer is not understood, so nothing is
        # settled on it (a ``False`` for "not found" must not close the key as a failure).
        _log.error("reconcile of %s under %s answered a value its return contract refuses "
                   "(%s): left unknown", tool.shown_name, ready.write_key, reason)
        _mark_unknown(runtime, ready)
        return Outcome(failure(WRITE_UNKNOWN), args=ready.args)
    tool.counts.reconciled += 1
    return _settled(runtime, ready, lambda: conclude(runtime, ready, found))


class _NotKnown:
    __slots__ = ()


#: A ``reconcile`` that could not say: the key stays unknown.
_NOT_KNOWN = _NotKnown()


async def arun(runtime: Runtime, ready: Ready) -> Outcome:
    """Await the body (a sync one in a worker thread) within its timeout, and conclude."""
    tool = ready.tool
    reconcile = tool.contract.reconcile
    if ready.reconciling and reconcile is not None:
        found = await _areconciled(runtime, ready, reconcile)
        answered = _reconcile_answered(runtime, ready, found)
        if answered is not None:
            return answered
    if ready.write_key is not None and tool.timeout is not None:
        # As on the sync path, a write runs on past a timeout and stores its outcome. A sync
        # body runs and settles on a worker thread, which outlives this event loop; an async
        # one in a task of this loop, kept until it settles. A sync body that hands back an
        # awaitable (an adapter's stand-in) has it awaited in such a task too: on the
        # caller's loop, in the caller's context, never on a loop of the worker's own.
        work: asyncio.Future[Outcome]
        if tool.is_async:
            work = _kept_task(runtime, _arun(runtime, ready, None))
        else:
            fn, args = tool.fn, ready.args
            future = runtime.pool.submit(lambda: _ran(runtime, ready, lambda: fn(**args),
                                                      hand_back=True))
            if future is None:
                return _busy(runtime, ready)
            work = _kept_task(runtime, _handed_back_awaited(runtime, ready, future))
        try:
            return await asyncio.wait_for(asyncio.shield(work), tool.timeout)
        except asyncio.TimeoutError:  # the work answers every body's own exception itself
            return _timed_out(ready)
    return await _arun(runtime, ready, tool.timeout)


def _kept_task(runtime: Runtime, work: Coroutine[Any, Any, Outcome]) -> asyncio.Task[Outcome]:
    """``work`` as a task of this loop, kept until it settles: a caller that stops waiting
    (a timeout, a cancellation) does not stop it."""
    task = asyncio.ensure_future(work)
    runtime.background.add(task)
    task.add_done_callback(_settled_task(runtime))
    return task


class _HandedBack:
    """A sync body's awaitable, handed back unsettled by its worker to the caller's loop."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable


async def _handed_back_awaited(runtime: Runtime, ready: Ready,
                               future: concurrent.futures.Future[Outcome | _HandedBack]
                               ) -> Outcome:
    """What a sync write body run on a worker came to: settled there, or, if it handed back
    an awaitable, that awaited here and settled."""
    done = await asyncio.wrap_future(future)
    if not isinstance(done, _HandedBack):
        return done
    try:
        value = await done.awaitable
    except BaseException as exc:
        return _body_raised(runtime, ready, exc)
    return _settled(runtime, ready, lambda: _answered(runtime, ready, value))


def _settled_task(runtime: Runtime) -> Callable[[asyncio.Future[Outcome]], None]:
    def done(task: asyncio.Future[Outcome]) -> None:
        runtime.background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a BaseException it ended with was handled in it
    return done


async def _areconciled(runtime: Runtime, ready: Ready, reconcile: Callable[..., Any]) -> object:
    try:
        return await await_body(reconcile, ready.args, is_async_body(reconcile), None, None)
    except Exception as exc:
        return _unreconciled(ready, exc)
    except BaseException:
        _interrupted(runtime, ready)
        raise


async def _arun(runtime: Runtime, ready: Ready, timeout: float | None) -> Outcome:
    tool = ready.tool
    tool.counts.runs += 1
    # A timed tool's sync body runs on the gate's bounded workers, even past a write's timeout.
    pool = runtime.pool if tool.timeout is not None else None
    try:
        value = await await_body(tool.fn, ready.args, tool.is_async, timeout, pool)
    except Exception as exc:
        if ready.write_key is None:
            return _body_raised(runtime, ready, exc)
        return await _settled_off_loop(functools.partial(_body_raised, runtime, ready, exc))
    except BaseException as exc:
        return _body_raised(runtime, ready, exc)  # left unknown here: it propagates now
    if ready.write_key is None:
        return _settled(runtime, ready, lambda: _answered(runtime, ready, value))
    return await _settled_off_loop(
        lambda: _settled(runtime, ready, lambda: _answered(runtime, ready, value)))


async def _settled_off_loop(settle: Callable[[], Outcome]) -> Outcome:
    """A write's settling (its outcome stored) on a worker thread. A caller cancelled
    meanwhile stops waiting; the settling goes on there, so the outcome is still stored."""
    return await asyncio.shield(asyncio.get_running_loop().run_in_executor(None, settle))


def _answered(runtime: Runtime, ready: Ready, value: object) -> Outcome:
    """What a body's run came to: its value concluded, or the run's own answer."""
    if value is TIMED_OUT:
        return _timed_out(ready)
    if value is BUSY:
        ready.tool.counts.runs -= 1  # no worker was free: nothing ran
        return _busy(runtime, ready)
    if value is LOOP_RUNNING:
        ready.tool.counts.runs -= 1  # the coroutine was closed unstarted: nothing ran
        _nothing_ran(runtime, ready)
        return Outcome(failure(ASYNC_LOOP_RUNNING), args=ready.args)
    return conclude(runtime, ready, value)


def conclude(runtime: Runtime, ready: Ready, value: object) -> Outcome:
    """Check what the body answered, remember a success, settle a write."""
    tool = ready.tool
    reason = tool.result_reason(value)
    if reason and reason != UNDECLARED:
        tool.counts.bad_results += 1
        envelope = failure("result:" + reason)
    else:
        envelope = success(value)
        if ready.key is not None:
            _remember(runtime, tool, ready.key, value, reason == UNDECLARED)
    if ready.write_key is not None and not _kept(runtime, ready, envelope):
        return Outcome(failure(WRITE_UNKNOWN), args=ready.args)
    return Outcome(envelope, args=ready.args)


def _kept(runtime: Runtime, ready: Ready, envelope: Envelope) -> bool:
    """Store a write's outcome; ``False`` (and the key unknown) if it could not be."""
    tool = ready.tool
    if ready.write_key is None or store_outcome(
            runtime.store(), ready.write_key, ready.owner, envelope, tool.contract,
            tool.redacts, ready.args):
        return True
    tool.counts.unknown += 1
    return False


def _remember(runtime: Runtime, tool: Tool, key: Hashable, value: object,
              undeclared: bool) -> None:
    frozen = freeze(value, undeclared, tool.copy_result)
    if frozen is not None:
        # A copy the contract's copier made is weighed by its weigher, as a compiled read's.
        weigh = tool.weigh_result if frozen[1] is tool.copy_result else None
        runtime.memo.put(key, frozen, tool.ttl, tool.counts,
                         None if weigh is None else weigh(frozen[0]))


def _raised(runtime: Runtime, ready: Ready, exc: Exception) -> Outcome:
    """The answer to a body that raised: a transport failure, a timeout, or ``raised:<Name>``."""
    tool = ready.tool
    tool.counts.raised += 1
    # The body's exception may quote its args (``ValueError(f"card {card} declined")``).
    secrets = call_secrets(tool.contract, ready.args) if tool.redacts_args else NO_SECRETS
    log_scrubbed(_log, logging.DEBUG, exc, secrets, "tool %r raised %s", tool.name,
                 type(exc).__name__)
    details: dict[str, Any] | None = None
    upstream = transport_failure(exc, secrets)  # reads the exception without ever raising
    if upstream is not None:
        envelope, details = failure(upstream[0]), upstream[1]
    else:
        envelope = failure(TIMEOUT if isinstance(exc, TimeoutError)
                           else "raised:" + type(exc).__name__)
    if ready.write_key is not None:
        if not is_retryable(envelope["error"]):
            # The body's own answer, kept: a repeat is refused the same way, never run again.
            if not _kept(runtime, ready, envelope):
                return Outcome(failure(WRITE_UNKNOWN), details=details, args=ready.args)
        elif getattr(exc, "applied", None) is False:  # the body's word: nothing was done
            _nothing_ran(runtime, ready)
        else:
            # A timeout or a failed upstream may have taken effect before it failed: a
            # retry must find out (reconcile, or an operator), not write a second time.
            _interrupted(runtime, ready)
    return Outcome(envelope, details=details, args=ready.args)


def _interrupted(runtime: Runtime, ready: Ready) -> None:
    """A write body that started and did not answer: its outcome is unknown, its key kept."""
    if ready.write_key is not None:
        ready.tool.counts.unknown += 1
        _mark_unknown(runtime, ready)


def _mark_unknown(runtime: Runtime, ready: Ready) -> None:
    if ready.write_key is not None:
        mark_unknown(runtime.store(), ready.write_key, ready.owner)


def _nothing_ran(runtime: Runtime, ready: Ready) -> None:
    """A write whose body never started: its key is freed, so that a retry may run it."""
    if ready.write_key is not None:
        release(runtime.store(), ready.write_key, ready.owner)


def _busy(runtime: Runtime, ready: Ready) -> Outcome:
    _nothing_ran(runtime, ready)
    return Outcome(failure(TIMEOUT_BUSY), args=ready.args)


def _timed_out(ready: Ready) -> Outcome:
    ready.tool.counts.timed_out += 1
    return Outcome(failure(TIMEOUT), args=ready.args)


def _plan(runtime: Runtime, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """What a call would do, for ``dry_run``: sensitive arguments redacted, nothing run.

    Its ``args_digest`` is keyed with the gate's secret: it tells two plans
    apart, but gives away no redacted value and cannot be made an approval.
    """
    contract = tool.contract
    return {"tool": contract.name, "args": redact_args(contract, args),
            "args_digest": runtime.keys.digest(args), "effect": contract.effect,
            "risk": contract.risk,
            "needs_approval": contract.needs_approval}
