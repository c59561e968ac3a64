"""The contract dialect, checked once when a table is registered.

A table is a plain dict, kept as a value that programs read::

    {name: {"fn": callable,
            "args": {arg: spec},
            "returns": {key: spec},
            "description": "optional text for the model",
            # optional, for tools that touch the world (see ``EFFECTS``, ``RISKS``):
            "effect": "read" | "write", "risk": one of RISKS,
            "key_args": [arg, ...], "timeout": seconds,
            # optional, for write tools: asks the outside world whether a write whose
            # outcome is unknown took effect (its value) or not (None), by its args
            "reconcile": callable,
            # optional: exceptions the body may raise on valid arguments (the harness passes them)
            "raises": (LookupError, ...),
            "source": "where the output comes from", "trust": "trusted" | "untrusted",
            # optional, for read tools: seconds a successful value may be served
            # from the gate's memo (0: never remembered; absent: the gate's default)
            "ttl": seconds,
            # optional, added by the importer for what a JSON Schema says beyond the
            # dialect (``multipleOf``, ``not``, a closed returned object, ...): run after
            # the specs' checks, each a callable (see ``SCHEMA_CHECK_KEYS``)
            "schema_checks": {"args": callable, "returns": callable}}}

A spec is a dict with ``type`` (one of ``TYPES``) and optionally ``required``
(bool, default ``True``), ``nullable``, ``allowed``, ``min``, ``max``,
``min_len``, ``max_len``, ``pattern`` (which all of a str must match, read by
RE2: see ``agtool._patterns``), ``item``, ``description``, ``echo`` and
``sensitive`` (redacted before a model or a log sees it), ``format`` (a str
checked by one of ``STRING_FORMATS``: ``date``, ``email``, ``uuid``, ...),
``min_exclusive`` / ``max_exclusive`` (``min`` / ``max`` itself refused too).
Type ``any`` is any JSON value but null (null is "not given", as everywhere);
with ``any_of`` (or ``one_of``) it is a value that keeps at least one (exactly
one) of the listed specs, each of a concrete type: a union, JSON Schema's
``anyOf`` / ``oneOf``. ``parse_entry`` turns
an entry into a frozen ``ToolContract`` or raises ``ContractError`` naming the
tool, the field and the problem.

Null means absent. For an optional key (``required: False``: an argument, a
returned key, or a named key of a list item or a dict) a ``None`` value is
read as the key not given: the args snapshot the body runs on has no such key
(so the body's own default applies, and ``{"x": None}`` is keyed, digested
and recorded as ``{}``), and a returned null is not checked against the
spec (a result is checked, never rewritten: the null stays in the value
handed back). ``nullable: False`` (a bool, only on an optional non-echo
spec) refuses null there as a wrong type. Null is never a value anywhere
else: a required key, an echo argument or a list item that is null is
refused as ``type``.

``item`` is the spec of a list's items, or a dict of named keys
(``{key: spec}``) for a list of objects; on a ``dict`` it must be named keys,
and the dict is then closed like the arguments: its required keys present,
no other key, each value checked by its spec. Such a dict reports a defect
inside it as its list items do, against the top-level argument
(``missing:arg``, ``unexpected:arg``, ``type:arg``). Named keys nest, through
lists and dicts, up to ``MAX_ITEM_DEPTH`` levels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ._errors import ContractError
from ._formats import STRING_FORMATS
from ._patterns import fullmatcher, pattern_problem

__all__ = [
    "EFFECTS",
    "ENTRY_KEYS",
    "MAX_ITEM_DEPTH",
    "RISKS",
    "SCHEMA_CHECK_KEYS",
    "SPEC_KEYS",
    "TRUST_LEVELS",
    "TYPES",
    "Spec",
    "ToolContract",
    "check_table",
    "expected_raises",
    "is_closed",
    "parse_entry",
]

TYPES = ("str", "int", "float", "bool", "list", "dict", "any")
SPEC_KEYS = frozenset(
    {"type", "required", "nullable", "allowed", "min", "max", "min_len", "max_len", "pattern",
     "item", "description", "echo", "sensitive", "format", "min_exclusive", "max_exclusive",
     "any_of", "one_of"}
)
ENTRY_KEYS = frozenset({"fn", "args", "returns", "description", "effect", "risk", "key_args",
                        "timeout", "source", "trust", "ttl", "reconcile", "raises",
                        "schema_checks"})
#: What ``schema_checks`` may hold: ``args(snapshot)`` answers ``None`` when the checked
#: args keep the source schema, else the argument that breaks it (``""``: the object as
#: a whole); ``returns(value)`` answers whether a returned value keeps it.
SCHEMA_CHECK_KEYS = ("args", "returns")
#: What a tool does to the world. Write tools are never memoized; they run once per
#: idempotency key.
EFFECTS = ("read", "write")
#: Risk levels, least to most: the first two are reads, the rest writes. A caller's
#: scope names the levels it may use; the last two also need an approval of the exact args.
RISKS = ("read_public", "read_sensitive", "reversible_write", "external_effect", "irreversible")
#: How far a tool's output may be believed: ``untrusted`` output is handed to a
#: model marked as data from its source, never as instructions.
TRUST_LEVELS = ("trusted", "untrusted")
#: The source of a tool whose entry names none: the system's own data.
INTERNAL_SOURCE = "internal"
#: How deep ``item`` specs may nest; each level is a loop in the compiled check,
#: and Python refuses more than 20 nested blocks in one function.
MAX_ITEM_DEPTH = 8

# Which optional keys make sense for which types: a key outside its types is
# refused rather than ignored, because an ignored bound is a hole in the gate.
_KEY_TYPES = {
    "allowed": {"str", "int", "float", "bool"},
    "min": {"int", "float"},
    "max": {"int", "float"},
    "min_len": {"str", "list"},
    "max_len": {"str", "list"},
    "pattern": {"str"},
    "item": {"list", "dict"},
    "echo": {"str"},
    "format": {"str"},
    "min_exclusive": {"int", "float"},
    "max_exclusive": {"int", "float"},
    "any_of": {"any"},
    "one_of": {"any"},
}
#: Spec keys a union's branch may not carry: a branch is a value's shape, not a key's.
_BRANCH_KEYS_REFUSED = ("required", "nullable", "echo", "sensitive")

ItemSpec = Union["Spec", dict[str, "Spec"], None]


@dataclass(frozen=True)
class Spec:
    """One argument's or one returned key's contract, validated."""

    type: str
    required: bool = True
    #: Whether null, given for this key when it is optional, means "not given".
    nullable: bool = True
    allowed: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    min_len: int | None = None
    max_len: int | None = None
    pattern: str | None = None
    item: ItemSpec = None
    description: str = ""
    #: An argument the model must copy verbatim from its input (a request id).
    echo: bool = False
    #: Redacted before a model or a call record sees it.
    sensitive: bool = False
    #: A str's format, one of ``STRING_FORMATS``, checked exactly.
    format: str | None = None
    #: Whether ``min`` (``max``) itself is refused too: JSON Schema's exclusive bounds.
    min_exclusive: bool = False
    max_exclusive: bool = False
    #: For type ``any``: the specs a value must keep at least one of (``one_of``:
    #: exactly one of); ``None``: any JSON value.
    branches: tuple[Spec, ...] | None = None
    one_of: bool = False

    @property
    def null_is_absent(self) -> bool:
        """Whether a null given for this key is read as the key not given."""
        return self.nullable and not self.required and not self.echo


@dataclass(frozen=True)
class ToolContract:
    """A validated table entry. ``fn`` is the function seen at validation time."""

    name: str
    fn: Callable[..., Any]
    args: dict[str, Spec]
    returns: dict[str, Spec]
    description: str = ""
    effect: str = "read"
    risk: str = "read_public"
    #: Arguments whose values name the business object of a write (an order id):
    #: with the run id and step id they make the idempotency key. Empty: all args.
    key_args: tuple[str, ...] = ()
    #: Seconds the body may take before the call answers ``timeout``; ``None``: no limit.
    timeout: float | None = None
    source: str = INTERNAL_SOURCE
    trust: str = "trusted"
    #: Seconds a read's successful value may be served from the gate's memo;
    #: ``0``: never remembered; ``None`` (absent): the gate's default.
    ttl: float | None = None
    #: For a write: called with the same args when a call of it finds its key's outcome
    #: unknown (an interrupted body, a crashed owner). It answers the write's value if the
    #: effect happened (looked up by the business key) or ``None`` if it did not, and the
    #: body then runs. ``None`` (absent): an unknown outcome waits for an operator.
    reconcile: Callable[..., Any] | None = None
    #: The source schema's checks beyond the specs (``schema_checks``), or ``None``.
    args_schema_check: Callable[[dict[str, Any]], str | None] | None = None
    result_schema_check: Callable[[Any], bool] | None = None

    @property
    def needs_approval(self) -> bool:
        """Whether each call needs an approval bound to its exact arguments."""
        return self.risk in ("external_effect", "irreversible")


def is_value_of(type_name: str, value: object) -> bool:
    """Whether ``value`` is of contract type ``type_name``.

    Scalars are matched by exact type, so ``True`` is never an int and ``"2"``
    never a number; an int is a float; floats must be finite (JSON has no NaN).
    """
    kind = type(value)
    if type_name == "str":
        return kind is str
    if type_name == "int":
        return kind is int
    if type_name == "float":
        return kind is int or (kind is float and math.isfinite(value))  # type: ignore[arg-type]
    if type_name == "bool":
        return kind is bool
    if type_name == "list":
        return isinstance(value, list)
    if type_name == "any":
        return isinstance(value, (str, int, list, dict)) or (
            kind is float and math.isfinite(value))  # type: ignore[arg-type]
    return isinstance(value, dict)


def check_table(table: object) -> dict[str, ToolContract]:
    """Validate a whole table; return its contracts by name or raise ``ContractError``."""
    if not isinstance(table, Mapping):
        raise ContractError("", "", f"a contract table must be a dict, got {type(table).__name__}")
    return {name: parse_entry(name, entry) for name, entry in table.items()}


def parse_entry(name: object, entry: object) -> ToolContract:
    """Validate one table entry; raise ``ContractError`` naming what is wrong."""
    if not isinstance(name, str) or not name:
        raise ContractError(repr(name), "", "a tool name must be a non-empty str")
    if not isinstance(entry, Mapping):
        raise ContractError(name, "", f"an entry must be a dict, got {type(entry).__name__}")
    unknown = sorted(map(str, set(entry) - ENTRY_KEYS))
    if unknown:
        raise ContractError(name, unknown[0], f"unknown entry key; expected {sorted(ENTRY_KEYS)}")
    for key in ("fn", "args", "returns"):
        if key not in entry:
            raise ContractError(name, key, "is missing")
    fn = entry["fn"]
    if not callable(fn):
        raise ContractError(name, "fn", f"must be callable, got {type(fn).__name__}")
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise ContractError(name, "description", "must be a str")
    returns = _parse_specs(name, "returns", entry["returns"])
    echoed = [key for key in entry["returns"] if returns[key].echo]
    if echoed:
        raise ContractError(name, f"returns.{echoed[0]}.echo", "applies to arguments only")
    args = _parse_specs(name, "args", entry["args"])
    effect, risk = _effect_and_risk(name, entry)
    source = entry.get("source", INTERNAL_SOURCE)
    if not isinstance(source, str) or not source:
        raise ContractError(name, "source", f"must be a non-empty str, got {source!r}")
    trust = entry.get("trust", "trusted" if source == INTERNAL_SOURCE else "untrusted")
    if trust not in TRUST_LEVELS:
        raise ContractError(name, "trust", f"must be one of {list(TRUST_LEVELS)}, got {trust!r}")
    expected_raises(entry, name)  # checked here; not part of the contract the gate keeps
    return ToolContract(
        name=name,
        fn=fn,
        args=args,
        returns=returns,
        description=description,
        effect=effect,
        risk=risk,
        key_args=_key_args(name, entry, effect, args),
        timeout=_timeout(name, entry),
        source=source,
        trust=trust,
        ttl=_ttl(name, entry, effect),
        reconcile=_reconcile(name, entry, effect),
        **_schema_checks(name, entry),
    )


def _schema_checks(name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    checks = entry.get("schema_checks")
    if checks is None:
        return {}
    if not isinstance(checks, Mapping) or not set(checks) <= set(SCHEMA_CHECK_KEYS):
        raise ContractError(name, "schema_checks", f"must be a dict with keys among "
                            f"{list(SCHEMA_CHECK_KEYS)}")
    for key, check in checks.items():
        if not callable(check):
            raise ContractError(name, f"schema_checks.{key}", f"must be callable, got "
                                f"{type(check).__name__}")
    return {"args_schema_check": checks.get("args"), "result_schema_check": checks.get("returns")}


def _reconcile(name: str, entry: Mapping[str, Any], effect: str) -> Callable[..., Any] | None:
    reconcile = entry.get("reconcile")
    if reconcile is None:
        return None
    if effect != "write":
        raise ContractError(name, "reconcile", "applies to write tools only")
    if not callable(reconcile):
        raise ContractError(name, "reconcile", f"must be callable, got {type(reconcile).__name__}")
    return reconcile  # type: ignore[no-any-return]


def _effect_and_risk(name: str, entry: Mapping[str, Any]) -> tuple[str, str]:
    effect = entry.get("effect", "read")
    if effect not in EFFECTS:
        raise ContractError(name, "effect", f"must be one of {list(EFFECTS)}, got {effect!r}")
    reads, writes = RISKS[:2], RISKS[2:]
    risk = entry.get("risk", reads[0] if effect == "read" else writes[0])
    if risk not in RISKS:
        raise ContractError(name, "risk", f"must be one of {list(RISKS)}, got {risk!r}")
    if risk not in (reads if effect == "read" else writes):
        raise ContractError(name, "risk", f"{risk!r} is not a risk of a {effect} tool; "
                            f"expected one of {list(reads if effect == 'read' else writes)}")
    return effect, risk


def _key_args(name: str, entry: Mapping[str, Any], effect: str,
              args: Mapping[str, Spec]) -> tuple[str, ...]:
    if "key_args" not in entry:
        return ()
    key_args = entry["key_args"]
    if effect != "write":
        raise ContractError(name, "key_args", "applies to write tools only")
    if not isinstance(key_args, (list, tuple)) or not key_args:
        raise ContractError(name, "key_args", "must be a non-empty list of argument names")
    for arg in key_args:
        if arg not in args:
            raise ContractError(name, "key_args", f"{arg!r} is not an argument")
        if not args[arg].required:
            raise ContractError(name, "key_args", f"{arg!r} must be a required argument")
    return tuple(key_args)


def _timeout(name: str, entry: Mapping[str, Any]) -> float | None:
    timeout = entry.get("timeout")
    if timeout is None:
        return None
    if not _is_number(timeout) or timeout <= 0:
        raise ContractError(name, "timeout", f"must be a positive number of seconds, "
                            f"got {timeout!r}")
    return float(timeout)


def expected_raises(entry: Mapping[str, Any], name: str = "") -> tuple[type[Exception], ...]:
    """The exceptions an entry's ``raises`` says its body may raise on valid arguments.

    A "not found" a tool signals by raising: the gate answers it ``raised:<Name>``
    as any other, but the harness does not count it as a crash. It changes no
    answer of the gate, so it is not part of the ``ToolContract`` (nor its hash).
    ``ContractError`` when it is not an Exception class or a list or tuple of them.
    """
    raises = entry.get("raises", ())
    classes = (raises,) if isinstance(raises, type) else raises  # as ``except X`` reads one
    if not isinstance(classes, (list, tuple)):
        raise ContractError(name, "raises", f"must be a tuple of exception classes, "
                            f"got {type(raises).__name__}")
    for index, cls in enumerate(classes):
        # Exception, not BaseException: a KeyboardInterrupt or a cancellation is never an
        # answer of the body's, and the gate lets those propagate whatever the table says.
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise ContractError(name, f"raises[{index}]", f"must be an Exception subclass, "
                                f"got {cls!r}")
    return tuple(classes)


def _ttl(name: str, entry: Mapping[str, Any], effect: str) -> float | None:
    ttl = entry.get("ttl")
    if ttl is None:
        return None
    if effect != "read":
        raise ContractError(name, "ttl", "applies to read tools only: writes are never memoized")
    # Unlike a timeout, 0 means something: a read whose value is never served again.
    if _is_number(ttl) and ttl >= 0:
        try:
            return float(ttl)
        except OverflowError:
            pass  # an int beyond every float is no number of seconds a clock can reach
    raise ContractError(name, "ttl", f"must be a non-negative finite number of seconds, "
                        f"got {ttl!r}")


def _parse_specs(tool: str, field: str, specs: object) -> dict[str, Spec]:
    if not isinstance(specs, Mapping):
        raise ContractError(tool, field, f"must be a dict of specs, got {type(specs).__name__}")
    parsed = {}
    for key, spec in specs.items():
        if not isinstance(key, str) or not key:
            raise ContractError(tool, f"{field}.{key!r}", "names must be non-empty strs")
        parsed[key] = _parse_spec(tool, f"{field}.{key}", spec)
    return parsed


def _parse_spec(tool: str, field: str, spec: object) -> Spec:
    if not isinstance(spec, Mapping):
        raise ContractError(tool, field, f"a spec must be a dict, got {type(spec).__name__}")
    unknown = sorted(map(str, set(spec) - SPEC_KEYS))
    if unknown:
        raise ContractError(tool, f"{field}.{unknown[0]}", f"unknown spec key; expected one of "
                            f"{sorted(SPEC_KEYS)}")
    type_name = spec.get("type")
    if type_name not in TYPES:
        raise ContractError(tool, f"{field}.type", f"unknown type {type_name!r}; expected one of "
                            f"{list(TYPES)}")
    for key, types in _KEY_TYPES.items():
        if key in spec and type_name not in types:
            raise ContractError(tool, f"{field}.{key}", f"does not apply to type {type_name!r}")
    required = spec.get("required", True)
    if type(required) is not bool:
        raise ContractError(tool, f"{field}.required", f"must be a bool, got {required!r}")
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise ContractError(tool, f"{field}.description", "must be a str")
    echo = spec.get("echo", False)
    if type(echo) is not bool:
        raise ContractError(tool, f"{field}.echo", f"must be a bool, got {echo!r}")
    sensitive = spec.get("sensitive", False)
    if type(sensitive) is not bool:
        raise ContractError(tool, f"{field}.sensitive", f"must be a bool, got {sensitive!r}")
    nullable = spec.get("nullable", True)
    if "nullable" in spec:
        if type(nullable) is not bool:
            raise ContractError(tool, f"{field}.nullable", f"must be a bool, got {nullable!r}")
        if required or echo:
            # An ignored key is a hole: nullable says what null means for a key that may be
            # left out, and a required key or an echo argument is never null.
            raise ContractError(tool, f"{field}.nullable", "applies to optional specs only "
                                "(required: False, not echo); null is never a value here")
    pattern = spec.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise ContractError(tool, f"{field}.pattern", "must be a str")
        problem = pattern_problem(pattern)
        if problem:
            raise ContractError(tool, f"{field}.pattern", problem)
    low, high = _bounds(tool, field, spec, "min", "max", _is_number)
    min_len, max_len = _bounds(tool, field, spec, "min_len", "max_len", _is_count)
    string_format = _format(tool, field, spec)
    min_exclusive = _exclusive(tool, field, spec, "min")
    max_exclusive = _exclusive(tool, field, spec, "max")
    branches, one_of = _branches(tool, field, spec)
    parsed = Spec(
        type=type_name,
        required=required,
        nullable=nullable,
        min=low,
        max=high,
        min_len=min_len,  # type: ignore[arg-type]  # _is_count admits ints only
        max_len=max_len,  # type: ignore[arg-type]
        pattern=pattern,
        item=_parse_item(tool, f"{field}.item", spec["item"], type_name) if "item" in spec
        else None,
        description=description,
        echo=echo,
        sensitive=sensitive,
        format=string_format,
        min_exclusive=min_exclusive,
        max_exclusive=max_exclusive,
        branches=branches,
        one_of=one_of,
    )
    if "allowed" in spec:
        parsed = _with_allowed(tool, field, parsed, spec["allowed"])
    return parsed


def _format(tool: str, field: str, spec: Mapping[str, Any]) -> str | None:
    name = spec.get("format")
    if name is None:
        return None
    if name not in STRING_FORMATS:
        # An unchecked format would be a hole; the importer drops unknown ones, with a warning.
        raise ContractError(tool, f"{field}.format", f"unknown format {name!r}; expected one "
                            f"of {sorted(STRING_FORMATS)}")
    return str(name)


def _exclusive(tool: str, field: str, spec: Mapping[str, Any], bound: str) -> bool:
    key = f"{bound}_exclusive"
    flag = spec.get(key, False)
    if type(flag) is not bool:
        raise ContractError(tool, f"{field}.{key}", f"must be a bool, got {flag!r}")
    if flag and spec.get(bound) is None:
        raise ContractError(tool, f"{field}.{key}", f"says {bound} is exclusive, but there is "
                            f"no {bound}")
    return flag


def _branches(tool: str, field: str, spec: Mapping[str, Any]
              ) -> tuple[tuple[Spec, ...] | None, bool]:
    """A union's branches (from ``any_of`` or ``one_of``) and whether exactly one must hold."""
    if "any_of" in spec and "one_of" in spec:
        raise ContractError(tool, f"{field}.one_of", "a union is any_of or one_of, not both")
    key = "one_of" if "one_of" in spec else "any_of"
    if key not in spec:
        return None, False
    listed = spec[key]
    if not isinstance(listed, (list, tuple)) or not listed:
        raise ContractError(tool, f"{field}.{key}", "must be a non-empty list of specs")
    branches = []
    for index, branch in enumerate(listed):
        where = f"{field}.{key}[{index}]"
        if isinstance(branch, Mapping):
            for refused in _BRANCH_KEYS_REFUSED:
                if refused in branch:
                    raise ContractError(tool, f"{where}.{refused}", "applies to the union, "
                                        "not to one of its branches")
            if branch.get("type") == "any":
                raise ContractError(tool, f"{where}.type", "a branch has a concrete type; "
                                    "a union of unions is one union")
        if where.count("[") > MAX_ITEM_DEPTH:
            raise ContractError(tool, where, f"unions nest deeper than {MAX_ITEM_DEPTH} levels")
        branches.append(_parse_spec(tool, where, branch))
    return tuple(branches), key == "one_of"


def _is_number(value: object) -> bool:
    # isfinite would overflow on an int beyond float range: any int is finite.
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _bounds(
    tool: str, field: str, spec: Mapping[str, Any], low_key: str, high_key: str,
    valid: Callable[[object], bool],
) -> tuple[float | None, float | None]:
    low, high = spec.get(low_key), spec.get(high_key)
    for key, bound in ((low_key, low), (high_key, high)):
        if bound is not None and not valid(bound):
            kind = "a finite number" if valid is _is_number else "a non-negative int"
            raise ContractError(tool, f"{field}.{key}", f"must be {kind}, got {bound!r}")
    if low is not None and high is not None and low > high:
        raise ContractError(tool, f"{field}.{low_key}",
                            f"{low_key} {low!r} is greater than {high_key} {high!r}")
    return low, high


def _parse_item(tool: str, field: str, item: object, owner: str) -> Spec | dict[str, Spec]:
    if field.count(".item") > MAX_ITEM_DEPTH:
        raise ContractError(tool, field, f"items nest deeper than {MAX_ITEM_DEPTH} levels")
    # A spec names its type with a str; a mapping of keys to specs has dict
    # values, even for a key that happens to be called "type".
    if isinstance(item, Mapping) and isinstance(item.get("type"), str):
        if owner == "dict":
            raise ContractError(tool, field, "a dict's item names its keys: a non-empty dict "
                                "of key -> spec, not one spec for every value")
        if "nullable" in item:
            raise ContractError(tool, f"{field}.nullable", "applies to optional keys only; "
                                "a list item is never null")
        spec = _parse_spec(tool, field, item)
        _refuse_nested_echo(tool, field, spec)
        return spec
    if isinstance(item, Mapping) and item:
        specs = _parse_specs(tool, field, item)
        for key, spec in specs.items():
            _refuse_nested_echo(tool, f"{field}.{key}", spec)
        return specs
    raise ContractError(tool, field, "must be a spec or a non-empty dict of key -> spec")


def _refuse_nested_echo(tool: str, field: str, spec: Spec) -> None:
    if spec.echo:
        raise ContractError(tool, f"{field}.echo", "applies to top-level arguments only")


def _with_allowed(tool: str, field: str, spec: Spec, allowed: object) -> Spec:
    if not isinstance(allowed, (list, tuple)) or not allowed:
        raise ContractError(tool, f"{field}.allowed", "must be a non-empty list")
    for value in allowed:
        if not is_value_of(spec.type, value):
            raise ContractError(tool, f"{field}.allowed",
                                f"value {value!r} is not of type {spec.type!r}")
        problem = scalar_problem(spec, value)
        if problem:
            raise ContractError(tool, f"{field}.allowed",
                                f"value {value!r} breaks the spec's own {problem!r}")
    return Spec(**{**spec.__dict__, "allowed": tuple(allowed)})


def scalar_problem(spec: Spec, value: Any) -> str:
    """The first bound a well-typed scalar breaks (``min``, ``max``, ``min_len``, …), or ``""``."""
    if spec.min is not None and (value < spec.min or (spec.min_exclusive and value == spec.min)):
        return "min"
    if spec.max is not None and (value > spec.max or (spec.max_exclusive and value == spec.max)):
        return "max"
    if spec.min_len is not None and len(value) < spec.min_len:
        return "min_len"
    if spec.max_len is not None and len(value) > spec.max_len:
        return "max_len"
    if spec.pattern is not None and fullmatcher(spec.pattern)(value) is None:
        return "pattern"
    if spec.format is not None and not STRING_FORMATS[spec.format](value):
        return "format"
    return ""


def is_closed(spec: Spec) -> bool:
    """Whether the contract types every part of a valid value (what orjson writes exactly)."""
    if spec.type == "any":
        return False  # a union's branches are read at run time: its parts are not known here
    if spec.type not in ("list", "dict"):
        return True  # a checked scalar, even a float: orjson writes 1 and 1.0 apart
    item = spec.item
    if item is None:
        return False  # a list or dict whose contents the spec leaves open: anything
    if isinstance(item, Spec):
        return is_closed(item)
    # Named keys may carry unnamed ones only if the args check let them: it does not.
    # (A null for an optional key is a scalar, which orjson writes exactly too.)
    return all(is_closed(inner) for inner in item.values())
