"""The contract dialect: every malformed table is refused, by name, at registration.

Each refusal is one row of ``MALFORMED``: the table, then the tool, the dotted
field and a word of the problem the ``ContractError`` must carry. Both ways of
registering a table (``check_table`` and ``Gate``) are run over every row.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from typing import Any

import pytest

from agtool import AgtoolError, ContractError, Gate, Spec, ToolContract, check_table
from agtool._contract import MAX_ITEM_DEPTH


def _fn(**kwargs: Any) -> dict[str, Any]:
    return {"ok": True}


def one_tool(args: Any = None, returns: Any = None, **entry: Any) -> dict[str, Any]:
    """A one-tool table named ``t``; ``entry`` adds or replaces entry keys."""
    body: dict[str, Any] = {"fn": _fn, "args": {} if args is None else args,
                            "returns": {} if returns is None else returns}
    body.update(entry)
    return {"t": body}


def arg(**spec: Any) -> dict[str, Any]:
    """A table whose tool ``t`` has the one argument ``x`` with ``spec``."""
    return one_tool(args={"x": spec})


def without(key: str) -> dict[str, Any]:
    table = one_tool()
    del table["t"][key]
    return table


NAN, INF = float("nan"), float("inf")

MALFORMED = [
    # The table and its entries.
    pytest.param([], "", "", "dict", id="table-not-a-dict"),
    pytest.param({1: one_tool()["t"]}, "1", "", "name", id="tool-name-not-str"),
    pytest.param({"": one_tool()["t"]}, "''", "", "name", id="tool-name-empty"),
    pytest.param({"t": [_fn]}, "t", "", "entry", id="entry-not-a-dict"),
    pytest.param(one_tool(fnc=_fn), "t", "fnc", "unknown", id="unknown-entry-key"),
    pytest.param(without("fn"), "t", "fn", "missing", id="missing-fn"),
    pytest.param(without("args"), "t", "args", "missing", id="missing-args"),
    pytest.param(without("returns"), "t", "returns", "missing", id="missing-returns"),
    pytest.param(one_tool(fn="stock_lookup"), "t", "fn", "callable", id="fn-not-callable"),
    pytest.param(one_tool(fn=None), "t", "fn", "callable", id="fn-none"),
    pytest.param(one_tool(description=3), "t", "description", "str",
                 id="entry-description-not-str"),
    pytest.param(one_tool(args=[("x", {"type": "str"})]), "t", "args", "dict",
                 id="args-not-a-dict"),
    pytest.param(one_tool(returns="rows"), "t", "returns", "dict", id="returns-not-a-dict"),
    pytest.param(one_tool(args={1: {"type": "int"}}), "t", "args.1", "names",
                 id="arg-name-not-str"),
    pytest.param(one_tool(args={"": {"type": "int"}}), "t", "args.''", "names",
                 id="arg-name-empty"),
    pytest.param(one_tool(args={"x": "str"}), "t", "args.x", "spec", id="spec-not-a-dict"),
    # Keys of a spec.
    pytest.param(arg(type="str", maxlen=3), "t", "args.x.maxlen", "unknown",
                 id="unknown-spec-key-maxlen"),
    pytest.param(arg(required=True), "t", "args.x.type", "type", id="missing-type"),
    pytest.param(arg(type="string"), "t", "args.x.type", "unknown", id="unknown-type"),
    pytest.param(arg(type=str), "t", "args.x.type", "unknown", id="type-is-a-python-class"),
    pytest.param(arg(type="int", required="yes"), "t", "args.x.required", "bool",
                 id="required-is-a-str"),
    pytest.param(arg(type="int", required=1), "t", "args.x.required", "bool",
                 id="required-is-an-int"),
    pytest.param(arg(type="int", description=None), "t", "args.x.description", "str",
                 id="spec-description-not-str"),
    # Keys that do not apply to the spec's type.
    pytest.param(arg(type="str", min=1), "t", "args.x.min", "apply", id="min-on-str"),
    pytest.param(arg(type="bool", max=1), "t", "args.x.max", "apply", id="max-on-bool"),
    pytest.param(arg(type="int", min_len=1), "t", "args.x.min_len", "apply",
                 id="min-len-on-int"),
    pytest.param(arg(type="dict", max_len=1), "t", "args.x.max_len", "apply",
                 id="max-len-on-dict"),
    pytest.param(arg(type="int", pattern="[0-9]+"), "t", "args.x.pattern", "apply",
                 id="pattern-on-int"),
    pytest.param(arg(type="str", item={"type": "str"}), "t", "args.x.item", "apply",
                 id="item-on-str"),
    pytest.param(arg(type="list", allowed=[[1]]), "t", "args.x.allowed", "apply",
                 id="allowed-on-list"),
    pytest.param(arg(type="dict", allowed=[{}]), "t", "args.x.allowed", "apply",
                 id="allowed-on-dict"),
    # Numeric bounds.
    pytest.param(arg(type="int", min=5, max=1), "t", "args.x.min", "greater",
                 id="min-greater-than-max"),
    pytest.param(arg(type="float", min=0.5, max=0.25), "t", "args.x.min", "greater",
                 id="float-min-greater-than-max"),
    pytest.param(arg(type="int", min="1"), "t", "args.x.min", "finite", id="min-is-a-str"),
    pytest.param(arg(type="int", max=True), "t", "args.x.max", "finite", id="max-is-a-bool"),
    pytest.param(arg(type="float", min=NAN), "t", "args.x.min", "finite", id="min-is-nan"),
    pytest.param(arg(type="float", max=INF), "t", "args.x.max", "finite", id="max-is-inf"),
    pytest.param(arg(type="float", min=-INF), "t", "args.x.min", "finite",
                 id="min-is-minus-inf"),
    # Length bounds.
    pytest.param(arg(type="str", min_len=3, max_len=2), "t", "args.x.min_len", "greater",
                 id="min-len-greater-than-max-len"),
    pytest.param(arg(type="list", min_len=-1), "t", "args.x.min_len", "non-negative",
                 id="min-len-negative"),
    pytest.param(arg(type="str", max_len=2.0), "t", "args.x.max_len", "int",
                 id="max-len-is-a-float"),
    pytest.param(arg(type="str", max_len=True), "t", "args.x.max_len", "int",
                 id="max-len-is-a-bool"),
    # Patterns.
    pytest.param(arg(type="str", pattern="[A-Z"), "t", "args.x.pattern", "regex",
                 id="pattern-does-not-compile"),
    pytest.param(arg(type="str", pattern=b"[A-Z]"), "t", "args.x.pattern", "str",
                 id="pattern-is-bytes"),
    # Allowed values.
    pytest.param(arg(type="str", allowed=[]), "t", "args.x.allowed", "non-empty",
                 id="allowed-empty"),
    pytest.param(arg(type="str", allowed="seoul"), "t", "args.x.allowed", "list",
                 id="allowed-is-a-str"),
    pytest.param(arg(type="str", allowed=["seoul", 3]), "t", "args.x.allowed", "type",
                 id="allowed-value-of-wrong-type"),
    pytest.param(arg(type="int", allowed=[1, True]), "t", "args.x.allowed", "type",
                 id="allowed-bool-for-int"),
    pytest.param(arg(type="int", allowed=[1, 2.0]), "t", "args.x.allowed", "type",
                 id="allowed-float-for-int"),
    pytest.param(arg(type="float", allowed=[0.5, NAN]), "t", "args.x.allowed", "type",
                 id="allowed-nan-for-float"),
    pytest.param(arg(type="bool", allowed=[1]), "t", "args.x.allowed", "type",
                 id="allowed-int-for-bool"),
    pytest.param(arg(type="int", min=1, allowed=[0, 1]), "t", "args.x.allowed", "min",
                 id="allowed-value-below-min"),
    pytest.param(arg(type="float", max=1, allowed=[1.5]), "t", "args.x.allowed", "max",
                 id="allowed-value-above-max"),
    pytest.param(arg(type="str", min_len=2, allowed=["a"]), "t", "args.x.allowed", "min_len",
                 id="allowed-value-shorter-than-min-len"),
    pytest.param(arg(type="str", max_len=2, allowed=["abc"]), "t", "args.x.allowed",
                 "max_len", id="allowed-value-longer-than-max-len"),
    pytest.param(arg(type="str", pattern="[a-z]+", allowed=["ok", "NO"]), "t",
                 "args.x.allowed", "pattern", id="allowed-value-breaks-pattern"),
    # Items of a list.
    pytest.param(arg(type="list", item={}), "t", "args.x.item", "non-empty",
                 id="item-empty-dict"),
    pytest.param(arg(type="list", item="str"), "t", "args.x.item", "spec",
                 id="item-not-a-dict"),
    pytest.param(arg(type="list", item={"type": "text"}), "t", "args.x.item.type", "unknown",
                 id="item-spec-unknown-type"),
    pytest.param(arg(type="list", item={"type": "str", "min": 1}), "t", "args.x.item.min",
                 "apply", id="item-spec-key-not-applicable"),
    pytest.param(arg(type="list", item={"store": {"type": "str"}, "count": {"type": "nat"}}),
                 "t", "args.x.item.count.type", "unknown", id="item-field-unknown-type"),
    pytest.param(arg(type="list", item={"type": 5}), "t", "args.x.item.type", "spec",
                 id="item-field-named-type-not-a-spec"),
    pytest.param(arg(type="list", item={"type": "list", "item": {"type": "int", "max_len": 1}}),
                 "t", "args.x.item.item.max_len", "apply", id="nested-item-spec-defect"),
    # Null for an optional key means "not given" unless nullable says False; nowhere else.
    pytest.param(arg(type="str", required=False, nullable="no"), "t", "args.x.nullable",
                 "bool", id="nullable-not-bool"),
    pytest.param(arg(type="str", nullable=False), "t", "args.x.nullable", "optional",
                 id="nullable-on-a-required-arg"),
    pytest.param(arg(type="str", required=True, nullable=True), "t", "args.x.nullable",
                 "optional", id="nullable-said-on-a-required-arg"),
    pytest.param(arg(type="str", required=False, echo=True, nullable=False), "t",
                 "args.x.nullable", "echo", id="nullable-on-an-echo-arg"),
    pytest.param(one_tool(returns={"n": {"type": "int", "nullable": False}}), "t",
                 "returns.n.nullable", "optional", id="nullable-on-a-required-returned-key"),
    pytest.param(arg(type="list", item={"type": "int", "nullable": False}), "t",
                 "args.x.item.nullable", "list item", id="nullable-on-a-list-item"),
    pytest.param(arg(type="list", item={"n": {"type": "int", "nullable": True}}), "t",
                 "args.x.item.n.nullable", "optional", id="nullable-on-a-required-item-key"),
    # A dict's named keys.
    pytest.param(arg(type="dict", item={"type": "int"}), "t", "args.x.item", "names its keys",
                 id="dict-item-one-spec"),
    pytest.param(arg(type="dict", item={}), "t", "args.x.item", "non-empty",
                 id="dict-item-empty"),
    pytest.param(arg(type="dict", item={"k": {"type": "nat"}}), "t", "args.x.item.k.type",
                 "unknown", id="dict-key-unknown-type"),
    pytest.param(arg(type="dict", item={"k": {"type": "str", "echo": True}}), "t",
                 "args.x.item.k.echo", "top-level", id="echo-on-a-dict-key"),
    pytest.param(one_tool(returns={"d": {"type": "dict", "item": {"n": {"type": "int",
                                                                      "min": 3, "max": 1}}}}),
                 "t", "returns.d.item.n.min", "greater", id="returns-dict-key-defect"),
    # Echo arguments: a top-level str argument the model must copy back verbatim.
    pytest.param(arg(type="str", echo="yes"), "t", "args.x.echo", "bool", id="echo-not-bool"),
    pytest.param(arg(type="int", echo=True), "t", "args.x.echo", "apply", id="echo-on-int"),
    pytest.param(one_tool(returns={"rid": {"type": "str", "echo": True}}), "t",
                 "returns.rid.echo", "arguments", id="echo-in-returns"),
    pytest.param(arg(type="list", item={"type": "str", "echo": True}), "t", "args.x.item.echo",
                 "top-level", id="echo-on-list-item"),
    pytest.param(arg(type="list", item={"rid": {"type": "str", "echo": True}}), "t",
                 "args.x.item.rid.echo", "top-level", id="echo-on-item-field"),
    # Sensitive values: redacted before a model or a record sees them.
    pytest.param(arg(type="str", sensitive="yes"), "t", "args.x.sensitive", "bool",
                 id="sensitive-not-bool"),
    pytest.param(one_tool(returns={"rows": {"type": "list", "item": {
        "phone": {"type": "str", "sensitive": 1}}}}), "t", "returns.rows.item.phone.sensitive",
        "bool", id="sensitive-on-item-field-not-bool"),
    # What a tool does to the world, and how far its output is trusted.
    pytest.param(one_tool(effect="delete"), "t", "effect", "one of", id="effect-unknown"),
    pytest.param(one_tool(risk="high"), "t", "risk", "one of", id="risk-unknown"),
    pytest.param(one_tool(risk="irreversible"), "t", "risk", "read tool",
                 id="read-tool-with-write-risk"),
    pytest.param(one_tool(effect="write", risk="read_sensitive"), "t", "risk", "write tool",
                 id="write-tool-with-read-risk"),
    pytest.param(one_tool(args={"x": {"type": "str"}}, key_args=["x"]), "t", "key_args",
                 "write tools", id="key-args-on-a-read-tool"),
    pytest.param(one_tool(effect="write", key_args=[]), "t", "key_args", "non-empty",
                 id="key-args-empty"),
    pytest.param(one_tool(effect="write", key_args="x"), "t", "key_args", "non-empty",
                 id="key-args-a-str"),
    pytest.param(one_tool(effect="write", key_args=["order"]), "t", "key_args",
                 "not an argument", id="key-args-not-an-argument"),
    pytest.param(one_tool(args={"x": {"type": "str", "required": False}}, effect="write",
                          key_args=["x"]), "t", "key_args", "required",
                 id="key-args-optional-argument"),
    pytest.param(one_tool(timeout=0), "t", "timeout", "positive", id="timeout-zero"),
    pytest.param(one_tool(timeout=True), "t", "timeout", "positive", id="timeout-a-bool"),
    pytest.param(one_tool(timeout=NAN), "t", "timeout", "positive", id="timeout-nan"),
    pytest.param(one_tool(source=""), "t", "source", "non-empty", id="source-empty"),
    pytest.param(one_tool(source="web", trust="maybe"), "t", "trust", "one of",
                 id="trust-unknown"),
    # The returns side is checked with the same rules and named as such.
    pytest.param(one_tool(returns={"rows": {"type": "list", "min_len": 4, "max_len": 2}}),
                 "t", "returns.rows.min_len", "greater", id="returns-min-len-greater"),
    pytest.param(one_tool(returns={"rows": {"type": "list", "item": {"n": {"type": "int",
                                                                         "maxlen": 2}}}}),
                 "t", "returns.rows.item.n.maxlen", "unknown", id="returns-item-unknown-key"),
    # The tool named is the one at fault, not the first one in the table.
    pytest.param({**one_tool(), "second": {"fn": _fn, "args": {"x": {"type": "int", "min": 2,
                                                                    "max": 1}},
                                           "returns": {}}},
                 "second", "args.x.min", "greater", id="second-tool-is-named"),
]


@pytest.mark.parametrize("register", [check_table, Gate], ids=["check_table", "Gate"])
@pytest.mark.parametrize(("table", "tool", "field", "word"), MALFORMED)
def test_malformed_table_is_refused_naming_tool_field_and_problem(
    register: Callable[[Any], object], table: Any, tool: str, field: str, word: str
) -> None:
    """A malformed table raises ContractError whose tool, field and problem locate the defect."""
    with pytest.raises(ContractError) as caught:
        register(table)
    assert (caught.value.tool, caught.value.field) == (tool, field)
    assert word in caught.value.problem


# The exact problem each refusal carries, naming the type or value at fault where it has one.
PROBLEMS = [
    pytest.param([], f"a contract table must be a dict, got {list.__name__}",
                 id="table-not-a-dict"),
    pytest.param({"": one_tool()["t"]}, "a tool name must be a non-empty str", id="tool-name"),
    pytest.param({"t": [_fn]}, f"an entry must be a dict, got {list.__name__}",
                 id="entry-not-a-dict"),
    pytest.param(without("fn"), "is missing", id="missing-fn"),
    pytest.param(one_tool(fn="stock_lookup"), f"must be callable, got {str.__name__}",
                 id="fn-not-callable"),
    pytest.param(one_tool(description=3), "must be a str", id="entry-description-not-str"),
    pytest.param(one_tool(returns={"rid": {"type": "str", "echo": True}}),
                 "applies to arguments only", id="echo-in-returns"),
    pytest.param(one_tool(args=[("x", {"type": "str"})]),
                 f"must be a dict of specs, got {list.__name__}", id="args-not-a-dict"),
    pytest.param(one_tool(args={"": {"type": "int"}}), "names must be non-empty strs",
                 id="arg-name-empty"),
    pytest.param(one_tool(args={"x": "str"}), f"a spec must be a dict, got {str.__name__}",
                 id="spec-not-a-dict"),
    pytest.param(arg(type="int", description=None), "must be a str",
                 id="spec-description-not-str"),
    pytest.param(arg(type="str", pattern=b"[A-Z]"), "must be a str", id="pattern-is-bytes"),
    pytest.param(arg(type="int", min="1"), f"must be a finite number, got {'1'!r}",
                 id="min-is-a-str"),
    pytest.param(arg(type="str", max_len=2.0), f"must be a non-negative int, got {2.0!r}",
                 id="max-len-is-a-float"),
    pytest.param(arg(type="list", item="str"), "must be a spec or a non-empty dict of key -> spec",
                 id="item-not-a-spec"),
    pytest.param(arg(type="list", item={"type": "str", "echo": True}),
                 "applies to top-level arguments only", id="echo-on-list-item"),
    pytest.param(arg(type="str", allowed=[]), "must be a non-empty list", id="allowed-empty"),
    *[pytest.param(arg(**spec, allowed=[value]),
                   f"value {value!r} breaks the spec's own {bound!r}", id=f"allowed-breaks-{bound}")
      for bound, spec, value in [
          ("min", {"type": "int", "min": 1}, 0),
          ("max", {"type": "float", "max": 1}, 1.5),
          ("min_len", {"type": "str", "min_len": 2}, "a"),
          ("max_len", {"type": "str", "max_len": 2}, "abc"),
          ("pattern", {"type": "str", "pattern": "[a-z]+"}, "NO"),
      ]],
]


@pytest.mark.parametrize(("table", "problem"), PROBLEMS)
def test_problem_reads_as_written(table: Any, problem: str) -> None:
    """Each refusal carries its own sentence, naming the offending type or value if it has one."""
    with pytest.raises(ContractError) as caught:
        check_table(table)
    assert caught.value.problem == problem


def test_malformed_cases_cover_every_spec_key() -> None:
    """The table of refusals names a defect for every key a spec may have."""
    from agtool import SPEC_KEYS

    fields = {param.values[2] for param in MALFORMED}
    last_parts = {str(field).rsplit(".", 1)[-1] for field in fields}
    assert set(SPEC_KEYS) <= last_parts


def test_contract_error_is_an_agtool_error_and_a_value_error() -> None:
    """ContractError can be caught as the library's root error or as a ValueError."""
    with pytest.raises(ContractError) as caught:
        check_table(arg(type="int", min=2, max=1))
    assert isinstance(caught.value, AgtoolError)
    assert isinstance(caught.value, ValueError)


def test_contract_error_message_names_tool_and_field() -> None:
    """The message of a ContractError repeats the tool, the field and the problem."""
    with pytest.raises(ContractError) as caught:
        check_table(arg(type="str", maxlen=3))
    message = str(caught.value)
    assert "'t'" in message
    assert "args.x.maxlen" in message
    assert caught.value.problem in message


def test_contract_error_message_without_a_field_names_only_the_tool() -> None:
    """A defect of the entry as a whole leaves the field out of the message."""
    with pytest.raises(ContractError) as caught:
        check_table({"t": 42})
    assert caught.value.field == ""
    assert "field" not in str(caught.value)


# Valid edge cases: tables at the edges of each rule that must be accepted.

VALID_SPECS = [
    pytest.param({"type": "int", "min": 3, "max": 3}, id="min-equals-max"),
    pytest.param({"type": "float", "min": -1, "max": 2.5}, id="float-with-int-bound"),
    pytest.param({"type": "int", "min": 0.5}, id="int-with-float-bound"),
    pytest.param({"type": "str", "min_len": 2, "max_len": 2}, id="min-len-equals-max-len"),
    pytest.param({"type": "list", "min_len": 0, "max_len": 0}, id="zero-lengths"),
    pytest.param({"type": "float", "allowed": [1, 2.5]}, id="float-allows-an-int"),
    pytest.param({"type": "bool", "allowed": [True]}, id="bool-allowed"),
    pytest.param({"type": "int", "allowed": [2], "min": 2, "max": 2}, id="allowed-at-bounds"),
    pytest.param({"type": "str", "allowed": ["ab"], "pattern": "[a-z]+", "min_len": 2,
                  "max_len": 2}, id="allowed-within-all-str-bounds"),
    pytest.param({"type": "str", "required": False, "description": "optional"},
                 id="optional-with-description"),
    pytest.param({"type": "str", "pattern": ""}, id="empty-pattern"),
    pytest.param({"type": "list", "item": {"type": {"type": "str"}}},
                 id="item-dict-with-a-key-named-type"),
    pytest.param({"type": "list", "item": {"type": "list", "item": {"type": "int"}}},
                 id="list-of-lists"),
    pytest.param({"type": "dict"}, id="bare-dict"),
    pytest.param({"type": "str", "echo": True, "pattern": "r[0-9]+"}, id="echo-with-pattern"),
    pytest.param({"type": "str", "echo": False, "required": False}, id="echo-false"),
    pytest.param({"type": "int", "required": False, "nullable": False}, id="optional-not-null"),
    pytest.param({"type": "int", "required": False, "nullable": True}, id="nullable-said"),
    pytest.param({"type": "dict", "item": {"type": {"type": "str"}}},
                 id="dict-with-a-key-named-type"),
    pytest.param({"type": "dict", "item": {"k": {"type": "dict", "item": {
        "n": {"type": "int", "required": False, "nullable": False}}}}}, id="dict-in-dict"),
]


@pytest.mark.parametrize("spec", VALID_SPECS)
def test_valid_edge_case_is_accepted(spec: dict[str, Any]) -> None:
    """A spec at the edge of every rule registers, and its bounds are kept as written."""
    contracts = check_table(arg(**spec))
    parsed = contracts["t"].args["x"]
    assert isinstance(parsed, Spec)
    for key in ("type", "min", "max", "min_len", "max_len", "pattern", "required", "echo",
                "nullable"):
        if key in spec:
            assert getattr(parsed, key) == spec[key]
    assert parsed.description == spec.get("description", "")
    if "allowed" in spec:
        assert list(parsed.allowed or ()) == spec["allowed"]
    Gate(arg(**spec))


def test_check_table_returns_a_contract_per_tool() -> None:
    """check_table answers a ToolContract for each tool with its name, fn and description."""
    def other(**kwargs: Any) -> dict[str, Any]:
        return {}

    table = {**one_tool(description="first"), "other": {"fn": other, "args": {},
                                                        "returns": {"n": {"type": "int"}}}}
    contracts = check_table(table)
    assert set(contracts) == set(table)
    assert isinstance(contracts["t"], ToolContract)
    assert (contracts["t"].name, contracts["t"].fn, contracts["t"].description) == (
        "t", _fn, "first")
    assert contracts["other"].fn is other
    assert contracts["other"].description == ""
    assert contracts["other"].returns["n"].type == "int"


def test_check_table_accepts_any_mapping_and_any_callable() -> None:
    """A read-only mapping is a table, and a class or builtin is a callable fn."""
    table = types.MappingProxyType({"cls": {"fn": dict, "args": {}, "returns": {}},
                                    "builtin": {"fn": len, "args": {}, "returns": {}}})
    assert set(check_table(table)) == {"cls", "builtin"}


def test_empty_table_is_valid() -> None:
    """A table with no tools registers, and every name is then unknown."""
    assert check_table({}) == {}
    assert Gate({}).validate_args("t", {}) == "unknown_tool"


def test_item_key_named_type_is_a_field_not_a_type() -> None:
    """A dict item whose key is called ``type`` describes that key rather than the item's type."""
    gate = Gate(arg(type="list", item={"type": {"type": "str"}}))
    assert gate.validate_args("t", {"x": [{"type": "pen"}]}) == ""
    assert gate.validate_args("t", {"x": [{"type": 1}]}) == "type:x"


# Entries broken after registration.

def _counting_table() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A one-tool table ``t(x: int) -> {n: int}`` and the list of calls its body received."""
    calls: list[dict[str, Any]] = []

    def body(**kwargs: Any) -> dict[str, Any]:
        calls.append(kwargs)
        return {"n": 1}

    table = {"t": {"fn": body, "args": {"x": {"type": "int"}}, "returns": {"n": {"type": "int"}}}}
    return table, calls


def _replace_args(entry: dict[str, Any]) -> None:
    entry["args"] = {"x": {"type": "integer"}}


def _replace_returns(entry: dict[str, Any]) -> None:
    entry["returns"] = {"n": {"type": "int", "min": 2, "max": 1}}


def _uncallable_fn(entry: dict[str, Any]) -> None:
    entry["fn"] = "not a function"


def _delete_fn(entry: dict[str, Any]) -> None:
    del entry["fn"]


def _delete_args(entry: dict[str, Any]) -> None:
    del entry["args"]


BREAKAGES = [
    pytest.param(_replace_args, id="args-replaced-with-unknown-type"),
    pytest.param(_replace_returns, id="returns-replaced-with-min-over-max"),
    pytest.param(_uncallable_fn, id="fn-replaced-with-a-str"),
    pytest.param(_delete_fn, id="fn-deleted-in-place"),
    pytest.param(_delete_args, id="args-deleted-in-place"),
]


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_entry_broken_after_registration_is_bad_contract(
    breakage: Callable[[dict[str, Any]], None],
) -> None:
    """An entry broken after the gate was built answers bad_contract and never runs the body."""
    table, calls = _counting_table()
    gate = Gate(table)
    assert gate.call_tool("t", {"x": 1})["ok"]
    breakage(table["t"])
    assert gate.call_tool("t", {"x": 1}) == {"ok": False, "value": None,
                                             "error": "args:bad_contract"}
    assert gate.validate_args("t", {"x": 1}) == "bad_contract"
    assert gate.validate_result("t", {"n": 1}) == "bad_contract"
    assert gate.contract("t") is None
    assert len(calls) == 1


def test_entry_broken_after_registration_logs_its_contract_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The ContractError of an entry broken after registration goes to the log at ERROR."""
    table, _ = _counting_table()
    gate = Gate(table)
    _replace_returns(table["t"])
    with pytest.raises(ContractError) as caught:
        check_table(table)
    caplog.set_level(logging.ERROR, logger="agtool")
    gate.call_tool("t", {"x": 1})
    [record] = [record for record in caplog.records if record.name == "agtool"]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == f"contract refused at call time: {caught.value}"


def test_entry_replaced_by_a_non_dict_is_bad_contract() -> None:
    """A table slot overwritten with something that is not an entry answers bad_contract."""
    table, calls = _counting_table()
    gate = Gate(table)
    table["t"] = ["fn", "args"]
    assert gate.call_tool("t", {"x": 1})["error"] == "args:bad_contract"
    assert calls == []


def test_broken_entry_repaired_later_works_again() -> None:
    """A broken entry fixed in the table is used again on the next call."""
    table, calls = _counting_table()
    gate = Gate(table)
    good_args = table["t"]["args"]
    _replace_args(table["t"])
    assert gate.call_tool("t", {"x": 1})["error"] == "args:bad_contract"
    table["t"]["args"] = good_args
    assert gate.call_tool("t", {"x": 1}) == {"ok": True, "value": {"n": 1}, "error": ""}
    assert len(calls) == 1


def test_refresh_refuses_a_table_broken_in_place() -> None:
    """refresh() revalidates the whole table and raises on a defect made after registration."""
    table, _ = _counting_table()
    gate = Gate(table)
    table["t"]["args"]["x"]["max"] = "ten"
    with pytest.raises(ContractError) as caught:
        gate.refresh()
    assert (caught.value.tool, caught.value.field) == ("t", "args.x.max")


# Tables that once broke registration.

def test_pattern_too_large_to_compile_is_a_contract_error() -> None:
    """A pattern re.compile refuses with OverflowError is a malformed table, not a crash."""
    with pytest.raises(ContractError) as caught:
        check_table(arg(type="str", pattern="a{4294967296}"))
    assert caught.value.field == "args.x.pattern"


def test_pattern_too_large_swapped_in_after_registration_is_bad_contract() -> None:
    """An entry given an uncompilable pattern after registration answers bad_contract."""
    table, calls = _counting_table()
    gate = Gate(table)
    table["t"]["args"] = {"x": {"type": "str", "pattern": "a{4294967296}"}}
    assert gate.call_tool("t", {"x": "a"})["error"] == "args:bad_contract"
    assert calls == []


def test_int_bound_beyond_float_range_is_accepted() -> None:
    """An int bound is a finite number however large, and the gate enforces it exactly."""
    bound = 10**400
    gate = Gate(arg(type="int", max=bound))
    assert gate.validate_args("t", {"x": bound}) == ""
    assert gate.validate_args("t", {"x": bound + 1}) == "max:x"


def _nested_list_spec(depth: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "int"}
    for _ in range(depth):
        spec = {"type": "list", "item": spec}
    return spec


def _nested_list(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_items_nest_down_to_max_item_depth_and_no_deeper() -> None:
    """MAX_ITEM_DEPTH levels of items register and are checked; one more is refused by name."""
    gate = Gate(arg(**_nested_list_spec(MAX_ITEM_DEPTH)))
    assert gate.validate_args("t", {"x": _nested_list(MAX_ITEM_DEPTH, 1)}) == ""
    assert gate.validate_args("t", {"x": _nested_list(MAX_ITEM_DEPTH, "1")}) == "type:x"
    with pytest.raises(ContractError) as caught:
        check_table(arg(**_nested_list_spec(MAX_ITEM_DEPTH + 1)))
    field = "args.x" + ".item" * (MAX_ITEM_DEPTH + 1)
    assert (caught.value.tool, caught.value.field) == ("t", field)
    assert str(MAX_ITEM_DEPTH) in caught.value.problem


def test_deeply_nested_item_spec_registers_or_is_refused_by_name() -> None:
    """Items nested 25 deep are either checked correctly or refused with ContractError."""
    depth = 25
    try:
        gate = Gate(arg(**_nested_list_spec(depth)))
    except ContractError as exc:
        refused: ContractError | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.field.startswith("args.x")
        return
    assert gate.validate_args("t", {"x": _nested_list(depth, 1)}) == ""
    assert gate.validate_args("t", {"x": _nested_list(depth, "1")}) == "type:x"


def test_deeply_nested_item_spec_swapped_in_never_raises_from_call_tool() -> None:
    """An entry given items nested 25 deep after registration never makes call_tool raise."""
    table, _ = _counting_table()
    gate = Gate(table)
    table["t"]["args"] = {"x": _nested_list_spec(25)}
    envelope = gate.call_tool("t", {"x": _nested_list(25, 1)})
    assert envelope["error"] in ("", "args:bad_contract")
