"""The floor of a plain read: one hand-fused function for ``stock_lookup``'s contract.

``fused_stock_read`` answers what ``Gate.call_tool`` answers for a plain read
of a tool with the contract of ``agtool.tools.TOOLS["stock_lookup"]`` (the
reference tools ``stock_lookup`` and ``legacy_stock`` share it), and keeps
every promise the gate keeps for such a call, written out by hand in one
function and nothing around it:

- the args are read once, through ``dict``'s own storage, into a snapshot the
  body runs on; a flood of keys is refused before it is read;
- the args are closed (an unknown or non-``str`` key is refused) and typed
  exactly (``True`` is no ``int``, a ``str`` subclass no ``str``), each
  refusal the reason the gate gives, in the gate's order of checks;
- the memo key tells apart what ``==`` confuses, and a run id that cannot be
  hashed means the call is not remembered;
- remembered values live for a time (TTL) and in a bounded space (least
  recently used out first), both counted: at most ``size`` values and
  ``max_bytes`` bytes of keys and values, weighed as the gate weighs them
  (the key's strings' lengths and 8 bytes for each other part, the copy's
  strings' lengths and 8 bytes for each value in it, summed as the copy is
  made), the total (``counts.bytes``) kept beside a plain ``OrderedDict``
  under a lock, as the
  gate's is, since two threads adding to one total would lose a weight;
- a hit hands out a fresh copy, a miss keeps a private copy: what a caller
  does to an answer never reaches the memo;
- the result is checked (shape, empty, too big, range), including the pass
  over its key types that decides whether its copier may be trusted; a value
  with undeclared parts (a subclass, an extra key) is copied the slow way;
- every counter the gate keeps for these outcomes is kept, and the answer is
  the gate's envelope.

It is not the gate: it knows one contract and one table, has no scope, no
records, no live table, no async path, and a body that raises is answered by
its exception's name (``timeout`` for a ``TimeoutError``) without the gate's
reading of transport failures. ``bench_gate`` times it beside ``call_tool``
(the gate must stay within 1.1x of it), and
``tests/core/test_fused_reference.py`` checks that the two agree, call by call.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from agtool import DEFAULT_MEMO_BYTES, shown
from agtool._memo import freeze, part_weight, value_weight
from agtool.tools import MAX_ROWS, REGIONS

__all__ = ["FusedCounts", "fused_stock_read"]

#: Ints of this magnitude or more weigh their size, as the gate weighs them.
_BIG = 1 << 63

_MISSING: Any = object()
_KNOWN = frozenset({"sku", "region", "limit"})
_REGIONS = frozenset(REGIONS)


class FusedCounts:
    """The counters the gate keeps for a plain read, named as ``ToolStats`` names them, and
    ``bytes``, what the memo's entries weigh (the gate's ``Memo.bytes``): not a counter,
    so ``reset`` leaves it."""

    __slots__ = ("bad_results", "blocked", "bytes", "evicted", "expired", "hits", "raised",
                 "runs")

    def __init__(self) -> None:
        self.bytes = 0
        self.reset()

    def reset(self) -> None:
        self.runs = self.hits = self.blocked = self.bad_results = self.raised = 0
        self.evicted = self.expired = 0


def _unexpected(args: dict[Any, Any]) -> str:
    for key in dict.__iter__(args):
        if type(key) is not str:
            return "not_object"
        if key not in _KNOWN:
            return f"unexpected:{shown(key)}"
    return "not_object"


def _copy_exact(value: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy of a result whose every part is a plain, declared container."""
    value = value.copy()
    value["rows"] = [row.copy() for row in value["rows"]]
    return value


def fused_stock_read(fn: Callable[..., Any], *, name: str = "stock_lookup",
                     version: str = "", ttl: float = 300.0, size: int = 1024,
                     max_bytes: int = DEFAULT_MEMO_BYTES,
                     clock: Callable[[], float] = time.monotonic,
                     ) -> tuple[Callable[[object, object, object], dict[str, Any]], FusedCounts,
                                OrderedDict[Hashable, Any]]:
    """``(read, counts, memo)``: ``read(args, echo, run_id)`` answers a plain call of ``fn``.

    ``version`` is what the gate keys its contract by (its keys hold it, and weigh it)."""
    counts = FusedCounts()
    # A plain OrderedDict, as the gate's: its weight is kept in counts.bytes.
    memo: OrderedDict[Hashable, Any] = OrderedDict()
    memo_get, touch, pop, oldest = memo.get, memo.move_to_end, memo.pop, memo.popitem
    books = threading.Lock()
    lock, unlock = books.acquire, books.release
    fixed = len(name) + len(version) + 8  # the key's name, version and limit

    def refused(reason: str) -> dict[str, Any]:
        counts.blocked += 1
        return {"ok": False, "value": None, "error": "args:" + reason}

    def bad(reason: str) -> dict[str, Any]:
        counts.bad_results += 1
        return {"ok": False, "value": None, "error": "result:" + reason}

    def read(args: object, echo: object, run_id: object) -> dict[str, Any]:
        # -- the snapshot, closed and exactly typed ------------------------------------------
        try:
            if type(args) is not dict:
                if not isinstance(args, dict):
                    return refused("not_object")
                if dict.__len__(args) > 3:
                    return refused(_unexpected(args))
                args = dict(dict.items(args))
            elif len(args) > 3:
                return refused(_unexpected(args))
            else:
                args = args.copy()
            for arg in args:
                if type(arg) is not str or arg not in _KNOWN:
                    return refused(_unexpected(args))
            if "sku" not in args:
                return refused("missing:sku")
            sku = args["sku"]
            if type(sku) is not str:
                return refused("type:sku")
            if "region" not in args:
                return refused("missing:region")
            region = args["region"]
            if type(region) is not str:
                return refused("type:region")
            if region not in _REGIONS:
                return refused("allowed:region")
            if "limit" not in args:
                return refused("missing:limit")
            limit = args["limit"]
            if type(limit) is not int:
                return refused("type:limit")
            if limit < 1:
                return refused("min:limit")
            if limit > MAX_ROWS:
                return refused("max:limit")
        except Exception:
            return refused("not_object")
        # -- the memo: exact scalars make an exact key ----------------------------------------
        key: Hashable | None = (name, version, run_id, sku, region, limit)
        try:
            entry = memo_get(key)
        except TypeError:  # a run id that cannot be hashed: not remembered
            key = entry = None
        if entry is not None:
            if entry[1] > clock():
                try:  # noqa: SIM105 - contextlib.suppress costs a frame on every hit
                    touch(key)
                except KeyError:
                    pass
                counts.hits += 1
                return {"ok": True, "value": entry[2](entry[0]), "error": ""}
            weighed_then = entry[3]
            with books:
                if memo_get(key) is entry:
                    del memo[key]
                    counts.bytes -= weighed_then
                    counts.expired += 1
        # -- the body --------------------------------------------------------------------------
        counts.runs += 1
        try:
            result = fn(**args)
        except Exception as exc:
            counts.raised += 1
            reason = "timeout" if isinstance(exc, TimeoutError) else "raised:" + type(exc).__name__
            return {"ok": False, "value": None, "error": reason}
        # -- the result check, with the pass that decides whether the copier may be trusted --
        try:
            exact = True
            if type(result) is not dict:
                if not isinstance(result, dict):
                    return bad("shape")
                exact = False
            if type(result.get("sku", _MISSING)) is not str:
                return bad("shape")
            rows = result.get("rows", _MISSING)
            if type(rows) is not list:
                if not isinstance(rows, list):
                    return bad("shape")
                exact = False
            if len(rows) > MAX_ROWS:
                return bad("too_big")
            if len(rows) == 0:
                return bad("empty")
            for row in rows:
                if type(row) is not dict:
                    if not isinstance(row, dict):
                        return bad("shape")
                    exact = False
                if type(row.get("store", _MISSING)) is not str:
                    return bad("shape")
                count = row.get("count", _MISSING)
                if type(count) is not int:
                    return bad("shape")
                if count < 0:
                    return bad("range")
                if len(row) != 2:
                    exact = False
                elif exact:
                    for row_key in row:
                        if type(row_key) is not str:
                            exact = False
            if len(result) != 2:
                exact = False
            elif exact:
                for result_key in result:
                    if type(result_key) is not str:
                        exact = False
        except Exception:
            return bad("shape")
        # -- remember a private copy ------------------------------------------------------------
        if key is not None and ttl > 0 and size > 0:
            heavy = fixed + len(sku) + len(region) + (
                len(run_id) if type(run_id) is str else part_weight(run_id))
            copier: Any
            if exact:  # the copy, weighed as it is made: 8 bytes for each value, and the text
                rows = [row.copy() for row in result["rows"]]
                held = result.copy()
                held["rows"] = rows
                heavy += 24 + len(held["sku"]) + 24 * len(rows)
                for row in rows:
                    heavy += len(row["store"])
                    if row["count"] >= _BIG:
                        heavy += sys.getsizeof(row["count"])
                copier = _copy_exact
            else:  # the slow way, as the gate's: orjson's text, or a deep copy, weighed
                frozen = freeze(result)
                held, copier = (_MISSING, None) if frozen is None else frozen
                weighed = None if frozen is None else value_weight(held)
                heavy = max_bytes + 1 if weighed is None else heavy + weighed
            if held is not _MISSING:
                expires = clock() + ttl
                lock()
                try:
                    old = pop(key, None)
                    if old is not None:
                        counts.bytes -= old[3]
                    if heavy <= max_bytes:  # heavier than the budget: not kept at all
                        memo[key] = (held, expires, copier, heavy)
                        counts.bytes += heavy
                        while counts.bytes > max_bytes or len(memo) > size:
                            counts.bytes -= oldest(False)[1][3]
                            counts.evicted += 1
                finally:
                    unlock()
        return {"ok": True, "value": result, "error": ""}

    return read, counts, memo
