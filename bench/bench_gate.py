"""Time the gate against its fused reference, a bare call and its peers; judge every target.

    python bench/bench_gate.py              # full run, about two minutes
    python bench/bench_gate.py --quick      # a few seconds (what the report runs)
    python bench/bench_gate.py --rounds 60  # the full plan's batches, 60 rounds
    python bench/bench_gate.py --json       # the figures as JSON
    python bench/bench_gate.py --strict     # exit 1 if a target fails

Every case is one statement compiled into its own loop, so no wrapper call is
timed; an empty loop is timed too and subtracted. Time is the thread's CPU time
(``time.thread_time_ns``): what other processes on a shared machine do shows
as cache and frequency effects, not as time the gate is charged for. The cases run in rounds: each
round times every case once, for one batch of calls, in an order rotated by one
each round, so drift on the machine falls on all of them alike. A target is a
ratio taken *within* a round (the case against its baseline timed in that same
round), and the figure judged is the median of those per-round ratios, not a
ratio of two medians: a slow spell that hits one round moves that round's ratio
a little instead of moving one side of every target.

The gate is judged against ``_fused.fused_stock_read``, one hand-fused function
that keeps every promise of a plain read (``tests/core/test_fused_reference.py``
holds the two to the same answers). The "emptied memo" miss cases clear the
memo before each call, so every timed call is a real miss (checked afterwards
with the counters) and pays for the clear as well; the "full memo" misses run
into a memo kept full (each call a new run id, the least recently used value
evicted), which is what a long-running service meets. A case whose API the gate
under test lacks (``acall_tool`` before the async gate landed) is reported as
n/a, not timed. The ``agtool.calls`` logger is kept below INFO for the whole
run, so only the cases that name a sink write records. Beside the targets, notes
with no verdict take the missed ones apart: the door (``call_tool`` to the tool's
own entry, called straight), its keyword-only signature (against the same door
with its keywords positional, which is not the API), the entry's live-table
check, and the pieces of a ``list[int]`` item on a miss beside two C checks that
are not exact. The report imports ``measure`` from here.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import importlib.util
import itertools
import json
import logging
import operator
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import msgspec
import orjson
import pydantic
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from agtool import DEFAULT_MEMO_SIZE, Gate, JsonLinesSink
from agtool.tools import MAX_ROWS, REGIONS, STOCK, TOOLS, stock_lookup

try:  # imported as bench.bench_gate, from the repository's root
    from bench._fused import FusedCounts, fused_stock_read
except ImportError:  # run as a script, or loaded from its path (the report): read beside it
    _FUSED = importlib.util.spec_from_file_location(
        "agtool_bench_fused", Path(__file__).resolve().parent / "_fused.py")
    if _FUSED is None or _FUSED.loader is None:
        raise
    _fused = importlib.util.module_from_spec(_FUSED)
    sys.modules[_FUSED.name] = _fused
    _FUSED.loader.exec_module(_fused)
    FusedCounts, fused_stock_read = _fused.FusedCounts, _fused.fused_stock_read  # type: ignore[misc]

# jsonschema ships no type hints; imported as a module object so the bench type-checks
# the same with or without stubs installed.
jsonschema: Any = importlib.import_module("jsonschema")

__all__ = ["CASES", "TARGETS", "main", "measure", "render"]

TOOL = "stock_lookup"
ARGS: dict[str, Any] = {"sku": "A100", "region": "seoul", "limit": MAX_ROWS}
BAD_REGION: dict[str, Any] = {**ARGS, "region": "mars"}
BOOL_LIMIT: dict[str, Any] = {**ARGS, "limit": True}
EXTRA_ARG: dict[str, Any] = {**ARGS, "colour": "red"}
NOT_AVAILABLE = "n/a (not available)"


# -- The extra contracts the bench needs, beside TOOLS -------------------------------------------

def tag_lookup(tags: list[str]) -> dict[str, Any]:
    """Products carrying every tag; only ever refused or keyed here, never run."""
    return {"tags": tags}


def filter_lookup(where: dict[str, Any]) -> dict[str, Any]:
    """Products matching a filter; only ever keyed here, never run."""
    return {"count": len(where)}


def ids_lookup(ids: list[int]) -> dict[str, Any]:
    """How many products were asked for: the body costs the same for 1 id as for 1,000."""
    return {"count": len(ids)}


async def astock_lookup(sku: str, region: str, limit: int) -> dict[str, Any]:
    """``stock_lookup`` as an ``async def``, with the same body (minus its run counter)."""
    rows = STOCK.get(sku, {}).get(region, [])
    return {"sku": sku, "rows": rows[:limit]}


EXTRA_TOOLS: dict[str, dict[str, Any]] = {
    "tag_lookup": {
        "fn": tag_lookup,
        "args": {"tags": {"type": "list", "max_len": 50, "item": {"type": "str"}}},
        "returns": {"tags": {"type": "list", "item": {"type": "str"}}},
    },
    "filter_lookup": {
        "fn": filter_lookup,
        "args": {"where": {"type": "dict"}},
        "returns": {"count": {"type": "int", "min": 0}},
    },
    "ids_lookup": {
        "fn": ids_lookup,
        "args": {"ids": {"type": "list", "max_len": 1000, "item": {"type": "int"}}},
        "returns": {"count": {"type": "int", "min": 0}},
    },
}
ASYNC_TOOL = "astock_lookup"
#: Looked up by name: the gate under test may predate it, and both must type-check.
ASYNC_CALL = "acall_tool"
ASYNC_TOOLS: dict[str, dict[str, Any]] = {
    ASYNC_TOOL: {**TOOLS[TOOL], "fn": astock_lookup,
                 "description": "stock_lookup, awaited."},
}
LIST_ARGS: dict[str, Any] = {"tags": ["red", "cotton", "summer", "sale", "kids"]}
DICT_ARGS: dict[str, Any] = {"where": {"colour": "red", "size": "M", "in_stock": True,
                                       "max_price": 30}}
HUGE_LIST: dict[str, Any] = {"tags": ["t"] * 10**6}  # refused on its length: max_len is 50
SHORT_BAD_LIST: dict[str, Any] = {"tags": ["t", 7]}  # refused on its second item's type
ITEMS = 1000
#: Distinct ids, as a caller's would be (small ints are shared objects, these are not all).
MANY_IDS: dict[str, Any] = {"ids": [7919 * i % 1_000_003 for i in range(ITEMS)]}
ONE_ID: dict[str, Any] = {"ids": [7919]}
#: Run ids for the misses into a full memo: twice the memo's size, cycled, so that each
#: call's key was evicted a thousand calls ago and the memo stays full.
FULL_RUNS = [f"run-{i}" for i in range(2 * DEFAULT_MEMO_SIZE)]


# -- The peers, written to the same contract as TOOLS["stock_lookup"] ----------------------------

Region = Literal["busan", "jeju", "seoul"]
_STRICT = pydantic.ConfigDict(strict=True, extra="forbid")


class ArgsModel(pydantic.BaseModel):
    model_config = _STRICT
    sku: str
    region: Region
    limit: int = pydantic.Field(ge=1, le=MAX_ROWS)


class RowModel(pydantic.BaseModel):
    model_config = _STRICT
    store: str
    count: int = pydantic.Field(ge=0)


class ResultModel(pydantic.BaseModel):
    model_config = _STRICT
    sku: str
    rows: list[RowModel] = pydantic.Field(min_length=1, max_length=MAX_ROWS)


@pydantic.with_config(_STRICT)
class ArgsDict(TypedDict):
    sku: str
    region: Region
    limit: Annotated[int, pydantic.Field(ge=1, le=MAX_ROWS)]


@pydantic.with_config(_STRICT)
class RowDict(TypedDict):
    store: str
    count: Annotated[int, pydantic.Field(ge=0)]


@pydantic.with_config(_STRICT)
class ResultDict(TypedDict):
    sku: str
    rows: Annotated[list[RowDict], pydantic.Field(min_length=1, max_length=MAX_ROWS)]


class ArgsStruct(msgspec.Struct, forbid_unknown_fields=True):
    sku: str
    region: Region
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_ROWS)]


class RowStruct(msgspec.Struct, forbid_unknown_fields=True):
    store: str
    count: Annotated[int, msgspec.Meta(ge=0)]


class ResultStruct(msgspec.Struct, forbid_unknown_fields=True):
    sku: str
    rows: Annotated[list[RowStruct], msgspec.Meta(min_length=1, max_length=MAX_ROWS)]


ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "region": {"enum": list(REGIONS)},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS},
    },
    "required": ["sku", "region", "limit"],
    "additionalProperties": False,
}
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "rows": {
            "type": "array", "minItems": 1, "maxItems": MAX_ROWS,
            "items": {
                "type": "object",
                "properties": {"store": {"type": "string"},
                               "count": {"type": "integer", "minimum": 0}},
                "required": ["store", "count"],
            },
        },
    },
    "required": ["sku", "rows"],
}


# -- The cases -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One timed statement. ``needs``: a namespace name that exists only if the gate has
    the API; ``gate`` and ``expect`` ("miss", "hit" or "blocked"): the counters checked after."""

    name: str
    statement: str
    needs: str = ""
    awaits: bool = False
    gate: str = ""
    tool: str = TOOL
    expect: str = ""


EMPTY = "empty loop (subtracted from all)"
BARE = "bare call"
FUSED_HIT = "fused reference: memo hit"
HIT = "gate: memo hit"
ENTRY_HIT = "  of which: the tool's own entry, called straight, memo hit"
LIVE_CHECK = "  of which: the live-table check alone (4 identity reads)"
FUSED_REGION = "fused reference: blocked, bad region"
BLOCKED_REGION = "gate: blocked, bad region"
ENTRY_REGION = "  of which: the tool's own entry, called straight, blocked"
POSITIONAL_REGION = "  (not the API) the same door, its keywords positional, blocked"
FUSED_BOOL = "fused reference: blocked, bool limit"
BLOCKED_BOOL = "gate: blocked, bool limit"
FUSED_FULL = "fused reference: miss into a full memo"
FULL_MISS = "gate: miss into a full memo"
MISS = "gate: miss into an emptied memo"
CLEAR = "  of which: memo clear() (timed on an empty memo)"
MANY_MISS = "gate: 1,000-item list[int] arg, emptied memo"
ONE_MISS = "gate: 1-item list[int] arg, emptied memo"
ITEMS_CHECK = "  of which: validate_args, 1,000-item list[int] arg (copy, exact type check)"
ONE_CHECK = "  of which: validate_args, 1-item list[int] arg"
ITEMS_KEY = "  of which: the memo key of 1,000 int items (orjson)"
ITEMS_COPY = "  of which: the copy of 1,000 int items (list.copy)"
ITEMS_COUNT = "  (not exact) countOf(map(type, items), int), 1,000 items"
ITEMS_MSGSPEC = "  (not exact) msgspec convert(list[int], strict), 1,000 items"
GATE_CHECKS = "gate: validate_args + validate_result"
PYDANTIC = "pydantic strict BaseModel: args + result"
ADAPTER = "pydantic TypeAdapter(TypedDict) strict: args + result"
MSGSPEC = "msgspec convert(strict) Struct: args + result"
JSONSCHEMA = "jsonschema Draft 2020-12: args + result"
FOR_MODEL = "gate: call_for_model, memo hit"
SINK_HIT = "gate: memo hit, JsonLinesSink records"
KEY_STOCK = "gate.cache_key, stock_lookup args"
VALIDATE_STOCK = "gate.validate_args, stock_lookup args"
KEY_LIST = "gate.cache_key, list args"
VALIDATE_LIST = "gate.validate_args, list args"
KEY_DICT = "gate.cache_key, dict args"
VALIDATE_DICT = "gate.validate_args, dict args"
HUGE = "gate: refuse 10**6-item list, records on"
SHORT = "gate: refuse 2-item list, records on"
ASYNC_BARE = "await bare async body"
ASYNC_MISS = "await gate.acall_tool, memo miss"

CASES: list[Case] = [
    Case(EMPTY, "pass"),
    Case(BARE, "fn(**args)"),
    Case(FUSED_HIT, "fused_hit(args, None, None)", gate="fused_hit_counts", expect="hit"),
    Case(HIT, "hit_call(tool, args)", gate="hit_gate", expect="hit"),
    Case(ENTRY_HIT, "entry_hit(args, None, None, None, None, (), False)",
         gate="entry_hit_gate", expect="hit"),
    Case(LIVE_CHECK, "live_table[tool] is live_entry and live_entry['fn'] is live_fn "
                     "and live_entry['args'] is live_args "
                     "and live_entry['returns'] is live_returns"),
    Case(FUSED_REGION, "fused_region(bad_region, None, None)", gate="fused_region_counts",
         expect="blocked"),
    Case(BLOCKED_REGION, "region_call(tool, bad_region)", gate="region_gate", expect="blocked"),
    Case(ENTRY_REGION, "entry_region(bad_region, None, None, None, None, (), False)",
         gate="entry_region_gate", expect="blocked"),
    Case(POSITIONAL_REGION, "positional_call(tool, bad_region)", gate="positional_gate",
         expect="blocked"),
    Case(FUSED_BOOL, "fused_bool(bool_limit, None, None)", gate="fused_bool_counts",
         expect="blocked"),
    Case(BLOCKED_BOOL, "bool_call(tool, bool_limit)", gate="bool_gate", expect="blocked"),
    Case(FUSED_FULL, "fused_full(args, None, fused_next_run())", gate="fused_full_counts",
         expect="miss"),
    Case(FULL_MISS, "full_call(tool, args, run_id=full_next_run())", gate="full_gate",
         expect="miss"),
    Case(MISS, "miss_clear(); miss_call(tool, args)", gate="miss_gate", expect="miss"),
    Case(CLEAR, "spare_clear()"),
    Case(MANY_MISS, "many_clear(); many_call('ids_lookup', many_ids)", gate="many_gate",
         tool="ids_lookup", expect="miss"),
    Case(ONE_MISS, "one_clear(); one_call('ids_lookup', one_id)", gate="one_gate",
         tool="ids_lookup", expect="miss"),
    Case(ITEMS_CHECK, "validate_key_args('ids_lookup', many_ids)"),
    Case(ONE_CHECK, "validate_key_args('ids_lookup', one_id)"),
    Case(ITEMS_KEY, "dumps(id_items, option=key_option)"),
    Case(ITEMS_COPY, "list_copy(id_items)"),
    Case(ITEMS_COUNT, "count_of(map(type, id_items), int)"),
    Case(ITEMS_MSGSPEC, "convert(id_items, type=list[int], strict=True)"),
    Case(GATE_CHECKS, "validate_args(tool, args); validate_result(tool, result)"),
    Case(PYDANTIC, "ArgsModel.model_validate(args); ResultModel.model_validate(result)"),
    Case(ADAPTER, "args_adapter.validate_python(args); result_adapter.validate_python(result)"),
    Case(MSGSPEC, "convert(args, type=ArgsStruct, strict=True); "
                  "convert(result, type=ResultStruct, strict=True)"),
    Case(JSONSCHEMA, "args_validator.is_valid(args); result_validator.is_valid(result)"),
    Case(FOR_MODEL, "model_call(tool, args)", gate="model_gate", expect="hit"),
    Case(SINK_HIT, "sink_call(tool, args)", gate="sink_gate", expect="hit"),
    Case(KEY_STOCK, "key_of(tool, args)"),
    Case(VALIDATE_STOCK, "validate_key_args(tool, args)"),
    Case(KEY_LIST, "key_of('tag_lookup', list_args)"),
    Case(VALIDATE_LIST, "validate_key_args('tag_lookup', list_args)"),
    Case(KEY_DICT, "key_of('filter_lookup', dict_args)"),
    Case(VALIDATE_DICT, "validate_key_args('filter_lookup', dict_args)"),
    Case(HUGE, "huge_call('tag_lookup', huge_list)", gate="huge_gate", tool="tag_lookup",
         expect="blocked"),
    Case(SHORT, "short_call('tag_lookup', short_list)", gate="short_gate", tool="tag_lookup",
         expect="blocked"),
    Case(ASYNC_BARE, "await afn(**args)", awaits=True),
    Case(ASYNC_MISS, "amiss_clear(); await amiss_call(async_tool, args)", needs="amiss_call",
         awaits=True, gate="amiss_gate", tool=ASYNC_TOOL, expect="miss"),
]


def _namespace(folder: Path) -> dict[str, Any]:
    """Everything the case statements name, built fresh for one run; sinks write in ``folder``."""
    if set(get_args(Region)) != set(REGIONS):
        raise RuntimeError("the peers' regions no longer match agtool.tools.REGIONS")
    jsonschema.Draft202012Validator.check_schema(ARGS_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(RESULT_SCHEMA)
    sinks = {name: folder / f"{name}.jsonl" for name in ("sink", "huge", "short")}
    gates = {
        "miss_gate": Gate(TOOLS), "hit_gate": Gate(TOOLS), "region_gate": Gate(TOOLS),
        "bool_gate": Gate(TOOLS), "model_gate": Gate(TOOLS),
        "sink_gate": Gate(TOOLS, records=JsonLinesSink(sinks["sink"])),
        "key_gate": Gate({**TOOLS, **EXTRA_TOOLS}),
        "huge_gate": Gate(EXTRA_TOOLS, records=JsonLinesSink(sinks["huge"])),
        "short_gate": Gate(EXTRA_TOOLS, records=JsonLinesSink(sinks["short"])),
        "full_gate": Gate(TOOLS), "many_gate": Gate(EXTRA_TOOLS), "one_gate": Gate(EXTRA_TOOLS),
        "entry_hit_gate": Gate(TOOLS), "entry_region_gate": Gate(TOOLS),
        "positional_gate": PositionalGate(TOOLS),
    }
    for name in ("hit_gate", "model_gate", "sink_gate", "entry_hit_gate"):
        gates[name].call_tool(TOOL, ARGS)  # the one run of the body a hit case may see
    fused = {case: fused_stock_read(stock_lookup) for case in ("hit", "region", "bool", "full")}
    fused["hit"][0](ARGS, None, None)  # its one run of the body, as the gate's hit case
    ns: dict[str, Any] = {
        **{f"fused_{case}": read for case, (read, _, _) in fused.items()},
        **{f"fused_{case}_counts": counts for case, (_, counts, _) in fused.items()},
        **_full_memos(gates["full_gate"], fused["full"]),
        "many_clear": gates["many_gate"].cache.clear, "many_call": gates["many_gate"].call_tool,
        "one_clear": gates["one_gate"].cache.clear, "one_call": gates["one_gate"].call_tool,
        "many_ids": MANY_IDS, "one_id": ONE_ID,
        "validate_key_args": gates["key_gate"].validate_args,
        **gates, "sink_paths": list(sinks.values()),
        "tool": TOOL, "async_tool": ASYNC_TOOL, "args": ARGS, "bad_region": BAD_REGION,
        "bool_limit": BOOL_LIMIT, "result": stock_lookup(**ARGS), "fn": stock_lookup,
        "afn": astock_lookup,
        "miss_clear": gates["miss_gate"].cache.clear, "miss_call": gates["miss_gate"].call_tool,
        "hit_call": gates["hit_gate"].call_tool, "region_call": gates["region_gate"].call_tool,
        "bool_call": gates["bool_gate"].call_tool,
        "model_call": gates["model_gate"].call_for_model,
        "sink_call": gates["sink_gate"].call_tool,
        "validate_args": gates["hit_gate"].validate_args,
        "validate_result": gates["hit_gate"].validate_result,
        "spare_clear": Gate(TOOLS).cache.clear,
        "ArgsModel": ArgsModel, "ResultModel": ResultModel,
        "args_adapter": pydantic.TypeAdapter(ArgsDict),
        "result_adapter": pydantic.TypeAdapter(ResultDict),
        "convert": msgspec.convert, "ArgsStruct": ArgsStruct, "ResultStruct": ResultStruct,
        "args_validator": jsonschema.Draft202012Validator(ARGS_SCHEMA),
        "result_validator": jsonschema.Draft202012Validator(RESULT_SCHEMA),
        "key_of": gates["key_gate"].cache_key, "dumps": orjson.dumps,
        "list_args": LIST_ARGS, "dict_args": DICT_ARGS,
        "huge_call": gates["huge_gate"].call_tool, "huge_list": HUGE_LIST,
        **_dispatch_pieces(gates["entry_hit_gate"], gates["entry_region_gate"]),
        "positional_call": gates["positional_gate"].call_tool,
        "id_items": MANY_IDS["ids"], "list_copy": list.copy,
        "key_option": orjson.OPT_NON_STR_KEYS, "count_of": operator.countOf,
        "short_call": gates["short_gate"].call_tool, "short_list": SHORT_BAD_LIST,
    }
    if hasattr(Gate, ASYNC_CALL):  # the async gate: timed once it exists
        amiss_gate = Gate(ASYNC_TOOLS)
        ns.update(amiss_gate=amiss_gate, amiss_clear=amiss_gate.cache.clear,
                  amiss_call=getattr(amiss_gate, ASYNC_CALL))
    return ns


class PositionalGate(Gate):
    """A gate whose ``call_tool`` takes its keywords positionally: not the API (they are
    keyword-only there), timed only to show what the keyword-only signature costs."""

    def call_tool(
        self, name: object, args: object, echo: Mapping[str, object] | None = None,
        scope: Any = None, run_id: Any = None, step_id: Any = None, approvals: Any = (),
        dry_run: bool = False,
    ) -> Any:
        tool = self._routes.get(name) if type(name) is str else None  # as Gate.call_tool
        if tool is None:
            raise LookupError(name)
        entry = tool.call_tool
        return entry(args, echo, scope, run_id, step_id, approvals, dry_run)


def _dispatch_pieces(hit_gate: Gate, region_gate: Gate) -> dict[str, Any]:
    """The tools' own entries (what ``call_tool`` routes a name to), and the objects the
    live-table check of an entry reads, for the cases that time the pieces of a call."""
    entry = TOOLS[TOOL]
    return {"entry_hit": hit_gate._routes[TOOL].call_tool,
            "entry_region": region_gate._routes[TOOL].call_tool,
            "live_table": TOOLS, "live_entry": entry, "live_fn": entry["fn"],
            "live_args": entry["args"], "live_returns": entry["returns"]}


def _full_memos(gate: Gate, fused: tuple[Callable[..., Any], FusedCounts, Any],
                ) -> dict[str, Any]:
    """The gate's and the fused reference's full-memo cases: each memo filled to its size
    by misses in runs of the cycle, the counters then set back to zero."""
    gate_runs = itertools.cycle(FULL_RUNS).__next__
    fused_runs = itertools.cycle(FULL_RUNS).__next__
    read, counts, memo = fused
    for _ in range(DEFAULT_MEMO_SIZE):
        gate.call_tool(TOOL, ARGS, run_id=gate_runs())
        read(ARGS, None, fused_runs())
    if len(gate.cache) != DEFAULT_MEMO_SIZE or len(memo) != DEFAULT_MEMO_SIZE:
        raise RuntimeError("the full-memo cases did not fill their memos")
    gate.reset_stats()
    counts.reset()
    return {"full_call": gate.call_tool, "full_next_run": gate_runs, "fused_full": read,
            "fused_next_run": fused_runs}


def _accepts(check: Callable[[object], object], value: object) -> bool:
    try:
        return check(value) is not False
    except (pydantic.ValidationError, msgspec.ValidationError):
        return False


def _check_agreement(ns: dict[str, Any]) -> None:
    """Every checker accepts the timed call and result and refuses the bad ones, or we stop."""
    gate: Gate = ns["hit_gate"]
    checkers: dict[str, tuple[Callable[[object], object], Callable[[object], object]]] = {
        "gate": (lambda a: gate.validate_args(TOOL, a) == "",
                 lambda r: gate.validate_result(TOOL, r) == ""),
        "pydantic": (ArgsModel.model_validate, ResultModel.model_validate),
        "TypeAdapter": (ns["args_adapter"].validate_python, ns["result_adapter"].validate_python),
        "msgspec": (lambda a: msgspec.convert(a, type=ArgsStruct, strict=True),
                    lambda r: msgspec.convert(r, type=ResultStruct, strict=True)),
        "jsonschema": (ns["args_validator"].is_valid, ns["result_validator"].is_valid),
    }
    for checker, (check_args, check_result) in checkers.items():
        verdict = [_accepts(check_args, a) for a in (ARGS, BAD_REGION, BOOL_LIMIT, EXTRA_ARG)]
        verdict.append(_accepts(check_result, ns["result"]))
        if verdict != [True, False, False, False, True]:
            raise RuntimeError(f"{checker} does not judge the benchmark calls like the gate: "
                               f"{verdict}")
    for name, args in ((TOOL, ARGS), ("tag_lookup", LIST_ARGS), ("filter_lookup", DICT_ARGS)):
        if ns["key_of"](name, args) is None:  # a None key is no key: it would time nothing
            raise RuntimeError(f"cache_key gives no key for the {name} args")
        if ns["validate_key_args"](name, args) != "":
            raise RuntimeError(f"validate_args refuses the {name} args")
    for args in (MANY_IDS, ONE_ID):
        if not ns["many_call"]("ids_lookup", args)["ok"]:
            raise RuntimeError("the list[int] cases are refused")
    ns["many_gate"].cache.clear()
    ns["many_gate"].reset_stats()
    judge = Gate(TOOLS)  # its own counters: the timed gates' must see only their cases
    for args in (ARGS, BAD_REGION, BOOL_LIMIT, ARGS):
        for name in ("hit", "region", "bool"):
            if ns[f"fused_{name}"](args, None, None) != judge.call_tool(TOOL, args):
                raise RuntimeError(f"the fused reference answers {args} unlike the gate")
    for name in ("hit", "region", "bool"):
        ns[f"fused_{name}_counts"].reset()
    ns["fused_hit_counts"].runs = 1  # the hit case's one run of the body, as the gate's


# -- Timing --------------------------------------------------------------------------------------

Loop = Callable[[int], int]


def _compile_loop(case: Case, ns: dict[str, Any], event_loop: asyncio.AbstractEventLoop) -> Loop:
    """``loop(n) -> elapsed ns`` running the statement n times, inlined like timeit does.

    An awaiting statement runs inside one coroutine on a running event loop; the clock
    is read inside it, so starting the coroutine is not timed.
    """
    source = (
        f"{'async ' if case.awaits else ''}def loop(_n, _clock=_clock):\n"
        "    _it = range(_n)\n"
        "    _t0 = _clock()\n"
        "    for _ in _it:\n"
        f"        {case.statement}\n"
        "    return _clock() - _t0\n"
    )
    scope = {**ns, "_clock": time.thread_time_ns}
    code = compile(source, f"<bench loop: {case.name.strip()}>", "exec")
    exec(code, scope)  # noqa: S102 - the statements are this file's own
    if not case.awaits:
        loop: Loop = scope["loop"]
        return loop
    coroutine_loop = scope["loop"]

    def awaited(n: int) -> int:
        elapsed: int = event_loop.run_until_complete(coroutine_loop(n))
        return elapsed

    return awaited


@dataclass(frozen=True)
class Plan:
    """How long to time: ``rounds`` rounds of one ``batch_ns`` batch per case. A case slower
    than a batch per call is timed in fewer rounds, evenly spread, about ``slow_ns`` in all."""

    rounds: int
    batch_ns: int
    slow_ns: int
    min_slow_rounds: int


# Quick batches stay at 5 ms: at 2 ms the cases that build a call record (~60 us each)
# read up to half again higher than in a full run, at 5 ms they agree with it.
QUICK = Plan(rounds=25, batch_ns=5_000_000, slow_ns=1_000_000_000, min_slow_rounds=1)
FULL = Plan(rounds=121, batch_ns=10_000_000, slow_ns=6_000_000_000, min_slow_rounds=3)


@dataclass
class _Timed:
    """A compiled case, its batch size, the rounds it runs in and the calls it made."""

    loop: Loop
    batch: int = 1
    rounds: frozenset[int] = frozenset()
    calls: int = 0

    def run(self, n: int) -> int:
        self.calls += n
        return self.loop(n)


def _calibrate(timed: _Timed, plan: Plan) -> None:
    """Pick the batch size for ``plan.batch_ns`` and, for a very slow case, its rounds."""
    n = 1
    while True:
        elapsed = timed.run(n)
        if elapsed >= plan.batch_ns // 8 or n >= 1 << 24:
            break
        n *= 2
    timed.batch = max(1, int(n * plan.batch_ns / max(elapsed, 1)))
    count = plan.rounds
    if timed.batch == 1 and elapsed > plan.batch_ns:  # one call already overruns a batch
        count = min(plan.rounds, max(plan.min_slow_rounds, plan.slow_ns // elapsed))
    timed.rounds = frozenset(round(i * plan.rounds / count) for i in range(count))


Round = dict[str, float]
#: A record file is emptied between rounds once it is this big (a full run writes ~5 MB).
SINK_BYTES = 64 << 20


def _time_rounds(cases: Mapping[str, _Timed], plan: Plan, sink_paths: list[Path]) -> list[Round]:
    """Raw ns per call of every case in every round it runs in (empty loop not subtracted)."""
    order = list(cases)
    rounds: list[Round] = []
    for index in range(plan.rounds):
        for path in sink_paths:  # outside any timed loop
            # Rarely: a fresh file's first writes cost more, which a short batch would show.
            if path.exists() and path.stat().st_size > SINK_BYTES:
                os.truncate(path, 0)
        shift = index % len(order)
        measured: Round = {}
        # Rotated each round: every case runs early, late, and next to every other.
        for name in order[shift:] + order[:shift]:
            timed = cases[name]
            if index in timed.rounds:
                measured[name] = timed.run(timed.batch) / timed.batch
        rounds.append(measured)
    return rounds


@contextmanager
def _records_log_off() -> Iterator[str]:
    """Keep ``agtool.calls`` below INFO for the run; yields how it was found."""
    # The gate asks this very logger whether INFO is on before it builds a record.
    log = logging.getLogger("agtool.calls")
    was_on, level = log.isEnabledFor(logging.INFO), log.level
    if was_on:
        log.setLevel(logging.WARNING)
    try:
        yield ("records logging (agtool.calls at INFO) off in every case" +
               (" (it was on: turned off for the run)" if was_on else ""))
    finally:
        log.setLevel(level)


@contextmanager
def _frozen_heap() -> Iterator[None]:
    """Move everything built so far out of the collector's sight: a full collection
    that one case triggers must not walk the million-item list another case holds."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _check_counters(cases: list[Case], timed: Mapping[str, _Timed], ns: dict[str, Any]) -> None:
    """A miss case ran the body on every call, a hit case never, a blocked case never."""
    for case in cases:
        if not case.expect or case.name not in timed:
            continue
        source, calls = ns[case.gate], timed[case.name].calls
        stats = source.stats(case.tool) if isinstance(source, Gate) else source
        expected = {"miss": (calls, 0, 0), "hit": (1, calls, 0), "blocked": (0, 0, calls)}
        seen = (stats.runs, stats.hits, stats.blocked)
        if seen != expected[case.expect]:
            raise RuntimeError(f"{case.name}: expected {case.expect} on each of {calls} calls, "
                               f"counters say (runs, hits, blocked) = {seen}")


# -- Targets -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """``numerator / denominator <= limit``, both taken from one round's net ns per call.

    The two functions see only the cases named in ``needs``, so a target cannot
    quietly read a case it does not list.
    """

    name: str
    limit: float
    needs: tuple[str, ...]
    numerator: Callable[[Round], float]
    denominator: Callable[[Round], float]
    unit: str = "x"  #: "x" for a ratio, "ns" for a figure in ns (its denominator is 1)


def _within_the_fused(gate: str, fused: str) -> Target:
    return Target(f"{gate.removeprefix('gate: ')}: gate vs the fused reference", 1.1,
                  (gate, fused), lambda r: r[gate], lambda r: r[fused])


def _per_item(r: Round) -> float:
    return (r[MANY_MISS] - r[ONE_MISS]) / (ITEMS - 1)


TARGETS: list[Target] = [
    _within_the_fused(HIT, FUSED_HIT),
    _within_the_fused(BLOCKED_REGION, FUSED_REGION),
    _within_the_fused(BLOCKED_BOOL, FUSED_BOOL),
    _within_the_fused(FULL_MISS, FUSED_FULL),
    Target("(miss into an emptied memo - bare) vs pydantic BaseModel args + result", 0.85,
           (MISS, BARE, PYDANTIC), lambda r: r[MISS] - r[BARE], lambda r: r[PYDANTIC]),
    Target("cache_key vs validate_args, stock_lookup args", 1.3, (KEY_STOCK, VALIDATE_STOCK),
           lambda r: r[KEY_STOCK], lambda r: r[VALIDATE_STOCK]),
    Target("cache_key vs validate_args, list args", 1.3, (KEY_LIST, VALIDATE_LIST),
           lambda r: r[KEY_LIST], lambda r: r[VALIDATE_LIST]),
    Target("list[int] arg of 1,000 items, per item on a miss", 8.0, (MANY_MISS, ONE_MISS),
           _per_item, lambda r: 1.0, unit="ns"),
    Target("call_tool with JsonLinesSink vs without, memo hit", 4.0, (SINK_HIT, HIT),
           lambda r: r[SINK_HIT], lambda r: r[HIT]),
    Target("call_for_model vs call_tool, memo hit, no sink", 1.5,
           (FOR_MODEL, HIT), lambda r: r[FOR_MODEL], lambda r: r[HIT]),
    Target("acall_tool overhead (async body) vs call_tool (sync), emptied memo", 1.5,
           (ASYNC_MISS, ASYNC_BARE, MISS, BARE), lambda r: r[ASYNC_MISS] - r[ASYNC_BARE],
           lambda r: r[MISS] - r[BARE]),
    Target("refuse a 10**6-item list vs a 2-item list, records on", 1.5, (HUGE, SHORT),
           lambda r: r[HUGE], lambda r: r[SHORT]),
]
def _net(name: str, case: str, of: str) -> Target:
    """``case - of`` in ns, within a round: what ``case`` adds to ``of``."""
    return Target(name, 0.0, (case, of), lambda r: r[case] - r[of], lambda r: 1.0, unit="ns")


def _each_item(name: str, case: str) -> Target:
    return Target(name, 0.0, (case,), lambda r: r[case] / ITEMS, lambda r: 1.0, unit="ns")


#: Shown beside the targets, with no verdict. An untyped dict arg must be walked before it
#: can be keyed exactly, which its check (a plain copy) never does. Then what the targets the
#: gate misses are made of: the door (``call_tool`` routing a name to the tool's own entry),
#: the entry's decision to take the compiled read (of which the live-table check), and the
#: pieces of a ``list[int]`` item on a miss, beside two C checks that are not exact.
NOTES: list[Target] = [
    Target("cache_key vs validate_args, untyped dict args", 0.0, (KEY_DICT, VALIDATE_DICT),
           lambda r: r[KEY_DICT], lambda r: r[VALIDATE_DICT]),
    _net("the door (call_tool to the tool's entry), memo hit", HIT, ENTRY_HIT),
    _net("the door (call_tool to the tool's entry), blocked", BLOCKED_REGION, ENTRY_REGION),
    _net("  of which: its keyword-only signature, blocked", BLOCKED_REGION, POSITIONAL_REGION),
    _net("the tool's entry over the fused reference, memo hit", ENTRY_HIT, FUSED_HIT),
    _net("the tool's entry over the fused reference, blocked", ENTRY_REGION, FUSED_REGION),
    Target("the live-table check alone", 0.0, (LIVE_CHECK,), lambda r: r[LIVE_CHECK],
           lambda r: 1.0, unit="ns"),
    Target("validate_args of a list[int] arg, per item", 0.0, (ITEMS_CHECK, ONE_CHECK),
           lambda r: (r[ITEMS_CHECK] - r[ONE_CHECK]) / (ITEMS - 1), lambda r: 1.0, unit="ns"),
    _each_item("memo key (orjson) of a list[int], per item", ITEMS_KEY),
    _each_item("list.copy of a list[int], per item", ITEMS_COPY),
    _each_item("countOf(map(type, items), int), not exact, per item", ITEMS_COUNT),
    _each_item("msgspec convert(list[int], strict), not exact, per item", ITEMS_MSGSPEC),
]


def _per_round(target: Target, rounds: list[Round]) -> list[float]:
    """The target's ratio in each round that timed all it needs (and has a positive base)."""
    ratios = []
    for measured in rounds:
        if not all(name in measured for name in target.needs):
            continue
        seen = {name: measured[name] for name in target.needs}
        base = target.denominator(seen)
        if base > 0:  # an overhead lost in the noise gives no ratio, rather than a wild one
            ratios.append(target.numerator(seen) / base)
    return ratios


def _judge(target: Target, rounds: list[Round], missing: set[str]) -> dict[str, Any]:
    ratios = [] if missing & set(target.needs) else _per_round(target, rounds)
    if not ratios:
        return {"name": target.name, "limit": target.limit, "unit": target.unit,
                "available": False, "measured": None, "quartiles": None, "rounds": 0,
                "passed": None}
    measured = statistics.median(ratios)
    low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (measured,) * 3
    return {"name": target.name, "limit": target.limit, "unit": target.unit,
            "available": True, "measured": round(measured, 3),
            "quartiles": [round(low, 3), round(high, 3)], "rounds": len(ratios),
            "passed": measured <= target.limit}


# -- One run -------------------------------------------------------------------------------------

def measure(quick: bool = False, rounds: int | None = None) -> dict[str, Any]:
    """Time every case side by side; return ns, ratios to a bare call and every target."""
    plan = QUICK if quick else FULL
    if rounds is not None:
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, not {rounds}")
        plan = Plan(rounds, plan.batch_ns, plan.slow_ns, plan.min_slow_rounds)
    load_before = os.getloadavg()[0]
    event_loop = asyncio.new_event_loop()
    try:
        with tempfile.TemporaryDirectory() as folder, _records_log_off() as logging_note:
            ns = _namespace(Path(folder))
            _check_agreement(ns)
            missing = {case.name for case in CASES if case.needs and case.needs not in ns}
            timed = {case.name: _Timed(_compile_loop(case, ns, event_loop))
                     for case in CASES if case.name not in missing}
            with _frozen_heap():
                for each in timed.values():
                    _calibrate(each, plan)
                raw = _time_rounds(timed, plan, ns["sink_paths"])
            _check_counters(CASES, timed, ns)
    finally:
        event_loop.close()
    figures = _figures(raw, timed, missing, plan, logging_note)
    # Other work on the machine widens the spread; this says whether there was any.
    return {"quick": quick, "load_before": round(load_before, 2), **figures}


def _figures(raw: list[Round], timed: Mapping[str, _Timed], missing: set[str], plan: Plan,
             logging_note: str) -> dict[str, Any]:
    empty = statistics.median(r[EMPTY] for r in raw)
    net = [{name: value - empty for name, value in r.items() if name != EMPTY} for r in raw]
    names = [case.name for case in CASES if case.name != EMPTY]
    ns_per_call: dict[str, float | None] = {}
    x_bare: dict[str, float | None] = {}
    for name in names:
        values = [r[name] for r in net if name in r]
        ratios = [r[name] / r[BARE] for r in net if name in r and r[BARE] > 0]
        ns_per_call[name] = round(statistics.median(values), 1) if values else None
        x_bare[name] = round(statistics.median(ratios), 2) if ratios else None
    targets = [_judge(target, net, missing) for target in TARGETS]
    notes = [{**_judge(note, net, missing), "limit": None, "passed": None} for note in NOTES]
    return {
        "rounds": plan.rounds,
        "batch_ms": plan.batch_ns / 1e6,
        "method": ("interleaved rounds, every case timed once per round in a rotating order; "
                   "each target is the median over rounds of a ratio taken within one round; "
                   "each statement compiled into its own loop, an empty loop subtracted; "
                   "thread CPU time; emptied-memo misses clear the memo before each call "
                   "(the clear is included), full-memo misses evict one value each"),
        "logging": logging_note,
        "empty_loop_ns": round(empty, 1),
        "ns": ns_per_call,
        "ratios": {name.strip(): value for name, value in x_bare.items()},
        "case_rounds": {name.strip(): len(timed[name].rounds) if name in timed else 0
                        for name in names},
        "targets": targets,
        "notes": notes,
        "unavailable": sorted(name.strip() for name in missing),
        "passed": all(t["passed"] for t in targets if t["available"]),
    }


def render(figures: dict[str, Any]) -> str:
    """The table of cases, then one line per target, as printed."""
    width = max(map(len, figures["ns"]))
    lines = [f"{'case':<{width}}  {'median ns':>14}  {'x bare':>10}", "-" * (width + 28)]
    for name, value in figures["ns"].items():
        ratio = figures["ratios"][name.strip()]
        if value is None:
            lines.append(f"{name:<{width}}  {NOT_AVAILABLE}")
            continue
        few = figures["case_rounds"][name.strip()]
        note = f"  ({few} rounds: slower than a batch per call)" if few < figures["rounds"] else ""
        lines.append(f"{name:<{width}}  {value:>14,.0f}  {ratio:>10.2f}{note}")
    lines += ["", f"empty loop {figures['empty_loop_ns']:.0f} ns per iteration, subtracted above; "
              f"{figures['rounds']} rounds of {figures['batch_ms']:g} ms batches"
              f"{' (quick)' if figures['quick'] else ''}; {figures['logging']}; "
              f"1-minute load average {figures['load_before']:g} before the run.", ""]
    judged = figures["targets"] + figures.get("notes", [])
    name_width = max(len(target["name"]) for target in judged)
    for target in judged:
        unit = target.get("unit", "x")
        limit = "(no target)" if target["limit"] is None else \
            f"target <= {target['limit']:g}{unit}"
        if not target["available"]:
            lines.append(f"n/a   {target['name']:<{name_width}}  {NOT_AVAILABLE:>9}  {limit}")
            continue
        low, high = target["quartiles"]
        verdict = "note" if target["passed"] is None else \
            "PASS" if target["passed"] else "FAIL"
        lines.append(f"{verdict:<4}  {target['name']:<{name_width}}  "
                     f"{target['measured']:>8.2f}{unit:<2}  {limit}  "
                     f"(middle half of {target['rounds']} rounds: {low:.2f}-{high:.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a run of a few seconds")
    parser.add_argument("--rounds", type=int, help="rounds to time (default: 121, quick: 25)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target fails")
    options = parser.parse_args(argv)
    if options.rounds is not None and options.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {options.rounds}")
    figures = measure(quick=options.quick, rounds=options.rounds)
    print(json.dumps(figures, indent=2) if options.json else render(figures))
    return 1 if options.strict and not figures["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
