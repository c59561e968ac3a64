"""Compile a contract's checks to Python code, once per contract.

An interpreted walk over the spec dicts costs several times a bare tool call;
straight-line code specialised to one contract costs about as much as the call
itself, so the gate can afford to check every call. Arguments and results
share one emitter: they differ in how a failed check is reported, and in
that the argument check also takes the snapshot the body will run on. The
emitter also writes its lines into a larger function: the fast path of a
plain read (``_fastpath``) is these same checks, inlined.

The snapshot is what makes "what was checked is what runs" hold against a
caller's own objects: the args and every container the contract types are
read once, through ``dict``'s and ``list``'s own storage (never a subclass's
``get``, ``__len__`` or ``__iter__``), into plain copies; the checks read the
copies, and the copies are what the body receives. Lengths are checked on the
caller's object before it is copied, so an oversized refusal costs O(1).
"""

from __future__ import annotations

import ast
import itertools
import linecache
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ._contract import Spec, is_closed, is_value_of
from ._formats import STRING_FORMATS
from ._patterns import fullmatcher
from ._reasons import EMPTY, NOT_OBJECT, RANGE, SHAPE, TOO_BIG, shown

__all__ = ["BIG_INT", "UNDECLARED", "UNROLL", "Emitter", "compile_arg_check", "compile_branch",
           "compile_copy", "compile_result_check", "compile_union", "compile_weigh",
           "copies_exactly", "emit_copy", "emit_weigh", "plain_dict", "weighs_fixed"]

Check = Callable[..., str]

#: What a result check answers for a value that keeps its contract but carries
#: parts the contract does not declare (extra keys, untyped items, containers
#: of a subclass): the memo must then verify and copy it the slow way.
UNDECLARED = "+undeclared"

# How each failed check reads in a result reason: a result has no "arguments"
# to name, only the four kinds of distrust.
_RESULT_REASON = {
    "missing": SHAPE,
    "unexpected": SHAPE,
    "type": SHAPE,
    "pattern": SHAPE,
    "format": SHAPE,
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


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING = _Missing()
#: Numbers the functions built, so that each one's source has a ``linecache`` name of its own.
_BUILT = itertools.count(1)
#: Containers of at most this many items or keys (by their contract) are walked by lines
#: written out per length instead of a loop: a loop costs about what four items do.
UNROLL = 4


def plain_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    """A plain copy of a dict, read from its own storage, whatever its class says."""
    return value.copy() if type(value) is dict else dict(dict.items(value))


class Emitter:
    """Accumulates the source lines of one function and the constants they refer to.

    ``fail(reason)`` is the statement that ends a failed check, given the
    reason as a Python expression: ``return <reason>`` for a bare check, an
    envelope for the fast path.
    """

    def __init__(self, fail: Callable[[str], str] = lambda reason: f"return {reason}") -> None:
        self.fail = fail
        self.results = False
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"isfinite": math.isfinite, "MISSING": _MISSING,
                                      "list_len": list.__len__, "list_copy": list.copy,
                                      "dict_len": dict.__len__, "dict_items": dict.items,
                                      "unexpected": _unexpected}
        self._count = 0
        self._reason: Callable[[str], str] = repr
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
        self.emit(indent + 1, self.fail(self._reason(check)))

    def build(self, name: str, params: str, *, asynchronous: bool = False) -> Callable[..., Any]:
        """The function made of the lines emitted so far.

        Its source is registered with ``linecache`` under a name of its own
        (``<agtool name #n>``), as attrs does for the methods it writes: a
        traceback through it shows the very line, and a debugger can step it.
        """
        head = f"{'async ' if asynchronous else ''}def {name}({params}):"
        source = "\n".join([head, *self.lines]) + "\n"
        filename = f"<agtool {name} #{next(_BUILT)}>"
        namespace = dict(self.names)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own source
        # mtime None: ``linecache.checkcache`` keeps the entry, as it keeps a module's.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        built: Callable[..., Any] = namespace[name]
        return built

    # -- arguments -----------------------------------------------------------------------------

    def arg_check(self, specs: Mapping[str, Spec], var: str, indent: int) -> None:
        """Check ``var`` against argument ``specs``, leaving its checked snapshot in ``var``."""
        self.results = False
        known = self.const(frozenset(specs))
        self.emit(indent, f"if type({var}) is not dict:")
        self.emit(indent + 1, f"if not isinstance({var}, dict):")
        self.emit(indent + 2, self.fail(repr(NOT_OBJECT)))
        # Counted on the caller's own storage: a flood of keys is refused unread.
        self.emit(indent + 1, f"if dict_len({var}) > {len(specs)}:")
        self.emit(indent + 2, self.fail(f"unexpected({var}, {known})"))
        self.emit(indent + 1, f"{var} = dict(dict_items({var}))")
        self.emit(indent, f"elif len({var}) > {len(specs)}:")
        self.emit(indent + 1, self.fail(f"unexpected({var}, {known})"))
        self.emit(indent, "else:")
        self.emit(indent + 1, f"{var} = {var}.copy()")
        # A key that only hashes and compares like a name is not that name:
        # fn(**args) would refuse it, so the gate refuses it first.
        self.known_keys(var, known, len(specs), indent,
                        self.fail(f"unexpected({var}, {known})"))
        for arg, spec in specs.items():
            # A defect anywhere inside an argument is reported against the argument.
            self._reason = lambda check, arg=arg: repr(f"{check}:{shown(arg)}")  # type: ignore[misc]
            self.members({arg: spec}, var, indent)

    def known_keys(self, var: str, known: str, most: int, indent: int, failed: str) -> None:
        """``failed`` unless every key of the plain dict ``var`` (at most ``most`` of them)
        is a ``str`` in ``known``: a loop, or for a few, each length's keys unpacked."""
        if most > UNROLL:
            key = self.fresh("k")
            self.emit(indent, f"for {key} in {var}:")
            self.emit(indent + 1, f"if type({key}) is not str or {key} not in {known}:")
            self.emit(indent + 2, failed)
            return
        length = self.fresh("n")
        self.emit(indent, f"{length} = len({var})")
        for count in range(most, 0, -1):
            keys = [self.fresh("k") for _ in range(count)]
            self.emit(indent, f"{'if' if count == most else 'elif'} {length} == {count}:")
            # A plain dict's own keys, unpacked in C: the loop's test for each, in its order.
            self.emit(indent + 1, f"{', '.join(keys)}{',' if count == 1 else ''} = {var}")
            test = " or ".join(f"type({key}) is not str or {key} not in {known}" for key in keys)
            self.emit(indent + 1, f"if {test}:")
            self.emit(indent + 2, failed)

    # -- results -------------------------------------------------------------------------------

    def result_check(self, specs: Mapping[str, Spec], var: str, exact: str, indent: int) -> None:
        """Check a returned ``var``; ``exact`` is left true if every part of it is declared."""
        self.results = True
        self.closed = True  # whatever the args check before it found
        self._reason = lambda check: repr(_RESULT_REASON[check])
        self.emit(indent, f"{exact} = True")
        self._exact = exact
        self._container(var, "dict", indent)
        self.members(specs, var, indent, top_level=True)
        if not self.closed:
            self.emit(indent, f"{exact} = False")

    def _container(self, var: str, kind: str, indent: int) -> None:
        """A returned container's type check: a subclass passes, but is not exact."""
        self.emit(indent, f"if type({var}) is not {kind}:")
        self.guard(indent + 1, f"not isinstance({var}, {kind})", "type")
        # A subclass's storage may not be what its methods showed: copied the slow way.
        self.emit(indent + 1, f"{self._exact} = False")

    # -- shared --------------------------------------------------------------------------------

    def value(self, spec: Spec, var: str, indent: int, top_level: bool = False) -> None:
        if spec.type == "any":
            self.any_value(spec, var, indent)
            return
        if isinstance(spec.item, Mapping) and spec.type == "dict":
            self.fields(spec.item, var, indent)  # a dict with named keys: read as list items are
            return
        if self.results and spec.type in ("list", "dict"):
            self._container(var, spec.type, indent)
        else:
            self.guard(indent, _TYPE_TESTS[spec.type].format(v=var), "type")
        if spec.type in ("list", "dict") and spec.item is None:
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
            self.names["plain_dict"] = plain_dict
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
        self.imported_checks(spec, var, indent)
        if spec.item is not None:
            self._items(spec.item, var, indent)

    # -- keywords read from imported schemas: formats, exclusive bounds, unions ----------------

    def imported_checks(self, spec: Spec, var: str, indent: int) -> None:
        """The checks of ``format`` and of exclusive bounds, after the others of a scalar."""
        if spec.min_exclusive:
            self.guard(indent, f"{var} == {self.const(spec.min)}", "min")
        if spec.max_exclusive:
            self.guard(indent, f"{var} == {self.const(spec.max)}", "max")
        if spec.format is not None:
            checker = self.const(STRING_FORMATS[spec.format])
            self.guard(indent, f"not {checker}({var})", "format")

    def any_value(self, spec: Spec, var: str, indent: int) -> None:
        """A value of type ``any``: any JSON value, or one that keeps its union's branches.

        Each branch is compiled to a function of its own (``compile_branch``), so
        a union nests no blocks here. A refused value is answered with the reason
        of the one branch of its JSON type, if exactly one has it, else ``type``.
        For ``one_of``, branches are counted as JSON Schema counts them, where an
        integral float is an integer too: never more values pass than it lets.
        """
        self.closed = False  # the branch a value keeps is known only at run time
        self.guard(indent, f"not is_value_of('any', {var})", "type")
        self.names["is_value_of"] = is_value_of
        if spec.branches is None:
            if not self.results:
                # Copied one level, as a list without item is: the body gets its own container.
                self.names["plain_dict"] = plain_dict
                self.emit(indent, f"if type({var}) is list:")
                self.emit(indent + 1, f"{var} = list_copy({var})")
                self.emit(indent, f"elif isinstance({var}, dict):")
                self.emit(indent + 1, f"{var} = plain_dict({var})")
            return
        union = self.const(compile_union(spec, self.results))
        reasons = self.const({check: ast.literal_eval(self._reason(check))
                              for check in _RESULT_REASON if check != "empty"})
        outcome = self.fresh("u")
        self.emit(indent, f"{outcome} = {union}({var})")
        self.emit(indent, f"if {outcome}[0] is not None:")
        self.emit(indent + 1, self.fail(f"{reasons}[{outcome}[0]]"))
        if not self.results:
            self.emit(indent, f"{var} = {outcome}[1]")

    def _items(self, inner: Spec | Mapping[str, Spec], var: str, indent: int) -> None:
        item = self.fresh("v")
        # Items that are containers are copied too, in place in the list's own copy.
        copies = not self.results and (not isinstance(inner, Spec)
                                       or inner.type in ("list", "dict"))
        if copies:
            index = self.fresh("i")
            self.emit(indent, f"for {index} in range(len({var})):")
            self.emit(indent + 1, f"{item} = {var}[{index}]")
        else:
            self.emit(indent, f"for {item} in {var}:")
        if isinstance(inner, Spec):
            self.value(inner, item, indent + 1)
        else:
            self.fields(inner, item, indent + 1)
        if copies:
            self.emit(indent + 1, f"{var}[{index}] = {item}")

    def fields(self, specs: Mapping[str, Spec], var: str, indent: int) -> None:
        if self.results:
            self._container(var, "dict", indent)
        else:
            self.guard(indent, f"not isinstance({var}, dict)", "type")
            self.guard(indent, f"dict_len({var}) > {len(specs)}", "unexpected")
            self.names["plain_dict"] = plain_dict
            self.emit(indent, f"{var} = plain_dict({var})")
            key = self.fresh("k")
            self.emit(indent, f"for {key} in {var}:")
            # Arguments are closed: an unnamed key is a typo or a hallucination.
            self.guard(indent + 1, f"type({key}) is not str or {key} not in "
                                   f"{self.const(frozenset(specs))}", "unexpected")
        self.members(specs, var, indent)

    def members(self, specs: Mapping[str, Spec], var: str, indent: int,
                top_level: bool = False) -> None:
        optional: list[str] = []
        for key, spec in specs.items():
            field = self.fresh("v")
            if not spec.required or spec.echo:
                self.emit(indent, f"{field} = {var}.get({key!r}, MISSING)")
            if spec.echo:
                # Present, well-typed, and the very value the caller was given:
                # a missing value on either side is a miss, never a match.
                self.guard(indent, f"{field} is MISSING", "echo")
                self.value(spec, field, indent)
                self.guard(indent, f"echo is None or echo.get({key!r}) != {field}", "echo")
            elif spec.required:
                self.required(var, key, field, indent)
                self.value(spec, field, indent, top_level)
                self.store(spec, var, key, field, indent)
            else:
                optional.append(field)
                if spec.null_is_absent and self.results:
                    # Checked, never rewritten: the null stays, counted as a key it has.
                    self.emit(indent, f"if {field} is not MISSING and {field} is not None:")
                elif spec.null_is_absent:
                    # Null is "not given": the snapshot the body runs on has no such key.
                    self.emit(indent, f"if {field} is None:")
                    self.emit(indent + 1, f"del {var}[{key!r}]")
                    self.emit(indent, f"elif {field} is not MISSING:")
                else:
                    self.emit(indent, f"if {field} is not MISSING:")
                self.value(spec, field, indent + 1, top_level)
                self.store(spec, var, key, field, indent + 1)
        if self.results:
            # Results may carry keys the contract does not name; they pass
            # unchecked, so the value is no longer known to be plain JSON.
            declared = [str(len(specs) - len(optional))]
            declared += [f"({field} is not MISSING)" for field in optional]
            self.emit(indent, f"if len({var}) != {' + '.join(declared)}:")
            self.emit(indent + 1, f"{self._exact} = False")
            # A key that only compares like a declared name would be shared by every copy.
            self.emit(indent, f"elif {self._exact}:")
            if not optional and 0 < len(specs) <= UNROLL:
                # Exact so far: a plain dict of exactly these many keys, unpacked in C.
                keys = [self.fresh("k") for _ in specs]
                self.emit(indent + 1, f"{', '.join(keys)}{',' if len(keys) == 1 else ''} = {var}")
                test = " or ".join(f"type({key}) is not str" for key in keys)
                self.emit(indent + 1, f"if {test}:")
                self.emit(indent + 2, f"{self._exact} = False")
                return
            key = self.fresh("k")
            self.emit(indent + 1, f"for {key} in {var}:")
            self.emit(indent + 2, f"if type({key}) is not str:")
            self.emit(indent + 3, f"{self._exact} = False")

    def required(self, var: str, key: str, field: str, indent: int) -> None:
        """Read a required key; a missing one fails the check."""
        if self.results:
            # .get, not a subscript: a subclass's __missing__ would make up a value.
            self.emit(indent, f"{field} = {var}.get({key!r}, MISSING)")
            self.guard(indent, f"{field} is MISSING", "missing")
            return
        # Arguments are read from the snapshot, a plain dict: only a missing key raises.
        self.emit(indent, "try:")
        self.emit(indent + 1, f"{field} = {var}[{key!r}]")
        self.emit(indent, "except KeyError:")
        self.emit(indent + 1, self.fail(self._reason("missing")))

    def store(self, spec: Spec, var: str, key: str, field: str, indent: int) -> None:
        """Put a container's checked copy where the caller's object was."""
        if not self.results and spec.type in ("list", "dict"):
            self.emit(indent, f"{var}[{key!r}] = {field}")


def compile_arg_check(specs: Mapping[str, Spec]) -> Check:
    """``check(args, echo=None) -> snapshot | reason``.

    The snapshot is a plain ``dict`` with ``str`` keys holding plain copies of
    every typed container, checked: what the body must be called with. A
    reason is a ``str``: ``not_object``, or ``<check>:<arg>``. ``echo`` maps
    each echo argument to the value the model was given; an echo argument that
    is missing, or differs from it, is refused as ``echo:<arg>``.
    """
    emitter = Emitter()
    emitter.arg_check(specs, "value", 1)
    emitter.emit(1, "return value")
    check: Check = emitter.build("check_args", "value, echo=None")
    return check


def compile_branch(spec: Spec, results: bool) -> Callable[[Any], tuple[str | None, Any]]:
    """``check(value) -> (None, snapshot) | (check, None)`` for one branch of a union.

    ``check`` is the bare name of the check that failed (``type``, ``min``, ...);
    for arguments, ``snapshot`` is the value's checked copy, as ``compile_arg_check``
    makes one. A branch's lists may be empty unless its ``min_len`` says otherwise.
    """
    emitter = Emitter(lambda reason: f"return ({reason}, None)")
    emitter.results = results
    emitter._exact = "exact"
    emitter.emit(1, "exact = True")
    emitter.emit(1, "try:")
    emitter.value(spec, "value", 2)
    emitter.emit(1, "except Exception:  # a value whose own methods raise keeps no branch")
    emitter.emit(2, "return ('type', None)")
    emitter.emit(1, "return (None, value)")
    check: Callable[[Any], tuple[str | None, Any]] = emitter.build("check_branch", "value")
    return check


def compile_union(spec: Spec, results: bool) -> Callable[[Any], tuple[str | None, Any]]:
    """``check(value)`` for a union (type ``any`` with branches): ``(None, snapshot)`` or
    ``(check, None)``, as the gate reads the value."""
    branches = spec.branches or ()
    checks = [(branch, compile_branch(branch, results)) for branch in branches]
    exactly_one = spec.one_of

    def check_union(value: Any) -> tuple[str | None, Any]:
        kept: list[Any] = []
        failures: list[str] = []
        # For oneOf, a branch JSON Schema would count is counted: there 1.0 is an integer,
        # so a float another branch keeps would make two, and the value is refused.
        as_json_schema = _integral(value) if exactly_one else value
        for branch, check in checks:
            problem, snapshot = check(value)
            if problem is None:
                kept.append(snapshot)
                if not exactly_one:
                    break
            elif as_json_schema is not value and check(as_json_schema)[0] is None:
                kept.append(None)  # counted, never chosen: the gate's own int is exact
            elif is_value_of(branch.type, value):
                failures.append(problem)  # of the right JSON type: its own reason is news
        if (len(kept) == 1 and kept[0] is not None) or (kept and not exactly_one):
            return None, kept[0]
        if kept == [None]:
            return "type", None  # kept only as JSON Schema reads 1.0: no branch of the gate
        if kept:
            return "type", None  # one_of: the value keeps several branches
        return (failures[0] if len(failures) == 1 else "type"), None

    return check_union


def _integral(value: Any, depth: int = 0) -> Any:
    """``value`` with each integral float an int (``1.0`` -> ``1``), or ``value`` itself."""
    if type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value)
    if depth > 32:  # as deep as any contract reads; deeper parts stay as they are
        return value
    if type(value) is list:
        items = [_integral(item, depth + 1) for item in value]
        changed = any(new is not old for new, old in zip(items, value, strict=True))
        return items if changed else value
    if type(value) is dict:
        pairs = {key: _integral(item, depth + 1) for key, item in value.items()}
        return pairs if any(pairs[key] is not value[key] for key in value) else value
    return value


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
    emitter = Emitter()
    emitter.emit(1, "try:")
    emitter.result_check(specs, "value", "exact", 2)
    emitter.emit(1, "except Exception:  # a value whose own methods raise has no shape to trust")
    emitter.emit(2, f"return {SHAPE!r}")
    emitter.emit(1, f"return '' if exact else {UNDECLARED!r}")
    check: Check = emitter.build("check_result", "value")
    return check


def compile_copy(specs: Mapping[str, Spec]) -> Callable[[Any], Any] | None:
    """``copy(value)``: a fresh copy of every container in a value the result check
    found exact (plain ``dict`` and ``list`` all through, every key declared), or
    ``None`` for a contract with untyped parts. Scalars are immutable: shared.
    """
    if not copies_exactly(specs):
        return None
    emitter = Emitter()
    emit_copy(emitter, specs, "value", "value", 1)
    emitter.emit(1, "return value")
    copy: Callable[[Any], Any] = emitter.build("copy_result", "value")
    return copy


def compile_weigh(specs: Mapping[str, Spec]) -> Callable[[Any], int] | None:
    """``weigh(value)``: the weight ``emit_weigh`` gives a copy ``compile_copy`` made, for
    the gate's general steps (its compiled reads weigh in place); ``None`` where there is
    no such copier."""
    if not copies_exactly(specs):
        return None
    emitter = Emitter()
    emitter.emit(1, "weight = 0")
    emit_weigh(emitter, specs, "value", "weight", 1)
    emitter.emit(1, "return weight")
    weigh: Callable[[Any], int] = emitter.build("weigh_result", "value")
    return weigh


def copies_exactly(specs: Mapping[str, Spec]) -> bool:
    """Whether ``compile_copy`` (``emit_copy``) can copy a value of ``specs`` found exact."""
    return all(is_closed(spec) for spec in specs.values())


def emit_copy(emitter: Emitter, specs: Mapping[str, Spec], source: str, target: str,
              indent: int) -> None:
    """Lines leaving in ``target`` a fresh copy of the exact value in ``source``: the body
    of ``compile_copy``, also written straight into a compiled read (``_fastpath``)."""
    emitter.emit(indent, f"{target} = {source}.copy()")
    _copy_fields(emitter, specs, target, indent)


def _copy_fields(emitter: Emitter, specs: Mapping[str, Spec], var: str, indent: int) -> None:
    for key, spec in specs.items():
        if spec.type not in ("list", "dict"):
            continue
        field = emitter.fresh("v")
        if spec.required:
            emitter.emit(indent, f"{field} = {var}[{key!r}]")
            _copy_container(emitter, spec, field, indent)
            emitter.emit(indent, f"{var}[{key!r}] = {field}")
        else:
            # None for a key it lacks, or for the null an optional key may hold: no copy.
            emitter.emit(indent, f"{field} = {var}.get({key!r})")
            emitter.emit(indent, f"if {field} is not None:")
            _copy_container(emitter, spec, field, indent + 1)
            emitter.emit(indent + 1, f"{var}[{key!r}] = {field}")


def _flat(item: Spec | Mapping[str, Spec] | None) -> bool:
    """Whether a list item of this spec is copied by its own ``.copy()`` (no containers in
    it), or needs no copy at all (a scalar, ``None``: checked, and immutable)."""
    if isinstance(item, Spec):
        return item.type != "dict" and (item.type != "list" or item.item is None
                                        or _scalar(item.item))
    return item is None or all(_scalar(field) for field in item.values())


def _scalar(spec: Spec | Mapping[str, Spec]) -> bool:
    return isinstance(spec, Spec) and spec.type not in ("list", "dict")


def _copy_container(emitter: Emitter, spec: Spec, var: str, indent: int) -> None:
    """Copy the list or named-key dict in ``var``, and each container inside it."""
    item = spec.item
    if spec.type == "dict":
        emitter.emit(indent, f"{var} = {var}.copy()")
        _copy_fields(emitter, item, var, indent)  # type: ignore[arg-type]  # closed: named
        return
    if item is None or _scalar(item):
        emitter.emit(indent, f"{var} = {var}.copy()")
        return
    if _flat(item) and spec.max_len is not None and 0 < spec.max_len <= UNROLL:
        _copy_unrolled(emitter, var, spec.max_len, indent)
        return
    emitter.emit(indent, f"{var} = {var}.copy()")
    index, element = emitter.fresh("i"), emitter.fresh("v")
    emitter.emit(indent, f"for {index} in range(len({var})):")
    emitter.emit(indent + 1, f"{element} = {var}[{index}]")
    if isinstance(item, Spec):
        _copy_container(emitter, item, element, indent + 1)
    else:
        emitter.emit(indent + 1, f"{element} = {element}.copy()")
        _copy_fields(emitter, item, element, indent + 1)
    emitter.emit(indent + 1, f"{var}[{index}] = {element}")


def _copy_unrolled(emitter: Emitter, var: str, max_len: int, indent: int) -> None:
    """A list of at most ``max_len`` flat containers, copied by one display per length
    (the result check has refused a longer one; the loop is there only for the empty)."""
    length = emitter.fresh("n")
    emitter.emit(indent, f"{length} = len({var})")
    for count in range(max_len, 0, -1):
        items = ", ".join(f"{var}[{index}].copy()" for index in range(count))
        emitter.emit(indent, f"{'if' if count == max_len else 'elif'} {length} == {count}:")
        emitter.emit(indent + 1, f"{var} = [{items}]")
    item = emitter.fresh("v")
    emitter.emit(indent, "else:")
    emitter.emit(indent + 1, f"{var} = [{item}.copy() for {item} in {var}]")


#: Ints of this magnitude or more are weighed by their size, not as 8 bytes.
BIG_INT = 1 << 63


def emit_weigh(emitter: Emitter, specs: Mapping[str, Spec], source: str, target: str,
               indent: int) -> None:
    """Lines adding to ``target`` the weight of the exact value in ``source`` (a copy made by
    ``emit_copy``), for the memo's byte bound: 8 bytes for each value in it (the value
    itself, each key's value and each item: a reference, or a scalar's bytes), plus each
    string's length and each huge int's size. The names are the contract's, not counted."""
    emitter.names.update(WEIGH_BIG=BIG_INT, weigh_size=sys.getsizeof, weigh_any=_weigh_any)
    emitter.emit(indent, f"{target} += 8 + {_slots(specs, source)}")
    _weigh_fields(emitter, specs, source, target, indent)


def _slots(specs: Mapping[str, Spec], var: str) -> str:
    """The 8 bytes of each value in ``var``, a dict of ``specs`` found exact: a constant
    when every key is required (an exact value holds each, and no other)."""
    if all(spec.required for spec in specs.values()):
        return str(8 * len(specs))
    return f"8 * len({var})"


def _weigh_fields(emitter: Emitter, specs: Mapping[str, Spec], var: str, target: str,
                  indent: int) -> None:
    for key, spec in specs.items():
        if weighs_fixed(spec):
            continue  # its 8 bytes are counted by its dict
        if spec.required and spec.type == "str":
            emitter.emit(indent, f"{target} += len({var}[{key!r}])")
            continue
        field = emitter.fresh("w")
        if spec.required:
            emitter.emit(indent, f"{field} = {var}[{key!r}]")
            _weigh_inside(emitter, spec, field, target, indent)
        else:  # None for a key it lacks, or for the null an optional key may hold
            emitter.emit(indent, f"{field} = {var}.get({key!r})")
            emitter.emit(indent, f"if {field} is not None:")
            _weigh_inside(emitter, spec, field, target, indent + 1)


def weighs_fixed(spec: Spec) -> bool:
    """Whether every value of ``spec`` weighs its 8 bytes alone (``emit_weigh``): a float,
    a bool, or an int the contract bounds within 64 bits."""
    if spec.type == "int":
        return (spec.min is not None and spec.max is not None
                and spec.min >= -BIG_INT and spec.max < BIG_INT)
    return spec.type in ("float", "bool")


def _weigh_inside(emitter: Emitter, spec: Spec, var: str, target: str, indent: int) -> None:
    """Add what ``var``, a value of ``spec``, holds beyond its own 8 bytes."""
    if spec.type == "str":
        emitter.emit(indent, f"{target} += len({var})")
    elif spec.type == "int":  # one side of the range is enough where the contract bounds one
        huge = (f"{var} >= WEIGH_BIG" if spec.min is not None and spec.min >= -BIG_INT else
                f"{var} < -WEIGH_BIG" if spec.max is not None and spec.max < BIG_INT else
                f"not -WEIGH_BIG <= {var} < WEIGH_BIG")
        emitter.emit(indent, f"if {huge}:")
        emitter.emit(indent + 1, f"{target} += weigh_size({var})")
    elif spec.type == "dict" and isinstance(spec.item, Mapping):
        emitter.emit(indent, f"{target} += {_slots(spec.item, var)}")
        _weigh_fields(emitter, spec.item, var, target, indent)
    elif spec.type == "list" and isinstance(spec.item, Spec) and spec.item.type == "str":
        emitter.emit(indent, f"{target} += 8 * len({var}) + sum(map(len, {var}))")
    elif spec.type == "list" and isinstance(spec.item, Mapping):  # of dicts with named keys
        element = emitter.fresh("w")
        slots = _slots(spec.item, element)
        if slots.isdigit():  # each item's own values: a constant, counted with the items
            emitter.emit(indent, f"{target} += {8 + int(slots)} * len({var})")
        else:
            emitter.emit(indent, f"{target} += 8 * len({var})")
        inner = Emitter()  # a dry run: does any value in an item weigh more than 8 bytes?
        _weigh_fields(inner, spec.item, element, target, indent + 1)
        if inner.lines or not slots.isdigit():
            emitter.emit(indent, f"for {element} in {var}:")
            if not slots.isdigit():
                emitter.emit(indent + 1, f"{target} += {slots}")
            _weigh_fields(emitter, spec.item, element, target, indent + 1)
    elif spec.type == "list" and isinstance(spec.item, Spec):
        emitter.emit(indent, f"{target} += 8 * len({var})")
        item = spec.item
        if weighs_fixed(item):
            return
        element = emitter.fresh("w")
        emitter.emit(indent, f"for {element} in {var}:")
        _weigh_inside(emitter, item, element, target, indent + 1)
    elif spec.type not in ("float", "bool"):  # an untyped list, or what else a contract adds
        emitter.emit(indent, f"{target} += weigh_any({var})")


def _weigh_any(value: object) -> int:
    """What ``emit_weigh``'s lines add for ``value`` where no spec says what it holds."""
    if type(value) is str:
        return len(value)
    if type(value) is int:
        return 0 if -BIG_INT <= value < BIG_INT else sys.getsizeof(value)
    total = 0
    if type(value) is list:
        for item in value:
            total += 8 + _weigh_any(item)
    elif type(value) is dict:
        for key, item in value.items():
            total += 8 + _weigh_any(key) + _weigh_any(item)
    return total
