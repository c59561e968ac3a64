"""Whole contract tables nobody wrote by hand, to test the harness on contracts it has never seen.

Every table drawn passes ``agtool.check_table`` and every spec in it can be
kept: each required argument and returned key has at least one valid value.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import event
from hypothesis import strategies as st

from ..._contract import RISKS
from ._specs import matching_text

__all__ = ["contract_tables", "generated_body", "spec_dicts"]

# Patterns with the length range of what they match, so length bounds can be
# chosen to agree with them; {n} is filled with a count. All are RE2 patterns
# that Python's re, which Hypothesis generates from, reads the same way.
_PATTERNS: tuple[tuple[str, int, int], ...] = (
    ("[a-z]{1,6}", 1, 6),
    ("[A-Z][0-9]{3}", 4, 4),
    ("ORD-[0-9]{4}", 8, 8),
    ("(yes|no)", 2, 3),
)
_MAX_DEPTH = 2


def generated_body(**args: Any) -> dict[str, Any]:
    """The ``fn`` of every generated tool: a placeholder; the harness stubs generated bodies."""
    return {}


# Built once: a strategy is validated when first drawn, and these are drawn thousands of times.
#: Mostly identifiers; sometimes what a careless table holds: colons, spaces, non-ASCII.
_NAMES = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8) | st.text(
    min_size=1, max_size=5)
_LOW_INT = st.none() | st.integers(-50, 50)
_INT_SPAN = st.none() | st.integers(0, 30)
_LOW_FLOAT = st.none() | st.floats(-1e6, 1e6, allow_nan=False)
_FLOAT_SPAN = st.none() | st.floats(0, 1e6)


@st.composite
def _int_spec(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "int"}
    low = draw(_LOW_INT)
    span = draw(_INT_SPAN)
    high = None if span is None else (low or 0) + span
    loose = draw(st.booleans())  # a float bound on an int spec: 0.5 admits 1, not 0
    if low is not None:
        spec["min"] = low - 0.5 if loose else low
    if high is not None:
        spec["max"] = high + 0.5 if loose else high
    if draw(st.booleans()):
        values = st.integers(-100 if low is None else low, 100 if high is None else high)
        spec["allowed"] = draw(st.lists(values, min_size=1, max_size=4, unique=True))
    return spec


@st.composite
def _float_spec(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "float"}
    low = draw(_LOW_FLOAT)
    span = draw(_FLOAT_SPAN)
    high = None if span is None else (low or 0.0) + span
    if low is not None:
        spec["min"] = low
    if high is not None:
        spec["max"] = high
    if draw(st.booleans()):
        values = st.floats(low, high, allow_nan=False, allow_infinity=False)
        spec["allowed"] = draw(st.lists(values, min_size=1, max_size=3))
    return spec


@st.composite
def _str_spec(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "str"}
    low = draw(st.integers(0, 3))
    high = low + draw(st.integers(0, 5))
    if draw(st.booleans()):
        pattern, low, high = draw(st.sampled_from(_PATTERNS))
        spec["pattern"] = pattern
    # min_len <= low <= high <= max_len: the bounds never exclude what the pattern matches.
    if draw(st.booleans()):
        spec["min_len"] = draw(st.integers(0, low))
    if draw(st.booleans()):
        spec["max_len"] = draw(st.integers(high, high + 4))
    if draw(st.booleans()):
        values = (matching_text(spec["pattern"]) if "pattern" in spec
                  else st.text(min_size=spec.get("min_len", 0), max_size=spec.get("max_len", high)))
        spec["allowed"] = draw(st.lists(values, min_size=1, max_size=3))
    return spec


@st.composite
def _bool_spec(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "bool"}
    if draw(st.booleans()):
        spec["allowed"] = draw(st.sampled_from([[True], [False], [True, False]]))
    return spec


@functools.cache
def _list_spec(depth: int, returned_top: bool) -> st.SearchStrategy[dict[str, Any]]:
    return _list_spec_dict(depth, returned_top)


@st.composite
def _list_spec_dict(draw: st.DrawFn, depth: int, returned_top: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "list"}
    if draw(st.booleans()):
        spec["min_len"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        spec["max_len"] = draw(st.integers(spec.get("min_len", 0), 4))
    if returned_top and spec.get("max_len") == 0 and "min_len" not in spec:
        spec["min_len"] = 0  # a returned list is otherwise never empty: nothing would fit
    item = draw(st.sampled_from(["none", "spec", "object"]))
    if item == "spec":
        spec["item"] = draw(spec_dicts(depth + 1, required=True))
    elif item == "object":
        spec["item"] = draw(_fields(depth + 1))
    return spec


@functools.cache
def _fields(depth: int) -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    return st.dictionaries(_NAMES, spec_dicts(depth), min_size=1, max_size=3)


@functools.cache
def spec_dicts(depth: int = 0, *, required: bool | None = None, returned_top: bool = False,
               argument: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """One spec as a table holds it: a dict with ``type`` and the keys that type takes.

    ``argument`` marks a top-level argument, the one place ``echo`` is allowed.
    """
    return _spec_dict(depth, required, returned_top, argument)


@st.composite
def _spec_dict(draw: st.DrawFn, depth: int, required: bool | None, returned_top: bool,
               argument: bool) -> dict[str, Any]:
    types = ["int", "float", "str", "bool", "dict"] + (["list"] if depth < _MAX_DEPTH else [])
    type_name = draw(st.sampled_from(types))
    if type_name == "list":
        spec = draw(_list_spec(depth, returned_top))
    elif type_name == "dict" and depth < _MAX_DEPTH and draw(st.booleans()):
        event("generated spec: a dict with named keys")
        spec = {"type": "dict", "item": draw(_fields(depth + 1))}
    else:
        spec = draw(_SCALAR_SPECS[type_name])
    if required is None:
        required = draw(st.booleans())
    if not required or draw(st.booleans()):
        spec["required"] = required  # True is the default: said or not, it is the same spec
    if argument and type_name == "str" and draw(st.integers(0, 3)) == 0:
        spec["echo"] = True  # a value the caller must copy verbatim, like a request id
    if not required and not spec.get("echo") and draw(st.integers(0, 2)) == 0:
        # Null for "not given" is the default; said or not, and sometimes refused.
        spec["nullable"] = draw(st.booleans())
        event(f"generated spec: nullable {spec['nullable']}")
    if draw(st.integers(0, 4)) == 0:
        spec["sensitive"] = True
    if draw(st.booleans()):
        spec["description"] = draw(st.text(max_size=10))
    return spec


_SCALAR_SPECS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "int": _int_spec(), "float": _float_spec(), "str": _str_spec(), "bool": _bool_spec(),
    "dict": st.builds(dict, type=st.just("dict")),
}


@functools.cache
def _entries(max_args: int, max_returns: int, side_effects: bool
             ) -> st.SearchStrategy[dict[str, Any]]:
    return _entry(st.dictionaries(_NAMES, spec_dicts(argument=True), max_size=max_args),
                  st.dictionaries(_NAMES, spec_dicts(returned_top=True), max_size=max_returns),
                  side_effects)


@st.composite
def _entry(draw: st.DrawFn, args: st.SearchStrategy[dict[str, Any]],
           returns: st.SearchStrategy[dict[str, Any]], side_effects: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"fn": generated_body, "args": draw(args), "returns": draw(returns)}
    if draw(st.booleans()):
        entry["description"] = draw(st.text(max_size=12))
    risk = draw(st.sampled_from((None, *RISKS))) if side_effects else None
    if risk is not None:  # a tool that touches the world: the harness must never run it twice
        entry["risk"] = risk
        entry["effect"] = "read" if risk in RISKS[:2] else "write"
        event(f"generated tool risk: {risk}")
        required = [name for name, spec in entry["args"].items() if spec.get("required", True)]
        keyed = draw(st.booleans())
        if entry["effect"] == "write" and required and keyed:
            entry["key_args"] = draw(st.lists(st.sampled_from(required), min_size=1,
                                              unique=True))
    return entry


def contract_tables(*, min_tools: int = 1, max_tools: int = 2, max_args: int = 4,
                    max_returns: int = 3, side_effects: bool = True
                    ) -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    """Whole contract tables: valid per ``check_table``, every spec satisfiable.

    Tool bodies are ``generated_body`` placeholders: the harness stubs them.
    With ``side_effects`` some tools declare a risk level (reads or writes,
    with or without ``key_args``); without, every tool is a public read.
    """
    def label(table: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        event(f"generated table: {len(table)} tool(s)")
        return table

    return st.dictionaries(_NAMES, _entries(max_args, max_returns, side_effects),
                           min_size=min_tools, max_size=max_tools).map(label)
