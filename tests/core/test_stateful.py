"""Property 6: valid calls, defective calls, bad results, repeats and clears, interleaved.

A ``RuleBasedStateMachine`` drives one instrumented gate with stubbed bodies
and keeps its own model of what must have happened: which calls are
remembered (and with what value), how often each body ran, how many calls
were memo hits, refused, or refused on their result. After every step the
gate's counters, the bodies' own counts and the memo's size must match the
model. The model's memo key is built here, not taken from the gate.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from agtool import Gate, Spec, ToolStats, check_table, tools
from agtool.harness._checks import body_of, echo_of, instrument, same_value
from agtool.harness.strategies import (
    bad_results,
    contract_tables,
    one_defect_args,
    permuted,
    valid_args,
)
from agtool.harness.strategies import valid_results as valid_values


def canonical(name: str, value: Any) -> Hashable:
    """The identity of a call: same types and values all the way down, key order ignored."""
    if isinstance(value, dict):
        return (name, "dict", tuple(sorted((key, canonical("", item))
                                           for key, item in value.items())))
    if isinstance(value, list):
        return (name, "list", tuple(canonical("", item) for item in value))
    return (name, type(value).__name__, repr(value))


def without_absent_nulls(specs: Mapping[str, Spec], args: dict[str, Any]) -> dict[str, Any]:
    """``args`` as one call: a null for an optional key that reads it as "not given" is no key.

    Written from the dialect's words, not from the gate's snapshot, so the model
    does not learn what a call is from the code it checks.
    """
    return {key: _inner(specs[key], value) if key in specs else value
            for key, value in args.items()
            if not (value is None and key in specs and specs[key].null_is_absent)}


def _inner(spec: Spec, value: Any) -> Any:
    if isinstance(spec.item, Mapping) and isinstance(value, dict):
        return without_absent_nulls(spec.item, value)
    if spec.item is not None and isinstance(value, list):
        item = spec.item
        if isinstance(item, Spec):
            return [_inner(item, each) for each in value]
        return [without_absent_nulls(item, each) if isinstance(each, dict) else each
                for each in value]
    return value


class GateMachine(RuleBasedStateMachine):
    """One gate over one table, checked step by step against a model of its memo and counters."""

    table: dict[str, dict[str, Any]]
    gate: Gate

    def start(self, table: dict[str, dict[str, Any]]) -> None:
        self.table = table
        self.names = sorted(table)
        self.gate = instrument(table, stub=True)
        self.expected = {name: ToolStats() for name in self.names}
        self.body_runs = dict.fromkeys(self.names, 0)  # never reset: the bodies count on
        #: canonical call -> (name, args, the value it must be answered with)
        self.memo: dict[Hashable, tuple[str, dict[str, Any], Any]] = {}

    def identity(self, name: str, args: dict[str, Any]) -> Hashable:
        """Which remembered call ``args`` are: the same up to key order and absent nulls."""
        return canonical(name, without_absent_nulls(check_table(self.table)[name].args, args))

    def count(self, name: str, **moved: int) -> None:
        self.body_runs[name] += moved.get("runs", 0)
        stats = self.expected[name]
        self.expected[name] = ToolStats(**{field: getattr(stats, field) + moved.get(field, 0)
                                           for field in ToolStats.__dataclass_fields__})

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        envelope = self.gate.call_tool(name, args, echo_of(self.gate, name, args))
        return dict(envelope)

    def answered_from_memo(self, name: str, args: dict[str, Any]) -> bool:
        """If the model remembers this call, the gate must answer it from the memo."""
        remembered = self.memo.get(self.identity(name, args))
        if remembered is None:
            return False
        envelope = self.call(name, args)
        self.count(name, hits=1)
        assert envelope["ok"], envelope
        assert same_value(envelope["value"], remembered[2])
        if isinstance(envelope["value"], dict):
            envelope["value"]["scribbled"] = True  # the caller's copy, not the memo's
        return True

    @rule(data=st.data())
    def valid_call(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.names))
        args = data.draw(valid_args(self.table, name))
        if self.answered_from_memo(name, args):
            return
        value = data.draw(valid_values(self.table, name))
        body_of(self.gate, name).value = value
        envelope = self.call(name, args)
        self.count(name, runs=1)
        assert envelope["ok"], envelope
        assert same_value(envelope["value"], value)
        self.memo[self.identity(name, args)] = (name, args, copy.deepcopy(value))

    @precondition(lambda self: bool(self.memo))
    @rule(data=st.data())
    def repeat(self, data: st.DataObject) -> None:
        name, args, _ = data.draw(st.sampled_from(list(self.memo.values())))
        assert self.answered_from_memo(name, data.draw(permuted(args)))

    @rule(data=st.data())
    def defective_call(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.names))
        call = data.draw(one_defect_args(self.table, name))
        envelope = self.gate.call_tool(name, call.args, call.echo)
        self.count(name, blocked=1)
        assert envelope == {"ok": False, "value": None, "error": call.error}

    @rule(data=st.data())
    def bad_result(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.names))
        args = data.draw(valid_args(self.table, name))
        if self.answered_from_memo(name, args):
            return  # a remembered success is answered before any body could go wrong
        bad = data.draw(bad_results(self.table, name))
        body_of(self.gate, name).value = bad.value
        envelope = self.call(name, args)
        self.count(name, runs=1, bad_results=1)
        assert envelope == {"ok": False, "value": None, "error": bad.error}

    @rule()
    def clear(self) -> None:
        self.gate.clear()
        self.memo.clear()

    @rule()
    def reset_stats(self) -> None:
        self.gate.reset_stats()
        self.expected = {name: ToolStats() for name in self.names}

    @invariant()
    def counters_match_the_model(self) -> None:
        for name in self.names:
            assert self.gate.stats(name) == self.expected[name], name
            assert body_of(self.gate, name).runs == self.body_runs[name], name

    @invariant()
    def the_memo_holds_what_the_model_remembers(self) -> None:
        assert len(self.gate.cache) == len(self.memo)


class ReferenceMachine(GateMachine):
    """The machine on the reference tools."""

    @initialize()
    def on_the_reference_table(self) -> None:
        self.start(tools.TOOLS)


class GeneratedMachine(GateMachine):
    """The machine on a table nobody wrote, of reads (writes have their own machine in
    ``tests/store/test_writes.py``: a write's repeat is a replay, not a memo hit)."""

    @initialize(table=contract_tables(side_effects=False))
    def on_a_generated_table(self, table: dict[str, dict[str, Any]]) -> None:
        self.start(table)


TestReferenceMachine = ReferenceMachine.TestCase
TestGeneratedMachine = pytest.mark.slow(GeneratedMachine.TestCase)
