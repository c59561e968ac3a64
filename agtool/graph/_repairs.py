"""Repairs by reason: what the repair graph changes in a refused call, read from its contract.

A rule takes the failed call, its reason (``parse_reason``) and the tool's
contract, and answers the fixed call, or ``None`` when it has no fix for this
call. A repairs table maps reasons to rules; ``*`` as the argument matches any
argument (``args:min:*``), and an exact reason wins over it. What a rule
answers is checked by the gate again like any other call.

``default_repairs`` holds the rules every contract implies:

- ``args:unexpected:<arg>``: the argument is dropped (not one the contract
  declares: then the key is inside its value, which no rule guesses at).
- ``args:min:<arg>`` / ``args:max:<arg>``: the value becomes the bound (for an
  int the nearest int inside it, so a bound of 0.5 gives 1).
- ``args:type:<arg>``: the value is converted only where the conversion is
  exact: a JSON number written as a string (``"5"`` to ``5``, ``"2.5"`` to
  ``2.5`` for a float), an integral float for an int (``5.0`` to ``5``), and
  ``"true"`` / ``"false"`` for a bool. ``True`` is never a number, ``"5.5"``
  never an int, and a number never a string (``2134`` may have been ``"02134"``).
- ``args:allowed:<arg>``: the fallback declared for ``<arg>`` (``fallbacks=``);
  without one there is no rule, and a model is handed the allowed values instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, TypedDict

from .._contract import Spec, ToolContract
from .._reasons import Reason, named, parse_reason, shown

__all__ = [
    "Call",
    "Fix",
    "RepairRule",
    "convert_exactly",
    "default_repairs",
    "drop_argument",
    "exact_value",
    "rule_for",
    "to_bound",
    "use_fallback",
    "use_successor",
]


class Call(TypedDict):
    """One call handed to the gate, exactly as it was handed."""

    tool: Any
    args: Any


class Fix(TypedDict):
    """One change a repair made to the call, and the reason that asked for it."""

    reason: str
    field: str  #: ``"tool"`` or an argument name
    action: str  #: ``"set"`` or ``"drop"``
    was: Any  #: ``None`` when the argument was absent
    now: Any  #: ``None`` when the argument was dropped


#: ``(failed call, its reason, the tool's contract) -> fixed call``, or ``None`` for no fix.
RepairRule = Callable[[Call, Reason, ToolContract | None], Call | None]


def rule_for(repairs: Mapping[str, RepairRule], reason: str) -> RepairRule | None:
    """The rule ``repairs`` holds for ``reason``: the exact one, else its ``*`` one."""
    stage, check, _ = parse_reason(reason)
    return repairs.get(reason) or repairs.get(f"{stage}:{check}:*")


def _with_args(call: Call, args: dict[Any, Any]) -> Call:
    return {"tool": call["tool"], "args": args}


def _spec(contract: ToolContract | None, reason: Reason) -> tuple[str, Spec] | None:
    """The argument a reason names, as the contract spells it, and its spec."""
    if contract is None:
        return None
    # The reason echoes the name as ``shown`` does (escaped, bounded).
    arg = named(contract.args, reason.arg)
    return None if arg is None else (arg, contract.args[arg])


def _set(call: Call, arg: str, value: object) -> Call | None:
    args = call["args"]
    return _with_args(call, {**args, arg: value}) if isinstance(args, dict) else None


def drop_argument(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    """Drop the argument the reason names (``args:unexpected:<arg>``), unless the contract
    declares it: then the unexpected key is inside its value, and dropping it would lose it."""
    args = call["args"]
    if not isinstance(args, dict) or (contract and named(contract.args, reason.arg)):
        return None
    dropped = named(args, reason.arg)
    if dropped is None:
        return _with_args(call, dict(args))  # nothing by that name: the repeat check ends it
    return _with_args(call, {key: value for key, value in args.items() if key != dropped})


def _bound(spec: Spec, which: str) -> float | None:
    bound: float | None = spec.min if which == "min" else spec.max
    if bound is None or spec.type != "int":
        return bound
    return math.ceil(bound) if which == "min" else math.floor(bound)


def to_bound(which: str) -> RepairRule:
    """A rule setting the named number to its contract's ``which`` bound (``"min"``/``"max"``)."""
    if which not in ("min", "max"):
        raise ValueError(f"which must be 'min' or 'max', got {which!r}")

    def clamp(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
        found = _spec(contract, reason)
        # Only a top-level number has the bound: a list's item bounds are not its own.
        if found is None or found[1].type not in ("int", "float"):
            return None
        bound = _bound(found[1], which)
        return None if bound is None else _set(call, found[0], bound)

    clamp.__name__ = f"to_{which}"
    return clamp


# JSON's number grammar: what the value would have been, had the model not quoted it.
_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BOOLS = {"true": True, "false": False}
#: Digits past which a string is not read as an int (Python's own limit is 4300).
_MAX_DIGITS = 400
_NO_VALUE = object()


def _number(text: str, want: str) -> object:
    if _JSON_INT.fullmatch(text):
        return int(text) if len(text) <= _MAX_DIGITS else _NO_VALUE
    if not _JSON_NUMBER.fullmatch(text):
        return _NO_VALUE
    try:
        exact = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the grammar above is Decimal's subset
        return _NO_VALUE
    if want == "int":
        whole = exact == exact.to_integral_value() and exact.adjusted() < _MAX_DIGITS
        return int(exact) if whole else _NO_VALUE
    number = float(text)
    # Exact: the float's shortest form names the same number ("0.1" yes, "0.10000000000000001" no).
    return number if math.isfinite(number) and Decimal(repr(number)) == exact else _NO_VALUE


def exact_value(type_name: str, value: object) -> tuple[bool, object]:
    """``(True, converted)`` when ``value`` has exactly one reading as a ``type_name``, else
    ``(False, None)``; see the module's ``args:type`` rule for which readings are exact."""
    kind = type(value)
    converted: object = _NO_VALUE
    if kind is str and type_name in ("int", "float"):
        converted = _number(value, type_name)  # type: ignore[arg-type]
    elif kind is str and type_name == "bool":
        converted = _BOOLS.get(value, _NO_VALUE)  # type: ignore[call-overload]
    elif kind is float and type_name == "int" and value.is_integer():  # type: ignore[attr-defined]
        converted = int(value)  # type: ignore[call-overload]
    return (False, None) if converted is _NO_VALUE else (True, converted)


def convert_exactly(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    """Convert the named argument to its contract type where that is exact (``exact_value``)."""
    found = _spec(contract, reason)
    args = call["args"]
    if found is None or not isinstance(args, dict) or found[0] not in args:
        return None
    ok, value = exact_value(found[1].type, args[found[0]])
    return _set(call, found[0], value) if ok else None


def use_fallback(value: object) -> RepairRule:
    """A rule setting the named argument to ``value`` (for ``args:allowed:<arg>``)."""
    def fallback(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
        found = _spec(contract, reason)
        return None if found is None else _set(call, found[0], value)

    return fallback


def use_successor(successors: Mapping[str, str]) -> RepairRule:
    """A rule moving the call to the tool that replaces its own (for ``result:too_big``)."""
    def successor(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
        tool = call["tool"]
        new = successors.get(tool) if isinstance(tool, str) else None
        return None if new is None else {"tool": new, "args": call["args"]}

    return successor


def default_repairs(fallbacks: Mapping[str, object] | None = None,
                    successors: Mapping[str, str] | None = None) -> dict[str, RepairRule]:
    """The repairs every contract implies, plus a fallback per argument and a successor per tool.

    ``fallbacks`` maps an argument name to the value used when a call's value is
    not one of its ``allowed``; ``successors`` a tool to the tool tried when its
    result is ``too_big``.
    """
    repairs: dict[str, RepairRule] = {
        "args:unexpected:*": drop_argument,
        "args:min:*": to_bound("min"),
        "args:max:*": to_bound("max"),
        "args:type:*": convert_exactly,
    }
    for arg, value in (fallbacks or {}).items():
        repairs[f"args:allowed:{shown(arg)}"] = use_fallback(value)
    if successors:
        repairs["result:too_big"] = use_successor(dict(successors))
    return repairs
