"""Compile a contract's checks to Python code, once per contract.

An interpreted walk over the spec dicts costs several times a bare tool call;
straight-line code specialised to one contract costs about as much as the call
itself, so the gate can afford to check every call. Arguments and results
share one emitter: they differ in how a failed check is reported, and in
that the argument check also takes the snapshot the body will run on.

The snapshot is what makes "what was checked is what runs" hold against a
caller's own objects: the args and every container the contract types are
read once, through ``dict``'s and ``list``'s own storage (never a subclass's
``get``, ``__len__`` or ``__iter__``), into plain copies; the checks read the
copies, and the copies are what the body receives. Lengths are checked on the
caller's object before it is copied, so an oversized refusal costs O(1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ._contract import Spec
from ._patterns import fullmatcher
from ._reasons import EMPTY, NOT_OBJECT, RANGE, SHAPE, TOO_BIG, shown

__all__ = ["UNDECLARED", "compile_arg_check", "compile_result_check", "plain_dict"]

Check = Callable[..., str]

#: What a result check answers for a value that keeps its contract but carries
#: parts the contract does not declare (extra keys, untyped items): the memo
#: must then verify its copy, since only declared parts are known to be JSON.
UNDECLARED = "+undeclared"

# How each failed check reads in a result reason: a result has no "arguments"
# to name, only the four kinds of distrust.
_RESULT_REASON = {
    "missing": SHAPE,
    "unexpected": SHAPE,
    "type": SHAPE,
    "pattern": SHAPE,
    "allowed": RANGE,
    "min": RANGE,
    "max": RANGE,
    "min_len": RANGE,
    "max_len": TOO_BIG,
    "empty": EMPTY,
}

_TYPE_TESTS = {
    "str": "type({v}) is not str",
    "int": "type({v}) is not int",
    "float": "type({v}) is not int and (type({v}) is not float or not isfinite({v}))",
    "bool": "type({v}) is not bool",
    "list": "not isinstance({v}, list)",
    "dict": "not isinstance({v}, dict)",
}


class _Emitter:
    """Accumulates source lines and the constants they refer to."""

    def __init__(self, fail: Callable[[str], str], results: bool) -> None:
        self.fail = fail
        self.results = results
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"isfinite": math.isfinite, "MISSING": _MISSING,
                                      "list_len": list.__len__, "list_copy": list.copy,
                                      "dict_len": dict.__len__, "plain_dict": plain_dict}
        self._count = 0
        #: Whether the contract types every part a valid value can have but extra keys.
        self.closed = True

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, value: object) -> str:
        name = self.fresh("C")
        self.names[name] = value
        return name

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def guard(self, indent: int, condition: str, check: str) -> None:
        self.emit(indent, f"if {condition}:")
        self.emit(indent + 1, self.fail(check))

    def value(self, spec: Spec, var: str, indent: int, top_level: bool = False) -> None:
        self.guard(indent, _TYPE_TESTS[spec.type].format(v=var), "type")
        if spec.type == "dict" or (spec.type == "list" and spec.item is None):
            self.closed = False
        min_len = spec.min_len
        if self.results and top_level and spec.type == "list" and min_len is None:
            min_len = 1  # a returned list is what an answer is built on: empty unless said so
        if spec.max_len is not None:
            # Before any item is looked at: an oversized value is refused unwalked, uncopied.
            length = f"list_len({var})" if spec.type == "list" and not self.results else \
                f"len({var})"
            self.guard(indent, f"{length} > {spec.max_len}", "max_len")
        if not self.results and spec.type in ("list", "dict"):
            # The copy is what is checked from here on and what the body receives.
            copy = "list_copy" if spec.type == "list" else "plain_dict"
            self.emit(indent, f"{var} = {copy}({var})")
        if min_len:
            if self.results:
                # len, not truth: a list subclass may say it is true with no items.
                self.guard(indent, f"len({var}) == 0", "empty")
            if not self.results or min_len > 1:
                self.guard(indent, f"len({var}) < {min_len}", "min_len")
        if spec.allowed is not None:
            self.guard(indent, f"{var} not in {self.const(frozenset(spec.allowed))}", "allowed")
        if spec.min is not None:
            self.guard(indent, f"{var} < {self.const(spec.min)}", "min")
        if spec.max is not None:
            self.guard(indent, f"{var} > {self.const(spec.max)}", "max")
        if spec.pattern is not None:
            matches = self.const(fullmatcher(spec.pattern))
            self.guard(indent, f"{matches}({var}) is None", "pattern")
        if spec.item is not None:
            item = self.fresh("v")
            # Items that are containers are copied too, in place in the list's own copy.
            copies = not self.results and (not isinstance(spec.item, Spec)
                                           or spec.item.type in ("list", "dict"))
            if copies:
                index = self.fresh("i")
                self.emit(indent, f"for {index} in range(len({var})):")
                self.emit(indent + 1, f"{item} = {var}[{index}]")
            else:
                self.emit(indent, f"for {item} in {var}:")
            if isinstance(spec.item, Spec):
                self.value(spec.item, item, indent + 1)
            else:
                self.fields(spec.item, item, indent + 1)
            if copies:
                self.emit(indent + 1, f"{var}[{index}] = {item}")

    def fields(self, specs: Mapping[str, Spec], var: str, indent: int) -> None:
        self.guard(indent, f"not isinstance({var}, dict)", "type")
        if not self.results:
            self.guard(indent, f"dict_len({var}) > {len(specs)}", "unexpected")
            self.emit(indent, f"{var} = plain_dict({var})")
            key = self.fresh("k")
            self.emit(indent, f"for {key} in {var}:")
            # A key that only hashes and compares like a name is not that name.
            self.guard(indent + 1, f"type({key}) is not str", "type")
            # Arguments are closed: an unnamed key is a typo or a hallucination.
            self.guard(indent, f"not {self.const(frozenset(specs))}.issuperset({var})",
                       "unexpected")
        self.members(specs, var, indent)

    def members(self, specs: Mapping[str, Spec], var: str, indent: int,
                top_level: bool = False) -> None:
        optional: list[str] = []
        for key, spec in specs.items():
            field = self.fresh("v")
            self.emit(indent, f"{field} = {var}.get({key!r}, MISSING)")
            if spec.echo:
                # Present, well-typed, and the very value the caller was given:
                # a missing value on either side is a miss, never a match.
                self.guard(indent, f"{field} is MISSING", "echo")
                self.value(spec, field, indent)
                self.guard(indent, f"echo is None or echo.get({key!r}) != {field}", "echo")
            elif spec.required:
                self.guard(indent, f"{field} is MISSING", "missing")
                self.value(spec, field, indent, top_level)
                self.store(spec, var, key, field, indent)
            else:
                optional.append(field)
                self.emit(indent, f"if {field} is not MISSING:")
                self.value(spec, field, indent + 1, top_level)
                self.store(spec, var, key, field, indent + 1)
        if self.results:
            # Results may carry keys the contract does not name; they pass
            # unchecked, so the value is no longer known to be plain JSON.
            declared = [str(len(specs) - len(optional))]
            declared += [f"({field} is not MISSING)" for field in optional]
            self.emit(indent, f"if len({var}) != {' + '.join(declared)}:")
            self.emit(indent + 1, "exact = False")


    def store(self, spec: Spec, var: str, key: str, field: str, indent: int) -> None:
        """Put a container's checked copy where the caller's object was."""
        if not self.results and spec.type in ("list", "dict"):
            self.emit(indent, f"{var}[{key!r}] = {field}")


def plain_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    """A plain copy of a dict, read from its own storage, whatever its class says."""
    return value.copy() if type(value) is dict else dict(dict.items(value))


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()


def _build(emitter: _Emitter, name: str, header: list[str], tail: str = "''") -> Check:
    source = "\n".join([f"def {name}(value, echo=None):", *header, *emitter.lines,
                        f"    return {tail}"])
    namespace = dict(emitter.names)
    exec(compile(source, f"<agtool {name}>", "exec"), namespace)  # noqa: S102 - our own source
    check: Check = namespace[name]
    return check


def compile_arg_check(specs: Mapping[str, Spec]) -> Check:
    """``check(args, echo=None) -> snapshot | reason``.

    The snapshot is a plain ``dict`` with ``str`` keys holding plain copies of
    every typed container, checked: what the body must be called with. A
    reason is a ``str``: ``not_object``, or ``<check>:<arg>``. ``echo`` maps
    each echo argument to the value the model was given; an echo argument that
    is missing, or differs from it, is refused as ``echo:<arg>``.
    """
    emitter = _Emitter(lambda check: "", results=False)
    for arg, spec in specs.items():
        # A defect anywhere inside an argument is reported against the argument.
        emitter.fail = lambda check, arg=arg: f"return {f'{check}:{shown(arg)}'!r}"  # type: ignore[misc]
        emitter.members({arg: spec}, "value", 1)
    emitter.names.update(KNOWN=frozenset(specs), unexpected=_unexpected)
    header = [
        "    if not isinstance(value, dict):",
        f"        return {NOT_OBJECT!r}",
        # Counted on the caller's own storage: a flood of keys is refused unread.
        f"    if dict_len(value) > {len(specs)}:",
        "        return unexpected(value, KNOWN)",
        "    value = plain_dict(value)",
        # A key that only hashes and compares like a name is not that name:
        # fn(**args) would refuse it, so the gate refuses it first.
        "    for key in value:",
        "        if type(key) is not str:",
        f"            return {NOT_OBJECT!r}",
        "    if not KNOWN.issuperset(value):",
        "        return unexpected(value, KNOWN)",
    ]
    return _build(emitter, "check_args", header, "value")


def _unexpected(args: dict[object, object], known: frozenset[str]) -> str:
    """``unexpected:<the first unknown name>``; reads at most ``len(known) + 1`` keys."""
    for key in dict.__iter__(args):
        if type(key) is not str:
            return NOT_OBJECT
        if key not in known:
            return f"unexpected:{shown(key)}"
    return NOT_OBJECT  # unreachable for a dict with more keys than there are names


def compile_result_check(specs: Mapping[str, Spec]) -> Check:
    """``check(value) -> reason``: ``""``, ``UNDECLARED``, or shape, empty, too_big, range.

    ``UNDECLARED`` is a valid value with parts its contract does not declare.
    """
    emitter = _Emitter(lambda check: f"return {_RESULT_REASON[check]!r}", results=True)
    emitter.members(specs, "value", 1, top_level=True)
    header = ["    if not isinstance(value, dict):", f"        return {SHAPE!r}",
              "    exact = True"]
    if not emitter.closed:
        return _build(emitter, "check_result", header, repr(UNDECLARED))
    return _build(emitter, "check_result", header, f"'' if exact else {UNDECLARED!r}")
