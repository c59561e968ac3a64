"""Argument sets for a tool of any contract table: valid, wrong once, or wrong as a model errs.

``defect_sites`` lists where a tool's arguments can be wrong in exactly one
way; ``one_defect_args`` draws a valid argument set and applies one of those
defects, and carries the reason the gate must answer with.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..._contract import ToolContract, check_table
from ..._reasons import ARG_CHECKS, shown
from ._specs import (
    Fields,
    Path,
    bad_value,
    invented_keys,
    json_values,
    object_sites,
    show_path,
    valid_object,
    valid_value,
)

__all__ = [
    "MISTAKES",
    "DefectSite",
    "DefectiveCall",
    "Mistake",
    "any_calls",
    "contract_of",
    "defect_sites",
    "echo_values",
    "mistake_kinds",
    "model_mistakes",
    "one_defect_args",
    "permuted",
    "plant",
    "valid_args",
]

Table = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class DefectSite:
    """Where a value can be wrong: ``kind`` at top-level ``arg``, at ``path`` inside it.

    ``kind`` is what the gate says (``min``; for results ``range``); ``check``
    is the check that fails (``min``), the same as ``kind`` for arguments. The
    ``unexpected`` site of a whole argument set has ``arg == ""``: the name is
    invented when the defect is drawn.
    """

    kind: str
    arg: str
    path: Path = ()
    check: str = ""

    def __post_init__(self) -> None:
        if not self.check:
            object.__setattr__(self, "check", self.kind)

    def __str__(self) -> str:
        where = show_path(self.arg, self.path) or "*"
        return f"{self.kind}:{where}" + (f"({self.check})" if self.check != self.kind else "")


@dataclass(frozen=True)
class DefectiveCall:
    """An argument set with exactly one defect, and what the gate must say about it."""

    args: dict[str, Any]
    kind: str
    arg: str  #: the top-level argument the reason names (the invented one for ``unexpected``)
    reason: str  #: what ``validate_args`` must answer, ``min:limit``
    site: DefectSite
    how: str = ""
    #: The values the caller was given for the contract's echo arguments: pass as ``echo=``.
    echo: dict[str, Any] = field(default_factory=dict)
    #: The same call without the defect: what a server that refuses ``args`` must accept.
    base: dict[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> str:
        """What ``call_tool`` must answer in ``error``: ``args:min:limit``."""
        return "args:" + self.reason


@dataclass(frozen=True)
class Mistake:
    """A call as a model gets it wrong, and every reason that names a real defect in it."""

    args: dict[str, Any]
    kind: str  #: one of ``MISTAKES``
    arg: str  #: the argument got wrong, as named in ``args`` (the invented one for an extra)
    #: What ``validate_args`` may answer, exactly: names echoed as the gate does (``shown``).
    reasons: frozenset[str] = field(default_factory=frozenset)
    #: The values the model was given for the contract's echo arguments: pass as ``echo=``.
    echo: dict[str, Any] = field(default_factory=dict)
    #: The same call without the mistake: what a server that refuses ``args`` must accept.
    base: dict[str, Any] = field(default_factory=dict)


#: The mistakes ``model_mistakes`` makes, as models make them.
MISTAKES = ("renamed argument", "string number", "invented enum value", "bool for int",
            "dropped argument", "extra argument")


def contract_of(table: Table, name: str) -> ToolContract:
    """The validated contract of ``name``; ``ContractError`` for a malformed table."""
    contracts = check_table(table)
    if name not in contracts:
        raise InvalidArgument(f"the table has no tool {name!r}; it has {sorted(contracts)}")
    return contracts[name]


def valid_args(table: Table, name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Argument sets ``name``'s contract accepts: every required argument, some optional ones."""
    return valid_object(contract_of(table, name).args)


def permuted(mapping: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """The same items in any order."""
    return st.permutations(list(mapping.items())).map(dict)


def defect_sites(table: Table, name: str) -> list[DefectSite]:
    """Every place ``name``'s arguments can be wrong in exactly one way.

    One ``unexpected`` site for the whole set, then per argument (in the
    table's order) the checks its spec makes possible, then those inside its
    items; a defect inside a list reports the top-level argument.
    """
    contract = contract_of(table, name)
    sites = []
    for check, path in object_sites(contract.args, results=False, top=True):
        arg, rest = (path[0][1:], path[1:]) if path else ("", ())
        sites.append(DefectSite(check, arg, rest))
    return sites


def _matching(sites: Sequence[DefectSite], name: str, kind: str | None, arg: str | None,
              path: Path | None) -> list[DefectSite]:
    if kind is not None and kind not in ARG_CHECKS:
        raise InvalidArgument(f"kind={kind!r} is not an argument check; expected one of "
                              f"{list(ARG_CHECKS)}")
    found = [site for site in sites if (kind is None or site.kind == kind)
             and (arg is None or site.arg == arg) and (path is None or site.path == path)]
    if not found:
        raise InvalidArgument(f"tool {name!r} has no defect site with kind={kind!r}, arg={arg!r},"
                              f" path={path!r}; its sites are {[str(site) for site in sites]}")
    return found


def one_defect_args(table: Table, name: str, kind: str | None = None, arg: str | None = None,
                    path: Path | None = None, *, bases: Sequence[Mapping[str, Any]] = ()
                    ) -> st.SearchStrategy[DefectiveCall]:
    """A valid argument set with exactly one defect applied, at a site matching the filters.

    ``kind``, ``arg`` and ``path`` narrow the sites ``defect_sites`` lists
    (``InvalidArgument`` when none is left). The defect is fixed when drawn, so
    shrinking simplifies the values around it but never removes it. ``bases``,
    when given, are the valid calls the defect is planted on (calls known to
    succeed), instead of a drawn one.
    """
    contract = contract_of(table, name)
    sites = _matching(defect_sites(table, name), name, kind, arg, path)
    return _one_defect(contract, tuple(sites), tuple(bases))


def echo_values(specs: Fields, args: Mapping[str, Any]) -> dict[str, Any]:
    """What a caller copying faithfully was given for the echo arguments of ``args``."""
    return {arg: args[arg] for arg, spec in specs.items() if spec.echo and arg in args}


def plant(draw: st.DrawFn, args: dict[str, Any], specs: Fields, site: DefectSite,
          extra: str | None = None) -> tuple[str, str]:
    """Make ``args`` wrong at ``site`` (a site of ``defect_sites``), in place.

    Returns the argument the gate's reason names and how it was made wrong.
    ``extra`` is the name an ``unexpected`` defect adds (invented if not given).
    """
    if site.kind == "unexpected" and not site.arg:
        extra = draw(invented_keys(specs)) if extra is None else extra
        args[extra] = draw(json_values())
        return extra, "a key the contract does not name"
    arg = site.arg
    if site.check == "missing" and not site.path:
        del args[arg]
        return arg, "a required argument dropped"
    if site.check == "echo":
        other = draw(valid_value(specs[arg]))
        if other == args[arg] or draw(st.booleans()):
            del args[arg]  # no other valid value, or a caller that left it out
            return arg, "an echo argument dropped"
        args[arg] = other
        return arg, "an echo argument not copied"
    args[arg], how = draw(bad_value(specs[arg], site.path, site.check, top=True))
    return arg, how


def _base_args(draw: st.DrawFn, contract: ToolContract,
               bases: tuple[Mapping[str, Any], ...]) -> dict[str, Any]:
    # Without bases, the same draw as ever: the same seed still finds the same bugs.
    if not bases:
        return draw(valid_object(contract.args))
    return copy.deepcopy(dict(draw(st.sampled_from(bases))))


@st.composite
def _one_defect(draw: st.DrawFn, contract: ToolContract, sites: tuple[DefectSite, ...],
                bases: tuple[Mapping[str, Any], ...] = ()) -> DefectiveCall:
    site = draw(st.sampled_from(sites))
    args = _base_args(draw, contract, bases)
    echo = echo_values(contract.args, args)
    base = copy.deepcopy(args)
    arg, how = plant(draw, args, contract.args, site)
    args = draw(permuted(args))
    event(f"defect kind: {site.kind}")
    event(f"defect made by: {how}")
    note(f"defect at {site}: {how}")
    return DefectiveCall(args, site.kind, arg, f"{site.kind}:{shown(arg)}", site, how, echo,
                         base)


# --- model mistakes -----------------------------------------------------------------------------


def _mistake_args(contract: ToolContract, kind: str) -> list[str]:
    """The arguments ``kind`` can be made on (``[""]`` for the whole call)."""
    specs = contract.args
    if kind == "renamed argument":
        return list(specs)
    if kind == "string number":
        return [arg for arg, spec in specs.items() if spec.type in ("int", "float")]
    if kind == "invented enum value":
        sites = object_sites(specs, results=False, top=True)
        return [path[0][1:] for check, path in sites if check == "allowed" and len(path) == 1]
    if kind == "bool for int":
        return [arg for arg, spec in specs.items() if spec.type == "int"]
    if kind == "dropped argument":
        return [arg for arg, spec in specs.items() if spec.required or spec.echo]
    return [""]


def mistake_kinds(table: Table, name: str) -> list[str]:
    """The ``MISTAKES`` a model can make on ``name``'s contract."""
    contract = contract_of(table, name)
    return [kind for kind in MISTAKES if _mistake_args(contract, kind)]


def model_mistakes(table: Table, name: str, kind: str | None = None, *,
                   bases: Sequence[Mapping[str, Any]] = ()) -> st.SearchStrategy[Mistake]:
    """Calls a model gets wrong: a valid call with one of ``MISTAKES`` made in it.

    A renamed argument is two defects at once (one name missing, one
    unexpected); ``reasons`` holds every reason the gate may rightly give.
    ``bases``, when given, are the valid calls the mistake is made in.
    """
    contract = contract_of(table, name)
    kinds = mistake_kinds(table, name) if kind is None else [kind]
    if kind is not None and kind not in mistake_kinds(table, name):
        raise InvalidArgument(f"tool {name!r} admits no {kind!r}; it admits "
                              f"{mistake_kinds(table, name)}")
    return _mistake(contract, tuple(kinds), tuple(bases))


@st.composite
def _mistake(draw: st.DrawFn, contract: ToolContract, kinds: tuple[str, ...],
             bases: tuple[Mapping[str, Any], ...] = ()) -> Mistake:
    kind = draw(st.sampled_from(kinds))
    arg = draw(st.sampled_from(_mistake_args(contract, kind)))
    specs = contract.args
    args = _base_args(draw, contract, bases)
    if arg:
        args.setdefault(arg, draw(_some_value_of(contract, arg)))
    echo = echo_values(specs, args)
    base = copy.deepcopy(args)
    # An echo argument left out is an echo defect, a plain required one is missing.
    absent = "echo:" if arg and specs[arg].echo else "missing:"
    reasons: set[str] = set()
    if kind == "renamed argument":
        new = draw(invented_keys(specs))
        args[new] = args.pop(arg)
        reasons.add("unexpected:" + shown(new))
        if specs[arg].required or specs[arg].echo:
            reasons.add(absent + shown(arg))
    elif kind == "string number":
        args[arg] = str(args[arg])
        reasons.add("type:" + shown(arg))
    elif kind == "invented enum value":
        args[arg], _ = draw(bad_value(specs[arg], (), "allowed"))
        reasons.add("allowed:" + shown(arg))
    elif kind == "bool for int":
        args[arg] = draw(st.booleans())
        reasons.add("type:" + shown(arg))
    elif kind == "dropped argument":
        del args[arg]
        reasons.add(absent + shown(arg))
    else:
        extra = draw(invented_keys(specs))
        args[extra] = draw(json_values())
        arg = extra
        reasons.add("unexpected:" + shown(extra))
    event(f"model mistake: {kind}")
    return Mistake(draw(permuted(args)), kind, arg, frozenset(reasons), echo, base)


def _some_value_of(contract: ToolContract, arg: str) -> st.SearchStrategy[Any]:
    # An optional argument the valid draw left out is put in, so it can be got wrong.
    return valid_value(contract.args[arg])


# --- anything at all -----------------------------------------------------------------------------


def any_calls(table: Table) -> st.SearchStrategy[tuple[Any, Any]]:
    """``(name, args)`` pairs of every sort: good, defective, and arbitrary Python objects.

    Names are the table's, near misses, or not strings at all; args are valid
    or one-defect sets for a real tool, dicts of odd keys and values, dict
    subclasses whose methods raise, huge ints, or any object.
    """
    names = list(check_table(table))
    tool_calls = [st.tuples(st.just(name), valid_args(table, name)
                            | one_defect_args(table, name).map(lambda call: call.args)
                            | _hostile_dicts(valid_args(table, name)))
                  for name in names]
    anything = st.tuples(_any_names(names), _any_objects())
    return st.one_of(*tool_calls, anything) if tool_calls else anything


def _any_names(names: list[str]) -> st.SearchStrategy[Any]:
    strategies: list[st.SearchStrategy[Any]] = [st.text(max_size=12), _any_objects()]
    if names:
        strategies.insert(0, st.sampled_from(names).map(lambda name: name + "_"))
        strategies.insert(0, st.sampled_from(names))
    return st.one_of(strategies)


class _Opaque:
    """An object with no JSON form and a repr that raises."""

    def __repr__(self) -> str:
        raise RuntimeError("this object has no repr")


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("this object cannot be compared")


class _Str(str):
    """A str subclass: equal to a real name, but not of type ``str``."""


class _Int(int):
    """An int subclass: equal to a count, but not of type ``int``."""


_RAISING_METHODS = ("get", "values", "items", "keys", "__iter__", "__getitem__", "__len__",
                    "__contains__")


def _raising_dict_class(method: str) -> type[dict[Any, Any]]:
    def boom(self: object, *args: object, **kwargs: object) -> Any:
        raise RuntimeError(f"{method} raised")

    return type(f"DictWhose_{method.strip('_')}_Raises", (dict,), {method: boom})


_RAISING_DICTS = {method: _raising_dict_class(method) for method in _RAISING_METHODS}


def _hostile_dicts(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Valid argument sets in a dict subclass one of whose methods raises."""
    def wrap(args: dict[str, Any], method: str) -> Any:
        event(f"hostile args: dict subclass whose {method} raises")
        return _RAISING_DICTS[method](args)

    return st.builds(wrap, base, st.sampled_from(_RAISING_METHODS))


def _huge_ints() -> st.SearchStrategy[int]:
    """Ints too long for ``str()`` (over 4300 digits): built when drawn, since even a repr fails."""
    return st.sampled_from([1, -1]).map(lambda sign: sign * 10**5000)


def _any_objects() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6),
        st.binary(max_size=4), st.complex_numbers(max_magnitude=10),
        _huge_ints(),
        st.builds(_Opaque), st.builds(_Unhashable), st.builds(object),
        st.text(max_size=4).map(_Str), st.integers(-3, 3).map(_Int),
    )
    keys = st.one_of(st.text(max_size=6), st.integers(), st.none(), st.booleans(),
                     st.tuples(st.integers()))
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=3) | st.frozensets(st.integers(), max_size=3),
        max_leaves=8,
    )
