"""The memo: remembered successes, their keys, and isolated copies of their values.

A key must tell apart what Python's ``==`` confuses: ``1``, ``1.0`` and
``True`` are equal and hash alike, but a model that sent ``True`` for a count
made a different call. For checked args the key is compiled from the
contract: scalars as they are (floats by their hex form, so ``1.0`` is not
``1`` and ``-0.0`` is not ``0.0``), containers as orjson with sorted keys.
Values orjson cannot write exactly (NaN, huge ints, tuples, non-str keys)
take a slower typed walk, and what neither can key is simply not remembered.

``Memo`` is bounded, so that a long-running service can keep one: it holds
at most ``size`` values and ``max_bytes`` bytes of keys and values, dropping
the least recently used, and each value only for its time to live.
"""

from __future__ import annotations

import copy
import math
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson

from ._compile import BIG_INT, Emitter, weighs_fixed
from ._contract import Spec, is_closed
from ._stats import Counts

__all__ = ["BIG_INT", "DEFAULT_MEMO_BYTES", "DEFAULT_MEMO_SIZE", "DEFAULT_MEMO_TTL",
           "MAX_DEPTH", "MISS", "Entry", "Frozen", "KeySource", "Memo", "cache_key", "compact",
           "compact_key", "compile_key", "emit_keep", "emit_key", "emit_key_weight", "freeze",
           "key_source", "part_weight", "thaw", "value_weight", "weight"]

#: How many values a gate remembers unless told otherwise: enough for the
#: repeats of one agent run and then some, small enough to live in a service.
DEFAULT_MEMO_SIZE = 1024
#: Bytes of keys and values a gate remembers unless told otherwise: a count alone let
#: 1,024 calls with 1 MB arguments pin a gigabyte (the key holds the arguments).
DEFAULT_MEMO_BYTES = 64 * 1024 * 1024
#: Seconds a value is served unless the contract says otherwise: a stock count
#: remembered at 9 a.m. is not what a 5 p.m. question should be answered with.
DEFAULT_MEMO_TTL = 300.0


class _Miss:
    def __repr__(self) -> str:
        return "MISS"


#: What ``Memo.get`` answers for a key it does not hold (``None`` may be remembered).
MISS: Any = _Miss()

#: Deeper values are not remembered: keys and copies stay bounded and cycles end.
MAX_DEPTH = 64

_JSON_SCALARS = (str, int, bool, type(None))
#: Subclasses, dataclasses and datetimes raise rather than turn into plain JSON.
_EXACT = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
          | orjson.OPT_PASSTHROUGH_DATETIME)
_ORJSON = orjson.OPT_SORT_KEYS | _EXACT


def cache_key(name: str, args: object, version: str = "",
              run_id: str | None = None) -> Hashable | None:
    """The key of any call's args, or ``None`` when they cannot be keyed exactly.

    Key order does not matter; the type of every value does; the tool's name,
    ``version`` (the gate passes its contract's hash) and the run are part of
    the key, so two tools, two versions of one contract or two runs never
    share one. The gate keys checked args with ``compile_key`` instead.
    """
    try:
        return _key(name, args, version, run_id)
    except Exception:  # args whose own methods raise are not remembered
        return None


def _key(name: str, args: object, version: str, run_id: str | None) -> Hashable | None:
    if not isinstance(args, dict):
        return None
    for value in args.values():
        kind = type(value)
        if kind is float:
            if not math.isfinite(value):
                break
        elif kind not in _JSON_SCALARS:
            break
    else:
        try:
            return (name, version, run_id, orjson.dumps(args, option=_ORJSON))
        except orjson.JSONEncodeError:
            pass  # a huge int or a str with a lone surrogate: key it by the walk
    walked = _typed(args, 0)
    return None if walked is None else (name, version, run_id, walked)


def _typed(value: object, depth: int) -> Hashable | None:
    """A hashable, type-tagged image of a JSON-like value; ``None`` if it is not one."""
    if depth > MAX_DEPTH:
        return None
    kind = type(value)
    if kind is int:
        # hex, not repr: Python refuses to print an int of more than 4300 decimal digits.
        return ("int", hex(value))  # type: ignore[arg-type]
    if kind in _JSON_SCALARS or kind is float:
        # repr tells -0.0 from 0.0 and NaN from anything; the type name tells 1 from True.
        return (kind.__name__, repr(value))
    if kind is list or kind is tuple:
        items = [_typed(item, depth + 1) for item in value]  # type: ignore[attr-defined]
        return None if None in items else (kind.__name__, tuple(items))
    if kind is dict:
        pairs = []
        for key, item in value.items():  # type: ignore[attr-defined]
            typed_key, typed_item = _typed(key, depth + 1), _typed(item, depth + 1)
            if typed_key is None or typed_item is None:
                return None
            pairs.append((typed_key, typed_item))
        return ("dict", tuple(sorted(pairs)))
    return None


#: A remembered value: what is kept, and the function that hands out a fresh copy of it.
Frozen = tuple[Any, Callable[[Any], Any]]


def freeze(value: object, verify: bool = True,
           copy_exact: Callable[[Any], Any] | None = None) -> Frozen | None:
    """A private copy of ``value`` to keep in the memo, or ``None`` if it cannot be copied.

    ``verify=False`` is for a value whose every part its contract typed
    exactly: ``copy_exact``, the copier compiled from that contract, keeps and
    hands out copies of it, or else orjson writes it without loss. Any other
    value is walked first, since orjson writes NaN as null, tuples as arrays
    and enums as their values without complaint.
    """
    if not verify and copy_exact is not None:
        return copy_exact(value), copy_exact
    if not verify or _is_plain_json(value, 0):
        try:
            return compact(orjson.dumps(value, option=_EXACT)), orjson.loads
        except orjson.JSONEncodeError:
            pass  # a huge int or a lone surrogate: copy it instead
    try:
        return copy.deepcopy(value), copy.deepcopy
    except Exception:
        return None  # a value that cannot be copied is not remembered


def compact(dumped: bytes) -> bytes:
    """``dumped`` in a buffer of its own size: orjson's output holds a buffer of at least
    4 KB, and eight times the text of a long string, which a kept value would pin."""
    return memoryview(dumped).tobytes()  # a third quicker than bytes(memoryview(...))


def _is_plain_json(value: object, depth: int) -> bool:
    """Whether ``value`` is made only of exact JSON types: what orjson reads back unchanged."""
    if depth > MAX_DEPTH:
        return False
    kind = type(value)
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind in _JSON_SCALARS:
        return True
    if kind is list:
        return all(_is_plain_json(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(type(key) is str and _is_plain_json(item, depth + 1)
                   for key, item in value.items())  # type: ignore[attr-defined]
    return False


def thaw(frozen: Frozen) -> Any:
    """A fresh copy of a remembered value: what the caller does to it stays with the caller."""
    return frozen[1](frozen[0])


# -- keys compiled from a contract ------------------------------------------------------------

class _NoKey:
    def __repr__(self) -> str:
        return "NO_KEY"


_NO_KEY: Any = _NoKey()


def _float_part(value: object) -> object:
    # An int stays an int; a float becomes its hex text: 1.0 and 1, -0.0 and 0.0 stay apart.
    return float.hex(value) if type(value) is float else value


def _exact_part(value: object) -> object:
    """A container the contract types all through: orjson writes it exactly."""
    try:
        return orjson.dumps(value, option=_ORJSON)
    except orjson.JSONEncodeError:  # a huge int or a lone surrogate
        walked = _typed(value, 0)
        return _NO_KEY if walked is None else walked


def _open_part(value: object) -> object:
    """A container with untyped parts: anything may be inside, so it is walked first."""
    if _is_plain_json(value, 0):
        return _exact_part(value)
    walked = _typed(value, 0)
    return _NO_KEY if walked is None else walked


class KeySource(NamedTuple):
    """The memo key of checked args as Python source (see ``key_source``)."""

    #: Reads ``snapshot`` and ``run_id``; each closed container keyed by ``key_exact``.
    expression: str
    #: The same key with each closed container's orjson written in place, or ``""`` when
    #: there is none: it raises ``KEY_ENCODE_ERROR`` where ``expression`` would walk instead.
    inline: str
    #: Whether the key may hold ``KEY_NONE`` (a part that cannot be keyed: then there is none).
    spoilable: bool
    #: The constants both refer to.
    names: dict[str, Any]
    #: The key's weight (``part_weight`` of each part), reading ``key`` and ``run_id``: what
    #: the contract fixes (the name, the version, a bounded int) summed once, here.
    weight: str
    #: The key with each container's orjson in a buffer of its own size (``compact``), or
    #: ``""`` when it has no container: the key a compiled read keeps.
    compacted: str


def key_source(name: str, version: str, specs: Mapping[str, Spec]) -> KeySource:
    """The memo key of checked args as Python source, for ``compile_key`` and the compiled
    reads (``_fastpath``), which write ``inline`` in a ``try`` and ``expression`` in its
    ``except KEY_ENCODE_ERROR``."""
    parts, inline_parts = [], []
    containers = inlined = False
    fixed = len(name) + len(version)
    # A run id is the caller's: a str in the common case, anything hashable else.
    weights = ["(len(run_id) if type(run_id) is str else key_weight(run_id))"]
    for number, (arg, spec) in enumerate(specs.items()):
        weighed, at = _fixed_weight(spec), f"key[{3 + number}]"
        if weighed is not None:
            fixed += weighed
        elif spec.required and spec.type == "str":
            weights.append(f"len({at})")
        elif spec.type in ("list", "dict", "any"):  # orjson's bytes, but for a walk or absent
            weights.append(f"(len({at}) if type({at}) is bytes else key_weight({at}))")
        else:
            weights.append(f"key_weight({at})")
        read = f"snapshot[{arg!r}]" if spec.required else f"snapshot.get({arg!r}, KEY_ABSENT)"
        inline = read
        if spec.type in ("list", "dict", "any"):  # "any" may hold a container too
            containers = True
            closed = is_closed(spec)
            part = "key_exact" if closed else "key_open"
            # An absent optional container is keyed as absent, not as a value.
            read = (f"{part}({read})" if spec.required else
                    f"(KEY_ABSENT if (key{number} := {read}) is KEY_ABSENT "
                    f"else {part}(key{number}))")
            if closed:
                inlined = True
                inline = (f"key_dumps({inline}, option=KEY_OPTION)" if spec.required else
                          f"(KEY_ABSENT if (key{number} := {inline}) is KEY_ABSENT "
                          f"else key_dumps(key{number}, option=KEY_OPTION))")
            else:
                inline = read
        elif spec.type == "float":
            read = inline = f"key_float({read})"
        parts.append(read)
        inline_parts.append(inline)
    head = "(KEY_NAME, KEY_VERSION, run_id"
    expression = f"{head}{''.join(', ' + part for part in parts)})"
    inline = f"{head}{''.join(', ' + part for part in inline_parts)})" if inlined else ""
    names: dict[str, Any] = {
        "KEY_NAME": name, "KEY_VERSION": version, "KEY_ABSENT": MISS, "KEY_NONE": _NO_KEY,
        "key_float": _float_part, "key_exact": _exact_part, "key_open": _open_part,
        "key_dumps": orjson.dumps, "KEY_OPTION": _ORJSON,
        "KEY_ENCODE_ERROR": orjson.JSONEncodeError, "key_weight": part_weight,
        "key_view": memoryview}
    # A walk or an absent container stays as it is.
    compacted = ", ".join(
        ["key[0], key[1], key[2]"] + [
            f"(key_view(key[{3 + number}]).tobytes() if type(key[{3 + number}]) is bytes "
            f"else key[{3 + number}])" if spec.type in ("list", "dict", "any")
            else f"key[{3 + number}]" for number, spec in enumerate(specs.values())])
    return KeySource(expression, inline, containers, names, " + ".join([str(fixed), *weights]),
                     f"({compacted})" if containers else "")


def _fixed_weight(spec: Spec) -> int | None:
    """What ``part_weight`` answers for every value of a required bool or bounded int (see
    ``weighs_fixed``); ``None`` for a part weighed as it comes."""
    return 8 if spec.required and spec.type != "float" and weighs_fixed(spec) else None


def emit_key_weight(emitter: Any, source: KeySource, indent: int) -> None:
    """``weight = <the weight of key>`` on ``emitter``, after ``emit_key``: a key with
    orjson parts is compacted first (``compact``), so the weight is what is kept."""
    if source.compacted:
        emitter.emit(indent, f"key = {source.compacted}")
    emitter.emit(indent, f"weight = {source.weight}")


def emit_key(emitter: Any, source: KeySource, indent: int, spoiled: str) -> None:
    """``key = <the key>`` on ``emitter`` (an ``Emitter``): orjson in place where it writes
    the key exactly, the walk where it cannot; ``spoiled`` is the statement run when a part
    could not be keyed."""
    emitter.names.update(source.names)
    emit = emitter.emit
    if not source.inline:
        emit(indent, f"key = {source.expression}")
        if source.spoilable:
            emit(indent, "if KEY_NONE in key:")
            emit(indent + 1, spoiled)
        return
    emit(indent, "try:")
    emit(indent + 1, f"key = {source.inline}")
    if "key_open(" in source.inline:
        emit(indent + 1, "if KEY_NONE in key:")
        emit(indent + 2, spoiled)
    emit(indent, "except KEY_ENCODE_ERROR:  # a huge int or a lone surrogate: walked")
    emit(indent + 1, f"key = {source.expression}")
    emit(indent + 1, "if KEY_NONE in key:")
    emit(indent + 2, spoiled)


def compile_key(name: str, version: str, specs: Mapping[str, Spec],
                keyed: Callable[[object], str] | None = None,
                ) -> Callable[[dict[str, Any], object], Hashable | None]:
    """``key_of(snapshot, run_id)``: the memo key of args that passed ``specs``' check.

    Only for checked snapshots, whose scalars have their exact declared types;
    ``None`` when some part cannot be keyed exactly (the call is not remembered).
    With ``keyed`` (a keyed digest of a value's canonical form, ``""`` for none),
    the key holds that digest of the snapshot instead of its values: for a tool
    whose arguments are sensitive, whose keys must not hold them in clear.
    """
    if keyed is not None:
        digest = keyed

        def key_of_digest(snapshot: dict[str, Any], run_id: object) -> Hashable | None:
            hexed = digest(snapshot)
            return (name, version, run_id, hexed) if hexed else None
        return key_of_digest
    emitter = Emitter()
    # A part that cannot be keyed spoils the whole key; scalars never do.
    emit_key(emitter, key_source(name, version, specs), 1, "return None")
    emitter.emit(1, "return key")
    key_of: Callable[[dict[str, Any], object], Hashable | None] = emitter.build(
        "key_of", "snapshot, run_id")
    return key_of


# -- the memo --------------------------------------------------------------------------------

def weight(value: object) -> int | None:
    """The bytes ``value`` holds in memory: ``sys.getsizeof`` of it and of every object inside
    its tuples, lists, dicts and sets, each object counted once (a list that holds itself
    ends); ``None`` when it cannot be weighed (its ``__sizeof__`` raises). Only a key and a
    value being remembered are weighed, as they are put in the memo."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    try:
        while stack:
            item = stack.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            total += sys.getsizeof(item)
            # Exact types only: a subclass's own methods are never called here.
            kind = type(item)
            if kind is tuple or kind is list or kind is set or kind is frozenset:
                stack.extend(item)  # type: ignore[arg-type]
            elif kind is dict:
                stack.extend(dict.keys(item))  # type: ignore[arg-type]
                stack.extend(dict.values(item))  # type: ignore[arg-type]
    except Exception:  # a __sizeof__ that raises, or answers what is not a size
        return None
    return total


def part_weight(part: object) -> int:
    """The weight of one part of a key: a str's or bytes' length, a typed walk's ``weight``,
    a huge int's size, 8 bytes for any other scalar (or a caller's run id, never read)."""
    kind = type(part)
    if kind is str or kind is bytes:
        return len(part)  # type: ignore[arg-type]
    if kind is int and not -BIG_INT <= part < BIG_INT:  # type: ignore[operator]
        return sys.getsizeof(part)
    if kind is tuple:  # a typed walk: tuples of str, made here, always weighed
        return weight(part) or 8
    return 8


def value_weight(kept: object) -> int | None:
    """The weight of a kept value that no contract's copier made: the length of orjson's
    text, or ``weight`` of a deep copy (``None``: it cannot be weighed)."""
    if type(kept) is bytes:
        return len(kept)
    try:  # a copy made by the contract's copier: exact JSON types, written in C
        return len(orjson.dumps(kept, option=_EXACT))
    except Exception:  # a deep copy of any value (it may hold itself), or a huge int
        return weight(kept)


def _weighed(key: Hashable, frozen: Frozen, weighed: int | None) -> tuple[Hashable, int | None]:
    """``(key, weight)`` of a key and its kept value, for ``Memo.put``: the key made equal
    but compacted (its orjson parts in buffers of their own size, ``compact``), weighed
    by ``part_weight``, and the value's ``weighed`` (by its contract's weigher) or else
    ``value_weight``. ``None`` for what cannot be weighed. The compiled reads weigh where
    they make the key and the copy instead."""
    total = value_weight(frozen[0]) if weighed is None else weighed
    if total is None or type(key) is not tuple:  # every key the gate makes is a tuple
        return key, None
    return compact_key(key), total + sum(map(part_weight, key))


def compact_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` with each orjson part in a buffer of its own size: even 5 bytes of orjson's
    text pin its 4 KB buffer (measured with tracemalloc), which the memo would keep."""
    for part in key:
        if type(part) is bytes:
            break
    else:
        return key
    return tuple(compact(part) if type(part) is bytes else part for part in key)


def emit_keep(emitter: Emitter, memo: Memo, indent: int) -> None:
    """Lines keeping ``(frozen, expires, counts, weight)`` under ``key`` in ``memo``, with
    its byte total, evicting the least recently used past its size or its bytes: the body
    of ``Memo.put``, also written straight into a compiled read (``_fastpath``).

    Under the memo's lock, the one every change of its entries takes: two threads
    keeping at once would each add to the total what the other's ``+=`` overwrote, and a
    pop and a set of one key by two threads would lose the weight of one of them.
    """
    emitter.names.update(KEEP_MEMO=memo, KEEP_SIZE=memo.size, KEEP_BYTES=memo.max_bytes,
                         keep_lock=memo.books.acquire, keep_unlock=memo.books.release)
    emit = emitter.emit
    emit(indent, "keep_lock()")
    emit(indent, "try:")
    emit(indent + 1, "keep_entries = KEEP_MEMO.entries  # read anew, as every change of it is")
    emit(indent + 1, "kept = keep_entries.pop(key, None)  # an older value under this key")
    emit(indent + 1, "if kept is not None:")
    emit(indent + 2, "KEEP_MEMO.bytes -= kept[3]")
    # Heavier than the whole budget: not kept at all (nor the older value, no fresher).
    emit(indent + 1, "if weight <= KEEP_BYTES:")
    emit(indent + 2, "keep_entries[key] = (frozen, expires, counts, weight)")
    emit(indent + 2, "KEEP_MEMO.bytes += weight")
    # Never the entry just kept: alone, it is within both bounds.
    emit(indent + 2, "while KEEP_MEMO.bytes > KEEP_BYTES or len(keep_entries) > KEEP_SIZE:")
    emit(indent + 3, "try:")
    emit(indent + 4, "kept = keep_entries.popitem(False)[1]")
    emit(indent + 3, "except KeyError:  # emptied by what does not take the lock: nothing left")
    emit(indent + 4, "break")
    emit(indent + 3, "KEEP_MEMO.bytes -= kept[3]")
    emit(indent + 3, "kept[2].evicted += 1")
    emit(indent, "finally:")
    emit(indent + 1, "keep_unlock()")


#: An entry of the memo: the frozen value, when it expires, its tool's counts, its weight.
Entry = tuple[Frozen, float, Counts, int]


class Memo:
    """Remembered successes: at most ``size`` values and ``max_bytes`` bytes of keys and
    values (``weight``), each for its own time to live.

    The least recently used value goes first when the memo is full; a value
    past its time is never served, and is dropped when next looked at. Each
    value is counted against its tool's ``Counts`` when it is evicted or
    expires. Safe to share between threads: every change of the entries, and
    of the byte total with them, holds ``books``; a lookup and the touch of a hit
    are one operation each on an ``OrderedDict``, which changes no weight.

    ``len(memo)`` is the number of values remembered (expired ones are dropped
    first), ``key in memo`` whether a fresh value is held, ``memo[key]`` a
    fresh copy of it. ``clock`` is fixed when the memo is made: the gate's
    compiled reads hold it.
    """

    def __init__(self, size: int = DEFAULT_MEMO_SIZE, *,
                 clock: Callable[[], float] = time.monotonic,
                 max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        for name, bound in (("memo size", size), ("memo bytes", max_bytes)):
            if type(bound) is not int or bound < 0:
                raise ValueError(f"{name} must be a non-negative int, got {bound!r}")
        self._size = size
        self._max_bytes = max_bytes
        self.clock = clock
        #: ``key -> (frozen, expires at, owner's Counts, weight)``, least recently used
        #: first. Read, and written under ``books`` (``emit_keep``), by the compiled reads
        #: (``_fastpath``), which is why it is not private.
        self.entries: OrderedDict[Hashable, Entry] = OrderedDict()
        #: What the entries held weigh: the sum of their weights, kept with them.
        self.bytes = 0
        #: Held by every change of ``entries`` and ``bytes``.
        self.books = threading.Lock()
        self._walk = threading.Lock()
        emitter = Emitter()
        emit_keep(emitter, self, 1)
        self._keep: Callable[[Hashable, Frozen, float, Counts, int], None] = emitter.build(
            "keep", "key, frozen, expires, counts, weight")

    @property
    def size(self) -> int:
        """How many values it holds at most; fixed when it is made (compiled reads hold it)."""
        return self._size

    @property
    def max_bytes(self) -> int:
        """How many bytes of keys and values it holds at most (see ``weight``)."""
        return self._max_bytes

    def get(self, key: Hashable) -> Any:
        """The frozen value held for ``key`` (see ``thaw``), or ``MISS``."""
        entry = self.entries.get(key)
        if entry is None:
            return MISS
        if entry[1] <= self.clock():
            self._expire(key, entry)
            return MISS
        try:  # noqa: SIM105 - contextlib.suppress costs a frame on every hit
            self.entries.move_to_end(key)
        except KeyError:  # dropped by another thread since: still the value it held
            pass
        return entry[0]

    def put(self, key: Hashable, frozen: Frozen, ttl: float, counts: Counts,
            weighed: int | None = None) -> None:
        """Hold ``frozen`` for ``ttl`` seconds, evicting the least recently used past ``size``
        or ``max_bytes``; a value that cannot be weighed, or outweighs the whole budget, is
        not held (nor an older value under its key, no fresher than it). ``weighed`` is the
        value's weight where its contract's weigher gave it (``compile_weigh``)."""
        if ttl <= 0 or self._size == 0:
            return
        key, heavy = _weighed(key, frozen, weighed)
        self._keep(key, frozen, self.clock() + ttl, counts,
                   self._max_bytes + 1 if heavy is None else heavy)

    def _expire(self, key: Hashable, entry: Entry) -> None:
        # Only the entry that was seen: a fresh one put meanwhile by another thread stays.
        with self.books:
            if self.entries.get(key) is not entry:
                return
            del self.entries[key]
            self.bytes -= entry[3]
        entry[2].expired += 1

    def _fresh(self) -> list[Hashable]:
        """The keys of values still in time, after dropping the expired ones."""
        with self._walk:
            now = self.clock()
            fresh = []
            for key, entry in list(self.entries.items()):
                if entry[1] <= now:
                    self._expire(key, entry)
                else:
                    fresh.append(key)
            return fresh

    def forget(self, drop: Callable[[Hashable], bool]) -> None:
        """Drop every value whose key ``drop`` selects (not counted as evicted)."""
        with self._walk:
            for key in [key for key in list(self.entries) if drop(key)]:
                with self.books:
                    entry = self.entries.pop(key, None)
                    if entry is not None:
                        self.bytes -= entry[3]

    def clear(self) -> None:
        """Forget every remembered value."""
        with self.books:
            self.entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._fresh())

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._fresh())

    def __contains__(self, key: object) -> bool:
        entry = self.entries.get(key)
        return entry is not None and entry[1] > self.clock()

    def __getitem__(self, key: Hashable) -> Any:
        frozen = self.get(key)
        if frozen is MISS:
            raise KeyError(key)
        return thaw(frozen)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return (f"<Memo {len(self)} of {self.size} values, {self.bytes} of "
                f"{self.max_bytes} bytes>")
