"""Memo keys and isolated copies of remembered values.

A key must tell apart what Python's ``==`` confuses: ``1``, ``1.0`` and
``True`` are equal and hash alike, but a model that sent ``True`` for a count
made a different call. orjson with sorted keys keeps the three apart and costs
little; values it cannot write exactly (NaN, huge ints, tuples, non-str keys)
take a slower typed walk, and what neither can key is simply not remembered.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "cache_key", "freeze", "thaw"]

#: Deeper values are not remembered: keys and copies stay bounded and cycles end.
MAX_DEPTH = 64

_JSON_SCALARS = (str, int, bool, type(None))
#: Subclasses, dataclasses and datetimes raise rather than turn into plain JSON.
_EXACT = (orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
          | orjson.OPT_PASSTHROUGH_DATETIME)
_ORJSON = orjson.OPT_SORT_KEYS | _EXACT


def cache_key(name: str, args: object, version: str = "") -> Hashable | None:
    """The memo key of a call, or ``None`` when these args cannot be keyed exactly.

    Key order does not matter; the type of every value does; the tool's name and
    ``version`` (the gate passes its contract's hash) are part of the key, so two
    tools, or two versions of one contract, never share one.
    """
    try:
        return _key(name, args, version)
    except Exception:  # args whose own methods raise are not remembered
        return None


def _key(name: str, args: object, version: str) -> Hashable | None:
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
            return (name, version, orjson.dumps(args, option=_ORJSON))
        except orjson.JSONEncodeError:
            pass  # a huge int or a str with a lone surrogate: key it by the walk
    walked = _typed(args, 0)
    return None if walked is None else (name, version, walked)


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


class _Copied:
    """A remembered value orjson could not round-trip: kept and handed out as deep copies."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def freeze(value: object, verify: bool = True) -> bytes | _Copied | None:
    """A private copy of ``value`` to keep in the memo, or ``None`` if it cannot be copied.

    ``verify=False`` is for a value whose every part its contract typed
    exactly, so orjson writes it without loss; any other value is walked
    first, since orjson writes NaN as null, tuples as arrays and enums as
    their values without complaint.
    """
    if not verify or _is_plain_json(value, 0):
        try:
            return orjson.dumps(value, option=_EXACT)
        except orjson.JSONEncodeError:
            pass  # a huge int or a lone surrogate: copy it instead
    try:
        return _Copied(copy.deepcopy(value))
    except Exception:
        return None  # a value that cannot be copied is not remembered


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


def thaw(frozen: bytes | _Copied) -> Any:
    """A fresh copy of a remembered value: what the caller does to it stays with the caller."""
    if type(frozen) is bytes:
        return orjson.loads(frozen)
    return copy.deepcopy(frozen.value)  # type: ignore[union-attr]
