"""The contract dialect's null and named dict keys, case by case.

Null for an optional key means "not given" (unless the spec says
``nullable: False``): the body runs without that key, so its own default
applies, and the call is keyed, digested and approved as if the key were
absent. A ``dict`` with ``item: {key: spec}`` is closed like the arguments.
The property-based coverage is in test_properties, test_oracle,
test_fastpath, test_strategies and test_stateful, through the strategies.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agtool import DEFAULT_SCOPE, CallRecord, ContractError, Gate, check_table
from agtool._contract import MAX_ITEM_DEPTH
from agtool._jsonschema import (
    from_json_schema,
    openai_strict_problems,
    output_schema,
    to_json_schema,
    tool_spec,
)


def _table(args: dict[str, Any], returns: dict[str, Any] | None = None,
           fn: Callable[..., Any] | None = None, **entry: Any) -> dict[str, Any]:
    return {"t": {"fn": fn or (lambda **kwargs: {}), "args": args,
                  "returns": {} if returns is None else returns, **entry}}


class Recorder:
    """A body that keeps the exact keyword arguments of each run and its own default."""

    def __init__(self, value: object = None) -> None:
        self.runs: list[dict[str, Any]] = []
        self.value = {} if value is None else value

    def __call__(self, sku: str, note: str = "the body's default", **rest: Any) -> Any:
        self.runs.append({"sku": sku, "note": note, **rest})
        return copy.deepcopy(self.value)


NOTE_ARGS = {"sku": {"type": "str"}, "note": {"type": "str", "required": False}}

#: The paths a call takes: the compiled read, the general steps, and the async twin.
PATHS: dict[str, Callable[[Gate, dict[str, Any]], dict[str, Any]]] = {
    "compiled": lambda gate, args: gate.call_tool("t", args),
    "general": lambda gate, args: gate.call_tool("t", args, scope=DEFAULT_SCOPE),
    "async": lambda gate, args: asyncio.run(gate.acall_tool("t", args)),
}


# --- null for an optional argument ----------------------------------------------------------


@pytest.mark.parametrize("path", sorted(PATHS))
def test_null_for_an_optional_arg_runs_the_body_without_it(path: str) -> None:
    """The body gets no such key, so its own default applies, on every path a call takes."""
    body = Recorder()
    gate = Gate(_table(NOTE_ARGS, fn=body))
    assert PATHS[path](gate, {"sku": "A1", "note": None})["ok"]
    assert body.runs == [{"sku": "A1", "note": "the body's default"}]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_null_and_absent_are_one_call_in_the_memo(path: str) -> None:
    """{note: None} then {} runs the body once and answers the second from the memo."""
    body = Recorder({"n": 1})
    gate = Gate(_table(NOTE_ARGS, fn=body))
    first = PATHS[path](gate, {"sku": "A1", "note": None})
    second = PATHS[path](gate, {"sku": "A1"})
    assert first == second == {"ok": True, "value": {"n": 1}, "error": ""}
    stats = gate.stats("t")
    assert (stats.runs, stats.hits) == (1, 1)
    assert gate.cache_key("t", {"sku": "A1", "note": None}) == gate.cache_key("t", {"sku": "A1"})
    assert gate.cache_key("t", {"sku": "A1", "note": "x"}) != gate.cache_key("t", {"sku": "A1"})


def test_null_leaves_the_callers_args_as_they_were() -> None:
    """The key is dropped from the gate's snapshot, never from the caller's dict."""
    args = {"sku": "A1", "note": None}
    assert Gate(_table(NOTE_ARGS, fn=Recorder())).call_tool("t", args)["ok"]
    assert args == {"sku": "A1", "note": None}


def test_null_and_absent_digest_alike_in_records_approvals_and_write_keys() -> None:
    """One call, one digest: records, approvals and idempotency keys do not tell them apart."""
    records: list[CallRecord] = []
    body = Recorder()
    table = _table(NOTE_ARGS, fn=body, effect="write", risk="external_effect")
    gate = Gate(table, records=records.append, scope={"read_public", "external_effect"})
    approval = gate.approve("t", {"sku": "A1", "note": None})
    assert approval.args_digest == gate.approve("t", {"sku": "A1"}).args_digest
    answer = gate.call_tool("t", {"sku": "A1"}, run_id="r", step_id="s", approvals=[approval])
    assert answer["ok"], answer
    assert gate.idempotency_key("t", {"sku": "A1", "note": None}, "r", "s") == \
        gate.idempotency_key("t", {"sku": "A1"}, "r", "s")
    # The repeat with null is the same write: replayed, not run again.
    again = gate.call_tool("t", {"sku": "A1", "note": None}, run_id="r", step_id="s",
                           approvals=[approval])
    assert again == answer
    assert len(body.runs) == 1
    assert records[0].args_digest == records[1].args_digest


def test_nullable_false_refuses_null_as_a_wrong_type() -> None:
    """nullable: False keeps the key optional but refuses null, and the body does not run."""
    body = Recorder()
    args = {**NOTE_ARGS, "note": {"type": "str", "required": False, "nullable": False}}
    gate = Gate(_table(args, fn=body))
    assert gate.call_tool("t", {"sku": "A1", "note": None})["error"] == "args:type:note"
    assert gate.call_tool("t", {"sku": "A1"})["ok"]
    assert body.runs == [{"sku": "A1", "note": "the body's default"}]


@pytest.mark.parametrize(("spec", "reason"), [
    pytest.param({"type": "str"}, "type:x", id="required"),
    pytest.param({"type": "int", "required": True}, "type:x", id="required-said"),
    pytest.param({"type": "str", "echo": True, "required": False}, "type:x", id="echo"),
    pytest.param({"type": "list", "item": {"type": "int"}}, "type:x", id="list"),
])
def test_null_is_refused_where_it_cannot_mean_not_given(spec: dict[str, Any],
                                                        reason: str) -> None:
    """A required argument or an echo argument is never null: null is a wrong type there."""
    gate = Gate(_table({"x": spec}))
    assert gate.validate_args("t", {"x": None}, echo={"x": "r-1"}) == reason


def test_null_items_and_null_keys_inside_list_items() -> None:
    """A list item is never null; an optional key of an item is dropped from the body's copy."""
    seen: list[Any] = []
    rows = {"type": "list", "item": {"id": {"type": "int"},
                                     "memo": {"type": "str", "required": False}}}
    gate = Gate(_table({"rows": rows}, fn=lambda rows: seen.append(rows) or {}))
    sent = [{"id": 1, "memo": None}, {"id": 2, "memo": "m"}]
    assert gate.call_tool("t", {"rows": sent})["ok"]
    assert seen == [[{"id": 1}, {"id": 2, "memo": "m"}]]
    assert sent[0] == {"id": 1, "memo": None}  # the caller's item is untouched
    assert gate.validate_args("t", {"rows": [None]}) == "type:rows"
    assert gate.validate_args("t", {"rows": [{"id": None}]}) == "type:rows"
    assert gate.cache_key("t", {"rows": [{"id": 1, "memo": None}]}) == \
        gate.cache_key("t", {"rows": [{"id": 1}]})


@pytest.mark.parametrize(("spec", "field", "word"), [
    pytest.param({"type": "str", "nullable": False}, "args.x.nullable", "optional",
                 id="required-arg"),
    pytest.param({"type": "str", "required": False, "echo": True, "nullable": True},
                 "args.x.nullable", "echo", id="echo-arg"),
    pytest.param({"type": "str", "required": False, "nullable": 0}, "args.x.nullable", "bool",
                 id="not-a-bool"),
    pytest.param({"type": "list", "item": {"type": "int", "nullable": True}},
                 "args.x.item.nullable", "list item", id="list-item"),
    pytest.param({"type": "dict", "item": {"k": {"type": "int", "nullable": False}}},
                 "args.x.item.k.nullable", "optional", id="required-dict-key"),
])
def test_misplaced_nullable_is_refused_at_registration(spec: dict[str, Any], field: str,
                                                       word: str) -> None:
    """nullable on a spec that can never be null is a hole, so it is refused, named."""
    with pytest.raises(ContractError) as caught:
        check_table(_table({"x": spec}))
    assert (caught.value.tool, caught.value.field) == ("t", field)
    assert word in caught.value.problem


def test_nullable_on_a_required_returned_key_is_refused() -> None:
    """The returns side reads nullable as the arguments do: only on an optional key."""
    with pytest.raises(ContractError) as caught:
        check_table(_table({}, {"n": {"type": "int", "nullable": True}}))
    assert caught.value.field == "returns.n.nullable"


# --- null in what a tool returns ------------------------------------------------------------


@pytest.mark.parametrize(("spec", "reason"), [
    pytest.param({"type": "int", "required": False}, "", id="optional"),
    pytest.param({"type": "int", "required": False, "nullable": False}, "shape",
                 id="optional-not-null"),
    pytest.param({"type": "int"}, "shape", id="required"),
])
def test_a_returned_null_is_an_absent_optional_key(spec: dict[str, Any], reason: str) -> None:
    """An optional returned key may be null (unless nullable: False); a required one may not."""
    gate = Gate(_table({}, {"n": spec}))
    assert gate.validate_result("t", {"n": None}) == reason


def test_a_returned_null_is_handed_back_and_remembered_as_it_was() -> None:
    """A result is checked, never rewritten: the null stays, in the answer and the memo."""
    value = {"n": None, "rows": [{"id": 1, "memo": None}]}
    returns = {"n": {"type": "int", "required": False},
               "rows": {"type": "list", "item": {"id": {"type": "int"},
                                                 "memo": {"type": "str", "required": False}}}}
    gate = Gate(_table({}, returns, fn=lambda: copy.deepcopy(value)))
    assert gate.call_tool("t", {})["value"] == value
    assert gate.call_tool("t", {})["value"] == value
    assert gate.stats("t").hits == 1


# --- dicts with named keys ------------------------------------------------------------------

OPTS = {"type": "dict", "item": {"depth": {"type": "int", "min": 1},
                                 "mode": {"type": "str", "allowed": ["fast", "full"],
                                          "required": False},
                                 "inner": {"type": "dict", "required": False,
                                           "item": {"on": {"type": "bool"}}}}}


@pytest.mark.parametrize(("value", "reason"), [
    pytest.param({"depth": 2}, "", id="valid"),
    pytest.param({"depth": 2, "mode": None, "inner": None}, "", id="null-optional-keys"),
    pytest.param({"depth": 2, "inner": {"on": True}}, "", id="nested"),
    pytest.param({}, "missing:opts", id="missing-key"),
    pytest.param({"depth": 2, "deep": 1}, "unexpected:opts", id="unknown-key"),
    pytest.param({"depth": 2, 1: 1}, "unexpected:opts", id="non-str-key"),
    pytest.param({"depth": "2"}, "type:opts", id="bad-typed-key"),
    pytest.param({"depth": None}, "type:opts", id="null-required-key"),
    pytest.param({"depth": 0}, "min:opts", id="key-below-min"),
    pytest.param({"depth": 2, "mode": "slow"}, "allowed:opts", id="key-not-allowed"),
    pytest.param({"depth": 2, "inner": {}}, "missing:opts", id="nested-missing"),
    pytest.param({"depth": 2, "inner": {"on": 1}}, "type:opts", id="nested-bad-type"),
    pytest.param([("depth", 2)], "type:opts", id="not-a-dict"),
    pytest.param(None, "type:opts", id="null-for-a-required-dict"),
])
def test_a_dict_with_named_keys_is_closed_like_the_args(value: object, reason: str) -> None:
    """Required keys present, no other key, each value its spec; defects name the argument."""
    gate = Gate(_table({"opts": OPTS}))
    assert gate.validate_args("t", {"opts": value}) == reason


def test_a_named_dict_reaches_the_body_as_a_checked_plain_copy() -> None:
    """The body gets a plain dict without the null keys; the caller's dict is not it."""
    seen: list[Any] = []
    gate = Gate(_table({"opts": OPTS}, fn=lambda opts: seen.append(opts) or {}))
    sent = {"depth": 2, "mode": None, "inner": {"on": True}}
    assert gate.call_tool("t", {"opts": sent})["ok"]
    (got,) = seen
    assert got == {"depth": 2, "inner": {"on": True}}
    assert type(got) is dict
    assert got is not sent
    assert got["inner"] is not sent["inner"]


class _Lying(dict):  # type: ignore[type-arg]
    """A dict whose methods show a harmless value while its storage holds another."""

    def __iter__(self) -> Any:
        return iter(["depth"])

    def keys(self) -> Any:
        return ["depth"]

    def items(self) -> Any:
        return [("depth", 2)]

    def get(self, key: Any, default: Any = None) -> Any:
        return 2 if key == "depth" else default

    def __getitem__(self, key: Any) -> Any:
        return 2

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize(("storage", "reason"), [
    pytest.param({"depth": 2, "rm -rf": "/"}, "unexpected:opts", id="hidden-key"),
    pytest.param({"depth": "2"}, "type:opts", id="hidden-bad-value"),
    pytest.param({}, "missing:opts", id="hidden-missing-key"),
])
def test_a_named_dict_subclass_cannot_lie_past_the_snapshot(storage: dict[str, Any],
                                                           reason: str) -> None:
    """What the dict holds is what is checked: a subclass's own methods are never asked."""
    ran: list[Any] = []
    gate = Gate(_table({"opts": OPTS}, fn=lambda opts: ran.append(opts) or {}))
    answer = gate.call_tool("t", {"opts": _Lying(storage)})
    assert answer["error"] == "args:" + reason
    assert ran == []


def test_a_named_dict_subclass_with_honest_storage_runs_on_a_plain_copy() -> None:
    """A subclass whose storage keeps the contract runs, and the body sees that storage."""
    ran: list[Any] = []
    gate = Gate(_table({"opts": OPTS}, fn=lambda opts: ran.append(opts) or {}))
    assert gate.call_tool("t", {"opts": _Lying({"depth": 3, "mode": "full"})})["ok"]
    assert ran == [{"depth": 3, "mode": "full"}]
    assert type(ran[0]) is dict


def test_named_dicts_nest_down_to_max_item_depth_and_no_deeper() -> None:
    """Dicts in dicts register and are checked to MAX_ITEM_DEPTH; one more is refused."""
    def nested(depth: int) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": "int"}
        for _ in range(depth):
            spec = {"type": "dict", "item": {"k": spec}}
        return spec

    def value(depth: int, leaf: object) -> object:
        for _ in range(depth):
            leaf = {"k": leaf}
        return leaf

    gate = Gate(_table({"x": nested(MAX_ITEM_DEPTH)}))
    assert gate.validate_args("t", {"x": value(MAX_ITEM_DEPTH, 1)}) == ""
    assert gate.validate_args("t", {"x": value(MAX_ITEM_DEPTH, "1")}) == "type:x"
    with pytest.raises(ContractError, match=str(MAX_ITEM_DEPTH)):
        check_table(_table({"x": nested(MAX_ITEM_DEPTH + 1)}))


RETURNED = {"stats": {"type": "dict", "item": {"count": {"type": "int", "min": 0},
                                               "tags": {"type": "list", "item": {"type": "str"},
                                                        "required": False}}}}


@pytest.mark.parametrize(("value", "reason"), [
    pytest.param({"stats": {"count": 1}}, "", id="valid"),
    pytest.param({"stats": {"count": 1, "extra": [1]}}, "", id="extra-key-is-open"),
    pytest.param({"stats": {"count": 1, "tags": None}}, "", id="null-optional-key"),
    pytest.param({"stats": {}}, "shape", id="missing-key"),
    pytest.param({"stats": {"count": "1"}}, "shape", id="bad-type"),
    pytest.param({"stats": {"count": -1}}, "range", id="out-of-range"),
    pytest.param({"stats": [1]}, "shape", id="not-a-dict"),
])
def test_a_returned_dict_with_named_keys_is_checked(value: object, reason: str) -> None:
    """Result-side named keys: required present and typed, extra keys allowed, as list items."""
    assert Gate(_table({}, RETURNED)).validate_result("t", value) == reason


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda value: value["stats"]["tags"].append("x"), id="list-in-dict"),
    pytest.param(lambda value: value["stats"].update(count=99), id="dict-key"),
    pytest.param(lambda value: value.clear(), id="top"),
])
def test_what_a_caller_does_to_a_remembered_named_dict_stays_with_the_caller(
        mutate: Callable[[dict[str, Any]], None]) -> None:
    """A hit's named dict, and the lists inside it, are fresh copies: the memo is unchanged."""
    original = {"stats": {"count": 1, "tags": ["a"]}}
    gate = Gate(_table({}, RETURNED, fn=lambda: copy.deepcopy(original)))
    assert gate._tools.lookup("t").copy_result is not None  # type: ignore[union-attr]
    mutate(gate.call_tool("t", {})["value"])  # the miss
    mutate(gate.call_tool("t", {})["value"])  # a hit
    assert gate.call_tool("t", {})["value"] == original
    assert gate.stats("t").hits == 2


# --- export and import ----------------------------------------------------------------------

DIALECT_ARGS = {
    "sku": {"type": "str"},
    "note": {"type": "str", "required": False, "allowed": ["a", "b"]},
    "limit": {"type": "int", "required": False, "nullable": False, "min": 1},
    "opts": {"type": "dict", "required": False, "description": "Options.",
             "item": {"depth": {"type": "int"},
                      "mode": {"type": "str", "required": False, "nullable": False}}},
}


def test_export_says_which_optional_keys_take_null() -> None:
    """[T, "null"] (and null in enum) for a nullable optional, T alone for nullable: False."""
    properties = to_json_schema(_table(DIALECT_ARGS), "t")["properties"]
    assert properties["note"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert properties["limit"] == {"type": "integer", "minimum": 1}
    assert properties["opts"] == {
        "type": ["object", "null"], "description": "Options.",
        "properties": {"depth": {"type": "integer"}, "mode": {"type": "string"}},
        "required": ["depth"], "additionalProperties": False}


@pytest.mark.parametrize(("args", "valid"), [
    pytest.param({"sku": "A", "note": None, "opts": None}, True, id="nulls-for-nullables"),
    pytest.param({"sku": "A", "opts": {"depth": 1}}, True, id="named-dict"),
    pytest.param({"sku": "A", "limit": None}, False, id="null-for-not-nullable"),
    pytest.param({"sku": None}, False, id="null-for-required"),
    pytest.param({"sku": "A", "opts": {"depth": 1, "mode": None}}, False,
                 id="null-for-a-not-nullable-dict-key"),
    pytest.param({"sku": "A", "opts": {"depth": 1, "x": 1}}, False, id="unknown-dict-key"),
])
def test_jsonschema_and_the_gate_read_the_export_alike(args: dict[str, Any],
                                                       valid: bool) -> None:
    """The exported schema accepts exactly what the gate accepts, null included."""
    table = _table(DIALECT_ARGS)
    assert Draft202012Validator(to_json_schema(table, "t")).is_valid(args) is valid
    assert (Gate(table).validate_args("t", args) == "") is valid


def test_openai_strict_lists_nullable_optionals_as_required() -> None:
    """Optional args no longer keep a tool from strict mode: listed, typed nullable."""
    args = {key: spec for key, spec in DIALECT_ARGS.items() if key not in ("limit", "opts")}
    args["opts"] = {"type": "dict", "required": False, "item": {"depth": {"type": "int"},
                                                                "mode": {"type": "str",
                                                                         "required": False}}}
    table = _table(args)
    assert openai_strict_problems(table, "t") == []
    function = tool_spec(table, "t", "openai")["function"]
    assert function["strict"] is True
    parameters = function["parameters"]
    assert parameters["required"] == ["sku", "note", "opts"]
    assert parameters["properties"]["opts"]["required"] == ["depth", "mode"]
    assert parameters["properties"]["opts"]["properties"]["mode"]["type"] == ["string", "null"]
    # What a strict-mode model sends for "not given" is what the gate takes as not given.
    assert Gate(table).validate_args("t", {"sku": "A", "note": None,
                                           "opts": {"depth": 1, "mode": None}}) == ""


def test_openai_strict_names_an_optional_that_refuses_null() -> None:
    """nullable: False cannot be said in strict mode, so it is the one reason left."""
    problems = openai_strict_problems(_table(DIALECT_ARGS), "t")
    assert len(problems) == 2
    assert [problem.split(":")[0] for problem in problems] == ["limit", "opts.mode"]
    assert all("nullable" in problem for problem in problems)


def test_export_import_export_is_the_identity_on_the_dialect() -> None:
    """Through JSON text, the arguments and returns come back as the same specs."""
    returns = {"n": {"type": "int", "required": False},
               "m": {"type": "int", "required": False, "nullable": False}, **RETURNED}
    table = _table(DIALECT_ARGS, returns)
    inputs = json.loads(json.dumps(to_json_schema(table, "t")))
    outputs = json.loads(json.dumps(output_schema(table, "t")))
    entry = from_json_schema(inputs, output=outputs, name="t")
    assert check_table({"t": entry})["t"].args == check_table(table)["t"].args
    assert check_table({"t": entry})["t"].returns == check_table(table)["t"].returns
    again = _table(entry["args"], entry["returns"])
    assert to_json_schema(again, "t") == to_json_schema(table, "t")
    assert output_schema(again, "t") == output_schema(table, "t")


@pytest.mark.parametrize(("node", "required", "spec"), [
    pytest.param({"type": ["string", "null"]}, False, {"type": "str", "required": False},
                 id="type-list"),
    pytest.param({"type": ["null", "integer"], "minimum": 1}, True,
                 {"type": "int", "min": 1, "required": False}, id="strict-required-nullable"),
    pytest.param({"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                  "description": "A note."}, False,
                 {"type": "str", "description": "A note.", "required": False},
                 id="pydantic-anyof"),
    pytest.param({"type": "string", "nullable": True}, False, {"type": "str", "required": False},
                 id="openapi-nullable"),
    pytest.param({"type": ["string", "null"], "enum": ["a", None]}, False,
                 {"type": "str", "allowed": ["a"], "required": False}, id="enum-with-null"),
    pytest.param({"type": ["string", "null"], "enum": ["a"]}, False,
                 {"type": "str", "allowed": ["a"], "required": False, "nullable": False},
                 id="enum-without-null-refuses-it"),
    pytest.param({"type": "string"}, False,
                 {"type": "str", "required": False, "nullable": False}, id="plain-optional"),
    pytest.param({"type": "object", "properties": {"a": {"type": "integer"}},
                  "required": ["a"]}, True, {"type": "dict", "item": {"a": {"type": "int"}}},
                 id="object-with-properties"),
])
def test_import_reads_null_and_named_objects_as_the_dialect(
        node: dict[str, Any], required: bool, spec: dict[str, Any]) -> None:
    """Each spelling of "may be null" and each object with properties become the dialect."""
    schema = {"type": "object", "properties": {"x": node}, "required": ["x"] if required else []}
    assert from_json_schema(schema)["args"] == {"x": spec}


def test_an_imported_strict_mode_schema_takes_the_nulls_its_model_sends() -> None:
    """OpenAI strict's every-property-required-and-nullable is read as optional args."""
    schema = {"type": "object", "additionalProperties": False, "required": ["q", "page"],
              "properties": {"q": {"type": "string"}, "page": {"type": ["integer", "null"]}}}
    seen: list[dict[str, Any]] = []
    entry = from_json_schema(schema, fn=lambda **args: seen.append(args) or {}, name="t")
    gate = Gate({"t": entry})
    assert gate.call_tool("t", {"q": "mug", "page": None})["ok"]
    assert gate.validate_args("t", {"q": "mug"}) == ""
    assert gate.validate_args("t", {"q": None, "page": None}) == "type:q"
    assert seen == [{"q": "mug"}]


def test_a_sensitive_key_inside_a_named_dict_is_redacted() -> None:
    """A model and a plan never see a sensitive value a named dict holds, in args or results."""
    card = {"type": "dict", "item": {"number": {"type": "str", "sensitive": True},
                                     "name": {"type": "str"}}}
    table = _table({"card": card}, {"card": card}, fn=lambda card: {"card": card},
                   effect="write", risk="external_effect")
    gate = Gate(table, scope={"read_public", "external_effect"})
    args = {"card": {"number": "4111-1111", "name": "Ann"}}
    plan = gate.call_tool("t", args, run_id="r", step_id="s", dry_run=True)["value"]
    assert plan["args"] == {"card": {"number": "[redacted]", "name": "Ann"}}
    answer = gate.call_for_model("t", args, run_id="r", step_id="s",
                                 approvals=[gate.approve("t", args)])
    assert "4111" not in json.dumps(answer)
    assert "Ann" in json.dumps(answer)
