"""Call records, digests and redaction: what may leave the gate about a call.

A record says which call it was (request id, tool, a keyed digest of the args with
sensitive values taken out, the contract's hash) and how it went (ok, code,
reason, latency, memo hit, replay), never a value. Records go to the gate's
sink, such as ``JsonLinesSink``, if it has one, and to the ``agtool.calls``
logger at INFO when they are asked for there (``records_asked``: a level set
on ``agtool.calls`` or ``agtool``, never one inherited from the root logger).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ._contract import Spec, ToolContract
from ._keys import Keys, canonical_key
from ._outcome import HIT, REPLAY, Outcome
from ._reasons import shown
from ._scrub import REDACTED, scrub

__all__ = ["REDACTED", "CallRecord", "JsonLinesSink", "RecordSink", "args_digest",
           "contract_hash", "record_call", "records_asked", "redact_args", "redact_value",
           "scrub", "shown_tool"]

records_log = logging.getLogger("agtool.calls")
_agtool_log = logging.getLogger("agtool")


def _logs_cache() -> dict[int, bool]:
    """``agtool.calls``' own cache of its ``isEnabledFor`` answers, by level.

    ``Logger.isEnabledFor`` answers from this per-logger dict, which
    ``setLevel``, ``logging.disable`` and the other level changes clear in
    place; reading it is a subscript where the method is a Python call. A
    logger without one (another Python) gives an empty dict: never cached,
    the method is always asked.
    """
    cache = getattr(records_log, "_cache", None)
    return cache if isinstance(cache, dict) else {}


#: ``agtool.calls``' cache of its level answers (``_logs_cache``), read on every record.
LOGS_CACHE = _logs_cache()


def records_asked() -> bool:
    """Whether someone asked for call records on ``agtool.calls``: a level of INFO or below
    set on that logger, or on ``agtool`` when it has none of its own.

    Never the root logger's level: a host application (or the MCP SDK's
    ``MCPServer``, whose default ``log_level="INFO"`` configures the root
    logger) sets that for its own logs, and must not turn on a record per
    call, which costs the compiled fast path its speed, by accident.
    """
    # logging's own cached answer first: a "no" it has cached is a "no" (a subscript where the
    # method is a call); anything else is asked of the method, which also sees ``disabled``.
    if LOGS_CACHE.get(_INFO) is False or not records_log.isEnabledFor(_INFO):
        return False
    level = records_log.level or _agtool_log.level
    return level != logging.NOTSET and level <= _INFO


@dataclass(frozen=True)
class CallRecord:
    """One gated call, as it may be logged: no argument or result values."""

    request_id: str
    tool: str
    ok: bool
    code: str  #: the model-facing code, ``""`` on success
    reason: str  #: the gate's reason, ``""`` on success
    latency_ms: float
    memo_hit: bool  #: answered from the memo, body not run
    replayed: bool  #: a write answered from the idempotency store, body not run
    args_digest: str  #: keyed HMAC of the canonical args, sensitive values redacted first
    contract_hash: str  #: ``""`` for a tool with no valid contract

    def as_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "tool": self.tool, "ok": self.ok,
                "code": self.code, "reason": self.reason, "latency_ms": self.latency_ms,
                "memo_hit": self.memo_hit, "replayed": self.replayed,
                "args_digest": self.args_digest, "contract_hash": self.contract_hash}


RecordSink = Callable[[CallRecord], None]

_new = object.__new__
_set = object.__setattr__


def _record_of(fields: dict[str, Any]) -> CallRecord:
    """``CallRecord(**fields)``, with ``fields`` (every field, in any order) as its attributes.

    Without the frozen ``__init__``, which sets each field in turn through
    ``object.__setattr__``: the record is the same dataclass, as immutable.
    """
    record: CallRecord = _new(CallRecord)
    _set(record, "__dict__", fields)
    return record


def shown_tool(name: object) -> str:
    """A called tool's name as a record may carry it: bounded and escaped, never a ``repr``."""
    return shown(name) if type(name) is str else f"<{type(name).__name__}>"


class JsonLinesSink:
    """A record sink appending one JSON object per line to ``path`` (thread-safe).

    The file is opened once, in append mode, and each line is flushed as it
    is written, so a reader (or a crash) sees every record up to the last
    call. ``close()`` closes it; a later record opens it again.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._out: io.FileIO | None = None

    def __call__(self, record: CallRecord) -> None:
        # A record's own attributes are its fields: written as they are, with no copy first.
        fields = record.__dict__ if type(record) is CallRecord else record.as_dict()
        self.write_line(orjson.dumps(fields, option=_SORTED_LINE))

    def write_line(self, line: bytes) -> None:
        """Append one whole line (``record_call`` hands one over) before answering."""
        lock = self._lock
        lock.acquire()  # not ``with``: its exit costs as much again as the lock itself
        try:
            out = self._out
            if out is None or out.closed:
                # Unbuffered: each line goes to the file in one write, as a flush would send it.
                out = self._out = open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open
            written = out.write(line)
            if written != len(line):  # a short write (a full disk, a signal): write the rest
                _write_rest(out, line, written or 0)
        finally:
            lock.release()

    def __del__(self) -> None:
        # A sink dropped without close() must not leave its file to the garbage collector.
        self.close()

    def close(self) -> None:
        """Close the file; every record written so far is in it."""
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None


#: A record's line: its fields in sorted order, then a newline.
_SORTED_LINE = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
#: The line of fields already in sorted order (``record_call``'s).
_LINE = orjson.OPT_APPEND_NEWLINE


def _write_rest(out: io.FileIO, line: bytes, written: int) -> None:
    view = memoryview(line)
    while written < len(line):
        more = out.write(view[written:])
        if not more:
            raise OSError(f"{out.name!r}: a record line was cut short")
        written += more


def args_digest(keys: Keys, contract: ToolContract | None, args: object) -> str:
    """The digest a record may carry: keyed, and taken after the sensitive values are redacted."""
    return keys.digest(redact_args(contract, args))


_INFO = logging.INFO


def _record_digest(keys: Keys, redact: ToolContract | None, args: dict[str, Any]) -> str:
    """``args_digest(keys, redact, args)`` for a checked snapshot, remembered for a short text.

    A memo hit repeats its args, so it repeats their digest: ``keys.recent``
    keeps the digests of short texts, of redacted args only (never a
    sensitive value).
    """
    value: object = args if redact is None else redact_args(redact, args)
    return keys.remembered(canonical_key(value))


def record_call(sink: RecordSink | None, request_id: str, tool: str, contract_hash: str,
                redact: ToolContract | None, code: str, outcome: Outcome,
                latency_ms: float, keys: Keys) -> None:
    """Record one gated call: a ``CallRecord`` to ``agtool.calls`` at INFO and to ``sink``.

    ``tool`` is the called name as a record shows it (``shown_tool``),
    ``contract_hash`` the tool's (``""`` for a name with no valid
    contract), ``redact`` its contract when it marks arguments sensitive,
    ``code`` the model-facing code of the reason. Only checked args
    (``outcome.args``) are digested, with the gate's ``keys``, so a refusal
    costs nothing in the size of what it refused. Raises what the sink raises.
    """
    envelope = outcome.envelope
    reason = envelope["error"]
    args = outcome.args
    # In sorted order, as a JSON line lists them: a JsonLinesSink writes this dict as it is.
    fields = {
        "args_digest": "" if args is None else _record_digest(keys, redact, args),
        "code": code, "contract_hash": contract_hash, "latency_ms": round(latency_ms, 3),
        "memo_hit": outcome.how == HIT, "ok": envelope["ok"], "reason": reason,
        "replayed": outcome.how == REPLAY, "request_id": request_id, "tool": tool}
    record = None
    # logging's cached "no" first, as ``records_asked`` reads it, without calling it.
    if LOGS_CACHE.get(_INFO) is not False and records_asked():
        record = _record_of(fields)
        records_log.info("%s %s %s", request_id, tool, reason or "ok",
                         extra={"agtool_record": record.as_dict()})
    if sink is None:
        return
    if type(sink) is JsonLinesSink:  # the record itself is never seen: only its line
        sink.write_line(orjson.dumps(fields, option=_LINE))
    else:
        sink(_record_of(fields) if record is None else record)


def redact_args(contract: ToolContract | None, args: object) -> object:
    """``args`` with every argument the contract marks sensitive (at any depth) replaced."""
    if contract is None or not isinstance(args, dict):
        return args
    return _redact_keys(contract.args, args)


def redact_value(contract: ToolContract, value: object) -> object:
    """A returned value with every key the return contract marks sensitive replaced."""
    return _redact_keys(contract.returns, value) if isinstance(value, dict) else value


def _redact_keys(specs: Mapping[str, Spec], value: dict[Any, Any]) -> dict[Any, Any]:
    return {key: _redact(specs[key], item) if key in specs else item
            for key, item in value.items()}


def _redact(spec: Spec, value: object) -> object:
    if spec.sensitive:
        return REDACTED
    item = spec.item
    if isinstance(item, Mapping) and isinstance(value, dict):
        return _redact_keys(item, value)  # a dict with named keys
    if item is None or not isinstance(value, list):
        return value
    if isinstance(item, Spec):
        return [_redact(item, element) for element in value]
    return [_redact_keys(item, element) if isinstance(element, dict) else element
            for element in value]


def contract_hash(contract: ToolContract) -> str:
    """A short sha256 of everything the contract declares, the body's qualified name included.

    Part of every memo key and every record: a changed contract never answers
    from what the old one remembered, and a record says which contract ran.
    """
    functions = ("fn", "reconcile", "args_schema_check", "result_schema_check")
    fields = {field.name: getattr(contract, field.name)
              for field in dataclasses.fields(contract) if field.name not in functions}
    for name in functions:
        fn = getattr(contract, name)
        if fn is not None:  # a contract without a reconcile hashes as it always did
            # A schema check says what it checks (its schema's digest); a body, its name.
            fields[name] = getattr(fn, "digest", None) or (
                f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn))}")
    # Specs are the only values JSON cannot write as they are.
    text = json.dumps(fields, sort_keys=True, default=dataclasses.asdict)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
