"""The differential oracle: the gate and the ``jsonschema`` package agree on the exported schemas.

For arbitrary contract tables and arbitrary arguments (valid ones, ones with one
value pushed past a bound, and random JSON junk), ``Gate.validate_args`` accepts
exactly when ``jsonschema`` accepts ``to_json_schema``'s schema, and
``validate_result`` exactly when it accepts ``output_schema``'s. The only
allowance is ``STRICTER_THAN_JSON_SCHEMA``, applied as the validator's reading
of the keywords it names; nothing else is excluded.

The generators are written here: ``strategies/__init__.py`` exported nothing
when this file was written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError, validators

from agtool import Gate
from agtool._contract import parse_entry
from agtool._jsonschema import (
    STRICTER_THAN_JSON_SCHEMA,
    from_json_schema,
    gate_pattern,
    output_schema,
    to_json_schema,
    tool_spec,
)
from agtool._patterns import fullmatcher

# Deadlines off: a first example pays for compiling a gate, and nothing here is timed.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The keyword-by-keyword oracles are as strong as their example count: at least 100
# (the dev profile runs 25, too few to meet every keyword), more if a profile asks.
ORACLE = settings(PROPERTY, max_examples=max(100, settings().max_examples))

# Patterns with a top-level alternation (``a|b``) are what a bare ``^…$`` export gets wrong.
PATTERNS = [r"[A-Z]{3}-[0-9]{2}", r"[a-z]+", r"T-\d+", r"(?:red|green)", r"a|bc", r"x*y?"]
NAMES = ["a", "b", "sku", "limit", "request_id", "ticket_id", "x.y"]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=6,
)


def _described(spec: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        spec["description"] = draw(st.sampled_from(["Order id.", "How many rows.", "ünï"]))
    return spec


@st.composite
def str_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A str spec with one of: nothing, ``allowed``, ``pattern``, length bounds."""
    kind = draw(st.sampled_from(["pattern", "allowed", "length", "plain"]))
    spec: dict[str, Any] = {"type": "str"}
    if kind == "allowed":
        spec["allowed"] = draw(st.lists(st.text(max_size=4), min_size=1, max_size=3,
                                        unique=True))
    elif kind == "pattern":
        spec["pattern"] = draw(st.sampled_from(PATTERNS))
    elif kind == "length":
        low = draw(st.integers(0, 3))
        high = draw(st.integers(low, low + 4))
        keep = draw(st.sampled_from(["min_len", "max_len", "both"]))
        spec.update({key: value for key, value in (("min_len", low), ("max_len", high))
                     if keep in (key, "both")})
    return _described(spec, draw)


@st.composite
def number_specs(draw: st.DrawFn, type_name: str) -> dict[str, Any]:
    """An int or float spec with bounds (floats may be fractional), ``allowed`` or neither."""
    spec: dict[str, Any] = {"type": type_name}
    numbers = st.integers(-20, 20) if type_name == "int" else (
        st.integers(-20, 20) | st.floats(-20, 20, allow_nan=False))
    kind = draw(st.sampled_from(["bounds", "allowed", "plain"]))
    if kind == "allowed":
        spec["allowed"] = draw(st.lists(numbers, min_size=1, max_size=3, unique=True))
    elif kind == "bounds":
        low, high = sorted([draw(numbers), draw(numbers)])
        if low == high:
            high = low  # 0 and -0.0 sort either way; floats(0, -0.0) is an empty range
        keep = draw(st.sampled_from(["min", "max", "both"]))
        spec.update({key: value for key, value in (("min", low), ("max", high))
                     if keep in (key, "both")})
    return _described(spec, draw)


@st.composite
def bool_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A bool spec, sometimes pinned to one value."""
    spec: dict[str, Any] = {"type": "bool"}
    pinned = draw(st.none() | st.booleans())
    if pinned is not None:
        spec["allowed"] = [pinned]
    return spec


SCALARS = st.one_of(str_specs(), number_specs("int"), number_specs("float"), bool_specs())


def optional(spec: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """``spec`` made optional: null is "not given" (said or not), or refused."""
    spec["required"] = False
    nullable = draw(st.sampled_from([None, True, False]))
    if nullable is not None:
        spec["nullable"] = nullable
    return spec


@st.composite
def members(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """A dict-of-specs for list items and named dicts: 1 to 3 keys, each required or not."""
    keys = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    return {key: optional(draw(SCALARS), draw) if draw(st.booleans()) else draw(SCALARS)
            for key in keys}


@st.composite
def named_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """A dict with named keys, whose values are scalars or, one level down, a named dict."""
    item = draw(members())
    if draw(st.booleans()):
        inner = {"type": "dict", "item": draw(members())}
        item["inner"] = optional(inner, draw) if draw(st.booleans()) else inner
    return {"type": "dict", "item": item}


@st.composite
def list_specs(draw: st.DrawFn, top_level_result: bool = False, objects: bool = False
               ) -> dict[str, Any]:
    """A list spec: items a scalar spec, a dict-of-specs or anything; optional length bounds."""
    spec: dict[str, Any] = {"type": "list"}
    item = "members" if objects else draw(st.sampled_from(["scalar", "members", "free-dict",
                                                           "none"]))
    if item == "scalar":
        spec["item"] = draw(SCALARS)
    elif item == "members":
        spec["item"] = draw(members())
    elif item == "free-dict":
        spec["item"] = {"type": "dict"}
    # A top-level returned list reads min_len 1 as the default; it is pinned separately.
    lows = st.sampled_from([None, 0, 2]) if top_level_result else st.none() | st.integers(0, 2)
    low = draw(lows)
    high = draw(st.none() | st.integers(max(low or 0, 1), (low or 0) + 3))
    spec.update({key: value for key, value in (("min_len", low), ("max_len", high))
                 if value is not None})
    return spec


@st.composite
def value_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly scalars, then lists, now and then a free-form dict or one with named keys."""
    kind = draw(st.sampled_from(["scalar", "list", "dict", "named"]))
    if kind == "dict":
        return {"type": "dict"}
    if kind == "named":
        return draw(named_dicts())
    return draw(list_specs() if kind == "list" else SCALARS)


@st.composite
def tables(draw: st.DrawFn) -> dict[str, Any]:
    """A one-tool table ``t``: 1 to 4 arguments (some optional, some echo), 0 to 3 returns."""
    args: dict[str, dict[str, Any]] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True)):
        spec = draw(value_specs())
        if spec["type"] == "str" and draw(st.sampled_from([False, True])):
            spec["echo"] = True  # refused when missing, whatever `required` says
            if draw(st.booleans()):
                spec["required"] = False
        elif draw(st.booleans()):
            spec = optional(spec, draw)
        args[name] = spec
    returns: dict[str, dict[str, Any]] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True)):
        spec = draw(st.one_of(SCALARS, list_specs(top_level_result=True), named_dicts()))
        if draw(st.booleans()):
            spec = optional(spec, draw)
        returns[name] = spec
    return {"t": {"fn": lambda **kwargs: {}, "args": args, "returns": returns,
                  "description": draw(st.sampled_from(["", "Look things up."]))}}


# --- Values from a spec -------------------------------------------------------------------


def valid(spec: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values the spec accepts."""
    if "allowed" in spec:
        return st.sampled_from(spec["allowed"])
    kind = spec["type"]
    if kind == "str":
        if "pattern" in spec:
            return st.from_regex(spec["pattern"], fullmatch=True)
        low = spec.get("min_len", 0)
        return st.text(min_size=low, max_size=spec.get("max_len", low + 4))
    if kind in ("int", "float"):
        low, high = spec.get("min"), spec.get("max")
        ints = st.integers(None if low is None else math.ceil(low),
                           None if high is None else math.floor(high))
        if kind == "int":
            return ints
        floats = st.floats(low, high, allow_nan=False, allow_infinity=False)
        return ints | floats if _has_int_between(low, high) else floats
    if kind == "bool":
        return st.booleans()
    if kind == "dict" and "item" in spec:
        return valid_object(spec["item"])
    if kind == "dict":
        return st.dictionaries(st.text(max_size=3), JSON, max_size=3)
    return _valid_list(spec)


def _has_int_between(low: float | None, high: float | None) -> bool:
    return low is None or high is None or math.ceil(low) <= math.floor(high)


def _valid_list(spec: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    item = spec.get("item")
    if item is None:
        items: st.SearchStrategy[Any] = JSON
    elif isinstance(item.get("type"), str):
        items = valid(item)
    else:
        items = valid_object(item)
    low = spec.get("min_len", 0)
    return st.lists(items, min_size=low, max_size=spec.get("max_len", low + 3))


def valid_object(specs: Mapping[str, Mapping[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with every required (or echo) key and some optional ones, each valid.

    An optional key that takes null for "not given" is sometimes sent as null.
    """
    needed = {key: valid(spec) for key, spec in specs.items()
              if spec.get("required", True) or spec.get("echo")}
    optional = {key: valid(spec) | st.none() if spec.get("nullable", True) else valid(spec)
                for key, spec in specs.items() if key not in needed}
    return st.fixed_dictionaries(needed, optional=optional)


def near_misses(spec: Mapping[str, Any], value: Any) -> st.SearchStrategy[Any]:
    """A value breaking one of the spec's constraints, the constraint chosen first.

    Each constraint the spec has (its type, each bound, ``allowed``, ``pattern``,
    the items of a list) is as likely to be broken as any other, so a keyword
    dropped from the export shows up within a few dozen examples.
    """
    options = [st.sampled_from(_breaking(spec, key, value)) for key in _CONSTRAINTS
               if spec.get(key) is not None]
    item = spec.get("item")
    if spec["type"] == "list" and value and item is not None:
        options.append(_item_misses(item, value))
    if spec["type"] == "dict" and item is not None:
        options.append(calls(item, defect=True))  # a key missing, past a bound, or unknown
    # Last: Hypothesis draws its first options most often.
    return st.one_of([*options, st.sampled_from(_wrong_types(spec["type"], value))])


_CONSTRAINTS = ("min", "max", "allowed", "pattern", "min_len", "max_len")


def _wrong_types(kind: str, value: Any) -> list[Any]:
    """Neighbouring types, including those the gate is deliberately stricter about."""
    if kind == "int":
        return [float(value), value + 0.5, True, str(value), None]
    if kind == "float":
        return [math.nan, math.inf, -math.inf, True, str(value), None]
    if kind == "str":
        return [5, None, True, [value]]
    if kind == "bool":
        return [int(value), str(value).lower(), None]
    return [{}, "x", None] if kind == "list" else [[], "x", None]


def _breaking(spec: Mapping[str, Any], key: str, value: Any) -> list[Any]:
    """Values of the right type that break the spec's ``key``."""
    kind, bound = spec["type"], spec[key]
    fraction = [0.5] if kind == "float" else []
    if key == "min":
        return [bound - 1, *(bound - step for step in fraction)]
    if key == "max":
        return [bound + 1, *(bound + step for step in fraction)]
    if key == "allowed":
        return [not value] if kind == "bool" else [value + ("x" if kind == "str" else 1)]
    if key == "pattern":
        return [value + "!", "!" + value, value + "\n"]
    filler = "x" if kind == "str" else [0]
    if key == "min_len":
        return [value[:bound - 1]] if bound else [value]
    return [value + filler * (bound + 1)]


def _item_misses(item: Mapping[str, Any], items: list[Any]) -> st.SearchStrategy[Any]:
    if isinstance(item.get("type"), str):
        bad_items = near_misses(item, items[0])
    else:
        # A defect inside the first item: a member past a bound, or one it does not name.
        bad_items = calls(item, defect=True)
    return bad_items.map(lambda bad: [bad, *items[1:]])


@st.composite
def calls(draw: st.DrawFn, specs: Mapping[str, Mapping[str, Any]], defect: bool = False) -> Any:
    """Arguments (or a result) for ``specs``: valid, with one defect, or random junk.

    Defects are the likeliest, and most of them push one present value past a bound.
    (Hypothesis draws the first of several options most often: they come first.)
    """
    kind = "one-defect" if defect else draw(st.sampled_from(["one-defect", "valid", "junk"]))
    if kind == "junk":
        return draw(JSON)
    value = draw(valid_object(specs))
    if kind == "valid":
        return value
    move = draw(st.sampled_from(["replace", "drop", "extra"]))
    if move == "drop" and specs:
        value.pop(draw(st.sampled_from(sorted(specs))), None)
    elif move == "extra" or not value:
        value[draw(st.sampled_from([*NAMES, "sku_id"]))] = draw(JSON)
    else:
        key = draw(st.sampled_from(sorted(value)))
        near = value[key] if value[key] is not None else draw(valid(specs[key]))
        value[key] = draw(near_misses(specs[key], near))
    return value


# --- The independent validator, with the listed differences and nothing else ---------------


def _pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any
                     ) -> Iterator[ValidationError]:
    accepts = STRICTER_THAN_JSON_SCHEMA["pattern"].accepts
    assert accepts is not None
    if validator.is_type(instance, "string") and not accepts(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _type(name: str) -> Any:
    accepts = STRICTER_THAN_JSON_SCHEMA[name].accepts
    assert accepts is not None
    return lambda checker, instance: accepts(instance)


GateReading = validators.extend(
    Draft202012Validator,
    validators={"pattern": _pattern_keyword},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _type("integer"), "number": _type("number")}),
)


def _echo_for(table: Mapping[str, Any], args: Any) -> dict[str, Any]:
    # The echo difference: the caller hands the gate the value the model was
    # given; here the model always copied it, so only presence and type remain.
    echoed = [name for name, spec in table["t"]["args"].items() if spec.get("echo")]
    return {name: args[name] for name in echoed if isinstance(args, dict) and name in args}


@st.composite
def tables_and_args(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    table = draw(tables())
    return table, draw(calls(table["t"]["args"]))


@st.composite
def tables_and_results(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    table = draw(tables())
    return table, draw(calls(table["t"]["returns"]))


@PROPERTY
@given(tables_and_args())
def test_gate_accepts_arguments_exactly_when_jsonschema_accepts_the_export(
    case: tuple[dict[str, Any], Any],
) -> None:
    """validate_args answers "" exactly when jsonschema (with the listed differences) accepts."""
    table, args = case
    schema = to_json_schema(table, "t")
    gate_ok = Gate(table).validate_args("t", args, echo=_echo_for(table, args)) == ""
    assert gate_ok == GateReading(schema).is_valid(args), (schema, args)


@PROPERTY
@given(tables_and_results())
def test_gate_accepts_results_exactly_when_jsonschema_accepts_the_output_schema(
    case: tuple[dict[str, Any], Any],
) -> None:
    """validate_result answers "" exactly when jsonschema accepts output_schema's schema."""
    table, result = case
    schema = output_schema(table, "t")
    gate_ok = Gate(table).validate_result("t", result) == ""
    assert gate_ok == GateReading(schema).is_valid(result), (schema, result)


def _one_arg_table(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"t": {"fn": lambda **kwargs: {}, "args": {"x": spec}, "returns": {}}}


#: Each kind of value gets its own examples, so every keyword is hit often.
KINDS = {
    "str": str_specs(), "int": number_specs("int"), "float": number_specs("float"),
    "bool": bool_specs(), "list": list_specs(), "objects": list_specs(objects=True),
    "dict": st.just({"type": "dict"}), "named": named_dicts(),
}


@st.composite
def near_or_valid(draw: st.DrawFn, spec: Mapping[str, Any]) -> Any:
    value = draw(valid(spec))
    return draw(near_misses(spec, value) | st.just(value))


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
@ORACLE
@given(data=st.data())
def test_gate_and_jsonschema_agree_on_one_argument(kind: str, data: st.DataObject) -> None:
    """One argument of a kind, valid or just past one constraint: the two agree."""
    spec = data.draw(KINDS[kind])
    args = {"x": data.draw(near_or_valid(spec))}
    table = _one_arg_table(spec)
    gate_ok = Gate(table).validate_args("t", args) == ""
    assert gate_ok == GateReading(to_json_schema(table, "t")).is_valid(args), args


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
@ORACLE
@given(data=st.data())
def test_gate_and_jsonschema_agree_on_one_returned_key(kind: str, data: st.DataObject) -> None:
    """One returned key of a kind, valid or just past one constraint: the two agree."""
    strategy = list_specs(top_level_result=True, objects=kind == "objects") if kind in (
        "list", "objects") else KINDS[kind]
    spec = data.draw(strategy)
    result = {"x": data.draw(near_or_valid(spec))}
    table = {"t": {"fn": lambda **kwargs: {}, "args": {}, "returns": {"x": spec}}}
    gate_ok = Gate(table).validate_result("t", result) == ""
    assert gate_ok == GateReading(output_schema(table, "t")).is_valid(result), result


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
@ORACLE
@given(data=st.data())
def test_gate_and_jsonschema_agree_on_patterns(pattern: str, data: st.DataObject) -> None:
    """A full match in the gate is a search of the anchored export in jsonschema."""
    table = _one_arg_table({"type": "str", "pattern": pattern})
    value = data.draw(st.from_regex(pattern, fullmatch=True))
    near = [value + "!", "!" + value, value + "\n", value[:-1], value + value, value]
    candidate = data.draw(st.sampled_from(near) | st.text(alphabet="abcRT-01!\n", max_size=5))
    gate_ok = Gate(table).validate_args("t", {"x": candidate}) == ""
    assert gate_ok == GateReading(to_json_schema(table, "t")).is_valid({"x": candidate})


@pytest.mark.slow
@ORACLE
@given(st.booleans(), st.none() | st.text(max_size=3) | JSON)
def test_gate_and_jsonschema_agree_on_echo_arguments(required: bool, value: Any) -> None:
    """An echo argument, optional or not, is refused when missing: the schema requires it too."""
    table = _one_arg_table({"type": "str", "echo": True, "required": required})
    args = {} if value is None else {"x": value}
    gate_ok = Gate(table).validate_args("t", args, echo=_echo_for(table, args)) == ""
    assert gate_ok == GateReading(to_json_schema(table, "t")).is_valid(args), args


@st.composite
def optional_and_null(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """One optional argument of any kind, and args giving it a value, null, or nothing."""
    spec = optional(draw(st.sampled_from(sorted(KINDS)).flatmap(KINDS.__getitem__)), draw)
    value = draw(st.sampled_from(["null", "absent", "value"]))
    if value == "value":
        return spec, {"x": draw(near_or_valid(spec))}
    return spec, {} if value == "absent" else {"x": None}


@pytest.mark.slow
@ORACLE
@given(optional_and_null(), st.booleans())
def test_gate_and_jsonschema_agree_on_null_for_an_optional_key(
        case: tuple[dict[str, Any], Any], returned: bool) -> None:
    """Null for an optional key, argument or returned: both take it unless nullable is False."""
    spec, value = case
    if returned:
        table = {"t": {"fn": lambda **kwargs: {}, "args": {}, "returns": {"x": spec}}}
        gate_ok = Gate(table).validate_result("t", value) == ""
        assert gate_ok == GateReading(output_schema(table, "t")).is_valid(value), value
    else:
        table = _one_arg_table(spec)
        gate_ok = Gate(table).validate_args("t", value) == ""
        assert gate_ok == GateReading(to_json_schema(table, "t")).is_valid(value), value
    if value == {"x": None}:
        assert gate_ok == spec.get("nullable", True)


@PROPERTY
@given(tables())
def test_exported_schemas_are_valid_draft_2020_12(table: dict[str, Any]) -> None:
    """Every exported schema passes the Draft 2020-12 metaschema."""
    Draft202012Validator.check_schema(to_json_schema(table, "t"))
    Draft202012Validator.check_schema(output_schema(table, "t"))


# --- Each listed difference is real, and the list is complete for these examples ----------

STR_ARG = {"type": "str", "pattern": "[a-z]+"}
#: Per entry of STRICTER_THAN_JSON_SCHEMA: a call plain jsonschema accepts and the gate refuses.
DIFFERENCES = {
    "integer": ({"n": {"type": "int"}}, {"n": 1.0}, {}, "type:n"),
    "number": ({"x": {"type": "float"}}, {"x": math.nan}, {}, "type:x"),
    "pattern": ({"s": STR_ARG}, {"s": "abc\n"}, {}, "pattern:s"),
    "x-agtool-echo": ({"r": {"type": "str", "echo": True}}, {"r": "req-1"}, {"r": "req-2"},
                      "echo:r"),
}


def test_every_listed_difference_has_an_example() -> None:
    """The examples below cover STRICTER_THAN_JSON_SCHEMA exactly, so the list stays honest."""
    assert set(DIFFERENCES) == set(STRICTER_THAN_JSON_SCHEMA)
    assert all(entry.why for entry in STRICTER_THAN_JSON_SCHEMA.values())


@pytest.mark.parametrize("name", sorted(DIFFERENCES))
def test_listed_difference_is_one_jsonschema_really_has(name: str) -> None:
    """Plain jsonschema accepts the call the gate refuses, so the entry is needed."""
    args_specs, args, echo, reason = DIFFERENCES[name]
    table = {"t": {"fn": lambda **kwargs: {}, "args": args_specs, "returns": {}}}
    schema = to_json_schema(table, "t")
    assert Draft202012Validator(schema).is_valid(args)
    assert Gate(table).validate_args("t", args, echo=echo) == reason


@pytest.mark.parametrize("value", [math.inf, -math.inf, 2.0])
def test_non_finite_and_integral_floats_are_the_only_number_differences(value: float) -> None:
    """Infinities are refused like NaN, and 2.0 is a fine float but not an int."""
    table = {"t": {"fn": lambda **kwargs: {}, "args": {"x": {"type": "float"},
                                                       "n": {"type": "int"}}, "returns": {}}}
    gate = Gate(table)
    float_ok = gate.validate_args("t", {"x": value, "n": 1}) == ""
    int_ok = gate.validate_args("t", {"x": 1, "n": value}) == ""
    assert float_ok == math.isfinite(value)
    assert not int_ok


def test_a_bool_is_a_number_in_neither() -> None:
    """True is refused for int and float by both sides: not a difference to list."""
    table = {"t": {"fn": lambda **kwargs: {}, "args": {"x": {"type": "float", "required": False},
                                                       "n": {"type": "int", "required": False}},
                   "returns": {}}}
    plain = Draft202012Validator(to_json_schema(table, "t"))
    for args in ({"x": True}, {"n": True}):
        assert not plain.is_valid(args)
        assert Gate(table).validate_args("t", args).startswith("type:")


# --- Import is the inverse of export ------------------------------------------------------


@PROPERTY
@given(tables())
def test_import_of_an_export_gives_the_same_contract(table: dict[str, Any]) -> None:
    """from_json_schema(to_json_schema, output_schema), through JSON text, rebuilds the contract."""
    inputs = json.loads(json.dumps(to_json_schema(table, "t")))
    outputs = json.loads(json.dumps(output_schema(table, "t")))
    entry = from_json_schema(inputs, output=outputs, name="t",
                             description=table["t"]["description"])
    original, rebuilt = parse_entry("t", table["t"]), parse_entry("t", entry)
    # An echo argument is refused when missing whatever its `required` says, so the
    # schema lists it as required and it comes back so: the same contract, spelt one way.
    expected = {name: replace(spec, required=True) if spec.echo else spec
                for name, spec in original.args.items()}
    assert rebuilt.args == expected
    assert rebuilt.returns == original.returns
    assert rebuilt.description == original.description


# --- OpenAI strict mode, checked against its documented subset ----------------------------

#: OpenAI's documented strict-mode keywords (Structured Outputs, "Supported schemas").
OPENAI_STRICT_KEYWORDS = {
    "type", "description", "enum", "const", "anyOf", "$defs", "$ref", "properties", "required",
    "additionalProperties", "items", "pattern", "format", "multipleOf", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
}


def strict_violations(node: Mapping[str, Any], where: str = "") -> list[str]:
    """Where a schema breaks OpenAI strict mode: keywords, closed objects, all required."""
    found = [f"{where}/{key}" for key in node if key not in OPENAI_STRICT_KEYWORDS]
    kinds = node.get("type")
    if kinds == "object" or (isinstance(kinds, list) and "object" in kinds):
        properties = node.get("properties", {})
        if node.get("additionalProperties") is not False:
            found.append(f"{where}: open object")
        if set(node.get("required", [])) != set(properties):
            found.append(f"{where}: optional properties")
        for key, child in properties.items():
            found += strict_violations(child, f"{where}/properties/{key}")
    if isinstance(node.get("items"), Mapping):
        found += strict_violations(node["items"], f"{where}/items")
    return found


@PROPERTY
@given(tables())
def test_openai_strict_exactly_when_the_schema_fits_strict_mode(table: dict[str, Any]) -> None:
    """strict is true exactly when the exact schema already keeps strict mode's rules."""
    function = tool_spec(table, "t", "openai")["function"]
    assert function["strict"] == (not strict_violations(function["parameters"]))


# --- JSON Schema's search pattern, read as the gate's full match --------------------------

SEARCH_PATTERNS = [
    "^a$", "^a|b$", "a", "a$", "^(?:a|b)$", "^(a)(b)?$", "^[ab]+-1$", "(a|b)1", "^$", "^", "$",
    r"a\$", "[$]", "^(?:a)|(?:b)$", r"\ba", "^[]a]+$", r"^[\]$]b$",
    "^[^$]+$", "^[^]$]+$",
]


@PROPERTY
@given(st.sampled_from(SEARCH_PATTERNS), st.text(alphabet="ab1-$]"))
def test_gate_pattern_full_match_is_json_schemas_search(pattern: str, value: str) -> None:
    """On ASCII text without newlines, RE2 full-matching gate_pattern(p) is searching p."""
    assert bool(fullmatcher(gate_pattern(pattern))(value)) == bool(re.search(pattern, value))


@pytest.mark.parametrize(("pattern", "value", "matches"), [
    pytest.param("^a$", "a\n", False, id="anchored"),
    pytest.param("a$", "ba\n", False, id="end-anchored"),
    pytest.param("a$", "ba", True, id="end-anchored-ok"),
    pytest.param("^(?:a|b)$", "b\n", False, id="agtool-export"),
    pytest.param("a", "\nab\n", True, id="unanchored-search"),
    pytest.param(r"a\$", "a$\n", True, id="escaped-dollar-is-a-char"),
])
def test_gate_pattern_end_is_the_end_of_input(pattern: str, value: str, matches: bool) -> None:
    """A bare $ means the end of input (ECMA 262), not "before a final newline" (Python)."""
    assert bool(fullmatcher(gate_pattern(pattern))(value)) is matches
