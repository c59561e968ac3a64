"""The steps of a plain read, compiled into one function per tool, and the tool's entries.

A plain read (no write, no approval, no timeout) called by a caller in the
gate's own scope goes through the same steps as every call: snapshot and
check the args, key, memo, body, result check, remember. Those steps cost
little each, but a Python call costs about as much as one of them, so for
this, the common call, they are emitted once, when the contract is
compiled, as the lines of a single function: the very checks ``_compile``
emits for ``check_args`` and ``check_result``, and the key ``_memo`` emits
for ``key_of``. Anything out of the ordinary (a body that raises, or hands
back a coroutine on the sync path) is handed to the general steps.

``compile_read`` makes ``fast(args, echo, run_id)``, answering the
``Outcome``; with a ``Guard`` it makes instead the tool's entry for one of the
gate's entry points, ``entry(args, echo, scope, run_id, step_id, approvals,
dry_run)``, answering the envelope. ``compile_model_entry`` makes the entry of
``call_for_model`` over ``fast``. Every entry opens with the one decision of
whether a call may take the compiled read (``_emit_guard``): a plain call,
the table's entry still the one compiled, and nobody recording (else the
compiled read is run by the gate's recorder). An ``async def`` body's are
coroutines (``acall_tool``), and so are a sync body's async entries, which
run only the body in a worker thread (``hop``).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Awaitable, Callable, Iterator, Mapping
from inspect import isawaitable
from typing import Any, NamedTuple

from ._answers import model_answer
from ._call import Call
from ._compile import Emitter, emit_copy, emit_weigh
from ._contract import ToolContract
from ._memo import Memo, emit_keep, emit_key, emit_key_weight, freeze, key_source, value_weight
from ._outcome import ANSWERED, HIT, Outcome, success
from ._reasons import NOT_OBJECT, SHAPE
from ._records import LOGS_CACHE, records_asked
from ._stats import Counts

__all__ = ["ENTRY_PARAMS", "REFUSED", "Guard", "compile_key_call", "compile_model_entry",
           "compile_read"]

Fallback = Callable[..., Any]
#: The parameters of every tool entry: the gate's keywords, positional, in ``Call``'s order.
ENTRY_PARAMS = "value, echo, scope, run_id, step_id, approvals, dry_run"
_records_log = logging.getLogger("agtool.calls")


class _Refused:
    def __repr__(self) -> str:
        return "REFUSED"


#: What ``compile_key_call``'s function answers for args its contract refuses.
REFUSED: Any = _Refused()


def compile_key_call(contract: ToolContract, version: str) -> Callable[..., Any]:
    """``key_call(args, echo, run_id)``: the memo key a call of these args would have
    (``None`` if it has none), or ``REFUSED``: the arg check and the key in one function,
    as a compiled read writes them (``Gate.cache_key``)."""
    emitter = Emitter(lambda reason: "return REFUSED")
    emitter.names["REFUSED"] = REFUSED
    emit = emitter.emit
    emit(1, "try:")
    emitter.arg_check(contract.args, "value", 2)
    emit(1, "except Exception:  # an object that cannot be read cleanly is not an object of args")
    emit(2, "return REFUSED")
    emit(1, "snapshot = value")
    emit(1, "try:")
    emit_key(emitter, key_source(contract.name, version, contract.args), 2, "return None")
    # Every other part is a checked scalar or a key of a container: only a run_id may fail.
    emit(2, "if run_id is not None and type(run_id) is not str:")
    emit(3, "hash(run_id)  # a run_id that cannot be hashed: no key")
    emit(1, "except Exception:  # a value nobody can key is simply not remembered")
    emit(2, "return None")
    emit(1, "return key")
    key_call: Callable[..., Any] = emitter.build("key_call", "value, echo, run_id")
    return key_call


class Guard(NamedTuple):
    """What a tool's entry checks before it takes the compiled read, and where else it goes.

    ``general(call)`` answers a ``Call`` by the gate's general steps (a call
    with a scope or a dry run, or an entry changed in the table since it was
    compiled); ``recorded(args, echo, run_id)`` runs the compiled read with a
    record of it (a gate with a sink, or ``agtool.calls`` at INFO).
    """

    table: Mapping[str, Any]
    entry: Mapping[str, Any]
    runtime: Any  #: the gate's ``Runtime``: its ``records`` sink is read on every call
    general: Callable[[Call], Any]
    recorded: Callable[[object, object, object], Any]


def _emit_guard(emitter: Emitter, name: str, guard: Guard, asynchronous: bool) -> None:
    """The one decision of whether a call may take the compiled read, as the entry's first
    lines: anything else is handed to the gate's general steps or its recorder."""
    entry = guard.entry
    emitter.names.update(
        GUARD_NAME=name, GUARD_ENTRY=entry, GUARD_FN=entry["fn"], GUARD_ARGS=entry["args"],
        GUARD_RETURNS=entry["returns"], GUARD_TABLE=guard.table,
        guard_runtime=guard.runtime, guard_general=guard.general,
        guard_recorded=guard.recorded, guard_logs=_records_log.isEnabledFor,
        guard_asked=records_asked,
        GUARD_LOGS_CACHE=LOGS_CACHE, GUARD_INFO=logging.INFO, Call=Call)
    emit = emitter.emit
    wait = "await " if asynchronous else ""
    general = f"return {wait}guard_general(Call(GUARD_NAME, {ENTRY_PARAMS}))"
    emit(1, "if scope is not None or dry_run:")
    emit(2, general)
    # Identity, not equality, as the lookup checks it: swapping an entry, its fn, its args or
    # its returns takes effect on the next call, through the lookup, which compiles it anew.
    emit(1, "try:")
    emit(2, "live = (GUARD_TABLE[GUARD_NAME] is GUARD_ENTRY "
            "and GUARD_ENTRY['fn'] is GUARD_FN and GUARD_ENTRY['args'] is GUARD_ARGS "
            "and GUARD_ENTRY['returns'] is GUARD_RETURNS)")
    emit(1, "except Exception:  # the table or its entry changed under us: the lookup looks again")
    emit(2, "live = False")
    emit(1, "if not live:")
    emit(2, general)
    # The logger's own answer, as isEnabledFor caches it: asked again only when not cached.
    # (A cached True of a logger disabled since goes to the recorder, which asks again.)
    emit(1, "try:")
    emit(2, "logs = GUARD_LOGS_CACHE[GUARD_INFO]")
    emit(1, "except KeyError:")
    emit(2, "logs = guard_logs(GUARD_INFO)")
    # A level the logger inherits (the root's, set by a host application) is no ask for
    # records: only then is records_asked consulted, so the common "no" stays a subscript.
    emit(1, "if (logs and guard_asked()) or guard_runtime.records is not None:")
    emit(2, f"return {wait}guard_recorded(value, echo, run_id)")


def compile_model_entry(contract: ToolContract, fast: Callable[..., Any], guard: Guard,
                        ids: tuple[str, Iterator[int]], redacts: bool, *,
                        is_async: bool) -> Callable[..., Any]:
    """The entry of ``call_for_model`` (or its twin) over ``fast``, the compiled read.

    ``ids`` is the gate's request-id prefix and counter. A success of a tool that
    redacts nothing is answered in place, its ``source`` a fresh copy of the one
    ``model_answer`` gives this contract; anything else by ``model_answer``.
    """
    emitter = Emitter()
    source = model_answer(Outcome(success(None)), contract, None, "", False)["source"]
    emitter.names.update(model_answer=model_answer, fast=fast, CONTRACT=contract,
                         ID_PREFIX=ids[0], IDS=ids[1], REDACTS=redacts, SOURCE=source)
    _emit_guard(emitter, contract.name, guard, is_async)
    emit = emitter.emit
    emit(1, f"outcome = {'await ' if is_async else ''}fast(value, echo, run_id)")
    emit(1, "request_id = f'{ID_PREFIX}{next(IDS)}'")
    if not redacts:
        emit(1, "envelope = outcome[0]")
        emit(1, "if envelope['ok']:")
        emit(2, "return {'ok': True, 'data': envelope['value'], 'source': SOURCE.copy(), "
                "'request_id': request_id}")
    emit(1, "return model_answer(outcome, CONTRACT, value, request_id, REDACTS)")
    entry: Callable[..., Any] = emitter.build("model_entry", ENTRY_PARAMS,
                                              asynchronous=is_async)
    return entry


def compile_read(contract: ToolContract, version: str, counts: Counts, memo: Memo, ttl: float,
                 copy_result: Callable[[Any], Any] | None, *, is_async: bool,
                 raised: Fallback, handed_back: Fallback,
                 guard: Guard | None = None,
                 hop: Callable[..., Awaitable[Any]] | None = None) -> Callable[..., Any]:
    """``fast(args, echo, run_id)`` for a plain read: its ``Outcome``; with ``guard``, the
    entry ``entry(args, echo, scope, run_id, step_id, approvals, dry_run)``: its envelope.

    ``copy_result`` is the contract's ``compile_copy``, or ``None``.
    ``raised(snapshot, exc)`` answers the ``Outcome`` of a body that raised,
    ``handed_back(snapshot, key, value)`` that of a sync body that handed back
    an awaitable. ``ttl`` 0 is a read never remembered.

    ``hop(fn, args)`` (async only) runs a sync body off the event loop, so that
    only the body is in a worker thread: the checks, the memo and the answer
    stay on the loop, and a hit never leaves it.
    """
    outcome = guard is None
    answers = _Answers(outcome)
    # The answer is made before it is counted: a reason that raises is counted once, below.
    emitter = Emitter(lambda reason: f"answer = {answers.refused(reason)}; "
                                     "counts.blocked += 1; return answer")
    emitter.names.update(
        counts=counts, memo_get=memo.get, MEMO=memo,
        memo_entries_get=memo.entries.get,
        memo_touch=memo.entries.move_to_end, memo_clock=memo.clock, fn=contract.fn,
        freeze=freeze, TTL=ttl, COPY=copy_result, raised=raised,
        handed_back=handed_back, isawaitable=isawaitable, Coroutine=types.CoroutineType,
        hop=hop,
        NEW=tuple.__new__, Outcome=Outcome, HIT=HIT, ANSWERED=ANSWERED)
    emit = emitter.emit
    if guard is not None:
        _emit_guard(emitter, contract.name, guard, is_async)

    emit(1, "try:")
    emitter.arg_check(contract.args, "value", 2)
    emit(1, "except Exception:  # an object that cannot be read cleanly is not an object of args")
    emit(2, emitter.fail(repr(NOT_OBJECT)))
    emit(1, "snapshot = value")

    remembers = ttl > 0 and memo.size > 0
    if remembers:
        _emit_memo(emitter, contract, version, answers, copy_result is not None)
    else:
        emit(1, "key = None")

    emit(1, "counts.runs += 1")
    emit(1, "try:")
    emit(2, "result = fn(**snapshot)" if hop is None else "result = await hop(fn, snapshot)")
    if is_async:
        emit(2, "if type(result) is Coroutine or isawaitable(result):")
        emit(3, "result = await result")
    else:
        emit(2, "handed = type(result) is not dict and isawaitable(result)")
    emit(1, "except Exception as exc:")
    emit(2, f"return raised(snapshot, exc){answers.envelope_of}")
    if not is_async:
        emit(1, "if handed:")
        emit(2, "counts.runs -= 1  # counted again where it is run")
        emit(2, f"return handed_back(snapshot, key, result){answers.envelope_of}")

    emitter.fail = lambda reason: f"answer = {answers.bad(reason)}; counts.bad_results += 1; " \
                                  "return answer"
    emit(1, "try:")
    emitter.result_check(contract.returns, "result", "exact", 2)
    emit(1, "except Exception:  # a value whose own methods raise has no shape to trust")
    emit(2, emitter.fail(repr(SHAPE)))
    if remembers:
        _emit_remember(emitter, contract, version, memo, copy_result is not None)
    emit(1, f"return {answers.ok('result', 'ANSWERED')}")
    fast: Callable[..., Any] = emitter.build(
        "fast" if guard is None else "entry",
        "value, echo, run_id" if guard is None else ENTRY_PARAMS, asynchronous=is_async)
    return fast


def _emit_remember(emitter: Emitter, contract: ToolContract, version: str, memo: Memo,
                   copies: bool) -> None:
    """``Memo.put(key, freeze(result, ...))``, written in place, weighed where it is made:
    the key by the weight its argument specs give it (``emit_key_weight``), an exact
    value's private copy made and weighed by the contract's copier and weigher, inlined;
    anything else frozen by ``freeze`` and weighed by ``value_weight``."""
    emitter.names.update(value_weight=value_weight)
    emit = emitter.emit
    emit(1, "if key is not None:")
    emit_key_weight(emitter, key_source(contract.name, version, contract.args), 2)
    if copies:
        emit(2, "if exact:")
        emit_copy(emitter, contract.returns, "result", "held", 3)
        emit(3, "frozen = (held, COPY)")
        emit_weigh(emitter, contract.returns, "held", "weight", 3)
        emit(2, "else:")
        emit(3, "frozen = freeze(result, True, COPY)")
    else:
        emit(2, "frozen = freeze(result, not exact, COPY)")
    emit(2, "if frozen is not None:")
    if copies:
        emit(3, "if frozen[1] is not COPY:")
        _emit_value_weight(emitter, 4)
    else:
        _emit_value_weight(emitter, 3)
    emit(3, "expires = memo_clock() + TTL")
    emit_keep(emitter, memo, 3)


def _emit_value_weight(emitter: Emitter, indent: int) -> None:
    # A value that cannot be weighed outweighs any budget: not kept, as one too heavy.
    emitter.emit(indent, "heavy = value_weight(frozen[0])")
    emitter.emit(indent, "weight = KEEP_BYTES + 1 if heavy is None else weight + heavy")


def _emit_memo(emitter: Emitter, contract: ToolContract, version: str,
               answers: _Answers, copies: bool) -> None:
    """The key (``key_of``'s source) and the memo lookup (``Memo.get``, read in place);
    a hit's fresh copy made by the contract's copier, inlined, when that is its copier."""
    source = key_source(contract.name, version, contract.args)
    emit = emitter.emit
    emit(1, "try:")
    emit_key(emitter, source, 2, "key = None")
    # Looked up inside the try: a run_id that cannot be hashed fails here, and is not kept.
    emit(2, "entry = None if key is None else memo_entries_get(key)" if source.spoilable
         else "entry = memo_entries_get(key)")
    emit(1, "except Exception:  # a value nobody can key is simply not remembered")
    emit(2, "key = entry = None")
    emit(1, "if entry is not None:")
    emit(2, "if entry[1] > memo_clock():")
    emit(3, "try:")
    emit(4, "memo_touch(key)")
    emit(3, "except KeyError:  # dropped by another thread since: still the value it held")
    emit(4, "pass")
    emit(3, "counts.hits += 1")
    emit(3, "frozen = entry[0]")
    if copies:
        emit(3, "if frozen[1] is COPY:")
        emit_copy(emitter, contract.returns, "frozen[0]", "fresh", 4)
        emit(4, f"return {answers.ok('fresh', 'HIT')}")
    emit(3, f"return {answers.ok('frozen[1](frozen[0])', 'HIT')}")
    emit(2, "memo_get(key)  # past its time: dropped, and counted as expired")


class _Answers:
    """The answer expressions of one variant: the envelope alone, or the ``Outcome``."""

    def __init__(self, outcome: bool) -> None:
        self.outcome = outcome
        self.envelope_of = "" if outcome else "[0]"

    def _answer(self, envelope: str, how: str, args: str) -> str:
        return f"NEW(Outcome, ({envelope}, {how}, None, {args}))" if self.outcome else envelope

    def refused(self, reason: str) -> str:
        return self._answer(_failure(f"'args:' + {reason}"), "ANSWERED", "None")

    def bad(self, reason: str) -> str:
        return self._answer(_failure(f"'result:' + {reason}"), "ANSWERED", "snapshot")

    def ok(self, value: str, how: str) -> str:
        return self._answer(f"{{'ok': True, 'value': {value}, 'error': ''}}", how, "snapshot")


def _failure(reason: str) -> str:
    return f"{{'ok': False, 'value': None, 'error': {reason}}}"
