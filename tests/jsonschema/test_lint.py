"""Schema lint: each rule, each fixed bug of seed 002's script, and the echo match rate.

Expected findings are written out from the schemas here and the fixtures under
``tests/fixtures/``, never read back from the lint's own output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agtool import ContractError
from agtool._jsonschema import ECHO_KEYWORD, SchemaError
from agtool._jsonschema.lint import (
    DENSITY_FLOOR,
    RULES,
    Finding,
    echo_match_rate,
    format_findings,
    lint_file,
    lint_schema,
    lint_table,
)
from agtool.tools import TOOLS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PROVIDER_FILES = ["openai_tools.json", "anthropic_tools.json", "mcp_tools.json"]

CLOSED = {"type": "string", "enum": ["a"]}


def schema_of(properties: dict[str, Any], required: list[str] | None = None,
              **root: Any) -> dict[str, Any]:
    """An object schema with ``properties``, all required unless ``required`` says."""
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required, **root}


def found(schema: Any) -> list[tuple[str, str]]:
    """The (rule, location) pairs the lint reports, sorted."""
    return sorted((finding.rule, finding.location) for finding in lint_schema(schema, "t"))


# --- R1: required-field density -----------------------------------------------------------


@pytest.mark.parametrize(("fields", "required", "flagged"), [
    pytest.param(3, 2, True, id="3-fields-2-required"),
    pytest.param(4, 3, False, id="4-fields-3-required-is-the-floor"),
    pytest.param(8, 5, True, id="8-fields-5-required"),
    pytest.param(2, 0, False, id="fewer-than-three-fields"),
    pytest.param(3, 3, False, id="all-required"),
])
def test_r1_flags_low_required_density(fields: int, required: int, flagged: bool) -> None:
    """R1 fires for 3+ fields with fewer than 75% required, and only then."""
    names = [f"f{index}" for index in range(fields)]
    schema = schema_of(dict.fromkeys(names, CLOSED), required=names[:required])
    assert found(schema) == ([("R1", "")] if flagged else [])
    assert DENSITY_FLOOR == 0.75


def test_r1_ignores_required_names_that_are_not_properties() -> None:
    """A required name with no property does not raise the density."""
    schema = schema_of(dict.fromkeys(["a", "b", "c"], CLOSED), required=["a", "b", "ghost"])
    assert found(schema) == [("R1", "")]


# --- R2, R3: open strings and boolean switches -------------------------------------------


@pytest.mark.parametrize(("node", "flagged"), [
    pytest.param({"type": "string"}, True, id="bare-string"),
    pytest.param({"type": "string", "maxLength": 9}, True, id="length-is-not-closed"),
    pytest.param({"type": ["string", "integer"]}, True, id="string-in-a-type-list"),
    pytest.param({"type": "string", "enum": ["a"]}, False, id="enum"),
    pytest.param({"type": "string", "const": "a"}, False, id="const"),
    pytest.param({"type": "string", "pattern": "^a$"}, False, id="pattern"),
    pytest.param({"type": "integer"}, False, id="not-a-string"),
])
def test_r2_flags_strings_without_a_closed_vocabulary(node: dict[str, Any],
                                                      flagged: bool) -> None:
    """R2 fires for a string with neither enum, const nor pattern."""
    assert found(schema_of({"s": node})) == ([("R2", "/properties/s")] if flagged else [])


def test_r3_flags_boolean_switches() -> None:
    """R3 fires for each boolean, in a type list too."""
    schema = schema_of({"on": {"type": "boolean"}, "maybe": {"type": ["boolean", "integer"]},
                        "n": {"type": "integer"}})
    assert found(schema) == [("R3", "/properties/maybe"), ("R3", "/properties/on")]


# --- R4: sentinel ambiguity, and the seed's first bug -------------------------------------


@pytest.mark.parametrize(("node", "flagged"), [
    pytest.param({"type": "integer"}, False, id="no-default-is-not-a-null-default"),
    pytest.param({"type": "integer", "default": 0}, False, id="zero-default"),
    pytest.param({"type": "integer", "default": None}, True, id="explicit-null-default"),
    pytest.param({"type": "null"}, True, id="null-type"),
    pytest.param({"type": ["integer", "null"]}, False, id="nullable-property-is-not-given"),
    pytest.param({"anyOf": [{"type": "integer"}, {"type": "null"}]}, False,
                 id="null-branch-of-a-property-is-not-given"),
])
def test_r4_flags_declared_nulls_only(node: dict[str, Any], flagged: bool) -> None:
    """R4 fires for "default": null or a null type; a missing default is not a null one.

    A property's ``[T, "null"]`` or null branch is not flagged: the gate reads that
    null as "not given" and hands the body no such key.

    Seed 002's script tested ``node.get("default") is None``, which is also true
    when no default is declared at all.
    """
    assert found(schema_of({"n": node})) == ([("R4", "/properties/n")] if flagged else [])


@pytest.mark.parametrize(("schema", "location"), [
    pytest.param({"type": "object", "properties": {"xs": {
        "type": "array", "items": {"type": ["integer", "null"]}}}}, "/properties/xs/items",
        id="null-list-item"),
    pytest.param({"type": "object", "properties": {"n": {
        "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}}},
        "/properties/n/anyOf/2", id="null-beside-a-union"),
])
def test_r4_still_flags_a_null_the_gate_cannot_read_as_not_given(schema: dict[str, Any],
                                                                 location: str) -> None:
    """A null list item, or null in a wider union, is still a sentinel to review."""
    assert ("R4", location) in found(schema)


def test_r4_reports_a_null_default_and_a_null_type_separately() -> None:
    """Both causes on one node are two findings, each saying which."""
    findings = lint_schema(schema_of({"n": {"type": "null", "default": None}}), "t")
    assert [finding.rule for finding in findings] == ["R4", "R4"]
    assert "default" in findings[0].message
    assert "type" in findings[1].message


# --- R5: id-like fields not marked echo ---------------------------------------------------


@pytest.mark.parametrize(("name", "node", "flagged"), [
    pytest.param("request_id", {"type": "string"}, True, id="request_id"),
    pytest.param("ticket_id", {"type": "string", "pattern": "^T-[0-9]+$"}, True,
                 id="patterned-id"),
    pytest.param("id", {"type": "string", "enum": ["x"]}, True, id="id"),
    pytest.param("customerId", {"type": "string", "enum": ["x"]}, True, id="camel-case"),
    pytest.param("request_id", {"type": "string", ECHO_KEYWORD: True, "enum": ["x"]}, False,
                 id="marked-echo"),
    pytest.param("order_id", {"type": "integer"}, False, id="not-a-string"),
    pytest.param("paid", {"type": "string", "enum": ["x"]}, False, id="ends-in-id-not-an-id"),
    pytest.param("valid", {"type": "string", "enum": ["x"]}, False, id="valid"),
])
def test_r5_flags_id_like_strings_not_marked_echo(name: str, node: dict[str, Any],
                                                  flagged: bool) -> None:
    """R5 fires for an id-like string argument without the echo marker."""
    findings = [finding for finding in lint_schema(schema_of({name: node}), "t")
                if finding.rule == "R5"]
    assert [finding.location for finding in findings] == (
        [f"/properties/{name}"] if flagged else [])


def test_r5_reads_the_echo_marker_and_type_through_a_ref() -> None:
    """A $ref'd id is a string by its definition, and may carry the marker there or here."""
    defs = {"$defs": {"Rid": {"type": "string", "pattern": "^r-[0-9]+$"},
                      "Marked": {"type": "string", "pattern": "^r$", ECHO_KEYWORD: True}}}
    schema = schema_of({"request_id": {"$ref": "#/$defs/Rid"},
                        "parent_id": {"$ref": "#/$defs/Rid", ECHO_KEYWORD: True},
                        "root_id": {"$ref": "#/$defs/Marked"}}, **defs)
    assert found(schema) == [("R5", "/properties/request_id")]


def test_r5_skips_refs_it_cannot_read_as_strings() -> None:
    """An id whose $ref loops or leaves the document is not assumed to be a string."""
    schema = schema_of({"a_id": {"$ref": "#/$defs/Loop"}},
                       **{"$defs": {"Loop": {"$ref": "#/$defs/Loop"}}})
    assert found(schema) == []


# --- The walk: the seed's second bug ------------------------------------------------------


@pytest.mark.parametrize(("node", "location"), [
    pytest.param({"type": "array", "items": {"type": "boolean"}}, "/properties/x/items",
                 id="items-schema"),
    pytest.param({"type": "array", "items": [CLOSED, {"type": "boolean"}]},
                 "/properties/x/items/1", id="items-tuple"),
    pytest.param({"type": "array", "prefixItems": [{"type": "boolean"}]},
                 "/properties/x/prefixItems/0", id="prefixItems"),
    pytest.param({"type": "array", "items": CLOSED, "additionalItems": {"type": "boolean"}},
                 "/properties/x/additionalItems", id="additionalItems"),
    pytest.param({"anyOf": [CLOSED, {"type": "boolean"}]}, "/properties/x/anyOf/1",
                 id="anyOf"),
    pytest.param({"oneOf": [{"type": "boolean"}]}, "/properties/x/oneOf/0", id="oneOf"),
    pytest.param({"allOf": [{"type": "boolean"}]}, "/properties/x/allOf/0", id="allOf"),
    pytest.param({"not": {"type": "boolean"}}, "/properties/x/not", id="not"),
    pytest.param({"type": "object", "additionalProperties": {"type": "boolean"}},
                 "/properties/x/additionalProperties", id="additionalProperties"),
    pytest.param({"type": "object", "properties": {"deep": {"type": "boolean"}}},
                 "/properties/x/properties/deep", id="nested-properties"),
])
def test_walk_reaches_every_kind_of_subschema(node: dict[str, Any], location: str) -> None:
    """A boolean hidden in any subschema position is found where it is."""
    assert found(schema_of({"x": node})) == [("R3", location)]


def test_walk_reaches_defs_and_reports_a_shared_definition_once() -> None:
    """$defs are walked, and a definition reached by two $refs is reported once, there."""
    schema = schema_of({"a": {"$ref": "#/$defs/Flag"}, "b": {"$ref": "#/$defs/Flag"}},
                       **{"$defs": {"Flag": {"type": "boolean"}, "Unused": {"type": "null"}},
                          "definitions": {"Old": {"type": "boolean"}}})
    assert found(schema) == [("R3", "/$defs/Flag"), ("R3", "/definitions/Old"),
                             ("R4", "/$defs/Unused")]


def test_walk_follows_a_ref_outside_the_walked_keywords() -> None:
    """A $ref to a schema under an unknown key (or a list index) is walked at its target."""
    schema = schema_of({"a": {"$ref": "#/x-shared/flags/0"}, "b": {"$ref": "#/x-shared/a~1b"}},
                       **{"x-shared": {"flags": [{"type": "boolean"}],
                                       "a/b": {"type": "null"}}})
    # The location is a JSON pointer: the "/" inside the key stays escaped.
    assert found(schema) == [("R3", "/x-shared/flags/0"), ("R4", "/x-shared/a~1b")]


@pytest.mark.parametrize("ref", ["https://example.com/s.json", "#/$defs/Missing"])
def test_a_ref_the_walk_cannot_follow_is_an_error(ref: str) -> None:
    """Skipping a ref would hide what it points at, so it is refused by location."""
    with pytest.raises(SchemaError, match="cannot be followed") as caught:
        lint_schema(schema_of({"a": {"$ref": ref}}), "t")
    assert caught.value.field == "/properties/a/$ref"


def test_boolean_schemas_and_odd_shapes_are_passed_over() -> None:
    """true/false subschemas and non-list required are nothing to review, not a crash."""
    schema = {"type": "object", "properties": {"a": True, "b": False, "c": CLOSED},
              "required": "a"}
    assert found(schema) == [("R1", "")]
    assert found({"type": "object"}) == []


def test_input_schema_must_be_an_object() -> None:
    """A non-object schema is an error naming the tool."""
    with pytest.raises(SchemaError, match="tool 't'"):
        lint_schema(["not", "a", "schema"], "t")


# --- Whole files and tables ---------------------------------------------------------------

#: What the three provider fixtures hold, read off the files by hand.
PROVIDER_FINDINGS = sorted([
    ("issue_refund", "R5", "/properties/order_id"),
    ("issue_refund", "R5", "/properties/request_id"),
    ("issue_refund", "R3", "/properties/notify_customer"),
    ("create_ticket", "R1", ""),  # 3 of 5 required
    ("create_ticket", "R5", "/properties/customer_id"),
    ("create_ticket", "R2", "/properties/subject"),
    ("create_ticket", "R2", "/properties/body"),
    ("search_orders", "R1", ""),  # 2 of 5 required
    ("search_orders", "R2", "/properties/query"),
    ("search_orders", "R3", "/properties/include_archived"),
])


def _triples(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return sorted((finding.tool, finding.rule, finding.location) for finding in findings)


@pytest.mark.parametrize("file", PROVIDER_FILES)
def test_provider_fixtures_give_the_findings_read_off_them(file: str) -> None:
    """Each format of the refund, ticket and search tools gives the same ten findings."""
    assert _triples(lint_file(FIXTURES / file)) == PROVIDER_FINDINGS


def test_walk_fixture_gives_every_nested_finding_once() -> None:
    """lint_walk.json hides findings in every subschema position; each is found once."""
    expected = sorted(("update_ticket", rule, location) for rule, location in [
        ("R1", ""),  # 2 of 13 fields required
        ("R5", "/properties/parent_id"),
        ("R2", "/properties/parent_id"),
        ("R4", "/properties/assignee"),  # "default": null
        # Not its {"type": "null"} branch: the gate reads that null as "not given".
        ("R2", "/properties/labels/items"),
        ("R2", "/$defs/Note/properties/text"),  # reached through two $refs, reported once
        ("R3", "/$defs/Note/properties/internal"),
        ("R2", "/properties/position/prefixItems/1"),
        ("R3", "/properties/legacy_pair/items/0"),
        ("R2", "/properties/escalation/oneOf/1/properties/team"),
        ("R2", "/properties/audit/allOf/0/properties/reason"),
    ])
    assert _triples(lint_file(FIXTURES / "lint_walk.json")) == expected


def test_walk_fixture_has_no_finding_where_nothing_is_declared() -> None:
    """status and priority declare no default: the seed's script would have flagged them."""
    locations = {finding.location for finding in lint_file(FIXTURES / "lint_walk.json")}
    assert not {"/properties/status", "/properties/priority", "/$defs/Status"} & locations


def test_lint_table_reads_the_exported_schema() -> None:
    """The reference tools: sku is an open string in both; region and limit are closed."""
    assert _triples(lint_table(TOOLS)) == [("legacy_stock", "R2", "/properties/sku"),
                                          ("stock_lookup", "R2", "/properties/sku")]


def test_lint_table_respects_echo_and_refuses_a_malformed_table() -> None:
    """An echo id is not flagged by R5; a malformed table raises ContractError."""
    table = {"t": {"fn": lambda **kwargs: {}, "returns": {}, "args": {
        "request_id": {"type": "str", "pattern": "r-[0-9]+", "echo": True},
        "order_id": {"type": "str", "pattern": "o-[0-9]+"}}}}
    assert _triples(lint_table(table)) == [("t", "R5", "/properties/order_id")]
    with pytest.raises(ContractError):
        lint_table({"t": {"fn": print, "args": {"x": {"type": "string"}}, "returns": {}}})


def test_lint_file_errors_name_the_file_and_location(tmp_path: Path) -> None:
    """A tool whose schema is not an object is reported with file, tool and pointer."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "refund", "input_schema": []}]))
    with pytest.raises(SchemaError) as caught:
        lint_file(path)
    assert (caught.value.source, caught.value.tool, caught.value.field) == (
        str(path), "refund", "/0/input_schema")


# --- Output ------------------------------------------------------------------------------


def test_format_findings_is_a_table_with_a_count() -> None:
    """One line per finding under a header, '-' for the tool as a whole, then a count."""
    text = format_findings([Finding("R1", "refund", "", "few required"),
                            Finding("R2", "refund", "/properties/memo", "open string")])
    lines = text.splitlines()
    assert lines[0].split() == ["RULE", "TOOL", "LOCATION", "FINDING"]
    assert lines[1].split() == ["R1", "refund", "-", "few", "required"]
    assert lines[2].split() == ["R2", "refund", "/properties/memo", "open", "string"]
    assert lines[3].startswith("2 findings")
    assert format_findings([Finding("R3", "t", "/a", "flag")]).splitlines()[-1].startswith(
        "1 finding ")


def test_format_findings_says_when_there_are_none() -> None:
    """No findings is said in words, not an empty table."""
    assert format_findings([]) == "no findings"


def test_findings_are_json_ready_and_rules_are_documented() -> None:
    """as_dict gives the four fields, and every rule a finding can carry is in RULES."""
    finding = Finding("R2", "t", "/properties/q", "open")
    assert json.loads(json.dumps(finding.as_dict())) == {
        "rule": "R2", "tool": "t", "location": "/properties/q", "message": "open"}
    rules = {finding.rule for file in [*PROVIDER_FILES, "lint_walk.json"]
             for finding in lint_file(FIXTURES / file)}
    # The fixtures hold no dangerous pattern; R6 is pinned in tests/core/test_patterns.py.
    assert rules | {"R6"} == set(RULES) == {"R1", "R2", "R3", "R4", "R5", "R6"}


# --- echo_match_rate: the seed's third bug ----------------------------------------------


def sample(given: Any = None, echoed: Any = None) -> dict[str, Any]:
    """A sample whose input and args carry request_id when not None."""
    return {"input": {} if given is None else {"request_id": given},
            "args": {} if echoed is None else {"request_id": echoed}}


@pytest.mark.parametrize(("samples", "rate"), [
    pytest.param([], None, id="no-samples-no-rate"),
    pytest.param([sample()], 0.0, id="missing-on-both-sides-is-a-miss"),
    pytest.param([sample("r-1")], 0.0, id="missing-in-args"),
    pytest.param([sample(None, "r-1")], 0.0, id="missing-in-input"),
    pytest.param([{"input": {"request_id": None}, "args": {"request_id": None}}], 0.0,
                 id="null-on-both-sides-is-a-miss"),
    pytest.param([sample(1, True)], 0.0, id="one-is-not-true"),
    pytest.param([sample("r-8841", "r-8814")], 0.0, id="transposed"),
    pytest.param([sample("r-1", "r-1")], 1.0, id="copied"),
    pytest.param([sample("a", "a"), sample("b", "b"), sample("c", "c"), sample("d")], 0.75,
                 id="three-of-four"),
    pytest.param([{"input": "r-1", "args": ["r-1"]}], 0.0, id="sides-not-mappings"),
])
def test_echo_match_rate_counts_only_real_copies(samples: list[Any], rate: float | None) -> None:
    """A hit is a value present on both sides and equal, of the same type."""
    assert echo_match_rate(samples) == rate


def test_echo_match_rate_reads_the_named_field_from_any_iterable() -> None:
    """field picks the key; a generator of samples works as well as a list."""
    samples = ({"input": {"ticket": t}, "args": {"ticket": t}} for t in ("T-1", "T-2"))
    assert echo_match_rate(samples, field="ticket") == 1.0


def test_echo_match_rate_refuses_a_sample_that_is_not_a_mapping() -> None:
    """A malformed sample is a TypeError naming its index, not a silent miss."""
    with pytest.raises(TypeError, match="sample 1"):
        echo_match_rate([sample("a", "a"), "a"])  # type: ignore[list-item]
