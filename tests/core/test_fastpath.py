"""The compiled read (``_fastpath``) answers exactly as the general chain of steps does.

A caller in the gate's own scope takes the compiled read; the same call with
its scope given explicitly takes the general steps (``prepare``, ``run_sync``,
``conclude``). The general steps are the oracle: on any table, any call and
any returned value, both answer the same envelope and model answer, count
the same, and remember the same.
"""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_stateful import without_absent_nulls

from agtool import DEFAULT_SCOPE, Gate, check_table
from agtool.harness.strategies import (
    any_calls,
    bad_results,
    contract_tables,
    valid_args,
    valid_results,
)
from agtool.tools import TOOLS

Table = dict[str, dict[str, Any]]


#: The secret of gates whose memo keys a test compares.
SECRET = "test-fastpath-secret-0123456789"  # noqa: S105 - a test's own secret


def _answering(value: object, seen: list[dict[str, Any]]) -> Callable[..., Any]:
    def body(**args: Any) -> Any:
        seen.append(args)
        return copy.deepcopy(value)
    return body


def _answering_async(value: object, seen: list[dict[str, Any]]) -> Callable[..., Any]:
    async def body(**args: Any) -> Any:
        seen.append(args)
        return copy.deepcopy(value)
    return body


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Table, object, object, object]:
    """A table, one call on it (of any sort), and what its tool's body answers."""
    table = draw(contract_tables(side_effects=False))
    name = draw(st.sampled_from(sorted(table)))
    result = draw(valid_results(table, name)
                  | bad_results(table, name).map(lambda bad: bad.value) | st.none())
    _, args = draw(any_calls({name: table[name]}))
    return table, name, args, result


def _with_body(table: Table, name: object, body: Callable[..., Any]) -> Table:
    return {tool: {**entry, "fn": body} if tool == name else dict(entry)
            for tool, entry in table.items()}


def _without_request_id(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "request_id"}


@given(_cases())
def test_compiled_read_answers_and_counts_as_the_general_steps(
        case: tuple[Table, object, object, object]) -> None:
    table, name, args, result = case
    compiled_runs: list[dict[str, Any]] = []
    general_runs: list[dict[str, Any]] = []
    # One secret: a tool with sensitive args is keyed by a keyed digest, alike on both.
    compiled = Gate(_with_body(table, name, _answering(result, compiled_runs)), secret=SECRET)
    general = Gate(_with_body(table, name, _answering(result, general_runs)), secret=SECRET)
    scope = DEFAULT_SCOPE
    for _ in range(2):  # the second call of a remembered value is a hit on both paths
        assert compiled.call_tool(name, args) == general.call_tool(name, args, scope=scope)
        assert _without_request_id(compiled.call_for_model(name, args)) == \
            _without_request_id(general.call_for_model(name, args, scope=scope))
    assert compiled_runs == general_runs  # the bodies ran as often, on the same args
    if isinstance(name, str):
        assert compiled.stats(name) == general.stats(name)
    assert sorted(map(repr, compiled.cache)) == sorted(map(repr, general.cache))


@pytest.mark.slow
@given(_cases())
def test_compiled_async_read_answers_and_counts_as_the_general_steps(
        case: tuple[Table, object, object, object]) -> None:
    table, name, args, result = case
    compiled_runs: list[dict[str, Any]] = []
    general_runs: list[dict[str, Any]] = []
    compiled = Gate(_with_body(table, name, _answering_async(result, compiled_runs)),
                    secret=SECRET)
    general = Gate(_with_body(table, name, _answering_async(result, general_runs)),
                    secret=SECRET)

    async def both() -> None:
        for _ in range(2):
            assert await compiled.acall_tool(name, args) == \
                await general.acall_tool(name, args, scope=DEFAULT_SCOPE)
            assert _without_request_id(await compiled.acall_for_model(name, args)) == \
                _without_request_id(await general.acall_for_model(name, args,
                                                                  scope=DEFAULT_SCOPE))

    asyncio.run(both())
    assert compiled_runs == general_runs
    if isinstance(name, str):
        assert compiled.stats(name) == general.stats(name)


def test_only_a_plain_read_in_the_gates_scope_is_compiled() -> None:
    """Writes, approvals, timeouts and tools outside the gate's scope take the general steps."""
    entry = TOOLS["stock_lookup"]
    table = {"read": entry, "timed": {**entry, "timeout": 1.0},
             "private": {**entry, "risk": "read_sensitive"},
             "write": {**entry, "effect": "write", "risk": "reversible_write"},
             "approved": {**entry, "effect": "write", "risk": "external_effect"}}
    tools = Gate(table, scope=set(DEFAULT_SCOPE) | {"reversible_write", "external_effect"})._tools
    compiled = {name: tools.lookup(name).fast is not None  # type: ignore[union-attr]
                for name in table}
    assert compiled == {"read": True, "timed": False, "private": False, "write": False,
                        "approved": False}


def test_a_remembered_value_past_its_time_is_dropped_and_counted_on_the_compiled_read() -> None:
    now = [0.0]
    gate = Gate({"stock_lookup": {**TOOLS["stock_lookup"], "ttl": 10}}, clock=lambda: now[0])
    args = {"sku": "A100", "region": "seoul", "limit": 1}
    first = gate.call_tool("stock_lookup", args)
    now[0] = 9.5
    assert gate.call_tool("stock_lookup", args) == first
    now[0] = 10.0
    assert gate.call_tool("stock_lookup", args) == first
    stats = gate.stats("stock_lookup")
    assert (stats.runs, stats.hits, stats.expired) == (2, 1, 1)
    assert len(gate.cache) == 1


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda value: value["rows"].append({"store": "X", "count": 1}), id="append"),
    pytest.param(lambda value: value["rows"][0].update(count=999), id="nested"),
    pytest.param(lambda value: value.update(sku="Z"), id="top"),
])
def test_what_a_caller_does_to_a_compiled_reads_value_stays_with_the_caller(
        mutate: Callable[[dict[str, Any]], None]) -> None:
    gate = Gate(TOOLS)
    args = {"sku": "A100", "region": "seoul", "limit": 2}
    expected = copy.deepcopy(gate.call_tool("stock_lookup", args))
    for _ in range(2):
        mutate(gate.call_tool("stock_lookup", args)["value"])  # two hits, two fresh copies
    assert gate.call_tool("stock_lookup", args) == expected


@given(_cases())
def test_cache_key_is_the_key_the_call_is_remembered_under(
        case: tuple[Table, object, object, object]) -> None:
    """cache_key is key_of of the checked snapshot, and the compiled read remembers under it."""
    table, name, args, result = case
    gate = Gate(_with_body(table, name, _answering(result, [])))
    key = gate.cache_key(name, args)  # type: ignore[arg-type]
    tool = gate._tools.lookup(name)
    if not isinstance(tool, str):
        snapshot = tool.snapshot(args, None)
        if not isinstance(snapshot, str):
            assert key == tool.key_of(snapshot, None)
    envelope = gate.call_tool(name, args)
    if envelope["ok"] and key is not None:
        assert key in gate.cache
    else:
        assert key not in gate.cache


@st.composite
def _null_cases(draw: st.DrawFn) -> tuple[Table, str, dict[str, Any], dict[str, Any], object]:
    """A valid call twice: with null for every nullable optional arg, and with them left out."""
    table = draw(contract_tables(side_effects=False))
    name = draw(st.sampled_from(sorted(table)))
    specs = check_table(table)[name].args
    args = draw(valid_args(table, name))
    nullable = [arg for arg, spec in specs.items() if spec.null_is_absent]
    with_nulls = {**args, **dict.fromkeys(nullable, None)}
    without = {arg: value for arg, value in args.items() if arg not in nullable}
    return table, name, with_nulls, without, draw(valid_results(table, name))


@given(_null_cases())
def test_null_and_absent_are_one_remembered_call_on_both_paths(
        case: tuple[Table, str, dict[str, Any], dict[str, Any], object]) -> None:
    """Null for an optional arg reaches no body, and keys the call as its absence does."""
    table, name, with_nulls, without, result = case
    echo = {arg: value for arg, value in without.items()
            if check_table(table)[name].args[arg].echo}
    runs: dict[str, list[dict[str, Any]]] = {"compiled": [], "general": []}
    answers = {}
    for path, kwargs in (("compiled", {}), ("general", {"scope": DEFAULT_SCOPE})):
        gate = Gate(_with_body(table, name, _answering(result, runs[path])), secret=SECRET)
        first = gate.call_tool(name, with_nulls, echo, **kwargs)
        second = gate.call_tool(name, without, echo, **kwargs)
        assert first["ok"], first
        assert second == first
        answers[path] = (first, gate.stats(name), sorted(map(repr, gate.cache)))
    assert answers["compiled"] == answers["general"]
    assert runs["compiled"] == runs["general"]
    # The body saw no null an optional key may stand for, at the top or inside items and dicts.
    assert runs["compiled"][0] == without_absent_nulls(check_table(table)[name].args, without)
    stats = answers["compiled"][1]
    if answers["compiled"][2]:  # remembered (a key that can be made): the second was a hit
        assert (stats.runs, stats.hits) == (1, 1)


# -- the review's cases: each was a difference between the two paths, or a raise ---------------

def _both(table: Table) -> tuple[Gate, Gate, dict[str, Any]]:
    """A gate whose calls take the compiled read, one whose calls take the general steps."""
    return Gate(table), Gate(table), {"scope": DEFAULT_SCOPE}


def _one_tool(body: Callable[..., Any], returns: dict[str, Any],
              args: dict[str, Any] | None = None) -> Table:
    return {"t": {"fn": body, "args": args or {"q": {"type": "str"}}, "returns": returns}}


_COUNT = {"count": {"type": "int"}}
_ROWS = {"rows": {"type": "list", "item": {"id": {"type": "int"}, "n": {"type": "int"}}}}


@pytest.mark.parametrize(("made_up", "returns"), [
    pytest.param(lambda: collections.Counter(), _COUNT, id="Counter"),
    pytest.param(lambda: collections.defaultdict(int), _COUNT, id="defaultdict"),
    pytest.param(lambda: {"rows": [collections.Counter(id=0)]}, _ROWS, id="Counter-item"),
])
def test_a_dict_that_makes_up_missing_keys_is_not_a_value_with_them(
        made_up: Callable[[], Any], returns: dict[str, Any]) -> None:
    """A subclass's ``__missing__`` answers for a key it lacks: the check must not ask it."""
    returned: list[Any] = []

    def body(q: str) -> Any:
        returned.append(made_up())
        return returned[-1]

    compiled, general, scope = _both(_one_tool(body, returns))
    for gate, kwargs in ((compiled, {}), (general, scope)):
        assert gate.call_tool("t", {"q": "a"}, **kwargs)["error"] == "result:shape"
    assert returned == [made_up(), made_up()]  # and the check wrote no made-up key into them


def test_a_key_that_only_compares_like_a_name_is_never_shared_by_two_hits() -> None:
    class Key(str):
        pass

    def body(q: str) -> dict[Any, Any]:
        key = Key("count")
        key.seen = []  # type: ignore[attr-defined]
        return {key: 1}

    compiled, general, scope = _both(_one_tool(body, {"count": {"type": "int"}}))
    for gate, kwargs in ((compiled, {}), (general, scope)):
        gate.call_tool("t", {"q": "a"}, **kwargs)
        first = gate.call_tool("t", {"q": "a"}, **kwargs)["value"]
        next(iter(first)).seen.append("changed by the first caller")
        second = gate.call_tool("t", {"q": "a"}, **kwargs)["value"]
        assert next(iter(second)).seen == []
        assert gate.stats("t").hits == 2


class _Unreadable:
    """A value whose ``__class__`` raises: even asking whether it is awaitable fails."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise ValueError("no class")


def test_a_value_that_cannot_be_asked_if_it_is_awaitable_is_a_raised_body() -> None:
    table = _one_tool(lambda q: _Unreadable(), {"count": {"type": "int"}})
    kept: list[Any] = []
    for gate in (Gate(table), Gate(table, records=kept.append)):
        assert gate.call_tool("t", {"q": "a"})["error"] == "raised:ValueError"
        assert gate.call_for_model("t", {"q": "a"})["error"]["code"] == "INTERNAL"
        assert gate.call_tool("t", {"q": "a"}, scope=DEFAULT_SCOPE)["error"] == \
            "raised:ValueError"
        assert gate.stats("t").raised == 3
    assert len(kept) == 3


def test_an_open_argument_does_not_change_how_a_closed_result_is_kept() -> None:
    args = {"q": {"type": "str"}, "opts": {"type": "dict", "required": False}}
    table = _one_tool(lambda q, opts=None: {"n": [1, 2]},
                      {"n": {"type": "list", "item": {"type": "int"}}}, args)
    compiled, general, scope = _both(table)
    compiled.call_tool("t", {"q": "a"})
    general.call_tool("t", {"q": "a"}, **scope)
    [(_, (compiled_frozen, *_))] = compiled.cache.entries.items()  # and its time, counts, weight
    [(_, (general_frozen, *_))] = general.cache.entries.items()
    assert compiled_frozen[1].__name__ == general_frozen[1].__name__ == "copy_result"


@pytest.mark.parametrize("run_id", [["a"], {"a": 1}, {"a"}], ids=["list", "dict", "set"])
def test_a_run_id_that_cannot_be_hashed_is_a_call_not_remembered(run_id: Any) -> None:
    body = Counting()
    compiled, general, scope = _both(_one_tool(body, {"count": {"type": "int"}}))
    for gate, kwargs in ((compiled, {}), (general, scope)):
        for _ in range(2):
            assert gate.call_tool("t", {"q": "a"}, run_id=run_id, **kwargs)["ok"]
            assert gate.cache_key("t", {"q": "a"}, run_id=run_id) is None
    assert body.runs == 4
    assert len(compiled.cache) == len(general.cache) == 0


class Counting:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, q: str) -> dict[str, Any]:
        self.runs += 1
        return {"count": self.runs}
