"""The bench's fused reference (``bench/_fused.py``) answers exactly as ``call_tool`` does.

The bench judges the gate against that one hand-fused function, so it must
keep every promise the gate keeps for a plain read, or the gate would be held
to a floor it may not stand on. Here the gate is the oracle: over the
reference tools, valid calls at every boundary, every hostile class of
``strategies``, bad results of every kind, the memo's time and size, and
callers who change what they were answered, both give the same answer, keep
the same counters, and remember values no caller can reach.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agtool import DEFAULT_MEMO_BYTES, Gate
from agtool.tools import TOOLS
from strategies import any_calls, bad_results, boundary_args, hostile_examples, valid_results

COUNTERS = ("runs", "hits", "blocked", "bad_results", "raised", "evicted", "expired")
READS = ("stock_lookup", "legacy_stock")


def _load_fused() -> ModuleType:
    """``bench/_fused.py``, wherever this test sits below the repository's root."""
    for folder in Path(__file__).resolve().parents:
        path = folder / "bench" / "_fused.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location("bench_fused_reference", path)
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError("bench/_fused.py is not above this test")


FUSED = _load_fused()


class Pair:
    """One gate and one fused reference over the same body, memo size and clock."""

    def __init__(self, name: str, fn: Callable[..., Any] | None = None, *, size: int = 1024,
                 ttl: float = 300.0, clock: Callable[[], float] | None = None,
                 max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        body = _own_rows(TOOLS[name]["fn"]) if fn is None else fn
        timing: dict[str, Any] = {} if clock is None else {"clock": clock}
        self.name = name
        self.gate = Gate({name: {**TOOLS[name], "fn": body}}, memo_size=size, memo_ttl=ttl,
                         memo_bytes=max_bytes, **timing)
        self.version = self.gate.cache_key(name, {"sku": "A100", "region": "seoul", "limit": 1})[1]
        self.read, self.counts, self.memo = FUSED.fused_stock_read(
            body, name=name, version=self.version, size=size, ttl=ttl, max_bytes=max_bytes,
            **timing)
        self.compared = 0

    def rescript(self, results: list[Any]) -> None:
        """Both sides anew, each running its own body answering ``results`` in order."""
        self.gate = Gate({self.name: {**TOOLS[self.name], "fn": _scripted(results)}})
        self.read, self.counts, self.memo = FUSED.fused_stock_read(
            _scripted(results), name=self.name, version=self.version)

    def call(self, args: object, run_id: object = None) -> tuple[dict[str, Any], ...]:
        """Both answers to one call, checked equal, with equal counters."""
        expected = self.gate.call_tool(self.name, args, run_id=run_id)
        got = self.read(args, None, run_id)
        assert got == expected, (args, run_id)
        stats = self.gate.stats(self.name)
        assert {c: getattr(self.counts, c) for c in COUNTERS} == \
            {c: getattr(stats, c) for c in COUNTERS}, (args, run_id)
        assert len(self.memo) == len(self.gate.cache.entries)  # as held: len() would expire
        # The byte bound: weighed alike, and each total the sum of what its memo holds.
        assert self.counts.bytes == self.gate.cache.bytes, (args, run_id)
        assert self.counts.bytes == sum(entry[3] for entry in self.memo.values())
        assert self.gate.cache.bytes == sum(entry[3] for entry in self.gate.cache.entries.values())
        self.compared += 1
        return expected, got

    def call_and_spoil(self, args: object, run_id: object = None) -> None:
        """A call, then, if it succeeded, its repeat after both callers changed what they
        were answered: the repeat is answered what the call was, by both (a private copy
        kept, then a fresh one handed out), and the next repeat too."""
        answers = self.call(args, run_id)
        if not answers[0]["ok"]:
            return
        kept = copy.deepcopy(answers[0])
        for _ in range(2):
            for answer in answers:
                _spoil(answer)
            answers = self.call(args, run_id)
            assert answers[0] == kept


def _spoil(answer: dict[str, Any]) -> None:
    value = answer["value"]
    if not answer["ok"] or not isinstance(value, dict):
        return
    rows = value.get("rows")
    if isinstance(rows, list):
        for row in rows:
            if isinstance(row, dict):
                row["count"] = -1
                row["stolen"] = True
        rows.append({"store": "forged", "count": 99})
    value["sku"] = "SPOILED"


def _own_rows(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The reference tool, answering rows of its own: a caller who changes what a miss
    answered changes the body's value, which must not be the shared ``STOCK`` table."""
    def body(sku: str, region: str, limit: int) -> Any:
        return copy.deepcopy(fn(sku=sku, region=region, limit=limit))
    return body


RUN_IDS: list[object] = [None, "run-1", "run-2", ["an", "unhashable", "run"]]


def _hand_made_bad_args() -> list[object]:
    base = {"sku": "A100", "region": "seoul", "limit": 1}

    class Sku(str):
        pass

    return [
        None, [], "sku=A100", 7, {}, {**base, "limit": True}, {**base, "limit": 1.0},
        {**base, "limit": 0}, {**base, "limit": 3}, {**base, "limit": -(10**40)},
        {**base, "region": "mars"}, {**base, "region": None}, {**base, "sku": None},
        {**base, "sku": Sku("A100")}, {**base, "colour": "red"}, {"sku": "A100"},
        {"region": "seoul", "limit": 1}, {**base, 1: "x"}, {**base, None: 1},
        {f"k{i}": i for i in range(1000)}, dict.fromkeys(("sku", "region", "limit", "x")),
    ]


def test_the_reference_and_the_gate_agree_on_every_class_of_call() -> None:
    """Valid calls at every boundary in four runs (one whose id cannot be hashed), every
    hostile class, hand-made mistakes: at least 200 calls, each answered and counted
    alike, and each success's repeat answered what it first was after both callers
    changed their copies."""
    compared = 0
    for name in READS:
        pair = Pair(name)
        for args in boundary_args(TOOLS, name):
            for run_id in RUN_IDS:
                pair.call_and_spoil(args, run_id)
        for hostile in hostile_examples(TOOLS, name):
            if hostile.given or hostile.name != name:
                continue  # a scope, approvals or another name: not a plain read of this tool
            pair.call(hostile.args)
            pair.call(hostile.args, "run-1")
        for args in _hand_made_bad_args():
            pair.call(args)
        compared += pair.compared
    assert compared >= 200, compared


def test_the_reference_refuses_where_the_gate_does_and_remembers_where_it_does() -> None:
    """A sanity floor under the agreement above: it saw hits, misses, refusals and bad
    results (a comparison of two functions that refuse everything would agree too)."""
    pair = Pair("legacy_stock")
    pair.call({"sku": "A100", "region": "seoul", "limit": 1})  # three rows: too big
    pair.call({"sku": "A100", "region": "jeju", "limit": 1})
    pair.call({"sku": "A100", "region": "jeju", "limit": 1})
    pair.call({"sku": "A100", "region": "mars", "limit": 1})
    stats = pair.gate.stats("legacy_stock")
    assert (stats.runs, stats.hits, stats.blocked, stats.bad_results) == (2, 1, 1, 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(any_calls(TOOLS), min_size=1, max_size=12),
       st.lists(st.sampled_from(RUN_IDS[:3]), min_size=1, max_size=12))
def test_the_reference_agrees_on_arbitrary_calls(calls: list[tuple[Any, Any]],
                                                 run_ids: list[object]) -> None:
    """Any args ``strategies`` can make (good, one-defect, odd keys, raising dicts, any
    object), each called twice, in runs drawn from a few."""
    pairs = {name: Pair(name) for name in READS}
    for index, (name, args) in enumerate(calls):
        pair = pairs.get(name) if isinstance(name, str) else None
        if pair is None:
            continue  # a name no reference tool has
        run_id = run_ids[index % len(run_ids)]
        pair.call(args, run_id)
        pair.call(args, run_id)


def _scripted(values: list[Any]) -> Callable[..., Any]:
    """A body that answers the next of ``values`` (a deep copy: each side gets its own)."""
    left = list(values)

    def body(sku: str, region: str, limit: int) -> Any:
        return copy.deepcopy(left.pop(0)) if left else {"sku": sku, "rows": []}
    return body


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(valid_results(TOOLS, "stock_lookup"),
                          bad_results(TOOLS, "stock_lookup").map(lambda bad: bad.value)),
                min_size=1, max_size=6))
def test_the_reference_agrees_on_every_kind_of_result(results: list[Any]) -> None:
    """Valid results (some with undeclared keys), and results wrong in one way of every
    kind: checked, refused or remembered alike, and each remembered one isolated."""
    pair = Pair("stock_lookup")
    pair.rescript(results)  # each side runs its own body, answering the same values in order
    for index in range(len(results)):
        pair.call_and_spoil({"sku": "A100", "region": "seoul", "limit": 1}, f"run-{index}")


def test_the_reference_forgets_in_time_and_in_space_as_the_gate_does() -> None:
    """A memo of three values and a clock moved by hand: hits within the time to live,
    expiry at it, and the least recently used evicted first, counted alike."""
    now = [0.0]
    pair = Pair("stock_lookup", size=3, ttl=10.0, clock=lambda: now[0])
    args = {"sku": "A100", "region": "seoul", "limit": 2}
    for step in range(40):
        run = f"run-{step % 5}"
        pair.call_and_spoil(args, run)
        if step % 4 == 0:
            pair.call(args, "run-0")  # kept recent: evicted last
        now[0] += 1.5 if step % 7 else 11.0
    stats = pair.gate.stats("stock_lookup")
    assert stats.evicted > 0
    assert stats.expired > 0
    assert stats.hits > 0


class _TaggedKey(str):
    """A key that compares as a declared name but carries a state of its own."""

    tag = "original"


def _rows_keyed_by(key: str) -> dict[str, Any]:
    return {"sku": "A100", "rows": [{key: "Gangnam", "count": 7}]}


def test_a_key_that_only_looks_declared_is_not_shared_between_answers() -> None:
    """A row keyed by a ``str`` subclass equal to ``"store"`` keeps its contract, but its
    key is not a plain ``str``: the key-type pass must send it to the slow copy, or every
    answer shares that key object and a caller's change to it reaches the next caller."""
    results = [_rows_keyed_by(_TaggedKey("store"))]
    pair = Pair("stock_lookup")
    pair.rescript(results)
    args = {"sku": "A100", "region": "seoul", "limit": 1}
    for answer in pair.call(args):  # the misses: each side's value is its body's own
        assert answer["ok"]
    for answer in pair.call(args):  # the first hits: spoil the key each was handed
        (key,) = [k for k in answer["value"]["rows"][0] if k != "count"]
        assert type(key) is _TaggedKey
        key.tag = "spoiled"
    for answer in pair.call(args):
        (key,) = [k for k in answer["value"]["rows"][0] if k != "count"]
        assert key.tag == "original"


def test_the_reference_evicts_by_bytes_as_the_gate_does() -> None:
    """A budget of a few entries' weight and room for a thousand values: what is evicted is
    what the bytes push out, weighed alike (the Pair checks both totals after each call),
    with run ids and skus of every length."""
    pair = Pair("stock_lookup", max_bytes=600)
    for step in range(60):
        run = "r" * (step % 9) if step % 4 else None
        args = {"sku": ("A100", "B200", "C300", "Z" * (step % 40))[step % 4],
                "region": ("seoul", "jeju", "busan")[step % 3], "limit": 1 + step % 2}
        pair.call_and_spoil(args, run)
    stats = pair.gate.stats("stock_lookup")
    assert stats.evicted > 0
    assert 0 < pair.gate.cache.bytes <= 600
    assert 1 < len(pair.memo) < 10  # bounded by bytes, not by its size of 1,024
