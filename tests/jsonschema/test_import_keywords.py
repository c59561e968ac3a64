"""Keywords the importer now enforces, each against ``jsonschema`` as an independent oracle.

For every keyword: a value that breaks it is refused with the reason that
names it, a value that keeps it passes, and on values drawn by Hypothesis the
gate's verdict is ``jsonschema``'s (``Draft202012Validator`` with its format
checker, ``jsonschema[format-nongpl]``), but where ``IMPORT_DIFFERENCES`` or
``STRICTER_THAN_JSON_SCHEMA`` says the gate is stricter: there, the gate never
accepts what jsonschema refuses.
"""

from __future__ import annotations

import functools
import json
import logging
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agtool import Gate
from agtool._formats import STRING_FORMATS
from agtool._jsonschema import (
    IMPORT_DIFFERENCES,
    RECURSION_DEPTH,
    SchemaError,
    from_json_schema,
    open_objects,
    schema_is_open,
    to_json_schema,
    tool_definition,
)
from agtool._jsonschema.schema_check import compile_schema_check
from agtool.harness.strategies._formats import format_text

FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER
#: Formats where the gate is documented stricter than jsonschema's checker (``"format"``
#: in STRICTER_THAN_JSON_SCHEMA): email is any text with an @ there, hostname takes a
#: trailing dot, uuid goes through UUID(). Everywhere else the two must agree exactly.
STRICTER_FORMATS = frozenset({"email", "hostname", "uuid"})


def _echo(**kwargs: Any) -> dict[str, Any]:
    return {"got": kwargs}


def gate_for(schema: dict[str, Any]) -> Gate:
    entry = from_json_schema(schema, fn=_echo, name="t")
    entry["returns"] = {}
    return Gate({"t": entry})


@functools.lru_cache(maxsize=64)
def _both(text: str) -> tuple[Gate, Draft202012Validator]:
    schema = json.loads(text)
    return gate_for(schema), Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def verdicts(schema: dict[str, Any], args: dict[str, Any]) -> tuple[str, bool]:
    """The gate's error (``""`` when accepted) and whether jsonschema accepts ``args``."""
    gate, oracle = _both(json.dumps(schema, sort_keys=True))
    return gate.call_tool("t", args)["error"], oracle.is_valid(args)


def prop(node: dict[str, Any], **root: Any) -> dict[str, Any]:
    """An input schema with one required property ``x``, closed (no difference from extras)."""
    return {"type": "object", "properties": {"x": node}, "required": ["x"],
            "additionalProperties": False, **root}


# --- each keyword: refused with its reason, kept values pass, the oracle agrees ---------------

CASES = [
    # (schema of x, a value that breaks it, the gate's reason, a value that keeps it)
    ({"type": "string", "format": "date"}, "2021-02-29", "args:format:x", "2024-02-29"),
    ({"type": "string", "format": "date-time"}, "2024-01-01 10:00:00Z", "args:format:x",
     "2024-01-01T10:00:00+09:00"),
    ({"type": "string", "format": "time"}, "23:59:60Z", "args:format:x", "23:59:59.5z"),
    ({"type": "string", "format": "email"}, "kim.example.com", "args:format:x",
     "kim.lee@example.com"),
    ({"type": "string", "format": "uri"}, "no scheme here", "args:format:x",
     "https://example.com/a?b=c#d"),
    ({"type": "string", "format": "uuid"}, "1234", "args:format:x",
     "0f6c8f5e-3c1a-4c1e-9d33-6a1b2c3d4e5f"),
    ({"type": "string", "format": "ipv4"}, "256.1.1.1", "args:format:x", "192.168.0.1"),
    ({"type": "string", "format": "ipv6"}, "1:2:3", "args:format:x", "fe80::1"),
    ({"type": "string", "format": "hostname"}, "-bad.example", "args:format:x",
     "db-1.example.com"),
    ({"type": "number", "exclusiveMinimum": 0}, 0, "args:min:x", 0.001),
    ({"type": "integer", "exclusiveMaximum": 10}, 10, "args:max:x", 9),
    ({"type": "integer", "minimum": 0, "exclusiveMinimum": 5}, 5, "args:min:x", 6),
    ({"const": "resource"}, "image", "args:allowed:x", "resource"),
    ({"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]}, "long",
     "args:max_len:x", 42),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, True, "args:type:x", "a"),
    ({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]}, 12, "args:type:x",
     12.5),
    # 12.0 is an integer to JSON Schema: two branches keep it, so oneOf refuses it, as here.
    ({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]}, 12.0, "args:type:x",
     12.5),
    ({"oneOf": [{"type": "array", "items": {"type": "integer"}},
                {"type": "array", "items": {"type": "number"}}]}, [1.0], "args:type:x", [0.5]),
    ({"type": ["string", "integer"], "minimum": 1}, 0, "args:min:x", "zero is fine here"),
    ({"type": "string", "anyOf": [{"format": "date"}, {"format": "date-time"}]}, "today",
     "args:type:x", "2026-12-02"),
    ({"type": "array", "items": {"anyOf": [{"type": "object", "properties": {
        "type": {"const": "text"}, "text": {"type": "string"}}, "required": ["type", "text"],
        "additionalProperties": False}, {"type": "object", "properties": {
            "type": {"const": "image"}, "data": {"type": "string"}},
        "required": ["type", "data"], "additionalProperties": False}]}},
     [{"type": "text", "data": "x"}], "args:type:x", [{"type": "image", "data": "AA=="}]),
    # allOf of several: what merges is the spec's (its reason), the rest the schema check's.
    ({"allOf": [{"type": "string", "format": "date"}, {"maxLength": 10}]}, "2026-13-01",
     "args:format:x", "2026-12-02"),
    ({"allOf": [{"type": "integer", "minimum": 0}, {"multipleOf": 5}]}, 7, "args:schema:x",
     10),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     {"a": 1}, "args:missing:x", {"a": 1, "b": "s"}),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "allOf": [
        {"if": {"required": ["a"]}, "then": {"properties": {"b": {"type": "string"}}}}],
      "unevaluatedProperties": False}, {"b": "s"}, "args:schema:x", {"a": 1, "b": "s"}),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
     [1, 2], "args:schema:x", [1]),
    ({"$dynamicAnchor": "list", "type": "array", "items": {"anyOf": [
        {"type": "integer"}, {"$dynamicRef": "#list"}]}}, [1, ["3"]], "args:type:x",
     [1, [2, [3]]]),
    ({"$dynamicAnchor": "list", "type": "array", "items": {"anyOf": [
        {"type": "integer"}, {"$dynamicRef": "#list"}]}}, [1, [2, [[["3"]]]]], "args:schema:x",
     [1, [2, [[[3]]]]]),
]


@pytest.mark.parametrize(("node", "bad", "reason", "good"), CASES,
                         ids=[f"{index}-{sorted(node)[0]}" for index, (node, *_) in
                              enumerate(CASES)])
def test_a_breaking_value_is_refused_by_its_reason_and_a_keeping_one_passes(
        node: dict[str, Any], bad: Any, reason: str, good: Any) -> None:
    """The gate and jsonschema both refuse the bad value and accept the good one."""
    error, oracle = verdicts(prop(node), {"x": bad})
    assert (error, oracle) == (reason, False)
    error, oracle = verdicts(prop(node), {"x": good})
    assert (error, oracle) == ("", True)


def test_a_typeless_schema_takes_any_json_value_but_null() -> None:
    """{} admits everything in JSON Schema; the gate refuses only a required null."""
    schema = prop({"description": "anything at all"})
    assert verdicts(schema, {"x": {"any": ["json", 1]}}) == ("", True)
    assert verdicts(schema, {"x": None}) == ("args:type:x", True)
    assert IMPORT_DIFFERENCES["null"].stricter


def test_the_gate_email_is_stricter_than_any_text_with_an_at() -> None:
    """jsonschema's email is any text with an @; the gate's is an addr-spec."""
    assert verdicts(prop({"type": "string", "format": "email"}), {"x": "kim@"}) == (
        "args:format:x", True)


# --- the oracle on drawn values -----------------------------------------------------------------


def _near(text: str) -> st.SearchStrategy[str]:
    """``text`` with one character dropped, doubled or replaced: values near the format."""
    if not text:
        return st.just(text)
    chars = string.printable[:95] + "é\u0660"
    return st.builds(lambda index, char, how: (text[:index] + text[index + 1:] if how == 0 else
                                               text[:index] + char + text[index:] if how == 1
                                               else text[:index] + char + text[index + 1:]),
                     st.integers(0, len(text) - 1), st.sampled_from(chars), st.integers(0, 2))


def _format_values(name: str) -> st.SearchStrategy[str]:
    return st.one_of(format_text(name), format_text(name).flatmap(_near), st.text(max_size=12))


@pytest.mark.parametrize("name", sorted(STRING_FORMATS))
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_gate_reads_each_format_as_jsonschema_does(name: str, data: st.DataObject) -> None:
    """Equal verdicts, but for the formats the gate is documented stricter on."""
    value = data.draw(_format_values(name), label="value")
    error, oracle = verdicts(prop({"type": "string", "format": name}), {"x": value})
    if name in STRICTER_FORMATS or value.endswith("\n"):
        assert not (error == "" and not oracle), f"the gate accepts {value!r}, jsonschema not"
    else:
        assert (error == "") == oracle, (value, error)


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-20, 20),
                     st.floats(-20, 20, allow_nan=False), st.text(max_size=4))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=5)
UNION_SCHEMAS = [
    {"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer", "maximum": 5}]},
    {"oneOf": [{"type": "integer"}, {"type": "number", "exclusiveMinimum": 3}]},
    {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
    {"type": ["boolean", "number"], "exclusiveMaximum": 2.5},
    {"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 3},
    {"enum": ["a", "b"], "type": "string"},
    {"const": 3},
]


@pytest.mark.parametrize("node", UNION_SCHEMAS, ids=[str(index)
                                                     for index in range(len(UNION_SCHEMAS))])
@settings(max_examples=100)
@example(value=4.0)  # a float JSON Schema also counts as an integer: two branches of a oneOf
@example(value=[1.0])
@given(value=_VALUES)
def test_unions_consts_and_exclusive_bounds_read_as_jsonschema_does(node: dict[str, Any],
                                                                    value: Any) -> None:
    """Equal verdicts, but for the integer and null differences, where the gate is stricter."""
    error, oracle = verdicts(prop(node), {"x": value})
    integral_float = any(type(part) is float and part == int(part) for part in _parts(value))
    if value is None or integral_float:
        # null is "not given" (IMPORT_DIFFERENCES["null"]); 1.0 is no integer (STRICTER_...).
        assert not (error == "" and not oracle)
    else:
        assert (error == "") == oracle, (value, error)


def _parts(value: Any) -> list[Any]:
    return [part for item in value for part in _parts(item)] if isinstance(value, list) \
        else [value]


# --- objects: closed, open, and results ----------------------------------------------------------


def test_an_open_input_object_is_closed_by_the_gate_and_named_open() -> None:
    """Without additionalProperties an extra key passes jsonschema; the gate refuses it."""
    schema = {"type": "object", "properties": {"a": {"type": "string"},
                                               "b": {"type": "object", "properties": {
                                                   "c": {"type": "integer"}}}}}
    error, oracle = verdicts(schema, {"a": "x", "extra": 1})
    assert (error, oracle) == ("args:unexpected:extra", True)
    assert open_objects(schema) == ("", "/properties/b")
    assert IMPORT_DIFFERENCES["additionalProperties"].stricter
    closed = {**schema, "additionalProperties": False,
              "properties": {**schema["properties"], "b": {
                  **schema["properties"]["b"], "additionalProperties": False}}}
    assert open_objects(closed) == ()
    listing = {"name": "t", "inputSchema": schema}
    assert schema_is_open(tool_definition(listing))
    assert not schema_is_open(tool_definition({**listing, "inputSchema": closed}))


def test_closed_output_objects_import_and_results_are_checked_by_their_keys() -> None:
    """additionalProperties: false on a returned object imports; its named keys are checked."""
    output = {"type": "object", "properties": {"content": {"type": "array", "items": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
        "additionalProperties": False}}}, "required": ["content"], "additionalProperties": False}
    entry = from_json_schema({"type": "object", "properties": {}}, output=output,
                             fn=lambda: {"content": []}, name="t")
    gate = Gate({"t": entry, "u": {**entry, "fn": lambda: {"content": [{"text": 5}]}}})
    assert gate.call_tool("t", {})["ok"]  # an empty list: nothing says it may not be
    assert gate.call_tool("u", {})["error"] == "result:shape"


def test_a_recursive_reference_is_cut_at_a_depth_and_warned(
        caplog: pytest.LogCaptureFixture) -> None:
    """A tree A -> B -> A imports (no RecursionError); the specs read it to the depth, and
    the whole-schema check deeper: a defect twenty levels down is refused too."""
    schema = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Node"}},
              "required": ["tree"], "$defs": {
                  "Node": {"type": "object", "properties": {
                      "name": {"type": "string"},
                      "children": {"type": "array", "items": {"$ref": "#/$defs/Kids"}}},
                      "required": ["name"]},
                  "Kids": {"$ref": "#/$defs/Node"}}}
    with caplog.at_level(logging.WARNING, logger="agtool"):
        gate = gate_for(schema)
    assert "recursive reference" in caplog.text
    assert str(RECURSION_DEPTH) in caplog.text
    good = {"tree": {"name": "a", "children": [{"name": "b", "children": []}]}}
    bad = {"tree": {"name": "a", "children": [{"name": 5}]}}
    assert gate.call_tool("t", good)["ok"]
    assert gate.call_tool("t", bad)["error"] == "args:type:tree"
    assert Draft202012Validator(schema).is_valid(good)
    assert not Draft202012Validator(schema).is_valid(bad)
    deep: dict[str, Any] = {"name": "leaf", "children": []}
    for level in range(20):
        deep = {"name": f"n{level}", "children": [deep]}
    assert gate.call_tool("t", {"tree": deep})["ok"]
    leaf = deep
    while leaf["children"]:
        leaf = leaf["children"][0]
    leaf["name"] = 5  # below every level the specs read
    assert not Draft202012Validator(schema).is_valid({"tree": deep})
    assert gate.call_tool("t", {"tree": deep})["error"] == "args:schema:tree"


def test_an_unknown_format_is_named_and_left_unchecked(caplog: pytest.LogCaptureFixture) -> None:
    """format: color is an annotation the gate does not check: a warning, never a refusal."""
    with caplog.at_level(logging.WARNING, logger="agtool"):
        gate = gate_for(prop({"type": "string", "format": "color"}))
    assert "'color' is not checked" in caplog.text
    assert gate.call_tool("t", {"x": "not a colour"})["ok"]


def test_an_exported_contract_keeps_the_new_keywords() -> None:
    """format, exclusive bounds and unions go back out as the keywords they came from."""
    schema = prop({"oneOf": [{"type": "string", "format": "uuid"},
                             {"type": "number", "exclusiveMinimum": 0}]})
    entry = from_json_schema(schema, fn=_echo, name="t")
    exported = to_json_schema({"t": entry}, "t")
    assert exported["properties"]["x"] == {"oneOf": [{"type": "string", "format": "uuid"},
                                                     {"type": "number", "exclusiveMinimum": 0}]}
    assert from_json_schema(exported, fn=_echo, name="t")["args"] == entry["args"]


def test_a_task_only_tool_is_refused_by_its_keyword() -> None:
    """execution.taskSupport: required is named as the keyword the gate cannot honour."""
    from agtool._jsonschema import import_tool

    listing = {"name": "slow", "inputSchema": {"type": "object"},
               "execution": {"taskSupport": "required"}}
    with pytest.raises(SchemaError) as caught:
        import_tool(tool_definition(listing, "up", "/tools/0"))
    assert caught.value.field == "/tools/0/execution/taskSupport"
    optional = import_tool(tool_definition({**listing, "execution": {"taskSupport": "optional"}}))
    assert optional["args"] == {}


@pytest.mark.parametrize(("effect", "ttl"), [(None, 0), ({"memo": 30}, 30), ("read", 0)])
def test_an_mcp_read_is_remembered_only_when_told(effect: Any, ttl: float) -> None:
    """A read-only hint says nothing of idempotence: ttl 0 unless memo gives seconds."""
    from agtool._jsonschema import import_tool

    listing = {"name": "now", "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": True}}
    entry = import_tool(tool_definition(listing), effect=effect)
    assert (entry["effect"], entry["ttl"]) == ("read", ttl)


@pytest.mark.parametrize("wrap", [
    lambda inner: {"type": "array", "items": inner},
    lambda inner: {"anyOf": [inner, {"type": "integer"}]},
    lambda inner: {"type": "object", "properties": {"a": inner}},
], ids=["items", "anyOf", "properties"])
def test_a_schema_nested_a_thousand_levels_is_a_schema_error(wrap: Any) -> None:
    """A hostile listing cannot make the importer raise RecursionError."""
    node: dict[str, Any] = {"type": "string"}
    for _ in range(1000):
        node = wrap(node)
    with pytest.raises(SchemaError, match="nest deeper"):
        from_json_schema(prop(node), name="t")


# --- the harness's strategies on imported contracts --------------------------------------------

IMPORTED = {"t": from_json_schema({"type": "object", "required": ["day", "ref", "share"],
                                   "properties": {
    "day": {"type": "string", "format": "date"},
    "mail": {"type": "string", "format": "email", "maxLength": 30},
    "ref": {"oneOf": [{"type": "string", "format": "uuid"},
                      {"type": "integer", "exclusiveMinimum": 0}]},
    "share": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    "tags": {"type": "array", "items": {"type": ["string", "integer"]}},
    "free": {"description": "any value"}}}, fn=_echo, name="t")}


@settings(max_examples=60)
@given(data=st.data())
def test_the_strategies_draw_what_the_gate_and_jsonschema_accept(data: st.DataObject) -> None:
    """valid_args on an imported contract: formats, unions and exclusive bounds all kept."""
    from agtool.harness.strategies import valid_args

    args = data.draw(valid_args(IMPORTED, "t"))
    assert Gate(IMPORTED).validate_args("t", args) == ""
    exported = to_json_schema(IMPORTED, "t")
    oracle = Draft202012Validator(exported, format_checker=FORMAT_CHECKER)
    assert oracle.is_valid(args), [error.message for error in oracle.iter_errors(args)]


@pytest.mark.parametrize("kind", ["format", "min", "max", "type"])
@settings(max_examples=30)
@given(data=st.data())
def test_a_planted_defect_of_a_new_keyword_is_refused_by_its_reason(kind: str,
                                                                    data: st.DataObject) -> None:
    """one_defect_args plants format and exclusive-bound defects the gate names exactly."""
    from agtool.harness.strategies import one_defect_args

    call = data.draw(one_defect_args(IMPORTED, "t", kind))
    assert Gate(IMPORTED).validate_args("t", call.args) == call.reason


# --- edges of the formats and of the importer ------------------------------------------------

FORMAT_EDGES = [
    ("email", "kim@[192.168.0.1]", True), ("email", "kim@[IPv6:fe80::1]", True),
    ("email", "kim@[300.1.1.1]", False), ("email", '"kim lee"@example.com', True),
    ("email", "kim..lee@example.com", False), ("email", "@example.com", False),
    ("uri", "http://[fe80::1]:8080/x", True), ("uri", "http://[fe80::1/x", False),
    ("uri", "http://host:80a/", False), ("uri", "http://ho]st/", False),
    ("uri", "mailto:kim@example.com", True), ("uri", "http://[fe80::1]x/", False),
    ("uri", "http://example.com/%zz", False), ("uri", "1http://example.com", False),
    ("hostname", "a" * 64 + ".com", False), ("hostname", "", False),
    ("ipv6", "fe80::1%eth0", False), ("date-time", "2024-01-01T10:00:00", False),
]


@pytest.mark.parametrize(("name", "value", "valid"), FORMAT_EDGES,
                         ids=[f"{name}-{index}" for index, (name, _, _) in
                              enumerate(FORMAT_EDGES)])
def test_format_edges_read_as_their_standards_say(name: str, value: str, valid: bool) -> None:
    """Address literals, ports, brackets, zone ids: the gate's verdict, never looser."""
    error, oracle = verdicts(prop({"type": "string", "format": name}), {"x": value})
    assert (error == "") == valid
    assert not (valid and not oracle)  # the gate never accepts what jsonschema refuses


IMPORT_EDGES = [
    # (schema of x, value, the gate's error)
    ({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, None, ""),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, True,
     "args:type:x"),
    ({"type": ["string", "integer", "null"], "enum": ["a", 1, None]}, 1, ""),
    ({"type": ["string", "integer", "null"], "enum": ["a", 1, None]}, "b", "args:allowed:x"),
    ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, 0, "args:min:x"),
    ({"type": "number", "maximum": 1, "exclusiveMaximum": True}, 0.5, ""),
    ({"allOf": [{"$ref": "#/$defs/Day"}], "description": "when"}, "2026-13-01",
     "args:format:x"),
    ({"anyOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "boolean"}]},
     True, ""),
    ({"anyOf": [{"type": "string"}, {}]}, [1], ""),
    ({"type": "string", "anyOf": [{"minLength": 2}, {"format": "date"}]}, "a", "args:type:x"),
    (True, {"any": "thing"}, ""),
    # Refused once, read now: a union inside the other kind, a branch that takes nothing,
    # keywords said both beside an allOf or a union and in it.
    ({"oneOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "boolean"}]},
     1, ""),
    ({"oneOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "boolean"}]},
     1.5, "args:type:x"),
    ({"type": "string", "anyOf": [{"type": "integer"}]}, "a", "args:schema:x"),
    ({"type": "string", "anyOf": [{"type": "integer"}, {"maxLength": 1}]}, "ab",
     "args:max_len:x"),
    ({"type": "string", "allOf": [{"type": "string"}]}, "a", ""),
    ({"type": "integer", "allOf": [{"enum": [1, "a"]}]}, 1, ""),
    ({"type": "integer", "allOf": [{"enum": [1, "a"]}]}, "a", "args:type:x"),
    ({"type": "object", "properties": {"k": {"type": "string"}}, "oneOf": [
        {"properties": {"k": {"const": "a"}, "a": {"type": "integer"}}, "required": ["a"]},
        {"properties": {"k": {"const": "b"}, "b": {"type": "string"}}, "required": ["b"]}],
      "unevaluatedProperties": False}, {"k": "a", "a": 1}, ""),
    ({"type": "object", "properties": {"k": {"type": "string"}}, "oneOf": [
        {"properties": {"k": {"const": "a"}, "a": {"type": "integer"}}, "required": ["a"]},
        {"properties": {"k": {"const": "b"}, "b": {"type": "string"}}, "required": ["b"]}],
      "unevaluatedProperties": False}, {"k": "a", "b": "s"}, "args:type:x"),
    # Refused once, read now: keywords beside a $ref apply with it, as in an allOf (its
    # target merged with them, or checked apart), and false takes nothing.
    ({"$ref": "#/$defs/Num", "maximum": 9}, 5, ""),
    ({"$ref": "#/$defs/Num", "maximum": 9}, 10, "args:max:x"),
    ({"$ref": "#/$defs/Num", "maximum": 9}, -1, "args:min:x"),
    ({"$ref": "#/$defs/Num", "multipleOf": 2}, 4, ""),
    ({"$ref": "#/$defs/Num", "multipleOf": 2}, 3, "args:schema:x"),
    ({"$ref": "#/$defs/Day", "maxLength": 5}, "2026-01-01", "args:max_len:x"),
    ({"$ref": "#/$defs/Num", "allOf": [{"maximum": 3}]}, 5, "args:max:x"),
    ({"$ref": "#/$defs/Str", "format": "date"}, "abc", "args:format:x"),
    ({"$ref": "#/$defs/Str", "format": "date"}, "2026-01-02", ""),
    ({"$ref": "#/$defs/Day", "format": "uri"}, "2026-01-02", "args:format:x"),
    ({"$ref": "#/$defs/Num", "anyOf": [{"maximum": 3}, {"minimum": 10}]}, 11, ""),
    ({"$ref": "#/$defs/Num", "anyOf": [{"maximum": 3}, {"minimum": 10}]}, 5, "args:type:x"),
    # A format is no annotation: beside a $ref, an allOf or a union it holds with them
    # (it was passed over there, as a title is).
    ({"$ref": "#/$defs/Day", "format": "uri"}, "https://example.com/a", "args:schema:x"),
    ({"allOf": [{"$ref": "#/$defs/Day"}], "format": "uri"}, "https://example.com/a",
     "args:schema:x"),
    ({"format": "date", "anyOf": [{"type": "string"}, {"type": "integer"}]}, "abc",
     "args:format:x"),
    ({"format": "date", "anyOf": [{"type": "string"}, {"type": "integer"}]}, 3, ""),
    ({"type": ["string", "integer"], "enum": ["2026-01-01", "x", 1], "format": "date"}, "x",
     "args:allowed:x"),
    ({"type": "integer", "format": "int32"}, 5, ""),
    # A null the keywords beside a $ref admit, its target refuses: refused (never looser).
    ({"type": ["integer", "null"], "$ref": "#/$defs/Num"}, None, "args:type:x"),
    ({"type": ["integer", "null"], "$ref": "#/$defs/Num"}, 1, ""),
    (False, 1, "args:schema:x"),
    ({"type": "object", "properties": {"y": False}}, {}, ""),
    ({"type": "object", "properties": {"y": False}}, {"y": 1}, "args:schema:x"),
    # An object's keyword beside a union holds for its object branch, not a string one.
    ({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "string"}], "unevaluatedProperties": False}, "s", ""),
    ({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "string"}], "unevaluatedProperties": False}, {"a": "s"}, "args:type:x"),
]


@pytest.mark.parametrize(("node", "value", "error"), IMPORT_EDGES,
                         ids=[str(index) for index in range(len(IMPORT_EDGES))])
def test_import_edges_read_as_jsonschema_does(node: Any, value: Any, error: str) -> None:
    """Null branches of wider unions, draft 4 flags, allOf of one, flattened unions, true
    and false, keywords beside a $ref."""
    schema = {"type": "object", "properties": {"x": node}, "required": ["x"],
              "additionalProperties": False,
              "$defs": {"Day": {"type": "string", "format": "date"},
                        "Num": {"type": "integer", "minimum": 0},
                        "Str": {"type": "string"}}}
    gate_error, oracle = verdicts(schema, {"x": value})
    assert gate_error == error
    if value is not None:  # null is "not given" in the gate: IMPORT_DIFFERENCES["null"]
        assert oracle == (error == "")


IMPORT_REFUSALS = [
    ({"anyOf": []}, "/properties/x/anyOf", "non-empty"),
    ({"allOf": []}, "/properties/x/allOf", "non-empty"),
    ({"allOf": [{"type": "integer"}, {"$ref": "https://example.com/n.json"}]},
     "/properties/x/allOf/1/$ref", "without the network"),
    ({"$ref": "#/$defs/Num", "maximum": 9, "allOf": 5}, "/properties/x/allOf", "non-empty"),
    ({"$ref": "https://example.com/n.json", "maximum": 9}, "/properties/x/$ref",
     "without the network"),
    ({"$ref": "#/$defs/Missing", "maximum": 9}, "/properties/x/$ref", "nothing"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}], "format": "date"},
     "/properties/x/format", "non-null branch"),
    ({"type": ["string", "strin"]}, "/properties/x/type", "unknown type"),
    ({"type": ["string", "string"]}, "/properties/x/type", "twice"),
    ({"type": "number", "exclusiveMinimum": 5, "maximum": 1},
     "/properties/x/exclusiveMinimum", "greater"),
]


@pytest.mark.parametrize(("node", "pointer", "word"), IMPORT_REFUSALS,
                         ids=[str(index) for index in range(len(IMPORT_REFUSALS))])
def test_what_the_importer_still_refuses_is_named_where_it_is(node: Any, pointer: str,
                                                              word: str) -> None:
    """Malformed unions and types, and a remote reference, are refused by JSON pointer."""
    with pytest.raises(SchemaError) as caught:
        from_json_schema(prop(node), name="t")
    assert caught.value.field == pointer
    assert word in caught.value.problem


def test_a_reference_inside_a_nested_id_resource_is_refused_where_it_is() -> None:
    """JSON Schema resolves a local ``$ref`` against the ``$id`` resource that holds it:
    here ``#`` is the inner object (a tree of them), not the document. The importer and the
    whole-schema check read references in the root resource only, so both refuse it by its
    pointer, where they once followed it to the document's root."""
    inner = {"$id": "https://example.com/node", "type": "object",
             "properties": {"child": {"$ref": "#"}, "v": {"type": "integer"}}}
    schema = prop(inner)
    oracle = Draft202012Validator(schema)  # the witness: a child is an inner object
    assert oracle.is_valid({"x": {"child": {"v": 1}}})
    assert not oracle.is_valid({"x": {"child": {"v": "one"}}})
    pointer = "/properties/x/properties/child/$ref"
    with pytest.raises(SchemaError) as imported:
        from_json_schema(schema, name="t")
    with pytest.raises(SchemaError) as checked:
        compile_schema_check(schema)
    assert imported.value.field == checked.value.field == pointer
    assert "inside the $id resource at '/properties/x'" in imported.value.problem
    # A nested $id with no reference inside it, or one at the root, changes nothing.
    assert verdicts(prop({"$id": "https://example.com/n", "type": "integer"}),
                    {"x": "a"}) == ("args:type:x", False)
    assert verdicts({**prop({"$ref": "#/$defs/Num"}), "$id": "https://example.com/root",
                     "$defs": {"Num": {"type": "integer"}}}, {"x": 1}) == ("", True)


def test_an_anchor_inside_a_nested_id_resource_is_never_the_roots() -> None:
    """A ``#name`` of the root resource names the root's anchor, never one of that name in
    a nested ``$id`` resource (the anchors' walk meets the nested one first here)."""
    anchored = prop({"$ref": "#word"}, **{"$defs": {
        "Word": {"$anchor": "word", "type": "string"},
        "Zone": {"$id": "https://example.com/zone",
                 "$defs": {"Code": {"$anchor": "word", "type": "integer"}}}}})
    assert verdicts(anchored, {"x": 1}) == ("args:type:x", False)
    assert verdicts(anchored, {"x": "a"}) == ("", True)


@pytest.mark.parametrize(("execution", "pointer"), [
    ("yes", "/tools/0/execution"), ({"taskSupport": "always"}, "/tools/0/execution/taskSupport")])
def test_a_malformed_execution_is_a_schema_error(execution: Any, pointer: str) -> None:
    """execution must be an object whose taskSupport MCP defines."""
    with pytest.raises(SchemaError) as caught:
        tool_definition({"name": "t", "inputSchema": {"type": "object"},
                         "execution": execution}, "up", "/tools/0")
    assert caught.value.field == pointer
