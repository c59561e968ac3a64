"""The strategies draw what they say they draw, judged by an independent validator.

The oracle is ``jsonschema`` with a type checker as strict as the contract
(``True`` is no integer, ``1.0`` is no integer, NaN is no number), over a
schema written here from each spec, not the gate: a strategy bug and a gate
bug cannot cancel out.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any

import pytest
from _tables import TICKETS
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators

from agtool import ARG_CHECKS, RESULT_CHECKS, RISKS, Gate, Spec, check_table, shown, tools
from agtool.harness import strategies
from agtool.harness._checks import same_value
from agtool.harness.strategies import (
    MISTAKES,
    bad_results,
    contract_tables,
    defect_sites,
    mistake_kinds,
    model_mistakes,
    one_defect_args,
    orders,
    result_sites,
    run_property,
    valid_args,
    valid_results,
)
from agtool.harness.strategies.profiles import PROFILES, load_default_profile, register_profiles

TOOLS = tools.TOOLS


def echo_values(table: Mapping[str, Any], name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """What a caller that copied faithfully was given for each echo argument."""
    specs = check_table(table)[name].args
    return {arg: args[arg] for arg, spec in specs.items() if spec.echo and arg in args}

# --- an independent validator ---------------------------------------------------------------------

_STRICT_TYPES = Draft202012Validator.TYPE_CHECKER.redefine_many({
    "integer": lambda _, value: type(value) is int,
    "number": lambda _, value: type(value) is int or (
        type(value) is float and math.isfinite(value)),
    "string": lambda _, value: type(value) is str,
    "boolean": lambda _, value: type(value) is bool,
    "array": lambda _, value: isinstance(value, list),
    "object": lambda _, value: isinstance(value, dict),
})
Strict = validators.extend(Draft202012Validator, type_checker=_STRICT_TYPES,
                           format_checker=Draft202012Validator.FORMAT_CHECKER)
_JSON_TYPE = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
              "list": "array", "dict": "object"}
_ARG_CHECK = {"type": "type", "required": "missing", "additionalProperties": "unexpected",
              "enum": "allowed", "minimum": "min", "maximum": "max", "minLength": "min_len",
              "minItems": "min_len", "maxLength": "max_len", "maxItems": "max_len",
              "pattern": "pattern", "format": "format"}


def spec_schema(spec: Spec, results: bool, top: bool = False,
                nullable: bool = False) -> dict[str, Any]:
    """The JSON Schema of one spec, as the contract dialect documents it.

    ``nullable``: an optional key that takes null for "not given".
    """
    if spec.type == "dict" and isinstance(spec.item, Mapping):
        schema = object_schema(spec.item, results)
        return {**schema, "type": ["object", "null"]} if nullable else schema
    schema: dict[str, Any] = {"type": [_JSON_TYPE[spec.type], "null"] if nullable
                              else _JSON_TYPE[spec.type]}
    if spec.allowed is not None:
        schema["enum"] = [*spec.allowed, None] if nullable else list(spec.allowed)
    if spec.min is not None:
        schema["minimum"] = spec.min
    if spec.max is not None:
        schema["maximum"] = spec.max
    low_key, high_key = ("minLength", "maxLength") if spec.type == "str" else ("minItems",
                                                                               "maxItems")
    min_len = spec.min_len
    if min_len is None and results and top and spec.type == "list":
        min_len = 1  # a returned list must not be empty unless its contract says min_len 0
    if min_len is not None:
        schema[low_key] = min_len
    if spec.max_len is not None:
        schema[high_key] = spec.max_len
    if spec.pattern is not None:
        schema["pattern"] = rf"\A(?:{spec.pattern})\Z"  # the gate matches the whole string
    if spec.format is not None:
        schema["format"] = spec.format  # jsonschema's checker, format-nongpl
    if isinstance(spec.item, Spec):
        schema["items"] = spec_schema(spec.item, results)
    elif spec.item is not None:
        schema["items"] = object_schema(spec.item, results)
    return schema


def object_schema(fields: Mapping[str, Spec], results: bool, top: bool = False) -> dict[str, Any]:
    """Arguments are closed; returned objects may carry keys their contract does not name."""
    return {"type": "object",
            "properties": {key: spec_schema(spec, results, top, spec.null_is_absent)
                           for key, spec in fields.items()},
            "required": [key for key, spec in fields.items() if spec.required],
            "additionalProperties": results}


def args_validator(table: Mapping[str, Any], name: str) -> Any:
    """A validator of ``name``'s argument sets (built once per tool of a table)."""
    return _validator(id(table), table, name, "args")


def results_validator(table: Mapping[str, Any], name: str) -> Any:
    """A validator of what ``name`` returns (built once per tool of a table)."""
    return _validator(id(table), table, name, "returns")


_VALIDATORS: dict[tuple[int, str, str], tuple[object, Any]] = {}


def _validator(key: int, table: Mapping[str, Any], name: str, which: str) -> Any:
    # Keyed by the table's id, with the table kept alive beside it so the id stays its own.
    found = _VALIDATORS.get((key, name, which))
    if found is None or found[0] is not table:
        contract = check_table(table)[name]
        fields = contract.args if which == "args" else contract.returns
        schema = object_schema(fields, results=which == "returns", top=True)
        Strict.check_schema(schema)
        if len(_VALIDATORS) > 256:
            _VALIDATORS.clear()
        found = _VALIDATORS[(key, name, which)] = (
            table, Strict(schema, format_checker=Strict.FORMAT_CHECKER))
    return found[1]


def defect_places(validator: Any, args: dict[str, Any]) -> set[tuple[str, str]]:
    """(check, top-level argument) for every error the validator finds in ``args``.

    Arguments are named as the gate's reasons echo them (``shown``: escaped, bounded).
    """
    schema = validator.schema
    places = set()
    for error in validator.iter_errors(args):
        check = _ARG_CHECK[error.validator]
        if error.absolute_path:
            places.add((check, shown(str(error.absolute_path[0]))))
        elif error.validator == "required":
            places |= {(check, shown(key)) for key in schema["required"] if key not in args}
        else:
            places |= {(check, shown(key)) for key in args if key not in schema["properties"]}
    return places


def result_kinds(validator: Any, value: Any) -> set[str]:
    """The result reasons the validator's errors amount to."""
    kinds = set()
    for error in validator.iter_errors(value):
        keyword = error.validator
        if keyword in ("type", "required", "pattern"):
            kinds.add("shape")
        elif keyword in ("maxLength", "maxItems"):
            kinds.add("too_big")
        elif keyword in ("minLength", "minItems") and len(error.instance) == 0:
            kinds.add("empty")
        else:
            kinds.add("range")
    return kinds


TABLES = {"reference": TOOLS, "tickets": TICKETS}
TOOL_CASES = [(label, name) for label, table in TABLES.items() for name in table]


# --- the public surface ---------------------------------------------------------------------------


def test_strategies_all_is_exactly_its_public_names() -> None:
    """The strategies' __all__ lists each public name once, and every name it lists resolves."""
    # Not identifiers: the names pytest's assertion rewriter adds to a package it rewrote.
    public = {name for name in vars(strategies)
              if name.isidentifier() and not name.startswith("_")} - {"annotations", "profiles"}
    assert set(strategies.__all__) == public
    assert len(strategies.__all__) == len(set(strategies.__all__))


def test_the_checkouts_strategies_folder_is_the_same_face() -> None:
    """``strategies`` at the top of a checkout re-exports exactly the installed strategies."""
    face = importlib.import_module("strategies")
    assert list(face.__all__) == list(strategies.__all__)
    assert all(getattr(face, name) is getattr(strategies, name) for name in strategies.__all__)


# --- valid draws ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("label", "name"), TOOL_CASES)
@given(data=st.data())
def test_valid_args_keep_the_contract(label: str, name: str, data: st.DataObject) -> None:
    """Every valid_args draw is valid to the independent validator and to the gate."""
    table = TABLES[label]
    args = data.draw(valid_args(table, name))
    assert not list(args_validator(table, name).iter_errors(args))
    assert Gate(table).validate_args(name, args, echo_values(table, name, args)) == ""


@pytest.mark.slow
@pytest.mark.parametrize(("label", "name"), TOOL_CASES)
@given(data=st.data())
def test_valid_results_keep_the_return_contract(label: str, name: str,
                                                data: st.DataObject) -> None:
    """Every valid_results draw is valid to the independent validator and to the gate."""
    table = TABLES[label]
    value = data.draw(valid_results(table, name))
    assert not list(results_validator(table, name).iter_errors(value))
    assert Gate(table).validate_result(name, value) == ""


# --- defects --------------------------------------------------------------------------------------


def test_the_ticket_table_has_a_site_for_every_argument_and_result_check() -> None:
    """The hand-written table reaches every argument check and every result kind (but
    ``schema``: no spec makes it, only an imported schema's rules beyond the specs)."""
    assert {site.kind for site in defect_sites(TICKETS, "open_ticket")} == \
        set(ARG_CHECKS) - {"schema"}
    assert {site.kind for site in result_sites(TICKETS, "open_ticket")} == set(RESULT_CHECKS)


def test_reference_sites_are_what_its_specs_allow() -> None:
    """stock_lookup: a bound on limit, a closed region, three required args, nothing else."""
    sites = {(site.kind, site.arg) for site in defect_sites(TOOLS, "stock_lookup")}
    assert sites == {("unexpected", ""), ("missing", "sku"), ("missing", "region"),
                     ("missing", "limit"), ("type", "sku"), ("type", "region"),
                     ("type", "limit"), ("allowed", "region"), ("min", "limit"),
                     ("max", "limit")}


SITE_CASES = [(label, name, site) for label, name in TOOL_CASES
              for site in defect_sites(TABLES[label], name)]
#: Per parametrized case: each runs every time, so each gets a third of the profile's examples.
PER_CASE = settings(max_examples=max(10, settings().max_examples // 3))


@pytest.mark.parametrize("kind", [kind for kind in ARG_CHECKS if kind != "schema"])
@PER_CASE
@given(data=st.data())
def test_one_defect_is_at_its_site_only(kind: str, data: st.DataObject) -> None:
    """Each kind, at any of its ticket-table sites: the validator finds it there and only there."""
    table, name = TICKETS, "open_ticket"
    site = data.draw(st.sampled_from([site for site in defect_sites(table, name)
                                      if site.kind == kind]))
    call = data.draw(one_defect_args(table, name, site.kind, site.arg, site.path))
    places = defect_places(args_validator(table, name), call.args)
    assert call.reason == f"{site.kind}:{shown(call.arg)}"
    if site.kind == "echo":
        # No schema knows echo: the value sent is not the value given, or is not sent at all.
        assert call.args.get(call.arg, None) != call.echo[call.arg]
        assert places <= {("missing", call.arg)}
        return
    assert (site.kind, shown(call.arg)) in places
    assert {arg for _, arg in places} == {shown(call.arg)}


# Every shrunk example is itself a draw, which test_one_defect_is_at_its_site_only
# covers; shrinking to the end takes seconds, so a few sites show it end to end.
SHRINK_CASES = [case for case in SITE_CASES if (case[1], str(case[2])) in {
    ("stock_lookup", "type:limit"), ("open_ticket", "echo:request_id"),
    ("open_ticket", "min:notes[].score")}]


@pytest.mark.slow
@pytest.mark.parametrize(("label", "name", "site"), SHRINK_CASES,
                         ids=[f"{name}-{site}" for _, name, site in SHRINK_CASES])
def test_shrinking_keeps_the_defect(label: str, name: str, site: Any) -> None:
    """The simplest example Hypothesis can shrink to still carries its defect."""
    table = TABLES[label]
    simplest = find(one_defect_args(table, name, site.kind, site.arg, site.path),
                    lambda call: True, settings=settings(database=None, max_examples=10))
    assert Gate(table).validate_args(name, simplest.args, simplest.echo) == simplest.reason


RESULT_CASES = [(label, name, kind) for label, name in TOOL_CASES for kind in RESULT_CHECKS
                if kind in {site.kind for site in result_sites(TABLES[label], name)}]


@pytest.mark.parametrize(("label", "name", "kind"), RESULT_CASES)
@PER_CASE
@given(data=st.data())
def test_bad_results_are_wrong_in_the_planted_way(label: str, name: str, kind: str,
                                                  data: st.DataObject) -> None:
    """The validator's errors amount to the planted result kind."""
    table = TABLES[label]
    bad = data.draw(bad_results(table, name, kind))
    assert bad.kind == kind
    assert kind in result_kinds(results_validator(table, name), bad.value)
    assert bad.error == "result:" + kind


def test_no_site_is_an_error_naming_the_tool_and_its_sites() -> None:
    """Asking for a defect the contract cannot have is a usage error, not a silent fallback."""
    with pytest.raises(Exception, match=r"stock_lookup.*pattern.*missing:sku"):
        one_defect_args(TOOLS, "stock_lookup", "pattern").example()
    with pytest.raises(Exception, match="no tool 'nope'"):
        valid_args(TOOLS, "nope")


# --- model mistakes and orders --------------------------------------------------------------------


def test_every_model_mistake_applies_to_the_reference_tool() -> None:
    """stock_lookup has an int, an enum and required args, so a model can make every mistake."""
    assert mistake_kinds(TOOLS, "stock_lookup") == list(MISTAKES)


@pytest.mark.parametrize("kind", MISTAKES)
@PER_CASE
@given(data=st.data())
def test_model_mistakes_name_a_real_defect(kind: str, data: st.DataObject) -> None:
    """Each mistake is refused; the validator agrees the gate's reason is one of its defects."""
    mistake = data.draw(model_mistakes(TOOLS, "stock_lookup", kind))
    reason = Gate(TOOLS).validate_args("stock_lookup", mistake.args, mistake.echo)
    assert reason in mistake.reasons
    check, _, arg = reason.partition(":")
    assert (check, arg) in defect_places(args_validator(TOOLS, "stock_lookup"), mistake.args)


#: Argument names the gate cannot echo as they are: a control character, a line separator, and
#: one past the echo cap; every mistake kind has one of them to be made on.
ODD_NAMES = {"lookup": {"args": {
    "li\x1fmit": {"type": "int", "required": True, "min": 1, "max": 5},
    "re\u2028gion": {"type": "str", "required": True, "allowed": ["busan", "jeju"]},
    "k" * 80: {"type": "str", "required": True},
}, "returns": {}, "fn": lambda **args: {}}}


@pytest.mark.parametrize("kind", MISTAKES)
@PER_CASE
@given(data=st.data())
def test_model_mistakes_echo_names_as_the_gate_does(kind: str, data: st.DataObject) -> None:
    """A mistake on a name with a control character or past the echo cap expects exactly the
    gate's reason: one defect, one reason, equal; a renamed argument, the gate's among its two."""
    mistake = data.draw(model_mistakes(ODD_NAMES, "lookup", kind))
    reason = Gate(ODD_NAMES).validate_args("lookup", mistake.args, mistake.echo)
    if kind == "renamed argument":
        assert reason in mistake.reasons
    else:
        assert mistake.reasons == {reason}


@given(data=st.data())
def test_orders_plant_what_they_report(data: st.DataObject) -> None:
    """An order's args are refused with one of its planted errors, each classified as said."""
    repairable = data.draw(st.booleans())
    order = data.draw(orders(TOOLS, "stock_lookup", can_repair=tools.can_repair,
                             repairable=repairable))
    assert order.fields["tool"] == "stock_lookup"
    args = {key: value for key, value in order.fields.items() if key != "tool"}
    reason = Gate(TOOLS).validate_args("stock_lookup", args)
    assert "args:" + reason in order.errors
    assert 1 <= len(order.repairable_errors) <= 2
    assert all(tools.can_repair(error) for error in order.repairable_errors)
    assert order.repairable == repairable
    assert repairable or not tools.can_repair(order.unrepairable_error)


# --- generated tables -----------------------------------------------------------------------------


@pytest.mark.slow
@given(table=contract_tables(), data=st.data())
def test_generated_tables_are_valid_and_satisfiable(table: dict[str, Any],
                                                    data: st.DataObject) -> None:
    """check_table accepts every drawn table; every tool has arguments and results that pass."""
    contracts = check_table(table)
    gate = Gate(table)
    for name in contracts:
        args = data.draw(valid_args(table, name))
        assert not list(args_validator(table, name).iter_errors(args))
        assert gate.validate_args(name, args, echo_values(table, name, args)) == ""
        value = data.draw(valid_results(table, name))
        assert not list(results_validator(table, name).iter_errors(value))
        assert gate.validate_result(name, value) == ""


@pytest.mark.slow
@pytest.mark.parametrize("risk", RISKS)
def test_generated_tables_reach_every_risk_level(risk: str) -> None:
    """Tables nobody wrote include tools of every risk, writes with and without key_args."""
    # Any example will do, so no shrinking; a fixed search, wide enough that the rarest
    # kind (a write with key_args) is found whatever the profile's max_examples.
    no_shrinking = settings(database=None, phases=[Phase.generate], derandomize=True,
                            max_examples=2000)
    found = find(contract_tables(), lambda table: any(entry.get("risk") == risk
                                                       for entry in table.values()),
                 settings=no_shrinking)
    assert check_table(found)
    if risk in RISKS[2:]:
        find(contract_tables(), lambda table: any(entry.get("risk") == risk and "key_args" in entry
                                                   for entry in table.values()),
             settings=no_shrinking)


@given(table=contract_tables(side_effects=False))
def test_tables_without_side_effects_are_public_reads(table: dict[str, Any]) -> None:
    """``side_effects=False`` draws only public reads, the memo's world."""
    assert {(contract.effect, contract.risk) for contract in check_table(table).values()} == {
        ("read", "read_public")}


@pytest.mark.slow
@given(table=contract_tables(), data=st.data())
def test_generated_defects_are_at_their_sites(table: dict[str, Any],
                                              data: st.DataObject) -> None:
    """On tables nobody wrote, each drawn defect is where its site says, per the validator."""
    name = data.draw(st.sampled_from(sorted(table)))
    site = data.draw(st.sampled_from(defect_sites(table, name)))
    call = data.draw(one_defect_args(table, name, site.kind, site.arg, site.path))
    assert Gate(table).validate_args(name, call.args, call.echo) == call.reason
    places = defect_places(args_validator(table, name), call.args)
    if site.kind != "echo":
        assert (site.kind, shown(call.arg)) in places
    assert {arg for _, arg in places} <= {shown(call.arg)}
    result_site = data.draw(st.sampled_from(result_sites(table, name)))
    bad = data.draw(bad_results(table, name, result_site.kind))
    assert result_site.kind in result_kinds(results_validator(table, name), bad.value)


# --- the dialect's null and named dict keys ------------------------------------------------------

DIALECT = {"t": {"fn": lambda **args: {}, "args": {
    "q": {"type": "str"},
    "note": {"type": "str", "required": False},
    "page": {"type": "int", "required": False, "nullable": False},
    "opts": {"type": "dict", "item": {"depth": {"type": "int", "min": 1},
                                      "mode": {"type": "str", "required": False}}},
}, "returns": {"stats": {"type": "dict", "item": {"count": {"type": "int", "min": 0},
                                                  "tag": {"type": "str", "required": False}}}}}}
DIALECT_GATE = Gate(DIALECT)
#: Any example will do: no shrinking, a fixed search.
SEARCH = settings(database=None, phases=[Phase.generate], derandomize=True, max_examples=500)


def test_valid_args_send_null_only_for_keys_that_read_it_as_not_given() -> None:
    """A model's null for "not given" is drawn, at the top and inside a named dict."""
    find(valid_args(DIALECT, "t"), lambda args: "note" in args and args["note"] is None,
         settings=SEARCH)
    find(valid_args(DIALECT, "t"), lambda args: args["opts"].get("mode", "") is None,
         settings=SEARCH)
    find(valid_results(DIALECT, "t"), lambda value: value["stats"].get("tag", "") is None,
         settings=SEARCH)


@settings(max_examples=200)
@given(data=st.data())
def test_valid_args_never_send_null_where_it_is_refused(data: st.DataObject) -> None:
    """page refuses null (nullable: False), q and opts.depth are required: never null."""
    args = data.draw(valid_args(DIALECT, "t"))
    assert args.get("page", 0) is not None
    assert args["q"] is not None
    assert args["opts"]["depth"] is not None


def test_a_named_dict_has_the_sites_of_its_keys() -> None:
    """Missing, unexpected and each key's own checks, under the path of the key."""
    sites = {(site.kind, site.arg, site.path) for site in defect_sites(DIALECT, "t")}
    assert {("type", "opts", ()), ("unexpected", "opts", ()), ("missing", "opts", (".depth",)),
            ("type", "opts", (".depth",)), ("min", "opts", (".depth",)),
            ("type", "opts", (".mode",))} <= sites
    assert ("missing", "opts", (".mode",)) not in sites
    results = {(site.kind, site.arg, site.path, site.check)
               for site in result_sites(DIALECT, "t")}
    assert {("shape", "stats", (".count",), "missing"),
            ("range", "stats", (".count",), "min")} <= results


@pytest.mark.parametrize(("arg", "path"), [("note", ()), ("opts", (".mode",))])
@settings(max_examples=30)
@given(data=st.data())
def test_a_type_defect_is_null_only_where_null_is_refused(arg: str, path: tuple[str, ...],
                                                          data: st.DataObject) -> None:
    """A planted type defect on note or opts.mode is never null: null is no defect there."""
    call = data.draw(one_defect_args(DIALECT, "t", "type", arg, path))
    value = call.args[arg] if not path else call.args[arg][path[0][1:]]
    assert value is not None
    assert DIALECT_GATE.validate_args("t", call.args) == f"type:{arg}"


def test_null_where_refused_is_drawn_as_a_type_defect() -> None:
    """For page (nullable: False), null is one of the type defects drawn."""
    find(one_defect_args(DIALECT, "t", "type", "page"), lambda call: call.args["page"] is None,
         settings=SEARCH)


def test_generated_tables_have_named_dicts_and_nullable_specs() -> None:
    """Tables nobody wrote hold dicts with named keys and optional keys refusing null."""
    def specs(table: dict[str, Any]) -> list[dict[str, Any]]:
        return [spec for entry in table.values() for side in ("args", "returns")
                for spec in entry[side].values()]

    find(contract_tables(), lambda table: any(spec["type"] == "dict" and "item" in spec
                                              for spec in specs(table)), settings=SEARCH)
    find(contract_tables(), lambda table: any(spec.get("nullable") is False
                                              for spec in specs(table)), settings=SEARCH)


# --- same_value, the harness's notion of "the same call" --------------------------------------


class Incomparable:
    """An object whose == raises."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")

    __hash__ = object.__hash__


INCOMPARABLE = Incomparable()


@pytest.mark.parametrize(("left", "right", "same"), [
    (INCOMPARABLE, INCOMPARABLE, True), (INCOMPARABLE, Incomparable(), False),
    (1, 1, True), (1, True, False), (1, 1.0, False), (0.0, -0.0, False),
    (math.nan, math.nan, True), ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, True),
    ([1, 2], (1, 2), False), ({"a": 1}, {"a": 1, "b": 2}, False),
])
def test_same_value_tells_apart_what_the_memo_must(left: Any, right: Any, same: bool) -> None:
    """Typed equality: 1, 1.0, True differ; -0.0 differs from 0.0; key order does not count."""
    assert same_value(left, right) is same


# --- profiles and run_property --------------------------------------------------------------------


def test_profiles_are_registered_and_chosen_by_the_ci_variable() -> None:
    """ci when CI is set (derandomized, no database), dev when not; thorough has thousands."""
    current = settings.get_current_profile_name()
    try:
        register_profiles()
        assert load_default_profile({"CI": "true"}) == "ci"
        assert settings().derandomize
        assert settings().database is None
        assert load_default_profile({}) == "dev"
        assert settings.get_profile("thorough").max_examples >= 1000
        assert set(PROFILES) == {"dev", "ci", "thorough"}
    finally:
        settings.load_profile(current)


def test_run_property_counts_examples_of_every_case() -> None:
    """A property that holds: every case runs, no failure, at most N examples per case."""
    run = run_property("refused", TOOLS, "stock_lookup",
                       settings(max_examples=3, derandomize=True, database=None))
    cases = len(defect_sites(TOOLS, "stock_lookup"))
    assert run.failures == 0
    assert run.messages == ()
    assert cases <= run.examples <= 3 * cases


def test_run_property_reports_a_body_that_breaks_its_contract() -> None:
    """legacy_stock's every-row answer is found and counted as one failure, with its reason."""
    table = {"legacy": {**TOOLS["legacy_stock"], "fn": lambda **args: {
        "sku": "A100", "rows": [{"store": "S", "count": 1}] * (args["limit"] + 1)}}}
    run = run_property("returns", table, "legacy",
                       settings(max_examples=20, derandomize=True, database=None))
    assert run.failures == 1
    assert "result:too_big" in run.messages[0]
    assert run.examples >= 1
    assert (run.prop, run.tool) == ("returns", "legacy")
