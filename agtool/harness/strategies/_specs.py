"""Values for one spec: valid ones, and ones wrong in exactly one way.

Everything here reads a parsed ``agtool.Spec`` and nothing else, so it works on
any contract table. A defect is a *site*: a check (one of the gate's, plus
``empty`` for results) at a path inside one value. A path is a tuple of steps:
``".key"`` for a field of an object, ``"[]"`` for one item of a list, so
``(".rows", "[]", ".count")`` is the ``count`` of some row, and
``(".opts", ".depth")`` the ``depth`` of a dict with named keys.

Null is drawn as the gate reads it: a valid object sometimes sends null for an
optional key that takes it as "not given", and a ``type`` defect puts null
only where it is refused (a required key, an echo argument, a list item, an
optional key with ``nullable: False``).

Defective values are built as "a valid value, then one fixed violation", never
by filtering, so shrinking can simplify everything around the defect but can
never remove it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..._contract import Spec
from ..._patterns import fullmatcher

__all__ = [
    "ITEM",
    "RESULT_KIND",
    "Fields",
    "Path",
    "bad_object",
    "bad_value",
    "fresh_key",
    "json_values",
    "matching_text",
    "object_sites",
    "satisfiable",
    "show_path",
    "valid_object",
    "valid_value",
]

T = TypeVar("T")
Path = tuple[str, ...]
Fields = Mapping[str, Spec]
Bad = tuple[Any, str]  # (value, how it is wrong), the how for event() and note()

#: The path step meaning "one item of this list".
ITEM = "[]"
#: How far past a length bound generated lists and strings go.
SPARE = 4
#: The result reason each check gives (``_compile._RESULT_REASON``, plus the empty check).
RESULT_KIND = {
    "missing": "shape",
    "type": "shape",
    "pattern": "shape",
    "allowed": "range",
    "min": "range",
    "max": "range",
    "min_len": "range",
    "max_len": "too_big",
    "empty": "empty",
}
# Strings tried, at each length a spec allows, to find ones a pattern refuses.
_PROBE_CHARS = " !0aA_.-Zz9\n\u00e9"
_PROBE_LENGTHS = 6


_MEMO_SIZE = 4096
_memo: dict[str, Any] = {}
F = TypeVar("F", bound=Callable[..., Any])


def _memoized(function: F) -> F:
    """Build each strategy once per distinct spec (keyed by the specs' reprs).

    A fresh strategy is validated when first drawn; validating the same ones
    again on every example would be most of the cost of drawing.
    """
    @functools.wraps(function)
    def build(*args: Any, **kwargs: Any) -> Any:
        try:
            key = f"{function.__qualname__}{args!r}{sorted(kwargs.items())!r}"
        except ValueError:  # an int bound too long for repr: build it afresh
            return function(*args, **kwargs)
        found = _memo.get(key)
        if found is None:
            if len(_memo) >= _MEMO_SIZE:
                _memo.clear()
            found = _memo[key] = function(*args, **kwargs)
        return found

    return build  # type: ignore[return-value]


def show_path(arg: str, path: Path) -> str:
    """``rows`` and ``("[]", ".count")`` -> ``rows[].count``."""
    return arg + "".join(path)


# --- what a spec admits --------------------------------------------------------------------------


def _int_range(spec: Spec) -> tuple[int | None, int | None]:
    low = None if spec.min is None else math.ceil(spec.min)
    high = None if spec.max is None else math.floor(spec.max)
    return low, high


def _min_len(spec: Spec, results: bool, top: bool) -> int:
    """The shortest length the gate accepts: a top-level returned list must not be empty."""
    if spec.min_len is not None:
        return spec.min_len
    return 1 if results and top and spec.type == "list" else 0


def _high(low: int, max_len: int | None) -> int:
    return low + SPARE if max_len is None else max_len


def satisfiable(spec: Spec, *, results: bool = False, top: bool = False) -> bool:
    """Whether some value keeps ``spec`` (patterns are assumed to match something)."""
    if spec.allowed is not None:
        return True  # check_table made every allowed value keep the spec's own bounds
    if spec.type == "int":
        low, high = _int_range(spec)
        return low is None or high is None or low <= high
    if spec.type == "list":
        low = _min_len(spec, results, top)
        if spec.max_len is not None and low > spec.max_len:
            return False
        return low == 0 or _item_satisfiable(spec.item, results)
    if spec.type == "dict":
        return _item_satisfiable(spec.item, results)
    return True


def _item_satisfiable(item: Spec | Fields | None, results: bool) -> bool:
    if item is None:
        return True
    if isinstance(item, Spec):
        return satisfiable(item, results=results)
    return all(satisfiable(spec, results=results) for spec in item.values() if spec.required)


# --- valid values --------------------------------------------------------------------------------


@functools.cache
def json_values() -> st.SearchStrategy[Any]:
    """Small JSON values, for lists and dicts whose contents the contract leaves open."""
    scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=6) | (
        st.floats(allow_nan=False, allow_infinity=False))
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                    max_size=3),
        max_leaves=6,
    )


@_memoized
def valid_value(spec: Spec, *, results: bool = False, top: bool = False) -> st.SearchStrategy[Any]:
    """Values the gate accepts for ``spec``; ``InvalidArgument`` when there are none."""
    if not satisfiable(spec, results=results, top=top):
        raise InvalidArgument(f"no value keeps the spec {spec!r}")
    if spec.allowed is not None:
        return st.sampled_from(spec.allowed)
    if spec.type == "int":
        return st.integers(*_int_range(spec))
    if spec.type == "float":
        return _numbers_between(spec.min, spec.max)
    if spec.type == "bool":
        return st.booleans()
    if spec.type == "str":
        return _valid_text(spec)
    if spec.type == "list":
        return _valid_list(spec, results, top)
    if isinstance(spec.item, Mapping):
        return valid_object(spec.item, results=results)
    return st.dictionaries(st.text(max_size=6), json_values(), max_size=3)


_NO_FLOAT: Any = object()


def _float_not_below(bound: float) -> Any:
    """The least finite float >= ``bound``: ``None`` if all are, ``_NO_FLOAT`` if none is.

    Bounds may be ints beyond any float, or ints no float equals exactly.
    """
    try:
        value = float(bound)
    except OverflowError:
        return None if bound < 0 else _NO_FLOAT
    if value < bound:
        value = math.nextafter(value, math.inf)
    return value if math.isfinite(value) else _NO_FLOAT


def _float_not_above(bound: float) -> Any:
    """The greatest finite float <= ``bound``: ``None`` if all are, ``_NO_FLOAT`` if none is."""
    try:
        value = float(bound)
    except OverflowError:
        return None if bound > 0 else _NO_FLOAT
    if value > bound:
        value = math.nextafter(value, -math.inf)
    return value if math.isfinite(value) else _NO_FLOAT


def _finite_floats(low: Any, high: Any) -> list[st.SearchStrategy[float]]:
    """Floats in [low, high] (bounds from the two functions above), or none when empty."""
    if low is _NO_FLOAT or high is _NO_FLOAT or (
            low is not None and high is not None and low > high):
        return []
    return [st.floats(low, high, allow_nan=False, allow_infinity=False)]


def _numbers_between(low: float | None, high: float | None) -> st.SearchStrategy[Any]:
    # A float spec also takes ints; drawing both keeps ``1`` and ``1.0`` both exercised.
    numbers: list[st.SearchStrategy[Any]] = list(_finite_floats(
        None if low is None else _float_not_below(low),
        None if high is None else _float_not_above(high)))
    int_low = None if low is None else math.ceil(low)
    int_high = None if high is None else math.floor(high)
    if int_low is None or int_high is None or int_low <= int_high:
        numbers.append(st.integers(int_low, int_high))
    return st.one_of(numbers)


def _valid_text(spec: Spec) -> st.SearchStrategy[str]:
    low, high = spec.min_len or 0, spec.max_len
    if spec.pattern is None:
        return st.text(min_size=low, max_size=_high(low, high))
    matching = matching_text(spec.pattern)
    if spec.min_len is None and spec.max_len is None:
        return matching
    # The one filter here: a regex and a length bound are two languages whose
    # intersection no generator knows; tables written by hand keep them compatible.
    return matching.filter(lambda text: low <= len(text) and (high is None or len(text) <= high))


@functools.lru_cache(maxsize=256)
def matching_text(pattern: str) -> st.SearchStrategy[str]:
    """Strings all of which ``pattern`` matches as the gate reads it, with RE2.

    Hypothesis generates from Python's ``re``: compiled ``re.ASCII``, its
    ``\\d``, ``\\w`` and ``\\b`` mean what RE2's do, and the few strings the
    two engines still read apart (Python's ASCII ``\\s`` holds ``\\v``) are
    dropped by asking RE2 itself, which is the oracle.
    """
    matches = fullmatcher(pattern)
    try:
        regex = re.compile(pattern, re.ASCII)
    except re.error as exc:
        raise InvalidArgument(f"pattern {pattern!r}: strings are generated with Python's re, "
                              f"which cannot read this RE2 pattern ({exc})") from exc
    return st.from_regex(regex, fullmatch=True).filter(lambda text: matches(text) is not None)


def _valid_list(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[list[Any]]:
    low = _min_len(spec, results, top)
    high = _high(low, spec.max_len)
    if not _item_satisfiable(spec.item, results):
        return st.just([])  # satisfiable() said low == 0
    return st.lists(_valid_item(spec.item, results), min_size=low, max_size=high)


@_memoized
def _valid_item(item: Spec | Fields | None, results: bool) -> st.SearchStrategy[Any]:
    if item is None:
        return json_values()
    if isinstance(item, Spec):
        return valid_value(item, results=results)
    return valid_object(item, results=results)


def fresh_key(taken: Mapping[str, Any] | frozenset[str], base: str) -> str:
    """``base``, with ``_`` appended until no key of ``taken`` has that name."""
    while base in taken:
        base += "_"
    return base


@_memoized
@st.composite
def valid_object(draw: st.DrawFn, fields: Fields, *, results: bool = False,
                 top: bool = False) -> dict[str, Any]:
    """A dict the gate accepts for ``fields``: every required key, some optional ones.

    An optional key that reads null as "not given" is sometimes sent as null,
    as models in OpenAI's strict mode do. Returned objects sometimes carry a
    key the contract does not name, since the gate lets results have extra
    keys; arguments never do.
    """
    value: dict[str, Any] = {}
    for key, spec in fields.items():
        if spec.required or spec.echo:  # an echo argument is checked as present, required or not
            if not satisfiable(spec, results=results, top=top):
                raise InvalidArgument(f"required field {key!r}: no value keeps its spec {spec!r}")
            value[key] = draw(valid_value(spec, results=results, top=top))
        elif spec.null_is_absent and draw(st.integers(0, 3)) == 0:
            event("valid object: null for an optional key")
            value[key] = None
        elif satisfiable(spec, results=results, top=top) and draw(st.booleans()):
            value[key] = draw(valid_value(spec, results=results, top=top))
    if results and draw(st.booleans()):
        event("valid result: with a key the contract does not name")
        value[fresh_key(fields, "extra")] = draw(json_values())
    return value


# --- where a value can be wrong ------------------------------------------------------------------


def object_sites(fields: Fields, *, results: bool, top: bool) -> list[tuple[str, Path]]:
    """Every (check, path) at which a dict for ``fields`` can be wrong in exactly one way.

    An ``echo`` argument (top level only) has an ``echo`` site where others
    have ``missing``: absent, or not the value the caller was given.

    At the top of an argument dict there is no ``type`` site (a non-dict is
    ``not_object``, a reason about the whole call); results have no
    ``unexpected`` site (extra keys are allowed in what a tool returns).
    """
    sites: list[tuple[str, Path]] = []
    if results or not top:
        sites.append(("type", ()))
    if not results:
        sites.append(("unexpected", ()))
    for key, spec in fields.items():
        step = "." + key
        if spec.echo:
            sites.append(("echo", (step,)))  # missing or not the value given: both are echo
        elif spec.required:
            sites.append(("missing", (step,)))
        sites += [(check, (step, *path)) for check, path in value_sites(spec, results, top)]
    return sites


def value_sites(spec: Spec, results: bool, top: bool) -> list[tuple[str, Path]]:
    """Every (check, path) at which a value for ``spec`` can be wrong in exactly one way."""
    sites: list[tuple[str, Path]] = [("type", ())]
    if spec.allowed is not None:
        # Any value breaking a bound is also outside ``allowed`` (allowed values
        # keep the bounds), so with ``allowed`` only ``allowed`` is a single defect.
        if _outside_allowed_exists(spec):
            sites.append(("allowed", ()))
        return sites
    if spec.min is not None:
        sites.append(("min", ()))
    if spec.max is not None:
        sites.append(("max", ()))
    if spec.type in ("str", "list"):
        sites += _length_sites(spec, results, top)
    if spec.pattern is not None and _probes(spec.pattern, spec.min_len, spec.max_len):
        sites.append(("pattern", ()))
    if spec.type == "dict" and isinstance(spec.item, Mapping):
        # The dict's own type site is the one above; the rest are its keys'.
        sites += [site for site in object_sites(spec.item, results=results, top=False)
                  if site != ("type", ())]
    if spec.type == "list" and spec.item is not None and spec.max_len != 0 and (
            _item_satisfiable(spec.item, results)):
        if isinstance(spec.item, Spec):
            inner = value_sites(spec.item, results, top=False)
        else:
            inner = object_sites(spec.item, results=results, top=False)
        sites += [(check, (ITEM, *path)) for check, path in inner]
    return sites


def _length_sites(spec: Spec, results: bool, top: bool) -> list[tuple[str, Path]]:
    sites: list[tuple[str, Path]] = []
    fillable = spec.type == "str" or _item_satisfiable(spec.item, results)
    low = _min_len(spec, results, top)
    if results:
        # The result check says ``empty`` for a value with no length at all, and
        # ``min_len`` (a range reason) only for a short one that is not empty.
        if low >= 1:
            sites.append(("empty", ()))
        if low >= 2 and fillable:
            sites.append(("min_len", ()))
    elif low >= 1:
        sites.append(("min_len", ()))
    if spec.max_len is not None and fillable:
        sites.append(("max_len", ()))
    return sites


def _outside_allowed_exists(spec: Spec) -> bool:
    allowed = spec.allowed or ()
    if spec.type == "bool":
        return len(set(allowed)) < 2
    if spec.type == "int":
        low, high = _int_range(spec)
        if low is None or high is None:
            return True
        return high - low + 1 > len({value for value in allowed if low <= value <= high})
    if spec.type == "float":
        return spec.min is None or spec.max is None or spec.min < spec.max or (
            spec.min not in allowed)
    return spec.max_len != 0  # str: only the empty string when max_len is 0, and it is allowed


@functools.lru_cache(maxsize=256)
def _probes(pattern: str, min_len: int | None, max_len: int | None) -> tuple[str, ...]:
    """Strings of an allowed length that ``pattern`` refuses; empty when none was found."""
    low = min_len or 0
    high = low + _PROBE_LENGTHS if max_len is None else min(max_len, low + _PROBE_LENGTHS)
    matches = fullmatcher(pattern)  # the gate's reading, not Python's
    return tuple(char * length for length in range(low, high + 1) for char in _PROBE_CHARS
                 if matches(char * length) is None)


# --- values wrong in exactly one way -------------------------------------------------------------


@_memoized
def bad_value(spec: Spec, path: Path, check: str, *, results: bool = False,
              top: bool = False) -> st.SearchStrategy[Bad]:
    """A value for ``spec`` that fails ``check`` at ``path`` and keeps everything else."""
    if isinstance(spec.item, Mapping) and spec.type == "dict" and (path or check != "type"):
        return bad_object(spec.item, path, check, results=results)
    if path:
        return _list_with_bad_item(spec, path[1:], check, results)
    builder = _BAD.get(check)
    if builder is None:
        raise InvalidArgument(f"no single defect {check!r} for a value")
    return builder(spec, results, top)


@_memoized
def _bad_item(item: Spec | Fields | None, path: Path, check: str,
              results: bool) -> st.SearchStrategy[Bad]:
    if isinstance(item, Spec):
        return bad_value(item, path, check, results=results)
    if item is None:
        raise InvalidArgument("a list without an item spec has no item defects")
    return bad_object(item, path, check, results=results)


@_memoized
@st.composite
def _list_with_bad_item(draw: st.DrawFn, spec: Spec, path: Path, check: str,
                        results: bool) -> Bad:
    low = max(1, spec.min_len or 0)
    size = draw(st.integers(low, _high(low, spec.max_len)))
    items = draw(st.lists(_valid_item(spec.item, results), min_size=size - 1, max_size=size - 1))
    bad, how = draw(_bad_item(spec.item, path, check, results))
    items.insert(draw(st.integers(0, size - 1)), bad)
    return items, "an item: " + how


@_memoized
@st.composite
def bad_object(draw: st.DrawFn, fields: Fields, path: Path, check: str, *,
               results: bool = False, top: bool = False) -> Bad:
    """A dict for ``fields`` wrong at ``path`` by ``check`` only (``path`` starts at a key)."""
    if not path and check == "type":
        return draw(_not_a_dict())
    value = draw(valid_object(fields, results=results, top=top))
    if not path and check == "unexpected":
        value[draw(invented_keys(fields))] = draw(json_values())
        return value, "a key the contract does not name"
    key = path[0][1:]
    if check == "missing" and len(path) == 1:
        del value[key]
        return value, "a required key dropped"
    value[key], how = draw(bad_value(fields[key], path[1:], check, results=results, top=top))
    return value, how


@_memoized
def invented_keys(fields: Fields) -> st.SearchStrategy[str]:
    """Names a careless caller invents: near misses of real ones (``sku_id``), or anything."""
    near = [form(name) for name in fields for form in _NEAR_MISSES]
    names = st.text(min_size=1, max_size=8)
    if near:
        names = st.sampled_from(near) | names
    return names.map(lambda name: fresh_key(fields, name))


_NEAR_MISSES: tuple[Callable[[str], str], ...] = (
    lambda name: name + "_id",
    lambda name: name + "s",
    lambda name: name.upper(),
    lambda name: name[:1].upper() + name[1:] + "Id",
)


def _labelled(how: str, values: st.SearchStrategy[T]) -> st.SearchStrategy[Bad]:
    return values.map(lambda value: (value, how))


def _not_a_dict() -> st.SearchStrategy[Bad]:
    return st.one_of(
        _labelled("a list for an object", st.lists(json_values(), max_size=3)),
        _labelled("a string for an object", st.text(max_size=5)),
        _labelled("null for an object", st.none()),
        _labelled("a number for an object", st.integers()),
    )


def _some_ints() -> st.SearchStrategy[int]:
    return st.integers(-1000, 1000)


@_memoized
def _wrong_type(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[Bad]:
    # One_of shrinks towards its first branch: each list starts with the classic trap.
    options: dict[str, list[tuple[str, st.SearchStrategy[Any]]]] = {
        "int": [
            ("bool for int", st.booleans()),
            ("number as string", _some_ints().map(str)),
            ("float for int", _some_ints().map(float) | st.floats(allow_nan=False)),
            ("null for int", st.none()),
        ],
        "float": [
            ("bool for float", st.booleans()),
            ("number as string", st.floats(allow_nan=False, allow_infinity=False).map(repr)),
            ("non-finite float", st.sampled_from([math.nan, math.inf, -math.inf])),
            ("null for float", st.none()),
        ],
        "str": [
            ("number for str", _some_ints()),
            ("null for str", st.none()),
            ("bool for str", st.booleans()),
            ("list for str", st.lists(st.text(max_size=3), max_size=2)),
        ],
        "bool": [
            ("int for bool", st.integers(0, 1)),
            ("string for bool", st.sampled_from(["true", "false", "True"])),
            ("null for bool", st.none()),
        ],
        "list": [
            ("tuple for list", st.tuples(_some_ints())),
            ("string for list", st.text(max_size=4)),
            ("dict for list", st.dictionaries(st.text(max_size=3), _some_ints(), max_size=2)),
            ("null for list", st.none()),
        ],
        "dict": [
            ("list for dict", st.lists(_some_ints(), max_size=3)),
            ("string for dict", st.text(max_size=4)),
            ("null for dict", st.none()),
        ],
    }
    # Null for a key that reads it as "not given" is no defect, so never drawn as one.
    return st.one_of([_labelled(how, values) for how, values in options[spec.type]
                      if not (spec.null_is_absent and how.startswith("null"))])


@_memoized
@st.composite
def _outside_allowed(draw: st.DrawFn, spec: Spec, results: bool, top: bool) -> Bad:
    allowed = frozenset(spec.allowed or ())
    how = "a value outside allowed"
    if spec.type == "bool":
        return (not (spec.allowed or (True,))[0]), how
    if spec.type == "str":
        low = spec.min_len or 0
        text = draw(st.text(min_size=low, max_size=_high(low, spec.max_len)))
        return _step_text(text, allowed), "invented enum value"
    start = draw(valid_value(Spec(spec.type, min=spec.min, max=spec.max)))
    if spec.type == "int":
        return _step_int(start, allowed, *_int_range(spec)), how
    return _step_float(start, allowed, spec.min, spec.max), how


def _step_int(start: int, allowed: frozenset[Any], low: int | None, high: int | None) -> int:
    """The nearest int at or above ``start`` (else below) in bounds and not allowed."""
    value = start
    while value in allowed and (high is None or value < high):
        value += 1
    if value not in allowed:
        return value
    value = start
    while value in allowed:  # _outside_allowed_exists() promised one below
        value -= 1
    return value


def _step_float(start: float, allowed: frozenset[Any], low: float | None,
                high: float | None) -> float:
    """The nearest number at or above ``start`` (else below) in bounds and not allowed."""
    if type(start) is int and abs(start) <= 2**53:
        start = float(start)  # exact: step through the floats, not by whole units

    def step(value: float, up: bool) -> float:
        # A huge int has no float neighbour: it steps by one.
        if type(value) is int:
            return value + 1 if up else value - 1
        return math.nextafter(value, math.inf if up else -math.inf)

    value = start
    while value in allowed and (high is None or value < high):
        value = step(value, True)
    if value not in allowed and (high is None or value <= high):
        return value
    value = start
    while value in allowed:  # _outside_allowed_exists() promised one below
        value = step(value, False)
    return value


def _step_text(text: str, allowed: frozenset[Any]) -> str:
    """``text`` with its last character moved on until it is not allowed; same length."""
    if not text:
        if text not in allowed:
            return text
        text = "a"  # _outside_allowed_exists(): max_len is not 0, so one character fits
    while text in allowed:
        code = ord(text[-1]) + 1
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            code = 0x61
        text = text[:-1] + chr(code)
    return text


@_memoized
def _below(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[Bad]:
    low = _given(spec.min, "min")
    values: list[st.SearchStrategy[Any]] = [st.integers(max_value=math.ceil(low) - 1)]
    if spec.type == "float":
        values += _finite_floats(None, _strictly(_float_not_above(low), low, -math.inf))
    return _labelled("below min", st.one_of(values))


@_memoized
def _above(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[Bad]:
    high = _given(spec.max, "max")
    values: list[st.SearchStrategy[Any]] = [st.integers(min_value=math.floor(high) + 1)]
    if spec.type == "float":
        values += _finite_floats(_strictly(_float_not_below(high), high, math.inf), None)
    return _labelled("above max", st.one_of(values))


def _strictly(nearest: Any, bound: float, direction: float) -> Any:
    """``nearest`` moved one float towards ``direction`` if it equals ``bound``."""
    if nearest is None or nearest is _NO_FLOAT or nearest != bound:
        return nearest
    moved = math.nextafter(nearest, direction)
    return moved if math.isfinite(moved) else _NO_FLOAT


def _given(bound: T | None, key: str) -> T:
    if bound is None:
        raise InvalidArgument(f"a {key} defect needs a spec with {key!r}")
    return bound


@_memoized
def _sized(spec: Spec, results: bool, low: int, high: int) -> st.SearchStrategy[Any]:
    if spec.type == "str":
        return st.text(min_size=low, max_size=high)
    if not _item_satisfiable(spec.item, results):
        return st.just([])
    return st.lists(_valid_item(spec.item, results), min_size=low, max_size=high)


@_memoized
def _too_short(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[Bad]:
    low = _min_len(spec, results, top)
    # A result that is empty is ``empty``, so a short result still has something in it.
    return _labelled("shorter than min_len", _sized(spec, results, int(results), low - 1))


@_memoized
def _too_long(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[Bad]:
    high = _given(spec.max_len, "max_len")
    return _labelled("longer than max_len", _sized(spec, results, high + 1, high + SPARE))


def _empty(spec: Spec, results: bool, top: bool) -> st.SearchStrategy[Bad]:
    return st.just(("" if spec.type == "str" else [], "empty"))


@_memoized
@st.composite
def _mismatch(draw: st.DrawFn, spec: Spec, results: bool, top: bool) -> Bad:
    pattern = _given(spec.pattern, "pattern")
    low = spec.min_len or 0
    text = draw(st.text(min_size=low, max_size=_high(low, spec.max_len)))
    if fullmatcher(pattern)(text) is not None:
        # Not a filter: a fixed string the pattern refuses takes the matching one's place.
        text = draw(st.sampled_from(_probes(pattern, spec.min_len, spec.max_len)))
    return text, "breaks the pattern"


_BAD: dict[str, Callable[[Spec, bool, bool], st.SearchStrategy[Bad]]] = {
    "type": _wrong_type,
    "allowed": _outside_allowed,
    "min": _below,
    "max": _above,
    "min_len": _too_short,
    "max_len": _too_long,
    "empty": _empty,
    "pattern": _mismatch,
}
