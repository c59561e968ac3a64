"""Keywords the dialect has no spec for, enforced exactly: the gate against jsonschema.

For each keyword (``multipleOf``, ``uniqueItems``, ``not``, ``if``/``then``/``else``,
``patternProperties``, ``dependentRequired``, ``propertyNames``, ``prefixItems``,
``contains``, ``minProperties``/``maxProperties``, ``unevaluatedProperties``,
``unevaluatedItems``, an ``allOf`` of several schemas, ``$dynamicRef``, a closed
returned object), a
Hypothesis property draws a schema that uses it and values around it: the gate on
the imported contract passes exactly the values ``jsonschema``'s Draft 2020-12
validator (an independent implementation) passes. Values are drawn where the
dialect's own reading is JSON Schema's (no null, no integral float for an integer:
``IMPORT_DIFFERENCES`` lists those), so any disagreement is the keyword's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agtool import Gate
from agtool._contract import parse_entry
from agtool._jsonschema import SchemaError, from_json_schema, import_tool, tool_definition
from agtool._jsonschema.schema_check import compile_schema_check, json_equal
from agtool._records import contract_hash

PER_CASE = settings(max_examples=max(30, settings().max_examples // 2))

ints = st.integers(-20, 20)
numbers = st.one_of(ints, st.floats(-20, 20, allow_nan=False).map(lambda value: round(value, 2)))
short = st.text("abc0", max_size=3)
scalars = st.one_of(ints, short, st.booleans())
int_lists = st.lists(st.integers(-3, 3), max_size=5)
mixed_lists = st.lists(scalars, max_size=4)
small_dicts = st.dictionaries(short, st.one_of(ints, short), max_size=4)


def _values(schema: Any, values: st.SearchStrategy[Any]
            ) -> st.SearchStrategy[tuple[dict[str, Any], list[Any]]]:
    """A schema and a few values drawn around it."""
    return st.tuples(schema, st.lists(values, min_size=1, max_size=6))


def _multiple_of() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    steps = st.one_of(st.integers(1, 6).map(lambda step: ("integer", step)),
                      st.sampled_from([0.5, 0.25, 2.5, 0.1, 3]).map(lambda step: ("number", step)))
    return steps.flatmap(lambda kind_step: _values(
        st.just({"type": kind_step[0], "multipleOf": kind_step[1]}),
        ints if kind_step[0] == "integer" else numbers))


def _unique_items() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    return _values(st.sampled_from([
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        {"type": "array", "uniqueItems": True},
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": False},
    ]), st.one_of(int_lists, mixed_lists, st.lists(int_lists, max_size=3)))


def _not() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    inner = st.one_of(
        st.lists(ints, min_size=1, max_size=3).map(lambda values: {"enum": values}),
        ints.map(lambda low: {"minimum": low}),
        st.just({"type": "string"}),
        st.just({"pattern": "^a"}),
        st.integers(1, 3).map(lambda step: {"multipleOf": step}),
    )
    return _values(inner.map(lambda negated: {"type": ["integer", "string"], "not": negated}),
                     st.one_of(ints, short))


def _if_then_else() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.builds(lambda low, step, high, has_else: {
        "type": "integer", "if": {"minimum": low}, "then": {"multipleOf": step},
        **({"else": {"maximum": high}} if has_else else {})},
        ints, st.integers(1, 4), ints, st.booleans())
    return _values(schema, ints)


def _pattern_properties() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.builds(lambda pattern, closed, named: {
        "type": "object", "patternProperties": {pattern: {"type": "integer"}},
        **({"properties": {"b": {"type": "string"}}} if named else {}),
        **({"additionalProperties": False} if closed else {})},
        st.sampled_from(["^a", "0$", "[bc]"]), st.booleans(), st.booleans())
    return _values(schema, small_dicts)


def _dependent_required() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.just({"type": "object", "additionalProperties": False,
                      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                     "c": {"type": "integer"}},
                      "dependentRequired": {"a": ["b"], "c": ["a", "b"]}})
    values = st.dictionaries(st.sampled_from("abc"), ints, max_size=3)
    return _values(schema, values)


def _property_names() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.sampled_from([{"type": "object", "propertyNames": {"maxLength": 2}},
                              {"type": "object", "propertyNames": {"pattern": "^[ab]+$"}},
                              {"type": "object", "propertyNames": {"enum": ["a", "b0"]}}])
    return _values(schema, small_dicts)


def _prefix_items() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.builds(lambda rest, most: {
        "type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
        **({"items": rest} if rest is not None else {}),
        **({"maxItems": most} if most is not None else {})},
        st.sampled_from([None, False, {"type": "boolean"}]), st.none() | st.integers(0, 3))
    return _values(schema, mixed_lists)


def _contains() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.builds(lambda low, least, most: {
        "type": "array", "items": {"type": "integer"}, "contains": {"minimum": low},
        **({"minContains": least} if least is not None else {}),
        **({"maxContains": most} if most is not None else {})},
        st.integers(-3, 3), st.none() | st.integers(0, 2), st.none() | st.integers(0, 3))
    return _values(schema, int_lists)


def _min_max_properties() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    schema = st.builds(lambda least, most: {
        "type": "object", **({"minProperties": least} if least is not None else {}),
        **({"maxProperties": most} if most is not None else {})},
        st.none() | st.integers(0, 3), st.none() | st.integers(0, 3))
    return _values(schema, small_dicts)


def _unevaluated_properties() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    """Each place 2020-12 says a key is evaluated: beside, and in subschemas that hold."""
    shapes = [
        lambda rest: {"properties": {"a": {"type": "integer"}}, "unevaluatedProperties": rest},
        lambda rest: {"allOf": [{"properties": {"a": {"type": "integer"}}},
                                {"properties": {"b": {"type": "string"}}}],
                      "unevaluatedProperties": rest},
        # A branch that fails evaluates nothing, even a key it names.
        lambda rest: {"properties": {"a": {}}, "anyOf": [
            {"properties": {"b": {"type": "integer"}}}, {"required": ["a"]}],
            "unevaluatedProperties": rest},
        lambda rest: {"oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                {"properties": {"b": {"type": "string"}}, "required": ["b"]}],
                      "unevaluatedProperties": rest},
        lambda rest: {"properties": {"a": {"type": "integer"}},
                      "if": {"properties": {"a": {"minimum": 0}}, "required": ["a"]},
                      "then": {"properties": {"b": {"type": "string"}}},
                      "else": {"properties": {"c": {}}}, "unevaluatedProperties": rest},
        lambda rest: {"properties": {"a": {}}, "dependentSchemas": {
            "a": {"properties": {"b": {"type": "integer"}}}}, "unevaluatedProperties": rest},
        lambda rest: {"patternProperties": {"^a": {"type": "integer"}},
                      "unevaluatedProperties": rest},
        lambda rest: {"properties": {"a": {}}, "not": {"required": ["b"]},
                      "unevaluatedProperties": rest},
        # The inner one sees only its own branch: b is unevaluated there.
        lambda rest: {"allOf": [{"properties": {"a": {}}, "unevaluatedProperties": rest}],
                      "properties": {"b": {}}},
        lambda rest: {"allOf": [{"allOf": [{"properties": {"a": {"type": "integer"}}}],
                                 "unevaluatedProperties": rest}], "properties": {"b": {}},
                      "unevaluatedProperties": False},
    ]
    schema = st.builds(lambda shape, rest: {"type": "object", **shape(rest)},
                       st.sampled_from(shapes), st.sampled_from([False, {"type": "integer"}]))
    return _values(schema, st.dictionaries(st.sampled_from("abc"), st.one_of(ints, short),
                                           max_size=3))


def _unevaluated_items() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    shapes = [
        lambda rest: {"prefixItems": [{"type": "integer"}], "unevaluatedItems": rest},
        lambda rest: {"contains": {"type": "string"}, "unevaluatedItems": rest},
        lambda rest: {"allOf": [{"prefixItems": [{"type": "integer"}]},
                                {"prefixItems": [{}, {"type": "string"}]}],
                      "unevaluatedItems": rest},
        lambda rest: {"anyOf": [{"prefixItems": [{"type": "integer"}]},
                                {"contains": {"type": "boolean"}}], "unevaluatedItems": rest},
        lambda rest: {"if": {"prefixItems": [{"type": "integer"}]},
                      "then": {"prefixItems": [{}, {"type": "integer"}]},
                      "else": {"items": {"type": "string"}}, "unevaluatedItems": rest},
        lambda rest: {"prefixItems": [{"type": "integer"}], "items": {"type": "string"},
                      "unevaluatedItems": rest},
        lambda rest: {"allOf": [{"prefixItems": [{}], "unevaluatedItems": rest}],
                      "prefixItems": [{}, {}]},
    ]
    schema = st.builds(lambda shape, rest: {"type": "array", **shape(rest)},
                       st.sampled_from(shapes), st.sampled_from([False, {"type": "boolean"}]))
    return _values(schema, mixed_lists)


_INTEGER_PARTS = [{"minimum": -5}, {"maximum": 8}, {"exclusiveMinimum": 0},
                  {"exclusiveMaximum": 3}, {"multipleOf": 2}, {"enum": [1, 2, 4, 6, "a"]},
                  {"const": 4}, {"not": {"const": 0}}, {"type": "number"}, {"type": "string"},
                  {"type": ["integer", "string"]}, {"minLength": 1}]
_STRING_PARTS = [{"minLength": 1}, {"maxLength": 2}, {"pattern": "^a"}, {"pattern": "0"},
                 {"enum": ["a", "b0", "a0", 1]}, {"const": "a0"},
                 {"type": ["string", "integer"]}, {"maximum": 1}]


def _all_of() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    """allOf of two to four schemas of one type, some other, beside keywords or alone."""
    def schema(kind: str, parts: list[dict[str, Any]], beside: bool) -> dict[str, Any]:
        typed = [{"type": kind}, *parts]
        if beside:
            return {**typed[0], "allOf": typed[1:]}
        return {"allOf": typed}
    integers = st.builds(schema, st.just("integer"),
                         st.lists(st.sampled_from(_INTEGER_PARTS), min_size=1, max_size=3),
                         st.booleans())
    strings = st.builds(schema, st.just("string"),
                        st.lists(st.sampled_from(_STRING_PARTS), min_size=1, max_size=3),
                        st.booleans())
    return st.one_of(_values(integers, st.one_of(ints, short, st.booleans())),
                     _values(strings, st.one_of(short, ints)))


#: A tree through $dynamicRef to its $dynamicAnchor: one resource, so the anchor there.
TREE = {"$dynamicAnchor": "node", "type": "object", "required": ["v"], "properties": {
    "v": {"type": "integer", "multipleOf": 2},
    "kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}}
trees = st.recursive(
    st.builds(lambda v: {"v": v}, st.one_of(ints, short)),
    lambda inner: st.builds(lambda v, kids: {"v": v, "kids": kids}, ints,
                            st.lists(inner, max_size=2)), max_leaves=6)


def _dynamic_ref() -> st.SearchStrategy[tuple[dict[str, Any], Any]]:
    return _values(st.sampled_from([TREE, {**TREE, "properties": {
        **TREE["properties"], "kids": {"type": "array", "items": {
            "$dynamicRef": "#/properties/x"}}}}]), trees)


KEYWORDS = {
    "multipleOf": _multiple_of(),
    "uniqueItems": _unique_items(),
    "not": _not(),
    "if/then/else": _if_then_else(),
    "patternProperties": _pattern_properties(),
    "dependentRequired": _dependent_required(),
    "propertyNames": _property_names(),
    "prefixItems": _prefix_items(),
    "contains": _contains(),
    "minProperties/maxProperties": _min_max_properties(),
    "unevaluatedProperties": _unevaluated_properties(),
    "unevaluatedItems": _unevaluated_items(),
    "allOf": _all_of(),
    "$dynamicRef": _dynamic_ref(),
}


def _body(**kwargs: Any) -> dict[str, Any]:
    return {"ok": True}


def _input_schema(inner: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": inner}, "required": ["x"],
            "additionalProperties": False}


@pytest.mark.parametrize("keyword", KEYWORDS)
@PER_CASE
@given(data=st.data())
def test_an_argument_passes_exactly_when_jsonschema_passes_it(keyword: str,
                                                              data: st.DataObject) -> None:
    """For a schema using the keyword, the gate passes an argument iff jsonschema does."""
    inner, values = data.draw(KEYWORDS[keyword])
    schema = _input_schema(inner)
    gate = Gate({"t": from_json_schema(schema, fn=_body, name="t")})
    _agree(schema, [{"x": value} for value in values],
           lambda args: gate.validate_args("t", args))


def _agree(schema: dict[str, Any], values: list[Any], reason_of: Any) -> None:
    """The gate's reason is empty for exactly the values jsonschema finds valid."""
    oracle = Draft202012Validator(schema)
    for value in values:
        reason = reason_of(value)
        assert (reason == "") == oracle.is_valid(value), (schema, value, reason)


OUTPUTS = {
    "closed object": _values(
        st.just({"type": "object", "properties": {"a": {"type": "integer"}},
                 "additionalProperties": False}),
        st.dictionaries(st.sampled_from("ab"), ints, max_size=2)),
    "closed nested object": _values(
        st.just({"type": "object", "properties": {"rows": {"type": "array", "items": {
            "type": "object", "properties": {"id": {"type": "integer"}},
            "required": ["id"], "additionalProperties": False}}}, "required": ["rows"]}),
        st.lists(st.dictionaries(st.sampled_from(["id", "extra"]), ints, max_size=2),
                 max_size=3).map(lambda rows: {"rows": rows})),
    "allOf in a result": _values(
        st.lists(st.sampled_from([
            {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string"}}},
            {"properties": {"b": {"type": "string", "maxLength": 1}},
             "additionalProperties": False},
            {"properties": {"c": {"type": "array", "items": {"type": "integer"}}}},
            {"$ref": "#/$defs/named"}]), min_size=2, max_size=3).map(lambda parts: {
                "type": "object", "allOf": parts, "$defs": {"named": {"properties": {
                    "a": {"type": "integer", "maximum": 9},
                    "c": {"type": "array", "maxItems": 1}}}}}),
        st.dictionaries(st.sampled_from("abc"), st.one_of(ints, short, int_lists),
                        max_size=3)),
    "unevaluatedProperties in a result": _values(
        st.sampled_from([
            {"type": "object", "properties": {"a": {"type": "integer"}},
             "allOf": [{"properties": {"b": {"type": "string"}}}],
             "unevaluatedProperties": False},
            {"type": "object", "properties": {"a": {"type": "integer"}},
             "allOf": [{"anyOf": [
                 {"properties": {"b": {"type": "string"}}, "required": ["b"]},
                 {"properties": {"c": {"type": "integer"}}, "required": ["c"]}]}],
             "unevaluatedProperties": False}]),
        st.dictionaries(st.sampled_from("abc"), st.one_of(ints, short), max_size=3)),
    "multipleOf in a result": _values(
        st.just({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}},
                 "required": ["n"]}),
        ints.map(lambda number: {"n": number})),
}


@pytest.mark.parametrize("case", OUTPUTS)
@PER_CASE
@given(data=st.data())
def test_a_result_passes_exactly_when_jsonschema_passes_it(case: str,
                                                           data: st.DataObject) -> None:
    """A closed returned object refuses other keys; any output keyword holds as JSON Schema's."""
    output, values = data.draw(OUTPUTS[case])
    gate = Gate({"t": from_json_schema({"type": "object"}, output=output, fn=_body, name="t")})
    _agree(output, values, lambda value: gate.validate_result("t", value))


def test_a_closed_result_with_an_extra_key_is_refused_on_a_call() -> None:
    """The call itself (not only validate_result) answers result:shape for an extra key."""
    output = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": False}
    answers = iter([{"a": 1, "leaked": "x"}, {"a": 1}])
    gate = Gate({"t": from_json_schema({"type": "object"}, output=output,
                                       fn=lambda: next(answers), name="t")})
    assert gate.call_tool("t", {}, step_id="s1")["error"] == "result:shape"
    assert gate.call_tool("t", {}, step_id="s2") == {"ok": True, "value": {"a": 1}, "error": ""}


def test_an_open_result_still_takes_other_keys() -> None:
    """Without additionalProperties: false a returned object stays open: no check added."""
    entry = from_json_schema({"type": "object"}, output={
        "type": "object", "properties": {"a": {"type": "integer"}}}, fn=_body, name="t")
    assert "schema_checks" not in entry
    assert Gate({"t": entry}).validate_result("t", {"a": 1, "b": 2}) == ""


def test_a_refusal_names_the_argument_or_the_object() -> None:
    """An argument breaking its own keyword is schema:<arg>; a rule over several, schema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5},
                                               "a": {"type": "string"},
                                               "b": {"type": "string"}},
              "required": ["n"], "dependentRequired": {"a": ["b"]}}
    calls: list[dict[str, Any]] = []
    gate = Gate({"t": from_json_schema(schema, fn=lambda **kw: calls.append(kw) or {},
                                       name="t")})
    assert gate.call_tool("t", {"n": 7})["error"] == "args:schema:n"
    assert gate.call_tool("t", {"n": 5, "a": "x"})["error"] == "args:schema"
    assert calls == []
    assert gate.call_tool("t", {"n": 10, "a": "x", "b": "y"})["ok"]
    assert calls == [{"n": 10, "a": "x", "b": "y"}]


def test_a_keyword_only_the_schema_check_reads_still_holds_inside_a_union() -> None:
    """A oneOf whose branches differ only by a keyword checked apart counts as JSON Schema does."""
    schema = _input_schema({"oneOf": [{"type": "integer", "multipleOf": 2},
                                      {"type": "integer", "multipleOf": 3}]})
    gate = Gate({"t": from_json_schema(schema, fn=_body, name="t")})
    oracle = Draft202012Validator(schema)
    for value in range(-7, 13):
        assert (gate.validate_args("t", {"x": value}) == "") == oracle.is_valid({"x": value})


def test_a_recursive_schema_is_checked_to_any_depth() -> None:
    """A tree's $ref is followed by the schema check as deep as the value goes."""
    schema = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}},
              "required": ["tree"], "$defs": {"node": {
                  "type": "object", "properties": {"v": {"type": "integer", "multipleOf": 2},
                                                   "kids": {"type": "array", "items": {
                                                       "$ref": "#/$defs/node"}}},
                  "required": ["v"]}}}
    check = compile_schema_check(schema)
    deep: dict[str, Any] = {"v": 2}
    for _ in range(10):
        deep = {"v": 4, "kids": [deep]}
    assert check({"tree": deep})
    deep["kids"][0]["kids"][0]["v"] = 3
    assert not check({"tree": deep})


#: The classic extensible tree (2020-12's own example): a $dynamicRef whose target a
#: resource further out may change. Nested $id resources: refused by the keyword.
EXTENSIBLE_TREE = {"type": "object", "properties": {"x": {
    "$id": "https://example.com/strict-tree", "$dynamicAnchor": "node",
    "$ref": "https://example.com/tree", "unevaluatedProperties": False}},
    "$defs": {"tree": {"$id": "https://example.com/tree", "$dynamicAnchor": "node",
                       "type": "object", "properties": {"kids": {
                           "type": "array", "items": {"$dynamicRef": "#node"}}}}}}


@pytest.mark.parametrize(("schema", "pointer"), [
    pytest.param(_input_schema({"$ref": "https://example.com/x.json"}), "/properties/x/$ref",
                 id="remote-ref"),
    pytest.param(_input_schema({"type": "integer", "not": {
        "$ref": "https://example.com/x.json"}}), "/properties/x/not/$ref",
                 id="remote-ref-inside-not"),
    pytest.param(_input_schema({"allOf": [{"type": "integer"}, {
        "$ref": "https://example.com/x.json"}]}), "/properties/x/allOf/1/$ref",
                 id="remote-ref-inside-allOf"),
    pytest.param(_input_schema({"type": "object", "properties": {"a": {}},
                                "unevaluatedProperties": {
                                    "$ref": "https://example.com/x.json"}}),
                 "/properties/x/unevaluatedProperties/$ref", id="remote-ref-unevaluated"),
    pytest.param(_input_schema({"type": "integer", "not": {"$dynamicRef": "#x"}}),
                 "/properties/x/not/$dynamicRef", id="dynamicRef-to-nothing"),
    pytest.param({"$dynamicAnchor": "node", "type": "object", "properties": {"x": {
        "$id": "inner", "type": "object", "properties": {"v": {"$dynamicRef": "#node"}}}}},
        "/properties/x/properties/v/$dynamicRef", id="dynamicRef-with-nested-id"),
    pytest.param(_input_schema({"type": "integer", "multipleOf": 0}),
                 "/properties/x/multipleOf", id="multipleOf-zero"),
    pytest.param(_input_schema({"type": "string", "not": {"pattern": "(?=a)"}}),
                 "/properties/x/not/pattern", id="lookahead-inside-not"),
    pytest.param(_input_schema({"type": "string", "minProperties": 1}),
                 "/properties/x/minProperties", id="an-object-keyword-on-a-string"),
])
def test_what_cannot_be_checked_is_refused_by_location(schema: dict[str, Any],
                                                       pointer: str) -> None:
    """A keyword no check reads, or a value JSON Schema forbids, is a SchemaError there."""
    with pytest.raises(SchemaError) as caught:
        from_json_schema(schema, fn=_body, name="t")
    assert caught.value.field == pointer


def test_a_remote_reference_is_refused_because_it_needs_the_network() -> None:
    """The one reference no check can follow says why, and the extensible tree says its scope."""
    with pytest.raises(SchemaError, match="without the network"):
        from_json_schema(_input_schema({"$ref": "https://example.com/x.json"}), name="t")
    with pytest.raises(SchemaError, match="dynamic scope") as caught:
        compile_schema_check(EXTENSIBLE_TREE["$defs"]["tree"] | {"$defs": {"strict": {
            "$id": "strict", "$dynamicAnchor": "node"}}})
    assert caught.value.field.endswith("/$dynamicRef")


# --- unevaluated*, allOf and $dynamicRef: values the specs pass and the schema does not ------


def _gate(schema: dict[str, Any], output: dict[str, Any] | None = None) -> Gate:
    return Gate({"t": from_json_schema(schema, output=output, fn=_body, name="t")})


def test_a_value_the_specs_pass_is_refused_for_an_unevaluated_property() -> None:
    """A returned object is open in the specs; unevaluatedProperties closes it as 2020-12 does:
    a key only a failed anyOf branch or the branch not taken names is refused."""
    output = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}},
              "if": {"properties": {"kind": {"const": "a"}}},
              "then": {"properties": {"a": {"type": "integer"}}},
              "else": {"properties": {"b": {"type": "string"}}},
              "allOf": [{"anyOf": [{"properties": {"n": {"type": "integer"}}},
                                   {"required": ["kind"]}]}],
              "unevaluatedProperties": False}
    gate = _gate({"type": "object"}, output)
    oracle = Draft202012Validator(output)
    for value, valid in [({"kind": "a", "a": 1}, True), ({"kind": "b", "b": "s"}, True),
                         ({"kind": "b", "a": 1}, False), ({"kind": "a", "n": 1}, True),
                         ({"kind": "a", "n": "x"}, False), ({"kind": "a", "z": 1}, False)]:
        assert oracle.is_valid(value) is valid, value
        assert gate.validate_result("t", value) == ("" if valid else "shape"), value
    entry = from_json_schema({"type": "object"}, output=output, fn=_body, name="t")
    assert Gate({"t": {**entry, "schema_checks": {}}}).validate_result(
        "t", {"kind": "b", "a": 1}) == ""  # the specs alone pass it: the check refuses it


def test_nested_allof_with_unevaluated_reads_each_level_as_jsonschema_does() -> None:
    """An inner unevaluatedProperties sees only its own branch: a key named beside the
    allOf is unevaluated there; an outer one sees the keys every level evaluated."""
    inner_closed = _input_schema({"type": "object", "properties": {"b": {}}, "allOf": [
        {"properties": {"a": {}}, "unevaluatedProperties": False}]})
    outer_closed = _input_schema({"type": "object", "properties": {"c": {}}, "allOf": [
        {"allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": {}}}],
        "unevaluatedProperties": False})
    for schema, value, valid in [(inner_closed, {"a": 1}, True), (inner_closed, {"a": 1, "b": 2},
                                                                  False),
                                 (outer_closed, {"a": 1, "b": 2, "c": 3}, True),
                                 (outer_closed, {"a": "1"}, False),
                                 (outer_closed, {"d": 1}, False)]:
        assert Draft202012Validator(schema).is_valid({"x": value}) is valid
        reason = _gate(schema).validate_args("t", {"x": value})
        assert (reason == "") is valid, (schema, value, reason)


def test_a_dynamic_ref_tree_is_checked_to_any_depth() -> None:
    """The specs read the tree to RECURSION_DEPTH; the schema check reads every level."""
    gate = _gate(_input_schema(TREE))
    deep: dict[str, Any] = {"v": 2}
    for _ in range(12):
        deep = {"v": 4, "kids": [deep]}
    assert gate.validate_args("t", {"x": deep}) == ""
    leaf = deep
    while "kids" in leaf:
        leaf = leaf["kids"][0]
    leaf["v"] = 3
    assert not Draft202012Validator(_input_schema(TREE)).is_valid({"x": deep})
    assert gate.validate_args("t", {"x": deep}) == "schema:x"


def test_an_allof_argument_is_named_by_the_branch_schemas_it_breaks() -> None:
    """Arguments named in the root's allOf branches are the args; a refusal names the arg."""
    schema = {"type": "object", "allOf": [
        {"properties": {"n": {"type": "integer", "multipleOf": 2}}, "required": ["n"]},
        {"$ref": "#/$defs/more"}], "$defs": {"more": {"properties": {
            "n": {"minimum": 0}, "m": {"type": "string"}}}}}
    calls: list[dict[str, Any]] = []
    gate = Gate({"t": from_json_schema(schema, fn=lambda **kw: calls.append(kw) or {},
                                       name="t")})
    assert gate.call_tool("t", {"n": 3})["error"] == "args:schema:n"
    assert gate.call_tool("t", {"n": -2})["error"] == "args:min:n"
    assert gate.call_tool("t", {"n": 2, "m": 1})["error"] == "args:type:m"
    assert gate.call_tool("t", {"m": "s"})["error"] == "args:missing:n"
    assert calls == []
    assert gate.call_tool("t", {"n": 2, "m": "s"})["ok"]
    assert calls == [{"n": 2, "m": "s"}]


def test_a_simply_merged_allof_carries_no_check_apart() -> None:
    """Types, bounds and named keys merge exactly: no schema check is added for them."""
    entry = from_json_schema(_input_schema({"allOf": [
        {"type": "integer", "minimum": 0}, {"maximum": 9}, {"minimum": 2}]}), fn=_body, name="t")
    assert "schema_checks" not in entry
    assert entry["args"]["x"] == {"type": "int", "min": 2, "max": 9}


def test_an_imported_mcp_tool_with_such_keywords_is_served_not_hidden() -> None:
    """import_tool (the proxy's path) imports them, and the contract hash follows the schema."""
    def listing(step: int) -> dict[str, Any]:
        return {"name": "t", "annotations": {"readOnlyHint": True}, "inputSchema": {
            "type": "object", "properties": {"n": {"type": "integer", "multipleOf": step}},
            "required": ["n"]}}
    entries = [import_tool(tool_definition(listing(step), "upstream", "/tools/0"), _body)
               for step in (2, 3)]
    assert all("schema_checks" in entry for entry in entries)
    gates = [Gate({"t": entry}) for entry in entries]
    assert [gate.validate_args("t", {"n": 4}) for gate in gates] == ["", "schema:n"]
    hashes = {contract_hash(parse_entry("t", entry)) for entry in entries}
    assert len(hashes) == 2


@given(st.recursive(st.none() | st.booleans() | ints | numbers | short,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(short, inner, max_size=3), max_leaves=8),
       st.recursive(st.none() | st.booleans() | ints | numbers | short,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(short, inner, max_size=3), max_leaves=8))
def test_json_equal_is_jsonschemas_equality(one: Any, two: Any) -> None:
    """const compares as jsonschema does: 1 == 1.0, True is no 1, containers item by item."""
    assert json_equal(one, two) == Draft202012Validator({"const": one}).is_valid(two)
    assert json_equal(one, one)


# --- the schema check alone, on schemas drawn from the applicators' grammar ---------------------

_LEAVES = [
    True, False, {}, {"type": "integer"}, {"type": "string"}, {"type": "object"},
    {"type": "array"}, {"minimum": 0}, {"maxLength": 1}, {"const": 1}, {"required": ["a"]},
    {"properties": {"a": {"type": "integer"}}}, {"prefixItems": [{"type": "string"}]},
    {"items": {"type": "integer"}}, {"contains": {"type": "string"}},
    {"patternProperties": {"^b": {"type": "string"}}}, {"additionalProperties": False},
    {"unevaluatedProperties": False}, {"unevaluatedItems": False}]


def _applied(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    objects = inner.filter(lambda schema: isinstance(schema, dict))
    return st.one_of(
        st.builds(lambda key, parts: {key: parts}, st.sampled_from(["allOf", "anyOf", "oneOf"]),
                  st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda base, rest: {**base, "unevaluatedProperties": rest}, objects, inner),
        st.builds(lambda base, rest: {**base, "unevaluatedItems": rest}, objects, inner),
        st.builds(lambda condition, then, otherwise: {"if": condition, "then": then,
                                                      "else": otherwise}, inner, inner, inner),
        st.builds(lambda negated: {"not": negated}, inner),
        st.builds(lambda sub: {"dependentSchemas": {"a": sub}}, inner),
        st.builds(lambda a, b: {"properties": {"a": a, "b": b}}, inner, inner),
        st.builds(lambda first, rest: {"prefixItems": [first], "items": rest}, inner, inner))


#: A referred schema (no reference in it), and schemas that may refer to it.
_TARGETS = st.recursive(st.sampled_from(_LEAVES), _applied, max_leaves=5)
_SCHEMAS = st.builds(
    lambda target, body: {"$defs": {"s": target}, "allOf": [body]}, _TARGETS,
    st.recursive(st.sampled_from([*_LEAVES, {"$ref": "#/$defs/s"}]), _applied, max_leaves=8))
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 2)
                     | st.sampled_from(["", "a", "bb"]),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from("abc"), inner, max_size=3), max_leaves=6)


@settings(max_examples=max(200, settings().max_examples * 4))
@given(schema=_SCHEMAS, values=st.lists(_JSON, min_size=1, max_size=4))
def test_the_schema_check_is_jsonschemas_on_drawn_applicators(schema: Any,
                                                             values: list[Any]) -> None:
    """unevaluated* under every in-place applicator, nested, through $ref: jsonschema's verdict."""
    check = compile_schema_check(schema)
    oracle = Draft202012Validator(schema)
    for value in values:
        assert check(value) == oracle.is_valid(value), (schema, value)


@settings(max_examples=max(100, settings().max_examples * 2))
@given(schema=_SCHEMAS, values=st.lists(_JSON, min_size=1, max_size=4))
def test_the_gate_on_a_drawn_import_never_passes_what_jsonschema_refuses(
        schema: Any, values: list[Any]) -> None:
    """Imported (or refused by SchemaError, never another error), the contract misses no
    check the schema states, as an argument and as a result: the specs may be looser (the
    schema check then decides) or stricter where IMPORT_DIFFERENCES says, never looser."""
    defs = schema.pop("$defs")
    wrapped = {"type": "object", "properties": {"x": schema}, "required": ["x"],
               "$defs": defs}
    oracle = Draft202012Validator(wrapped)
    for output in (False, True):
        try:
            entry = from_json_schema({"type": "object"} if output else wrapped,
                                     output=wrapped if output else None, fn=_body, name="t")
        except SchemaError:
            continue
        gate = Gate({"t": entry})
        for value in values:
            reason = (gate.validate_result("t", {"x": value}) if output
                      else gate.validate_args("t", {"x": value}))
            assert reason != "" or oracle.is_valid({"x": value}), (wrapped, value, output)
