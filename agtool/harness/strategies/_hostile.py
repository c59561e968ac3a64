"""Hostile callers, and the calls every run must make: each class of input, each boundary.

Luck decides what a random draw meets; a class the gate mishandles must be met
on every run, under every profile. So each hostile class is built twice: as a
strategy (``hostile_calls``, labelled with ``event`` for the statistics), and
as one concrete call per class over the tool's simplest valid arguments
(``hostile_examples``), which the properties run as explicit examples.
``boundary_args`` does the same for valid calls: every allowed value, every
bound, each on its own.

Each ``HostileCall`` carries its oracle: the error it must get, or ``None``
when it must be answered as the plain dict of the same items is.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, event, find
from hypothesis import settings as Settings
from hypothesis import strategies as st

from ..._contract import ToolContract, is_value_of
from ..._gate import Gate
from ..._reasons import shown
from ._args import Table, contract_of, echo_values, valid_args
from ._specs import fresh_key, valid_value

__all__ = [
    "HOSTILE_CLASSES",
    "INTERRUPTS",
    "HostileCall",
    "boundary_args",
    "hostile_calls",
    "hostile_examples",
    "simplest_args",
]


@dataclass(frozen=True, eq=False)
class HostileCall:
    """A call of one hostile class, and what it must be answered."""

    kind: str  #: one of ``HOSTILE_CLASSES``
    tool: str  #: the tool it was built from
    name: Any  #: the name called (the tool's, or a hostile one)
    args: Any
    #: The error it must get; ``None``: the answer ``plain`` gets, from a twin gate.
    expected: str | None
    plain: Any = None
    given: dict[str, Any] = field(default_factory=dict)  #: a hostile ``scope`` or ``approvals``
    echo: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:  # what Hypothesis prints: never the payload itself
        return f"HostileCall({self.kind!r}, tool={self.tool!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # Hypothesis's printer would walk a dataclass's fields


class _Boom(Exception):
    """What a hostile method raises: no exception the gate could expect by name."""


# --- containers that lie or raise -----------------------------------------------------------------

_DICT_METHODS = ("get", "values", "items", "keys", "__iter__", "__getitem__", "__len__",
                 "__contains__")


def _raiser(method: str) -> Callable[..., Any]:
    def boom(self: object, *args: object, **kwargs: object) -> Any:
        raise _Boom(f"{method} raised")

    return boom


def _dict_class(label: str, methods: dict[str, Callable[..., Any]]) -> type[dict[Any, Any]]:
    return type(f"Dict_{label}", (dict,), methods)


_DICT_LIES: dict[str, dict[str, Callable[..., Any]]] = {
    "keys-hide-one": {"keys": lambda self: list(dict.keys(self))[1:]},
    "iter-hides-one": {"__iter__": lambda self: iter(list(dict.keys(self))[1:])},
    "len-says-0": {"__len__": lambda self: 0},
    "contains-says-yes": {"__contains__": lambda self, key: True},
    "contains-says-no": {"__contains__": lambda self, key: False},
    "get-says-none": {"get": lambda self, key, default=None: None},
    "getitem-says-0": {"__getitem__": lambda self, key: 0},
    "items-say-nothing": {"items": lambda self: []},
    "values-say-zeros": {"values": lambda self: [0] * dict.__len__(self)},
}
_DICTS: dict[str, type[dict[Any, Any]]] = {
    **{f"dict whose {method} raises": _dict_class(method.strip("_") + "_raises",
                                                  {method: _raiser(method)})
       for method in _DICT_METHODS},
    **{f"dict whose {label}": _dict_class(label.replace("-", "_"), methods)
       for label, methods in _DICT_LIES.items()},
}
_LIST_LIES: dict[str, dict[str, Callable[..., Any]]] = {
        "len-says-1000": {"__len__": lambda self: 1000},
        "len-raises": {"__len__": _raiser("__len__")},
        "iter-says-a-str": {"__iter__": lambda self: iter(["x"])},
        "iter-raises": {"__iter__": _raiser("__iter__")},
        "getitem-says-0": {"__getitem__": lambda self, index: 0},
}
_LISTS: dict[str, type[list[Any]]] = {
    f"list whose {label}": type(f"List_{label.replace('-', '_')}", (list,), methods)
    for label, methods in _LIST_LIES.items()
}


class _StrKey(str):
    """A str subclass: equal to an argument's name, but not a str."""


# --- values no JSON carries, or too big to walk ---------------------------------------------------


def _deep(depth: int = 10_000) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _self_list() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _self_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


_VALUES: dict[str, Callable[[], Any]] = {
    "NaN": lambda: math.nan,
    "infinity": lambda: math.inf,
    "-infinity": lambda: -math.inf,
    "huge int": lambda: 10**5000,
    "deep nesting": _deep,
    "self-referencing list": _self_list,
    "self-referencing dict": _self_dict,
    "huge string": lambda: "x" * 1_000_000,
    "huge list": lambda: [0] * 200_000,
}
_NAMES: dict[str, Callable[[], str]] = {
    "control characters": lambda: "bad\nname\r\x00\x1b[31m\u2028end\u2029\x7f\x85",
    "huge": lambda: "Z" * 1_000_000 + "\n",
}


class _IterRaises:
    def __iter__(self) -> Iterator[Any]:
        raise _Boom("iter")


class _ContainsRaises:
    def __contains__(self, item: object) -> bool:
        raise _Boom("contains")

    def __iter__(self) -> Iterator[str]:
        raise _Boom("iter")


_APPROVALS: dict[str, Callable[[], Any]] = {
    "none": lambda: None,
    "an int": lambda: 42,
    "a str": lambda: "approved",
    "an iterable that raises": _IterRaises,
    "a list of non-approvals": lambda: [object(), None],
}
_SCOPES: dict[str, Callable[[], Any]] = {
    "a str naming a level": lambda: "irreversible",
    "an int": lambda: 42,
    "a dict of levels to False": lambda: {"irreversible": False, "read_public": False},
    "a set with an unknown level": lambda: {"read_public", "root"},
    "a collection whose membership raises": _ContainsRaises,
}


# --- building one call of a class -----------------------------------------------------------------

Builder = Callable[[ToolContract, dict[str, Any]], HostileCall]


def _call(kind: str, contract: ToolContract, args: Any, expected: str | None,
          plain: Any = None, name: Any = None, **given: Any) -> HostileCall:
    held = plain if plain is not None else args
    echo = echo_values(contract.args, held) if isinstance(held, dict) else {}
    return HostileCall(kind, contract.name, contract.name if name is None else name, args,
                       expected, plain, given, echo)


def _free(contract: ToolContract) -> str:
    return fresh_key(contract.args, "hostile")


def _container(kind: str, cls: type[dict[Any, Any]]) -> Builder:
    return lambda contract, base: _call(kind, contract, cls(base), None, dict(base))


def _list_container(kind: str, cls: type[list[Any]]) -> Builder:
    def build(contract: ToolContract, base: dict[str, Any]) -> HostileCall:
        lists = [arg for arg, value in base.items() if type(value) is list]
        if lists:  # held by an argument that takes a list: answered as the plain list
            return _call(kind, contract, {**base, lists[0]: cls(base[lists[0]])}, None,
                         dict(base))
        extra = _free(contract)
        return _call(kind, contract, {**base, extra: cls([1, 2])}, f"args:unexpected:{extra}")

    return build


def _odd_key(kind: str, key: Callable[[dict[str, Any]], Any]) -> Builder:
    return lambda contract, base: _call(kind, contract, {**base, key(base): "x"},
                                        "args:not_object")


def _str_key(contract: ToolContract, base: dict[str, Any]) -> HostileCall:
    args = {_StrKey(key): value for key, value in base.items()} or {_StrKey("x"): 1}
    return _call("key: a str subclass equal to an argument's name", contract, args,
                 "args:not_object")


def _value(kind: str, make: Callable[[], Any]) -> Builder:
    def build(contract: ToolContract, base: dict[str, Any]) -> HostileCall:
        value = make()
        for arg, spec in contract.args.items():
            # An argument whose type the value is not: refused for its type, whatever it holds.
            if arg in base and not spec.echo and not is_value_of(spec.type, value):
                return _call(kind, contract, {**base, arg: value}, f"args:type:{shown(arg)}")
        extra = _free(contract)
        return _call(kind, contract, {**base, extra: value}, f"args:unexpected:{extra}")

    return build


def _tool_name(kind: str, make: Callable[[], str]) -> Builder:
    return lambda contract, base: _call(kind, contract, base, "args:unknown_tool", name=make())


def _arg_name(kind: str, make: Callable[[], str]) -> Builder:
    def build(contract: ToolContract, base: dict[str, Any]) -> HostileCall:
        name = make()
        return _call(kind, contract, {**base, name: 1}, f"args:unexpected:{shown(name)}")

    return build


def _approvals(kind: str, make: Callable[[], Any]) -> Builder:
    def build(contract: ToolContract, base: dict[str, Any]) -> HostileCall:
        expected = "auth:approval" if contract.needs_approval else None
        return _call(kind, contract, base, expected, dict(base), approvals=make())

    return build


def _scope(kind: str, make: Callable[[], Any]) -> Builder:
    return lambda contract, base: _call(kind, contract, base, "auth:bad_scope", scope=make())


_BUILDERS: dict[str, Builder] = {
    **{f"args: {label}": _container(f"args: {label}", cls) for label, cls in _DICTS.items()},
    **{f"a {label}": _list_container(f"a {label}", cls) for label, cls in _LISTS.items()},
    "key: an int": _odd_key("key: an int", lambda base: 1),
    "key: None": _odd_key("key: None", lambda base: None),
    "key: a tuple": _odd_key("key: a tuple", lambda base: ("sku",)),
    "key: a str subclass equal to an argument's name": _str_key,
    **{f"value: {label}": _value(f"value: {label}", make) for label, make in _VALUES.items()},
    **{f"tool name: {label}": _tool_name(f"tool name: {label}", make)
       for label, make in _NAMES.items()},
    **{f"argument name: {label}": _arg_name(f"argument name: {label}", make)
       for label, make in _NAMES.items()},
    **{f"approvals: {label}": _approvals(f"approvals: {label}", make)
       for label, make in _APPROVALS.items()},
    **{f"scope: {label}": _scope(f"scope: {label}", make) for label, make in _SCOPES.items()},
}
#: Every class of hostile input the gate must survive, as ``event`` labels it.
HOSTILE_CLASSES: tuple[str, ...] = tuple(_BUILDERS)


def _build(kind: str, contract: ToolContract, base: dict[str, Any]) -> HostileCall:
    event(f"hostile: {kind}")
    return _BUILDERS[kind](contract, base)


def hostile_calls(table: Table, name: str) -> st.SearchStrategy[HostileCall]:
    """A call of some hostile class built over valid arguments of ``name``."""
    contract = contract_of(table, name)
    return st.builds(_build, st.sampled_from(HOSTILE_CLASSES), st.just(contract),
                     valid_args(table, name))


def hostile_examples(table: Table, name: str) -> list[HostileCall]:
    """One call of every hostile class over ``name``'s simplest valid arguments.

    Built afresh on each call: some are mutable, and each test gets its own.
    """
    contract = contract_of(table, name)
    base = simplest_args(table, name)
    return [_BUILDERS[kind](contract, dict(base)) for kind in HOSTILE_CLASSES]


#: The ``BaseException`` s a body may raise, each of which must propagate untouched.
INTERRUPTS: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit,
                                               asyncio.CancelledError)


# --- the simplest valid call, and the calls at each boundary --------------------------------------

_FIND = Settings(database=None, derandomize=True, max_examples=50, deadline=None,
                 phases=[Phase.generate, Phase.shrink],
                 suppress_health_check=list(HealthCheck))
#: (id of the table, tool) -> (the table, its simplest args): the table is kept so that
#: its id cannot be reused by another while the entry stands.
_SIMPLEST_SIZE = 256
_simplest: dict[tuple[int, str], tuple[Table, dict[str, Any]]] = {}


def _simplest_of(strategy: st.SearchStrategy[Any]) -> Any:
    # Shrunk to the minimum, so the same on every run and machine.
    return find(strategy, lambda _: True, settings=_FIND)


def simplest_args(table: Table, name: str) -> dict[str, Any]:
    """The simplest argument set ``name``'s contract accepts, the same on every run.

    ``InvalidArgument`` when no call can keep the contract.
    """
    key = (id(table), name)
    if key not in _simplest or _simplest[key][0] is not table:
        if len(_simplest) >= _SIMPLEST_SIZE:
            _simplest.clear()
        _simplest[key] = (table, _simplest_of(valid_args(table, name)))
    return dict(_simplest[key][1])


def _edges(spec: Any) -> list[Any]:
    """The values at the edges of what ``spec`` admits, some of which may not be valid."""
    if spec.allowed is not None:
        return list(spec.allowed)
    if spec.type == "bool":
        return [False, True]
    if spec.type == "int":  # a bound may be a float: 0.5 admits 1
        return [edge(bound) for edge, bound in ((math.ceil, spec.min), (math.floor, spec.max))
                if bound is not None]
    if spec.type == "float":
        return [bound for bound in (spec.min, spec.max) if bound is not None]
    if spec.type in ("str", "list"):
        lengths = [n for n in (spec.min_len, spec.max_len) if n is not None]
        if spec.type == "str":
            return ["a" * n for n in lengths] if spec.pattern is None else []
        if not lengths:
            return []
        try:
            item = _simplest_of(valid_value(spec.item)) if spec.item is not None else 0
        except Exception:  # an item no value keeps: no list edge to try
            return []
        return [[item] * n for n in lengths]
    return []


def boundary_args(table: Table, name: str) -> list[dict[str, Any]]:
    """Valid argument sets: the simplest, then one per argument edge (every allowed value,
    each bound, each length bound), each on its own over the simplest."""
    contract = contract_of(table, name)
    base = simplest_args(table, name)
    gate = Gate({name: table[name]})
    found = [base]
    for arg, spec in contract.args.items():
        for edge in _edges(spec):
            args = {**base, arg: edge}
            if args not in found and gate.validate_args(
                    name, args, echo_values(contract.args, args)) == "":
                found.append(args)
    return found
