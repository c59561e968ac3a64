"""The memo for a long-running service: bounded (LRU), expiring (ttl), scoped by run.

Time is an injected clock the tests move by hand; body runs are counted by the bodies,
and every expectation comes from a model kept in the test (an ordered dict for LRU, a
map of remembered-at times for ttl), never from the gate's own output.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Any

import pytest
from _bodies import CountingBody
from hypothesis import given
from hypothesis import strategies as st

from agtool import ContractError, Gate

ARGS: dict[str, Any] = {"x": {"type": "int"}}
RETURNS: dict[str, Any] = {"x": {"type": "int"}, "run": {"type": "int"}}
_NO_TTL = object()


class Body(CountingBody):
    """A counting body answering its ``x`` and the serial of this run, so runs tell apart."""

    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"x": kwargs["x"], "run": self.count}


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def entry(body: Callable[..., Any], ttl: object = _NO_TTL, **extra: Any) -> dict[str, Any]:
    found = {"fn": body, "args": ARGS, "returns": RETURNS, **extra}
    if ttl is not _NO_TTL:
        found["ttl"] = ttl
    return found


def service_gate(body: Callable[..., Any], *, ttl: object = _NO_TTL,
                 **kwargs: Any) -> Gate:
    """A gate over one tool ``t``; ``kwargs`` go to ``Gate`` (memo_size, memo_ttl, clock)."""
    return Gate({"t": entry(body, ttl)}, **kwargs)


def call(gate: Gate, x: int, **kwargs: Any) -> dict[str, Any]:
    envelope = gate.call_tool("t", {"x": x}, **kwargs)
    assert envelope["ok"], envelope
    return envelope


# -- Bounded: least recently used goes first ------------------------------------------------------

def test_memo_holds_at_most_memo_size_values() -> None:
    """After 20 distinct successes a memo of 8 holds 8 and has evicted 12."""
    body = Body()
    gate = service_gate(body, memo_size=8)
    for x in range(20):
        call(gate, x)
    assert len(gate.cache) == 8
    assert gate.stats("t").evicted == 12
    assert body.count == 20
    assert all(gate.cache_key("t", {"x": x}) in gate.cache for x in range(12, 20))
    assert not any(gate.cache_key("t", {"x": x}) in gate.cache for x in range(12))


def test_a_value_hit_recently_survives_eviction() -> None:
    """A hit makes a value the most recently used: the least recently used one goes instead."""
    body = Body()
    gate = service_gate(body, memo_size=8)
    for x in range(8):
        call(gate, x)
    assert call(gate, 0)["value"] == {"x": 0, "run": 1}  # a hit: 0 is now the newest
    call(gate, 8)  # evicts 1, the least recently used
    assert body.count == 9
    assert call(gate, 0)["value"] == {"x": 0, "run": 1}
    assert body.count == 9
    assert call(gate, 1)["value"] == {"x": 1, "run": 10}
    assert body.count == 10
    assert gate.stats("t").evicted == 2  # 1 for 8, then 2 for 1


def test_the_default_memo_is_bounded_at_1024() -> None:
    """A gate made with no memo_size remembers 1024 values, evicting the oldest."""
    body = Body()
    gate = Gate({"t": entry(body)})
    for x in range(1024 + 10):
        call(gate, x)
    assert len(gate.cache) == 1024
    assert gate.stats("t").evicted == 10
    assert gate.cache_key("t", {"x": 9}) not in gate.cache
    assert gate.cache_key("t", {"x": 10}) in gate.cache


@given(xs=st.lists(st.integers(0, 9), max_size=60), size=st.integers(1, 5))
def test_memo_is_an_lru_of_memo_size(xs: list[int], size: int) -> None:
    """Against an ordered-dict LRU model: the same runs, hits, evictions and remembered keys."""
    body = Body()
    gate = service_gate(body, memo_size=size)
    model: collections.OrderedDict[int, int] = collections.OrderedDict()  # x -> run
    runs = evicted = 0
    for x in xs:
        if x in model:
            model.move_to_end(x)
        else:
            runs += 1
            model[x] = runs
            if len(model) > size:
                model.popitem(last=False)
                evicted += 1
        assert call(gate, x)["value"] == {"x": x, "run": model[x]}
        assert body.count == runs
    assert len(gate.cache) == len(model)
    assert gate.stats("t").evicted == evicted
    assert gate.stats("t").hits == len(xs) - runs
    for x in range(10):
        assert (gate.cache_key("t", {"x": x}) in gate.cache) == (x in model)


# -- Expiring: a ttl per tool, and the gate's default --------------------------------------------

def test_a_value_is_served_while_fresh_and_run_again_once_stale() -> None:
    """With ttl 5, a value is served at 4.9 s and run again at 5.1 s; the expiry is counted."""
    body, clock = Body(), Clock()
    gate = service_gate(body, ttl=5, clock=clock)
    assert call(gate, 1)["value"] == {"x": 1, "run": 1}
    clock.advance(4.9)
    assert call(gate, 1)["value"] == {"x": 1, "run": 1}
    clock.advance(0.2)
    assert call(gate, 1)["value"] == {"x": 1, "run": 2}
    assert body.count == 2
    stats = gate.stats("t")
    assert (stats.runs, stats.hits, stats.expired, stats.evicted) == (2, 1, 1, 0)
    clock.advance(4.9)  # fresh again: remembered anew at the second run
    assert call(gate, 1)["value"] == {"x": 1, "run": 2}


def test_ttl_zero_is_never_remembered() -> None:
    """A tool with ttl 0 runs on every call and leaves nothing in the memo."""
    body, clock = Body(), Clock()
    gate = service_gate(body, ttl=0, clock=clock)
    for _ in range(3):
        call(gate, 1)
    assert body.count == 3
    assert len(gate.cache) == 0
    assert gate.stats("t").hits == 0


@pytest.mark.parametrize(("ttl", "gate_kwargs", "fresh_at", "stale_at"), [
    pytest.param(_NO_TTL, {"memo_ttl": 10}, 9.5, 10.5, id="gate-memo_ttl-applies"),
    pytest.param(_NO_TTL, {}, 299.0, 301.0, id="default-memo_ttl-is-300"),
    pytest.param(5, {"memo_ttl": 300}, 4.5, 5.5, id="entry-ttl-shorter-than-gate"),
    pytest.param(50, {"memo_ttl": 10}, 49.0, 51.0, id="entry-ttl-longer-than-gate"),
])
def test_which_ttl_applies(ttl: object, gate_kwargs: dict[str, Any], fresh_at: float,
                           stale_at: float) -> None:
    """An entry's ttl wins; an entry without one gets the gate's memo_ttl (300 s by default)."""
    body, clock = Body(), Clock()
    gate = service_gate(body, ttl=ttl, clock=clock, **gate_kwargs)
    start = clock.now
    call(gate, 1)
    clock.now = start + fresh_at
    call(gate, 1)
    assert body.count == 1
    clock.now = start + stale_at
    call(gate, 1)
    assert body.count == 2
    assert gate.stats("t").expired == 1


@pytest.mark.parametrize("ttl", [
    pytest.param(-1, id="negative"),
    pytest.param(-0.5, id="negative-float"),
    pytest.param("5", id="str"),
    pytest.param(True, id="bool"),
    pytest.param(math.nan, id="nan"),
])
def test_a_bad_ttl_is_refused_at_registration(ttl: object) -> None:
    """A ttl that is not a non-negative number of seconds is a ContractError naming ttl."""
    for good in (0, 5, 2.5):  # the key itself is known: only the bad value is refused
        Gate({"t": entry(Body(), good)})
    with pytest.raises(ContractError, match="ttl"):
        Gate({"t": entry(Body(), ttl)})


def test_a_ttl_on_a_write_is_refused_at_registration() -> None:
    """ttl applies to reads only: a write tool that names one is a ContractError naming ttl."""
    Gate({"t": entry(Body(), 5)})
    Gate({"t": entry(Body(), effect="write")}, scope={"reversible_write"})
    with pytest.raises(ContractError, match="ttl"):
        Gate({"t": entry(Body(), 5, effect="write")}, scope={"reversible_write"})


#: Clock steps in whole seconds against a ttl of 5: ages equal to the ttl do happen, and
#: the model accepts either answer there (the spec does not say which side 5.0 is on).
TTL = 5
STEPS = st.lists(st.one_of(st.tuples(st.just("call"), st.integers(0, 2)),
                           st.tuples(st.just("wait"), st.integers(0, 7))), max_size=40)


@given(steps=STEPS)
def test_a_stale_value_is_never_served(steps: list[tuple[str, int]]) -> None:
    """Against a model of remembered-at times, the body runs exactly when no fresh value is left."""
    body, clock = Body(), Clock()
    gate = service_gate(body, ttl=TTL, clock=clock)
    remembered: dict[int, tuple[float, int]] = {}  # x -> (remembered at, run)
    calls = 0
    for step, n in steps:
        if step == "wait":
            clock.advance(n)
            continue
        before = body.count
        calls += 1
        value = call(gate, n)["value"]
        ran = body.count == before + 1
        assert body.count in (before, before + 1)
        kept = remembered.get(n)
        age = None if kept is None else clock.now - kept[0]
        if age is None or age > TTL:
            assert ran, (n, age)
        elif age < TTL:
            assert not ran, (n, age)
            assert value == {"x": n, "run": kept[1]}  # type: ignore[index]
        if ran:
            remembered[n] = (clock.now, body.count)
            assert value == {"x": n, "run": body.count}
    assert gate.stats("t").hits == calls - body.count


def test_len_drops_an_expired_value_once_its_expiry_is_seen() -> None:
    """len(gate.cache) counts remembered values; an expired one found stale is counted no more."""
    clock = Clock()
    fail_second = {1: 0}

    def body(x: int) -> dict[str, Any]:
        if x == 1:
            fail_second[1] += 1
            if fail_second[1] == 2:
                raise RuntimeError("second run of x=1 fails")
        return {"x": x, "run": 0}

    gate = service_gate(body, ttl=5, clock=clock)
    call(gate, 1)
    clock.advance(3)
    call(gate, 0)
    call(gate, 2)
    assert len(gate.cache) == 3
    clock.advance(3)  # 1 is 6 s old and stale; 0 and 2 are 3 s old and fresh
    assert gate.call_tool("t", {"x": 1})["error"] == "raised:RuntimeError"  # expiry seen
    assert len(gate.cache) == 2
    assert gate.cache_key("t", {"x": 1}) not in gate.cache
    call(gate, 1)
    assert len(gate.cache) == 3
    assert gate.stats("t").expired == 1


# -- Scoped by run --------------------------------------------------------------------------------

@pytest.mark.parametrize(("run_ids", "runs"), [
    pytest.param(["r1", "r2"], 2, id="two-runs-two-bodies"),
    pytest.param(["r1", "r1"], 1, id="one-run-one-body"),
    pytest.param([None, None], 1, id="no-run-one-body"),
    pytest.param(["r1", None], 2, id="a-run-then-none"),
    pytest.param([None, "r1"], 2, id="none-then-a-run"),
    pytest.param(["r1", "r2", "r1", "r2", None], 3, id="interleaved"),
])
def test_run_id_scopes_the_memo(run_ids: list[str | None], runs: int) -> None:
    """The same args in another run (or outside any run) are another memo entry."""
    body = Body()
    gate = service_gate(body, memo_size=16)
    for run_id in run_ids:
        call(gate, 1, run_id=run_id)
    assert body.count == runs
    for run_id in set(run_ids):
        assert gate.cache_key("t", {"x": 1}, run_id=run_id) in gate.cache
    assert len(gate.cache) == len(set(run_ids))
    assert gate.cache_key("t", {"x": 1}, run_id="never") not in gate.cache


# -- What is remembered -------------------------------------------------------------------------

def _raises(kwargs: dict[str, Any]) -> Any:
    raise RuntimeError("down")


@pytest.mark.parametrize(("make", "reason"), [
    pytest.param(_raises, "raised:RuntimeError", id="raised"),
    pytest.param(lambda kwargs: {"x": "one", "run": 1}, "result:shape", id="bad-result"),
    pytest.param(lambda kwargs: None, "result:shape", id="none"),
])
def test_failures_are_never_remembered_nor_evict(make: Callable[[dict[str, Any]], Any],
                                                 reason: str) -> None:
    """A failure runs again on every call, takes no memo slot and evicts nothing."""
    good, bad = Body(), CountingBody(make)
    gate = Gate({"good": entry(good), "bad": entry(bad)}, memo_size=2)
    gate.call_tool("good", {"x": 0})
    gate.call_tool("good", {"x": 1})
    for _ in range(3):
        assert gate.call_tool("bad", {"x": 2}) == {"ok": False, "value": None, "error": reason}
    assert bad.count == 3
    assert len(gate.cache) == 2
    assert gate.call_tool("good", {"x": 0})["value"] == {"x": 0, "run": 1}
    assert gate.call_tool("good", {"x": 1})["value"] == {"x": 1, "run": 2}
    assert good.count == 2
    assert gate.stats("good").evicted == gate.stats("bad").evicted == 0


def test_a_remembered_value_cannot_be_changed_by_the_caller() -> None:
    """Mutating an answer, the first or a hit, never changes what the memo answers next."""

    def body(x: int) -> dict[str, Any]:
        return {"x": x, "run": 1, "rows": [{"store": "Gangnam"}]}

    gate = Gate({"t": {"fn": body, "args": ARGS,
                       "returns": {**RETURNS, "rows": {"type": "list", "item": {
                           "store": {"type": "str"}}}}}}, memo_size=4, clock=Clock())
    original = {"x": 1, "run": 1, "rows": [{"store": "Gangnam"}]}
    for _ in range(3):
        value = gate.call_tool("t", {"x": 1})["value"]
        assert value == original
        value["run"] = 99
        value["rows"][0]["store"] = "changed"
        value["rows"].append({"store": "extra"})
    assert gate.stats("t").runs == 1


def test_clear_forgets_every_value() -> None:
    """cache.clear() empties the memo: len 0, and the next call runs the body."""
    body = Body()
    gate = service_gate(body, memo_size=4)
    call(gate, 1)
    call(gate, 2, run_id="r1")
    assert len(gate.cache) == 2
    gate.cache.clear()
    assert len(gate.cache) == 0
    assert gate.cache_key("t", {"x": 1}) not in gate.cache
    call(gate, 1)
    assert body.count == 3


def test_the_memo_reads_as_a_mapping_of_fresh_values() -> None:
    """`gate.cache` answers `in`, `[]`, `len`, `bool` and `repr` from the values in time, and
    a hit read through `[]` is a copy the caller may change."""
    from agtool import tools

    gate = Gate(tools.TOOLS, memo_size=4)
    args = {"sku": "A100", "region": "seoul", "limit": 2}
    key = gate.cache_key("stock_lookup", args)
    assert not gate.cache
    assert key not in gate.cache
    with pytest.raises(KeyError):
        gate.cache[key]
    value = gate.call_tool("stock_lookup", args)["value"]
    assert gate.cache
    assert key in gate.cache
    assert repr(gate.cache) == (f"<Memo 1 of 4 values, {gate.cache.bytes} of "
                                f"{gate.cache.max_bytes} bytes>")
    assert 0 < gate.cache.bytes < gate.cache.max_bytes
    held = gate.cache[key]
    assert held == value
    held["rows"].clear()
    assert gate.cache[key] == value


class _EvictedInBetween(collections.OrderedDict):  # type: ignore[type-arg]
    """Entries whose key is dropped by "another thread" right after it is put, before the
    put moves it to the end: the interleaving of two threads, made to happen every time."""

    def move_to_end(self, key: Any, last: bool = True) -> None:
        self.pop(key, None)
        super().move_to_end(key, last)


def test_a_value_evicted_while_it_is_put_breaks_nothing() -> None:
    """A remembered value dropped by another thread mid-put: the call still answers its value,
    and the next call simply runs the body again (it was not remembered)."""
    body = CountingBody(lambda kwargs: {"n": 1})
    gate = Gate({"t": {"fn": body, "args": {}, "returns": {"n": {"type": "int"}}}})
    gate.cache.entries = _EvictedInBetween()
    assert gate.call_tool("t", {}) == {"ok": True, "value": {"n": 1}, "error": ""}
    assert gate.call_tool("t", {}) == {"ok": True, "value": {"n": 1}, "error": ""}
    assert body.count == 2
