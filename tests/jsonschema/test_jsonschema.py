"""JSON Schema out of contract tables and back in, on the reference tools and real tool files.

Expected schemas are written out by hand from the contract they come from; the
refund, ticket and search tools under ``tests/fixtures/`` are the same three
tools in OpenAI, Anthropic and MCP form, so each format must give one contract.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agtool import RISKS, ContractError, Gate
from agtool._contract import parse_entry
from agtool._jsonschema import (
    DIALECT,
    ECHO_KEYWORD,
    ECHO_NOTE,
    SchemaError,
    export_tools,
    from_json_schema,
    load_tools,
    load_tools_file,
    openai_strict_problems,
    output_schema,
    read_tools_file,
    to_json_schema,
    tool_spec,
)
from agtool.tools import MAX_ROWS, REGIONS, TOOLS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PROVIDER_FILES = ["openai_tools.json", "anthropic_tools.json", "mcp_tools.json"]


def _fn(**kwargs: Any) -> dict[str, Any]:
    return {}


def one_tool(args: Any = None, returns: Any = None, description: str = "") -> dict[str, Any]:
    """A one-tool table ``t``."""
    return {"t": {"fn": _fn, "args": args or {}, "returns": returns or {},
                  "description": description}}


def schema_of(properties: dict[str, Any], **root: Any) -> dict[str, Any]:
    """An input schema with ``properties``; ``root`` adds root keywords."""
    return {"type": "object", "properties": properties, **root}


# --- Out --------------------------------------------------------------------------------


def test_reference_input_schema_is_its_contract() -> None:
    """stock_lookup's args become a closed object: sku, region's enum, limit's bounds."""
    assert to_json_schema(TOOLS, "stock_lookup") == {
        "$schema": DIALECT,
        "type": "object",
        "properties": {
            "sku": {"type": "string", "description": "Product code, e.g. A100."},
            "region": {"type": "string", "description": "Region whose stores are searched.",
                       "enum": REGIONS},
            "limit": {"type": "integer", "description": "How many store rows to return at most.",
                      "minimum": 1, "maximum": MAX_ROWS},
        },
        "required": ["sku", "region", "limit"],
        "additionalProperties": False,
    }


def test_reference_output_schema_is_its_return_contract() -> None:
    """Returned rows: at least one (empty is refused), at most MAX_ROWS, items open."""
    assert output_schema(TOOLS, "stock_lookup") == {
        "$schema": DIALECT,
        "type": "object",
        "properties": {
            "sku": {"type": "string"},
            "rows": {"type": "array", "maxItems": MAX_ROWS, "minItems": 1, "items": {
                "type": "object",
                "properties": {"store": {"type": "string"},
                               "count": {"type": "integer", "minimum": 0}},
                "required": ["store", "count"],
            }},
        },
        "required": ["sku", "rows"],
    }


def test_a_returned_list_with_min_len_zero_may_be_empty() -> None:
    """min_len 0 on a returned list drops the implicit minItems 1, and the gate agrees."""
    table = one_tool(returns={"hits": {"type": "list", "min_len": 0}})
    schema = output_schema(table, "t")
    assert schema["properties"]["hits"]["minItems"] == 0
    assert Draft202012Validator(schema).is_valid({"hits": []})
    assert Gate(table).validate_result("t", {"hits": []}) == ""


def test_pattern_is_exported_as_a_full_match() -> None:
    """A pattern is wrapped ^(?:...)$, so a search cannot match part of the value."""
    table = one_tool(args={"ticket": {"type": "str", "pattern": r"T-\d+|X"}})
    schema = to_json_schema(table, "t")
    assert schema["properties"]["ticket"]["pattern"] == r"^(?:T-\d+|X)$"
    validator = Draft202012Validator(schema)
    for value in ("T-12x", "xT-12", "XX"):
        assert not validator.is_valid({"ticket": value})
        assert Gate(table).validate_args("t", {"ticket": value}) == "pattern:ticket"
    assert validator.is_valid({"ticket": "T-12"})


def test_pattern_with_global_flags_cannot_be_anchored() -> None:
    """A global inline flag is legal only first, so it is refused at export, by location."""
    table = one_tool(args={"code": {"type": "str", "pattern": "(?i)abc"}})
    with pytest.raises(SchemaError, match="inline flags") as caught:
        to_json_schema(table, "t")
    assert caught.value.field == "/properties/code/pattern"


def test_lengths_and_items_map_to_their_keywords() -> None:
    """min_len/max_len are minLength/maxLength on strings and minItems/maxItems on lists."""
    table = one_tool(args={
        "note": {"type": "str", "min_len": 1, "max_len": 9},
        "tags": {"type": "list", "min_len": 2, "max_len": 4, "item": {"type": "bool"}},
        "rows": {"type": "list", "item": {"id": {"type": "int"},
                                          "memo": {"type": "str", "required": False}}},
        "meta": {"type": "dict", "required": False},
        "score": {"type": "float", "allowed": [0.5, 1]},
    })
    properties = to_json_schema(table, "t")["properties"]
    assert properties["note"] == {"type": "string", "minLength": 1, "maxLength": 9}
    assert properties["tags"] == {"type": "array", "minItems": 2, "maxItems": 4,
                                  "items": {"type": "boolean"}}
    assert properties["rows"]["items"] == {
        "type": "object", "properties": {"id": {"type": "integer"},
                                         "memo": {"type": ["string", "null"]}},
        "required": ["id"], "additionalProperties": False}
    assert properties["meta"] == {"type": ["object", "null"]}
    assert properties["score"] == {"type": "number", "enum": [0.5, 1]}


def test_echo_argument_is_required_marked_and_explained() -> None:
    """An echo argument is required even if optional, carries the marker and the note."""
    table = one_tool(args={"request_id": {"type": "str", "echo": True, "required": False,
                                          "description": "The request id."}})
    schema = to_json_schema(table, "t")
    assert schema["required"] == ["request_id"]
    assert schema["properties"]["request_id"] == {
        "type": "string", "description": f"The request id. {ECHO_NOTE}", ECHO_KEYWORD: True}


def test_unknown_tool_and_bad_table_are_contract_errors() -> None:
    """Asking for a tool the table lacks, or passing no table, names the problem."""
    with pytest.raises(ContractError, match="no such tool"):
        to_json_schema(TOOLS, "stock_lokup")
    with pytest.raises(ContractError, match="must be a dict"):
        output_schema([], "t")  # type: ignore[arg-type]


# --- Provider specs ---------------------------------------------------------------------


def test_provider_specs_carry_the_same_schema_without_dialect() -> None:
    """OpenAI, Anthropic and MCP get the input schema minus $schema; MCP also the output."""
    inputs = {key: value for key, value in to_json_schema(TOOLS, "stock_lookup").items()
              if key != "$schema"}
    outputs = {key: value for key, value in output_schema(TOOLS, "stock_lookup").items()
               if key != "$schema"}
    description = TOOLS["stock_lookup"]["description"]
    assert tool_spec(TOOLS, "stock_lookup", "openai") == {"type": "function", "function": {
        "name": "stock_lookup", "description": description, "parameters": inputs,
        "strict": True}}
    assert tool_spec(TOOLS, "stock_lookup", "anthropic") == {
        "name": "stock_lookup", "description": description, "input_schema": inputs}
    assert tool_spec(TOOLS, "stock_lookup", "mcp") == {
        "name": "stock_lookup", "description": description, "inputSchema": inputs,
        "outputSchema": outputs, "annotations": {"readOnlyHint": True, "destructiveHint": False,
                                                 "idempotentHint": True,
                                                 "openWorldHint": False}}


def test_export_tools_lists_every_tool_in_table_order() -> None:
    """export_tools gives one spec per tool, in the table's order."""
    assert [spec["name"] for spec in export_tools(TOOLS, "anthropic")] == list(TOOLS)


def test_a_tool_without_description_has_no_description_key() -> None:
    """An empty description is left out rather than sent as ""."""
    assert "description" not in tool_spec(one_tool(), "t", "anthropic")


@pytest.mark.parametrize(("args", "words"), [
    pytest.param({"q": {"type": "str", "required": False, "nullable": False}},
                 ["q", "nullable"], id="optional-not-null"),
    pytest.param({"q": {"type": "str", "max_len": 9}}, ["q", "maxLength"], id="max-len"),
    pytest.param({"q": {"type": "dict"}}, ["q", "free-form"], id="free-dict"),
    pytest.param({"r": {"type": "str", "echo": True}}, ["r", "echo"], id="echo"),
    pytest.param({"rows": {"type": "list", "item": {"a": {"type": "int", "required": False,
                                                          "nullable": False}}}},
                 ["rows[].a", "nullable"], id="optional-member-not-null"),
    pytest.param({"opts": {"type": "dict", "item": {"a": {"type": "dict"}}}},
                 ["opts.a", "free-form"], id="free-dict-in-a-named-dict"),
    pytest.param({"tags": {"type": "list", "item": {"type": "str", "min_len": 1}}},
                 ["tags[]", "minLength"], id="item-min-len"),
])
def test_openai_export_is_not_strict_when_strict_mode_cannot_say_it(
    args: dict[str, Any], words: list[str],
) -> None:
    """strict: false, with a reason naming the argument, rather than a schema that lies."""
    table = one_tool(args=args)
    assert tool_spec(table, "t", "openai")["function"]["strict"] is False
    problems = openai_strict_problems(table, "t")
    assert len(problems) == 1
    assert all(word in problems[0] for word in words)


def test_openai_strict_tool_has_every_property_required() -> None:
    """A strict export lists every property in required and closes every object."""
    table = one_tool(args={"rows": {"type": "list", "item": {"a": {"type": "int"}}},
                           "n": {"type": "int", "min": 1}})
    function = tool_spec(table, "t", "openai")["function"]
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["rows", "n"]
    assert function["parameters"]["properties"]["rows"]["items"]["additionalProperties"] is False


@pytest.mark.parametrize("format_", ["openai", "anthropic"])
def test_provider_tool_names_are_checked(format_: str) -> None:
    """OpenAI and Anthropic take 1 to 64 of [A-Za-z0-9_-]; MCP is not so narrow."""
    table = {"stock.lookup": TOOLS["stock_lookup"]}
    with pytest.raises(SchemaError, match="64"):
        tool_spec(table, "stock.lookup", format_)
    assert tool_spec(table, "stock.lookup", "mcp")["name"] == "stock.lookup"


def test_unknown_format_is_refused() -> None:
    """A format other than openai, anthropic and mcp is a ValueError naming them."""
    with pytest.raises(ValueError, match="openai"):
        tool_spec(TOOLS, "stock_lookup", "gemini")


# --- In: the real tool files ------------------------------------------------------------

REFUND_OK = {"order_id": "ord_12345678", "amount_cents": 1999, "currency": "EUR",
             "reason": "damaged", "notify_customer": True, "request_id": "req_AbCdEf123456"}
#: What the MCP fixture's annotations say of each tool, stated for the formats that cannot.
FIXTURE_EFFECTS = {"issue_refund": "irreversible", "create_ticket": "reversible_write",
                   "search_orders": "read"}


def load_fixture(file: str, **fns: Any) -> dict[str, dict[str, Any]]:
    """A provider fixture's table, each tool a read or a write as the MCP annotations say."""
    effects = None if file == "mcp_tools.json" else FIXTURE_EFFECTS
    return load_tools_file(FIXTURES / file, fns=fns, effects=effects)


def trusted_call(gate: Gate, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A call with every scope, an approval of these args and a step key, as an operator's."""
    return dict(gate.call_tool(name, args, scope=RISKS, run_id="run-1", step_id=repr(args),
                               approvals=[gate.approve(name, args)]))


@pytest.mark.parametrize("file", PROVIDER_FILES)
@pytest.mark.parametrize(("change", "reason"), [
    pytest.param({}, "raised:NotImplementedError", id="valid-reaches-the-stub"),
    pytest.param({"amount_cents": 0}, "args:min:amount_cents", id="minimum"),
    pytest.param({"amount_cents": 500001}, "args:max:amount_cents", id="maximum"),
    pytest.param({"amount_cents": 10.0}, "args:type:amount_cents", id="integral-float"),
    pytest.param({"currency": "usd"}, "args:allowed:currency", id="enum"),
    pytest.param({"order_id": "ord_1234567"}, "args:pattern:order_id", id="pattern"),
    pytest.param({"order_id": "xord_12345678"}, "args:pattern:order_id", id="pattern-prefix"),
    pytest.param({"notify_customer": "yes"}, "args:type:notify_customer", id="boolean"),
    pytest.param({"note": "rush"}, "args:unexpected:note", id="extra-argument"),
])
def test_refund_tool_is_gated_as_its_schema_says(file: str, change: dict[str, Any],
                                                 reason: str) -> None:
    """Each provider's refund tool refuses exactly what its schema refuses, by keyword."""
    gate = Gate(load_fixture(file))
    assert trusted_call(gate, "issue_refund", {**REFUND_OK, **change})["error"] == reason


@pytest.mark.parametrize("file", PROVIDER_FILES)
def test_optional_fields_may_be_left_out_and_required_ones_not(file: str) -> None:
    """create_ticket's priority and tags are optional; its subject is required."""
    gate = Gate(load_fixture(file))
    ticket = {"customer_id": "cus_0123456789abcdef", "subject": "Refund missing",
              "body": "Paid twice."}
    assert gate.validate_args("create_ticket", ticket) == ""
    assert gate.validate_args("create_ticket", {**ticket, "tags": ["billing"] * 6}) == (
        "max_len:tags")
    del ticket["subject"]
    assert gate.validate_args("create_ticket", ticket) == "missing:subject"


def test_every_provider_file_gives_the_same_contracts() -> None:
    """The three files describe the same tools, and import to equal contracts."""
    contracts = [
        {name: (parse_entry(name, entry).args, parse_entry(name, entry).description)
         for name, entry in load_fixture(file).items()}
        for file in PROVIDER_FILES
    ]
    assert contracts[0] == contracts[1] == contracts[2]
    assert list(contracts[0]) == ["issue_refund", "create_ticket", "search_orders"]


def test_mcp_output_schema_becomes_the_return_contract() -> None:
    """With real functions, an MCP tool's result is checked against its outputSchema."""
    refunds = iter([{"refund_id": "re_0123456789abcd", "status": "succeeded",
                     "amount_cents": 1999},
                    {"refund_id": "re_0123456789abcd", "status": "done", "amount_cents": 5}])
    table = load_tools_file(FIXTURES / "mcp_tools.json", fns={
        "issue_refund": lambda **args: next(refunds),
        "search_orders": lambda **args: {"orders": []},
    })
    gate = Gate(table)
    assert trusted_call(gate, "issue_refund", REFUND_OK)["ok"]
    assert trusted_call(gate, "issue_refund", {**REFUND_OK, "amount_cents": 5})["error"] == (
        "result:range")
    # The schema lets a search find nothing (no minItems), so the gate must too.
    assert gate.call_tool("search_orders", {"query": "mug", "limit": 5})["ok"]
    assert trusted_call(gate, "create_ticket", {"customer_id": "cus_0123456789abcdef",
                                                "subject": "Broken", "body": "."})["error"] == (
        "raised:NotImplementedError")


def test_openai_and_anthropic_tools_only_require_an_object_back() -> None:
    """Without an output schema the return contract is empty: any dict is accepted."""
    table = load_fixture("openai_tools.json", issue_refund=lambda **args: {"anything": 1})
    assert table["issue_refund"]["returns"] == {}
    assert trusted_call(Gate(table), "issue_refund", REFUND_OK)["ok"]


def test_absent_additional_properties_still_closes_the_arguments() -> None:
    """The Anthropic file omits additionalProperties; the gate refuses unnamed args anyway."""
    schema = json.loads((FIXTURES / "anthropic_tools.json").read_text())[0]["input_schema"]
    assert "additionalProperties" not in schema
    gate = Gate(load_fixture("anthropic_tools.json"))
    assert gate.validate_args("issue_refund", {**REFUND_OK, "sku": "A"}) == "unexpected:sku"


def test_read_tools_file_reports_formats_and_locations() -> None:
    """Each definition knows its format and where its schemas are in the file."""
    mcp = read_tools_file(FIXTURES / "mcp_tools.json")
    assert (mcp[0].name, mcp[0].format, mcp[0].input_at, mcp[0].output_at) == (
        "issue_refund", "mcp", "/tools/0/inputSchema", "/tools/0/outputSchema")
    openai = read_tools_file(FIXTURES / "openai_tools.json")
    assert (openai[2].format, openai[2].input_at, openai[2].output_schema) == (
        "openai", "/2/function/parameters", None)


def test_echo_survives_export_to_a_file_and_back(tmp_path: Path) -> None:
    """An exported echo argument is loaded as echo, and the gate then compares it."""
    table = one_tool(args={"request_id": {"type": "str", "echo": True,
                                          "description": "From the conversation."},
                           "amount": {"type": "int", "min": 1}})
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(export_tools(table, "mcp")))
    loaded = load_tools_file(path, fns={"t": _fn})
    assert loaded["t"]["args"]["request_id"] == {"type": "str", "echo": True,
                                                 "description": "From the conversation."}
    gate = Gate(loaded)
    args = {"request_id": "r-8841", "amount": 3}
    assert gate.call_tool("t", args, echo={"request_id": "r-8814"})["error"] == (
        "args:echo:request_id")
    assert gate.call_tool("t", args, echo={"request_id": "r-8841"})["ok"]


@pytest.mark.parametrize("format_", ["openai", "anthropic", "mcp"])
def test_every_export_format_loads_back_to_the_reference_contract(tmp_path: Path,
                                                                  format_: str) -> None:
    """export then load gives stock_lookup's argument contract back, for each format."""
    path = tmp_path / f"{format_}.json"
    path.write_text(json.dumps(export_tools(TOOLS, format_)))
    loaded = load_tools_file(path)
    assert parse_entry("stock_lookup", loaded["stock_lookup"]).args == parse_entry(
        "stock_lookup", TOOLS["stock_lookup"]).args


# --- In: the subset, keyword by keyword --------------------------------------------------


def test_annotations_are_passed_over_and_description_kept() -> None:
    """title, default, examples and $comment validate nothing; description is kept."""
    entry = from_json_schema(schema_of({"q": {
        "type": "string", "title": "Query", "default": "", "examples": ["mug"],
        "$comment": "free text", "description": "What to look for."}}, title="Search"))
    assert entry["args"] == {"q": {"type": "str", "required": False, "nullable": False,
                                   "description": "What to look for."}}


def test_local_refs_are_followed_and_keep_the_referring_description() -> None:
    """A pydantic-style $ref into $defs reads the definition; its own description wins."""
    schema = schema_of(
        {"status": {"$ref": "#/$defs/Status", "description": "New status."},
         "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}}},
        required=["status"],
        **{"$defs": {"Status": {"type": "string", "enum": ["open", "closed"]},
                     "Tag": {"type": "string", "pattern": "^[a-z]+$"}}})
    assert from_json_schema(schema)["args"] == {
        "status": {"type": "str", "allowed": ["open", "closed"], "description": "New status."},
        "tags": {"type": "list", "item": {"type": "str", "pattern": "[a-z]+"},
                 "required": False, "nullable": False},
    }


def test_a_free_object_behind_a_ref_keeps_the_referring_description() -> None:
    """The description beside a $ref to a free-form object is not lost."""
    schema = schema_of({"meta": {"$ref": "#/$defs/Meta", "description": "Extra fields."}},
                       required=["meta"], **{"$defs": {"Meta": {"type": "object"}}})
    assert from_json_schema(schema)["args"] == {
        "meta": {"type": "dict", "description": "Extra fields."}}


@pytest.mark.parametrize(("node", "spec"), [
    pytest.param({"enum": ["a", "b"]}, {"type": "str", "allowed": ["a", "b"]}, id="enum-str"),
    pytest.param({"enum": [1, 2]}, {"type": "int", "allowed": [1, 2]}, id="enum-int"),
    pytest.param({"enum": [1, 2.5]}, {"type": "float", "allowed": [1, 2.5]}, id="enum-number"),
    pytest.param({"const": True}, {"type": "bool", "allowed": [True]}, id="const-bool"),
    pytest.param({"type": ["integer"], "maximum": 3}, {"type": "int", "max": 3},
                 id="one-type-list"),
    pytest.param({"type": "array", "items": True}, {"type": "list"}, id="items-true"),
    pytest.param({"type": "array", "items": {}}, {"type": "list"}, id="items-empty"),
    pytest.param({"type": "object"}, {"type": "dict"}, id="free-object"),
    pytest.param({"type": "object", "additionalProperties": True, "description": "Any."},
                 {"type": "dict", "description": "Any."}, id="open-object"),
    pytest.param({"type": "string", "pattern": "ord_[0-9]+"},
                 {"type": "str", "pattern": "(?s:.*?)(?:ord_[0-9]+)(?s:.*)"},
                 id="unanchored-pattern-is-a-search"),
])
def test_keyword_maps_to_the_dialect(node: dict[str, Any], spec: dict[str, Any]) -> None:
    """Each accepted form becomes exactly the dialect spec it means."""
    assert from_json_schema(schema_of({"x": node}, required=["x"]))["args"] == {"x": spec}


@pytest.mark.parametrize(("min_items", "min_len"), [(None, 0), (1, None), (3, 3)])
def test_returned_top_level_array_keeps_its_minimum(min_items: int | None,
                                                    min_len: int | None) -> None:
    """No minItems means an empty list is fine (min_len 0); 1 is the gate's own default."""
    rows: dict[str, Any] = {"type": "array"}
    if min_items is not None:
        rows["minItems"] = min_items
    entry = from_json_schema(schema_of({}), output=schema_of({"rows": rows}, required=["rows"]))
    assert entry["returns"]["rows"].get("min_len") == min_len


def test_stub_body_says_how_to_give_it_a_function() -> None:
    """A tool loaded without fn raises NotImplementedError naming the tool."""
    entry = from_json_schema(schema_of({}), name="refund")
    with pytest.raises(NotImplementedError, match=r"'refund'.*fns="):
        entry["fn"]()


DEFS = {"$defs": {"Loop": {"$ref": "#/$defs/Loop"}, "Num": {"type": "integer"}}}

REFUSED = [
    # Keywords outside the subset, named where they are. (exclusiveMinimum, format,
    # oneOf, several types, prefixItems, a schema for other keys, objects whose keys
    # only the schema check reads and an allOf of several schemas were refused here once;
    # tests/jsonschema/ enforces them.)
    ({"type": "string", "minProperties": 1}, "/properties/x/minProperties", "subset"),
    ({"type": "string", "minimum": 1}, "/properties/x/minimum", "minimum"),
    ({"type": "array", "items": [{"type": "string"}]}, "/properties/x/items", "tuple"),
    ({"anyOf": [{"type": "string"}], "oneOf": [{"type": "string"}]}, "/properties/x/oneOf",
     "intersection"),
    ({"type": "string", "format": 5}, "/properties/x/format", "string"),
    ({"type": "number", "exclusiveMinimum": "0"}, "/properties/x/exclusiveMinimum", "number"),
    ({"type": "number", "exclusiveMaximum": True}, "/properties/x/exclusiveMaximum",
     "no maximum"),
    # Null where it cannot mean "not given": only an optional key can be null.
    ({"type": "array", "items": {"type": ["string", "null"]}}, "/properties/x/items/type",
     "optional key"),
    ({"type": "null"}, "/properties/x/type", "optional key"),
    ({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
     "/properties/x/items/anyOf", "optional key"),
    ({"type": "string", "nullable": "yes"}, "/properties/x/nullable", "boolean"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}], "minLength": 1},
     "/properties/x/minLength", "non-null branch"),
    ({"anyOf": [{"type": "string"}, {"type": "null", "minimum": 1}]},
     "/properties/x/anyOf/1", "only type"),
    ({"type": ["string", "null"], ECHO_KEYWORD: True}, "/properties/x", "echo"),
    # Values the dialect refuses, by the JSON keyword they came from.
    ({"type": "string", "maxLength": 1.5}, "/properties/x/maxLength", "non-negative int"),
    ({"type": "integer", "minimum": 5, "maximum": 1}, "/properties/x/minimum", "greater"),
    ({"type": "string", "enum": []}, "/properties/x/enum", "non-empty"),
    ({"type": "integer", "enum": [1, 1.5]}, "/properties/x/enum", "type"),
    ({"type": "integer", "const": "one"}, "/properties/x/const", "type"),
    ({"type": "string", "pattern": "("}, "/properties/x/pattern", "regex"),
    ({"type": "string", "pattern": 5}, "/properties/x/pattern", "string"),
    ({"type": "string", "description": 5}, "/properties/x/description", "string"),
    # Echo markers out of place.
    ({"type": "integer", ECHO_KEYWORD: True}, f"/properties/x/{ECHO_KEYWORD}", "apply"),
    ({"type": "string", ECHO_KEYWORD: "yes"}, f"/properties/x/{ECHO_KEYWORD}", "bool"),
    ({"type": "array", "items": {"type": "string", ECHO_KEYWORD: True}},
     f"/properties/x/items/{ECHO_KEYWORD}", "top-level"),
    # Types.
    ({"enum": ["a", 1]}, "/properties/x", "no type"),
    ({"type": "strin"}, "/properties/x/type", "unknown type"),
    ({"type": {"a": 1}}, "/properties/x/type", "unknown type"),
    (5, "/properties/x", "object or a boolean"),
    # References.
    ({"$ref": "https://example.com/s.json"}, "/properties/x/$ref", "local"),
    ({"$ref": "#/$defs/Missing"}, "/properties/x/$ref", "nothing"),
    ({"$ref": "#/$defs/Loop"}, "/$defs/Loop/$ref", "itself"),
]


@pytest.mark.parametrize(("node", "pointer", "word"), REFUSED,
                         ids=[f"{pointer.rsplit('/', 1)[-1]}-{index}"
                              for index, (_, pointer, _) in enumerate(REFUSED)])
def test_outside_the_subset_is_refused_by_location(node: Any, pointer: str, word: str) -> None:
    """A keyword the gate cannot enforce is refused with its JSON pointer, never dropped."""
    with pytest.raises(SchemaError) as caught:
        from_json_schema(schema_of({"x": node}, **DEFS), name="refund")
    assert caught.value.field == pointer
    assert word in caught.value.problem
    assert str(caught.value).startswith(f"tool 'refund', at '{pointer}'")


ROOTS_REFUSED = [
    ([], "", "object"),
    ({"type": "array"}, "/type", "object"),
    (schema_of({}, additionalProperties=5), "/additionalProperties", "schema"),
    ({"type": "object", "properties": []}, "/properties", "object of schemas"),
    (schema_of({}, required=["y"]), "/required/0", "'y'"),
    (schema_of({}, required="x"), "/required", "list"),
    (schema_of({}, **{"$defs": []}), "/$defs", "object of schemas"),
    (schema_of({"": {"type": "string"}}), "/properties", "non-empty"),
]


@pytest.mark.parametrize(("schema", "pointer", "word"), ROOTS_REFUSED)
def test_malformed_input_roots_are_refused(schema: Any, pointer: str, word: str) -> None:
    """The root must be a closed object schema whose required names its properties."""
    with pytest.raises(SchemaError) as caught:
        from_json_schema(schema)
    assert (caught.value.field, word in caught.value.problem) == (pointer, True)


@pytest.mark.parametrize(("output", "pointer", "word"), [
    # Closed returned objects were refused here once; they import now (tests/jsonschema/).
    (schema_of({"r": {"type": "string", ECHO_KEYWORD: True}}), f"/properties/r/{ECHO_KEYWORD}",
     "arguments"),
])
def test_output_schemas_the_gate_cannot_read_are_refused(output: Any, pointer: str,
                                                         word: str) -> None:
    """An echo marker in a returned object is refused: echo applies to arguments."""
    with pytest.raises(SchemaError) as caught:
        from_json_schema(schema_of({}), output=output)
    assert caught.value.field == pointer
    assert word in caught.value.problem


def test_schema_error_is_a_contract_error_and_a_value_error() -> None:
    """SchemaError sits under ContractError, so one except clause catches table mistakes."""
    assert issubclass(SchemaError, ContractError)
    assert issubclass(SchemaError, ValueError)


# --- Tools files that are malformed -----------------------------------------------------

OPENAI_TOOL = {"type": "function", "function": {"name": "refund", "parameters": schema_of({})}}

BAD_FILES = [
    pytest.param("{not json", "", "not JSON", id="not-json"),
    pytest.param(json.dumps({"functions": []}), "", "'tools' list", id="no-tool-list"),
    pytest.param(json.dumps([3]), "/0", "must be an object", id="tool-not-an-object"),
    pytest.param(json.dumps([{"name": "refund", "schema": {}}]), "/0", "'inputSchema'",
                 id="unknown-format"),
    pytest.param(json.dumps([{"input_schema": schema_of({})}]), "/0/name", "name",
                 id="no-name"),
    pytest.param(json.dumps([OPENAI_TOOL, OPENAI_TOOL]), "/1", "twice", id="duplicate"),
    pytest.param(json.dumps([{"name": "refund", "inputSchema": schema_of({}),
                              "output_schema": {}}]), "/0/output_schema", "unknown key",
                 id="misspelt-output-schema"),
    pytest.param(json.dumps([{"type": "function", "function": [], "x": 1}]), "/0/x",
                 "unknown key", id="openai-outer-key"),
    pytest.param(json.dumps([{"type": "custom", "function": {}}]), "/0/type", "'function'",
                 id="openai-type"),
    pytest.param(json.dumps([{"type": "function", "function": []}]), "/0/function",
                 "object", id="openai-function-not-object"),
    pytest.param(json.dumps([{"name": "refund", "description": 5,
                              "input_schema": schema_of({})}]), "/0/description", "string",
                 id="description"),
    pytest.param(json.dumps({"tools": [{"name": "refund", "inputSchema": schema_of(
        {"amount": {"type": "integer", "not": {"$ref": "https://example.com/a.json"}}})}]}),
        "/tools/0/inputSchema/properties/amount/not/$ref", "network",
        id="keyword-located-in-the-file"),
]


@pytest.mark.parametrize(("text", "pointer", "word"), BAD_FILES)
def test_malformed_tools_file_names_file_tool_and_location(tmp_path: Path, text: str,
                                                           pointer: str, word: str) -> None:
    """The error says which file, which tool and where in the file."""
    path = tmp_path / "tools.json"
    path.write_text(text)
    with pytest.raises(SchemaError) as caught:
        load_tools_file(path)
    assert caught.value.source == str(path)
    assert caught.value.field == pointer
    assert word in str(caught.value)
    assert str(caught.value).startswith(str(path))


def test_missing_file_is_a_schema_error_naming_it(tmp_path: Path) -> None:
    """A file that cannot be read is reported with its name, not as a bare OSError."""
    with pytest.raises(SchemaError, match="cannot be read") as caught:
        read_tools_file(tmp_path / "absent.json")
    assert caught.value.source.endswith("absent.json")


def test_error_names_the_tool(tmp_path: Path) -> None:
    """Problems inside a named tool carry the tool's name."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "refund", "input_schema": {"type": "array"}}]))
    with pytest.raises(SchemaError, match="tool 'refund'") as caught:
        load_tools_file(path)
    assert caught.value.tool == "refund"


@pytest.mark.parametrize(("fns", "word"), [
    ({"refnd": _fn}, "does not define"),
    ({"refund": "not a function"}, "callable"),
])
def test_fns_must_name_tools_of_the_file_and_be_callable(tmp_path: Path, fns: dict[str, Any],
                                                        word: str) -> None:
    """A misspelt name in fns is an error, not a silent stub."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([OPENAI_TOOL]))
    with pytest.raises(SchemaError, match=word):
        load_tools_file(path, fns=fns)


def test_responses_style_openai_tool_and_missing_parameters(tmp_path: Path) -> None:
    """The Responses API's flat function tool loads; no parameters means no arguments."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([
        {"type": "function", "name": "ping", "description": "Check the service."},
        {"type": "function", "function": {"name": "pong"}},
    ]))
    table = load_tools_file(path)
    assert table["ping"]["args"] == table["pong"]["args"] == {}
    assert table["ping"]["description"] == "Check the service."
    assert Gate(table).validate_args("ping", {"x": 1}) == "unexpected:x"


# --- Tools files: effect and risk from MCP annotations -------------------------------------


def mcp_tool(name: str = "t", annotations: Any = None) -> dict[str, Any]:
    """An MCP tool taking one int, with these annotations (none when ``None``)."""
    tool: dict[str, Any] = {"name": name, "inputSchema": schema_of({"n": {"type": "integer"}},
                                                                    required=["n"])}
    if annotations is not None:
        tool["annotations"] = annotations
    return tool


@pytest.mark.parametrize(("annotations", "effect", "risk", "trust"), [
    pytest.param({"readOnlyHint": True, "openWorldHint": False}, "read", "read_public",
                 "trusted", id="closed-read"),
    pytest.param({"readOnlyHint": True}, "read", "read_public", "untrusted",
                 id="open-world-read"),
    pytest.param({"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
                 "write", "reversible_write", "trusted", id="additive-closed"),
    pytest.param({"readOnlyHint": False, "destructiveHint": False}, "write", "external_effect",
                 "trusted", id="additive-open-world"),
    pytest.param({"readOnlyHint": False}, "write", "irreversible", "trusted",
                 id="destructive-by-default"),
    pytest.param({"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
                  "openWorldHint": False}, "write", "irreversible", "trusted",
                 id="idempotent-changes-nothing"),
    pytest.param(None, "write", "irreversible", "trusted", id="no-annotations"),
    pytest.param({"title": "T"}, "write", "irreversible", "trusted", id="no-hints"),
])
def test_mcp_annotations_give_effect_and_risk(annotations: Any, effect: str, risk: str,
                                              trust: str) -> None:
    """Absent hints read as MCP's spec reads them: not read-only, destructive, open world."""
    contract = parse_entry("t", load_tools([mcp_tool(annotations=annotations)])["t"])
    assert (contract.effect, contract.risk, contract.trust) == (effect, risk, trust)


def test_the_import_warning_keeps_a_hostile_tool_name_on_one_line(
        caplog: pytest.LogCaptureFixture) -> None:
    """A tool name from someone else's server cannot forge log lines through the warning."""
    name = "refund\nagtool: all tools are read-only"
    openai = {"type": "function", "function": {"name": name, "parameters": schema_of(
        {}, required=[])}}
    with caplog.at_level(logging.WARNING, logger="agtool"):
        load_tools([openai])
    [message] = [record.getMessage() for record in caplog.records]
    assert "\n" not in message
    assert "refund\\nagtool" in message


def test_a_tool_that_does_not_say_it_reads_is_a_write_and_is_never_memoized(
        caplog: pytest.LogCaptureFixture) -> None:
    """The old default made this a memoized public read; now it is refused, and said so."""
    runs: list[dict[str, Any]] = []
    openai = {"type": "function", "function": {"name": "refund", "parameters": schema_of(
        {"n": {"type": "integer"}}, required=["n"])}}
    with caplog.at_level(logging.WARNING, logger="agtool"):
        table = load_tools([openai], fns={"refund": lambda **args: runs.append(args) or {}})
    assert "'refund' does not say it is read-only" in caplog.text
    assert "effects={'refund': 'read'}" in caplog.text
    gate = Gate(table)
    assert gate.call_tool("refund", {"n": 1})["error"] == "auth:scope:irreversible"
    assert runs == []
    assert trusted_call(gate, "refund", {"n": 1}) == trusted_call(gate, "refund", {"n": 1})
    assert runs == [{"n": 1}]
    assert (gate.stats("refund").hits, gate.stats("refund").replayed) == (0, 1)


def test_an_annotated_tool_is_imported_without_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    """Only a tool whose effect had to be guessed is warned about."""
    with caplog.at_level(logging.WARNING, logger="agtool"):
        load_tools([mcp_tool(annotations={"readOnlyHint": True}),
                    mcp_tool("w", {"readOnlyHint": False})])
    assert caplog.text == ""


@pytest.mark.parametrize(("override", "effect", "risk"), [
    pytest.param("read", "read", "read_public", id="read"),
    pytest.param("write", "write", "reversible_write", id="write"),
    pytest.param("read_sensitive", "read", "read_sensitive", id="read-risk"),
    pytest.param("external_effect", "write", "external_effect", id="write-risk"),
    pytest.param({"effect": "write", "risk": "irreversible", "key_args": ["n"]}, "write",
                 "irreversible", id="entry-keys"),
])
def test_effects_override_the_annotations(override: Any, effect: str, risk: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """An override wins over the annotations (or their absence), and silences the warning."""
    with caplog.at_level(logging.WARNING, logger="agtool"):
        table = load_tools([mcp_tool(annotations={"readOnlyHint": True})], effects={"t": override})
        load_tools([mcp_tool()], effects={"t": override})
    contract = parse_entry("t", table["t"])
    assert (contract.effect, contract.risk) == (effect, risk)
    assert caplog.text == ""


@pytest.mark.parametrize(("tools", "effects", "word"), [
    pytest.param([mcp_tool()], {"t": "delete"}, "must be 'read', 'write' or a risk level",
                 id="unknown-effect"),
    pytest.param([mcp_tool()], {"t": {"effect": "write", "colour": "red"}}, "entry keys",
                 id="unknown-entry-key"),
    pytest.param([mcp_tool()], {"t": {"effect": "write", "key_args": ["m"]}}, "key_args",
                 id="key-args-of-no-argument"),
    pytest.param([mcp_tool()], {"u": "read"}, "does not define", id="unknown-tool"),
    pytest.param([mcp_tool(annotations={"readOnlyHint": "yes"})], None, "true or false",
                 id="hint-not-a-bool"),
    pytest.param([mcp_tool(annotations=["readOnlyHint"])], None, "must be an object",
                 id="annotations-not-an-object"),
])
def test_a_bad_effect_or_hint_is_a_schema_error(tools: Any, effects: Any, word: str) -> None:
    """A hint that cannot be read, or an override that names nothing, is refused."""
    with pytest.raises(SchemaError, match=word):
        load_tools(tools, effects=effects)


def test_hint_errors_point_into_the_file(tmp_path: Path) -> None:
    """A hint that is not a bool is named by its JSON pointer in the file."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": [mcp_tool(annotations={"destructiveHint": 0})]}))
    with pytest.raises(SchemaError) as caught:
        load_tools_file(path)
    assert caught.value.field == "/tools/0/annotations/destructiveHint"


@pytest.mark.parametrize("risk", ["read_public", "reversible_write", "external_effect",
                                  "irreversible"])
@pytest.mark.parametrize("source", ["internal", "web"])
def test_exported_annotations_import_back_to_the_same_effect_and_risk(risk: str,
                                                                      source: str) -> None:
    """tool_spec's MCP annotations are what the importer reads back: effect, risk, a read's trust.

    No MCP hint says a write's output is untrusted, so a write comes back trusted.
    """
    effect = "read" if risk.startswith("read") else "write"
    table = one_tool(args={"n": {"type": "int"}})
    table["t"].update(effect=effect, risk=risk, source=source)
    back = parse_entry("t", load_tools(export_tools(table, "mcp"))["t"])
    expected = parse_entry("t", table["t"])
    assert (back.effect, back.risk) == (expected.effect, expected.risk)
    assert back.trust == (expected.trust if effect == "read" else "trusted")


def test_in_memory_tools_load_as_the_file_does() -> None:
    """load_tools on a file's contents gives the file's table, effects and all."""
    data = json.loads((FIXTURES / "mcp_tools.json").read_text())
    from_file, in_memory = load_tools_file(FIXTURES / "mcp_tools.json"), load_tools(data)
    def shape(table: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
        return {name: (contract.args, contract.returns, contract.effect, contract.risk,
                       contract.trust, contract.description)
                for name, contract in ((name, parse_entry(name, entry))
                                       for name, entry in table.items())}

    assert shape(from_file) == shape(in_memory)
    assert [parse_entry(name, entry).risk for name, entry in in_memory.items()] == [
        "irreversible", "reversible_write", "read_public"]
