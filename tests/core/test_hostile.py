"""Hostile input at the gate: containers that lie, odd keys, racing tables, bad scopes.

Every case plants one hostile input and builds its expected answer from the input's
*real* contents (what a plain dict or list holding the same items gets); body runs are
counted by the bodies, records by a sink. Nothing expected is read back from the gate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _bodies import CountingBody
from _shapes import assert_envelope
from hypothesis import example, given
from hypothesis import strategies as st

import agtool
import agtool.tools as tools
from agtool import CallRecord, Gate

MODEL_ERROR_KEYS = {"code", "retryable", "message", "details"}
#: A raw control character or line separator: what must never reach a log line or a model.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: How long any one echo of a model-chosen name may be: 64 characters plus a short marker.
ECHO_BOUND = 120
VALID: dict[str, Any] = {"sku": "A100", "region": "seoul", "limit": 2}
HUGE = 10**9


class StockBody(CountingBody):
    """A counting body that answers the real stock lookup of the arguments it was handed."""

    def default(self, kwargs: dict[str, Any]) -> Any:
        return tools.stock_lookup(**kwargs)


class ListSink:
    """A record sink keeping every record it is handed."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def __call__(self, record: CallRecord) -> None:
        self.records.append(record)


#: Shared by every gate here, so that records of two gates digest the same args alike.
SECRET = "hostile-tests-shared-secret"  # noqa: S105 - a test fixture, not a credential


def stock_gate(body: Callable[..., Any], **kwargs: Any) -> Gate:
    """A gate over the stock example's ``stock_lookup`` contract, with ``body`` as its fn."""
    return Gate({"stock_lookup": {**tools.TOOLS["stock_lookup"], "fn": body}}, secret=SECRET,
                **kwargs)


def stock_answer(args: dict[str, Any]) -> dict[str, Any]:
    """The envelope a valid stock call must get, computed from the stock itself."""
    rows = tools.STOCK[args["sku"]][args["region"]][: args["limit"]]
    return {"ok": True, "value": {"sku": args["sku"], "rows": rows}, "error": ""}


def refused(reason: str) -> dict[str, Any]:
    return {"ok": False, "value": None, "error": reason}


def assert_model_answer(answer: object) -> None:
    """The model form: data/source/request_id on success, a four-key error on failure."""
    assert isinstance(answer, dict)
    assert type(answer["ok"]) is bool
    assert isinstance(answer["request_id"], str)
    if answer["ok"]:
        assert set(answer) == {"ok", "data", "source", "request_id"}
    else:
        assert set(answer) == {"ok", "error", "request_id"}
        assert set(answer["error"]) == MODEL_ERROR_KEYS
        assert type(answer["error"]["retryable"]) is bool


def strings_in(value: object) -> Iterator[str]:
    """Every str inside a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


def without_request_id(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in answer.items() if key != "request_id"}


# -- Dict subclasses that lie about their contents ------------------------------------------------

_HIDDEN = "sku_id"


class Liar(dict):  # type: ignore[type-arg]
    """A dict subclass that logs every overridden reading method called on it in ``called``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.called: list[str] = []


class GetLies(Liar):
    def get(self, key: Any, default: Any = None) -> Any:
        self.called.append("get")
        return 1 if key == "limit" else dict.get(self, key, default)


class GetitemLies(Liar):
    def __getitem__(self, key: Any) -> Any:
        self.called.append("__getitem__")
        return 1 if key == "limit" else dict.__getitem__(self, key)


class ItemsLie(Liar):
    def items(self) -> Any:
        self.called.append("items")
        return [(key, 1 if key == "limit" else value) for key, value in dict.items(self)]


class ValuesLie(Liar):
    def values(self) -> Any:
        self.called.append("values")
        return ["A100", "seoul", 1]


class IterHides(Liar):
    def __iter__(self) -> Iterator[Any]:
        self.called.append("__iter__")
        return iter([key for key in dict.keys(self) if key != _HIDDEN])


class KeysHide(Liar):
    def keys(self) -> Any:
        self.called.append("keys")
        return [key for key in dict.keys(self) if key != _HIDDEN]


class LenLies(Liar):
    def __len__(self) -> int:
        self.called.append("__len__")
        return 3


class ContainsLies(Liar):
    def __contains__(self, key: object) -> bool:
        self.called.append("__contains__")
        return True


class EverythingLies(GetLies, GetitemLies, ItemsLie, ValuesLie, IterHides, KeysHide, LenLies,
                     ContainsLies):
    """Every reading method at once, each telling the lie of its class."""


class _Boom(Exception):
    """What a hostile method raises; never an exception the gate could expect by name."""


def _raising(method: str) -> type[Liar]:
    def boom(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.called.append(method)
        raise _Boom(method)

    return type(f"Raising_{method.strip('_')}", (Liar,), {method: boom})


READING_METHODS = ["get", "__getitem__", "__iter__", "keys", "items", "values", "__contains__",
                   "__len__"]
LIARS = [
    pytest.param(GetLies, id="get-says-limit-1"),
    pytest.param(GetitemLies, id="getitem-says-limit-1"),
    pytest.param(ItemsLie, id="items-say-limit-1"),
    pytest.param(ValuesLie, id="values-say-limit-1"),
    pytest.param(IterHides, id="iter-hides-sku_id"),
    pytest.param(KeysHide, id="keys-hide-sku_id"),
    pytest.param(LenLies, id="len-says-3"),
    pytest.param(ContainsLies, id="contains-says-yes"),
    pytest.param(EverythingLies, id="every-method-lies"),
    *(pytest.param(_raising(method), id=f"{method.strip('_')}-raises")
      for method in READING_METHODS),
]
#: (real contents, the envelope a plain dict of those contents gets).
CONTENTS = [
    pytest.param(VALID, stock_answer(VALID), id="valid"),
    pytest.param({**VALID, "limit": HUGE}, refused("args:max:limit"), id="limit-too-big"),
    pytest.param({**VALID, _HIDDEN: "A100"}, refused("args:unexpected:sku_id"), id="extra-key"),
    pytest.param({"sku": "A100", "region": "seoul"}, refused("args:missing:limit"),
                 id="missing-key"),
]


@pytest.mark.parametrize(("real", "expected"), CONTENTS)
@pytest.mark.parametrize("cls", LIARS)
def test_hostile_dict_is_answered_as_its_real_contents(
        cls: type[Liar], real: dict[str, Any], expected: dict[str, Any]) -> None:
    """A dict whose readers lie or raise gets a plain dict's answer (memo too); none is called."""
    body = StockBody()
    sink = ListSink()
    gate = stock_gate(body, records=sink)
    args = cls(real)
    assert gate.call_tool("stock_lookup", args) == expected
    assert gate.call_tool("stock_lookup", args) == expected
    model = gate.call_for_model("stock_lookup", args)
    assert_model_answer(model)
    if expected["ok"]:
        assert model["data"] == expected["value"]
        assert body.calls == [VALID]  # once: the second call and the model's are memo hits
        assert type(body.calls[0]) is dict
        assert gate.stats("stock_lookup").hits == 2
    else:
        assert model["error"]["details"]["reason"] == expected["error"]
        assert body.count == 0
    assert [record.reason for record in sink.records] == [expected["error"]] * 3
    assert args.called == []


LIAR_CLASSES = [param.values[0] for param in LIARS]
STOCK_SCHEMA = agtool.to_json_schema(tools.TOOLS, "stock_lookup")
#: Args for the stock contract, each value valid or off by one defect, any key left out.
STOCK_VALUES = {
    "sku": st.one_of(st.sampled_from(["A100", "B200", "C300", "Z9"]), st.integers(0, 3)),
    "region": st.sampled_from([*tools.REGIONS, "mars", ""]),
    "limit": st.one_of(st.integers(-1, 4), st.booleans(), st.just("2"), st.just(HUGE)),
    _HIDDEN: st.just("A100"),
}


def stock_defects(args: dict[str, Any]) -> set[str]:
    """Every reason the stock contract has against ``args``, checked by hand."""
    defects = {f"args:unexpected:{key}" for key in args if key not in VALID}
    for key in VALID:
        if key not in args:
            defects.add(f"args:missing:{key}")
    sku, region, limit = (args.get(key) for key in VALID)
    if "sku" in args and type(sku) is not str:
        defects.add("args:type:sku")
    if "region" in args:
        if type(region) is not str:
            defects.add("args:type:region")
        elif region not in tools.REGIONS:
            defects.add("args:allowed:region")
    if "limit" in args:
        if type(limit) is not int:
            defects.add("args:type:limit")
        elif limit < 1:
            defects.add("args:min:limit")
        elif limit > tools.MAX_ROWS:
            defects.add("args:max:limit")
    return defects


@given(real=st.fixed_dictionaries({}, optional=STOCK_VALUES), cls=st.sampled_from(LIAR_CLASSES))
@example(real={"sku": "A100", "region": "busan", "limit": 1}, cls=LIAR_CLASSES[0])  # a valid call
def test_any_args_in_a_hostile_dict_get_the_plain_answer(real: dict[str, Any],
                                                         cls: type[Liar]) -> None:
    """Args in a lying or raising dict are answered by their real contents, as jsonschema judges."""
    body, plain_body = StockBody(), StockBody()
    sink, plain_sink = ListSink(), ListSink()
    answer = stock_gate(body, records=sink).call_tool("stock_lookup", cls(real))
    plain = stock_gate(plain_body, records=plain_sink).call_tool("stock_lookup", dict(real))
    defects = stock_defects(real)
    assert jsonschema.Draft202012Validator(STOCK_SCHEMA).is_valid(real) == (not defects)
    if defects:
        assert answer == refused(answer["error"])
        assert answer["error"] in defects
        assert body.count == 0
    else:
        assert answer == plain
        assert body.calls == plain_body.calls == [real]
    assert [r.args_digest for r in sink.records] == [r.args_digest for r in plain_sink.records]


class Flipping(dict):  # type: ignore[type-arg]
    """A dict that logs every reading method called on it and then sets ``limit`` to HUGE.

    A gate that checks one read of the args and runs the body on another read would
    check ``limit=2`` and hand the body ``limit=10**9``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.called: list[str] = []

    def _flip(self, method: str) -> None:
        self.called.append(method)
        dict.__setitem__(self, "limit", HUGE)

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, default)
        self._flip("get")
        return value

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        self._flip("__getitem__")
        return value

    def __iter__(self) -> Iterator[Any]:
        keys = list(dict.keys(self))
        self._flip("__iter__")
        return iter(keys)

    def keys(self) -> Any:
        keys = list(dict.keys(self))
        self._flip("keys")
        return keys

    def items(self) -> Any:
        items = list(dict.items(self))
        self._flip("items")
        return items

    def values(self) -> Any:
        values = list(dict.values(self))
        self._flip("values")
        return values

    def __contains__(self, key: object) -> bool:
        found = dict.__contains__(self, key)
        self._flip("__contains__")
        return found

    def __len__(self) -> int:
        size = dict.__len__(self)
        self._flip("__len__")
        return size


@pytest.mark.parametrize("entry", ["call_tool", "call_for_model"])
def test_args_are_read_once_from_storage_and_the_body_gets_the_checked_values(
        entry: str) -> None:
    """Args are read once from storage, not via their methods; the body gets what was checked."""
    body = StockBody()
    sink = ListSink()
    gate = stock_gate(body, records=sink)
    args = Flipping(VALID)
    answer = getattr(gate, entry)("stock_lookup", args)
    assert answer["ok"] is True
    assert body.calls == [VALID]
    assert type(body.calls[0]) is dict
    assert args.called == []
    assert len(sink.records) == 1


# -- List subclasses that lie ---------------------------------------------------------------------

LIST_ARGS: dict[str, Any] = {
    "ids": {"type": "list", "max_len": 10, "item": {"type": "int"}},
    "rows": {"type": "list", "required": False, "max_len": 10,
             "item": {"store": {"type": "str"}}},
}


class ListBody(CountingBody):
    """A counting body that answers how many ids it was handed."""

    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"n": len(kwargs["ids"])}


def list_gate(body: Callable[..., Any]) -> Gate:
    return Gate({"t": {"fn": body, "args": LIST_ARGS, "returns": {"n": {"type": "int"}}}})


class ListLenSays1(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 1


class ListLenSays1000(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 1000


class ListIterSaysInts(list):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        return iter([1, 2])


class ListIterSaysStr(list):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        return iter(["x"])


class ListGetitemSaysInt(list):  # type: ignore[type-arg]
    def __getitem__(self, index: Any) -> Any:
        return [1] * 3 if isinstance(index, slice) else 1


class ListLenRaises(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        raise _Boom("len")


class ListIterRaises(list):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        raise _Boom("iter")


class RowGetLies(dict):  # type: ignore[type-arg]
    def get(self, key: Any, default: Any = None) -> Any:
        return "Gangnam" if key == "store" else dict.get(self, key, default)


class RowIterRaises(dict):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        raise _Boom("iter")


# (args as built, the reason or "" when accepted, the plain args the body must receive).
LYING_LISTS = [
    pytest.param(lambda: {"ids": ListLenSays1(range(1000))}, "args:max_len:ids", None,
                 id="len-says-1-holding-1000"),
    pytest.param(lambda: {"ids": ListLenRaises(range(1000))}, "args:max_len:ids", None,
                 id="len-raises-holding-1000"),
    pytest.param(lambda: {"ids": ListIterSaysInts(["x"])}, "args:type:ids", None,
                 id="iter-says-ints-holding-a-str"),
    pytest.param(lambda: {"ids": ListGetitemSaysInt(["x", "y", "z"])}, "args:type:ids", None,
                 id="getitem-says-ints-holding-strs"),
    pytest.param(lambda: {"ids": ListLenSays1000([1, 2, 3])}, "", {"ids": [1, 2, 3]},
                 id="len-says-1000-holding-3"),
    pytest.param(lambda: {"ids": ListIterSaysStr([1, 2])}, "", {"ids": [1, 2]},
                 id="iter-says-a-str-holding-ints"),
    pytest.param(lambda: {"ids": ListIterRaises([1, 2])}, "", {"ids": [1, 2]},
                 id="iter-raises-holding-ints"),
    pytest.param(lambda: {"ids": [], "rows": [RowGetLies({"store": 5})]}, "args:type:rows",
                 None, id="row-get-says-str-holding-an-int"),
    pytest.param(lambda: {"ids": [], "rows": [RowGetLies({"store": "A", "extra": 1})]},
                 "args:unexpected:rows", None, id="row-with-an-extra-key"),
    pytest.param(lambda: {"ids": [], "rows": ListLenSays1([{"store": "A"}] * 20)},
                 "args:max_len:rows", None, id="rows-len-says-1-holding-20"),
    pytest.param(lambda: {"ids": [], "rows": [RowIterRaises({"store": "Jamsil"})]}, "",
                 {"ids": [], "rows": [{"store": "Jamsil"}]}, id="row-iter-raises-holding-a-str"),
    pytest.param(lambda: {"ids": [7], "rows": ListIterSaysInts([RowGetLies({"store": "B"})])},
                 "", {"ids": [7], "rows": [{"store": "B"}]}, id="rows-and-row-both-lie"),
]


@pytest.mark.parametrize(("build", "reason", "received"), LYING_LISTS)
def test_lying_list_is_answered_as_its_real_items(build: Callable[[], dict[str, Any]],
                                                  reason: str,
                                                  received: dict[str, Any] | None) -> None:
    """A list (or list item) that lies is checked by its real items; the body gets plain copies."""
    body = ListBody()
    gate = list_gate(body)
    envelope = gate.call_tool("t", build())
    assert_envelope(envelope)
    assert envelope["error"] == reason
    if reason:
        assert body.count == 0
        return
    assert envelope["value"] == {"n": len(received["ids"])}  # type: ignore[index]
    [got] = body.calls
    assert got == received
    for name, value in got.items():
        assert type(value) is list, name
        assert all(type(item) in (int, dict) for item in value)
        assert all(type(item) is dict for item in value if not isinstance(item, int))


# -- Keys that are not exactly str ---------------------------------------------------------------

class StrKey(str):
    """A str subclass: hashes and compares equal to the argument name it spells."""


ODD_KEYS = [
    pytest.param({"sku": "A100", "region": "seoul", StrKey("limit"): 2},
                 id="str-subclass-equal-to-an-arg-name"),
    pytest.param({StrKey(key): value for key, value in VALID.items()},
                 id="every-key-a-str-subclass"),
    pytest.param({**VALID, 1: "x"}, id="int-key"),
    pytest.param({**VALID, ("sku",): "x"}, id="tuple-key"),
    pytest.param({**VALID, None: "x"}, id="none-key"),
]


@pytest.mark.parametrize("args", ODD_KEYS)
def test_keys_that_are_not_exactly_str_are_not_an_object(args: dict[Any, Any]) -> None:
    """Args with any key that is not exactly a str answer args:not_object; the body never runs."""
    body = StockBody()
    gate = stock_gate(body)
    assert gate.call_tool("stock_lookup", args) == refused("args:not_object")
    model = gate.call_for_model("stock_lookup", args)
    assert_model_answer(model)
    assert model["error"]["details"]["reason"] == "args:not_object"
    assert body.count == 0


# -- The table replaced while calls run ---------------------------------------------------------

_RACE_RETURNS: dict[str, Any] = {"tag": {"type": "str"}}
_RACE_ARGS_OPEN: dict[str, Any] = {"x": {"type": "int", "min": 0}}
_RACE_ARGS_SHUT: dict[str, Any] = {"x": {"type": "int", "min": 0, "max": 3}}
RACE_THREADS = 8
RACE_CALLS_EACH = 2_500  # 20,000 calls in all


def test_table_replaced_during_concurrent_calls_never_breaks_an_answer() -> None:
    """Calls racing entry swaps, deletions and args swaps never raise; values come from its fns."""
    tags: set[str] = set()
    serial = iter(range(1, 10**9))

    def fn_tagged() -> Callable[..., Any]:
        tag = f"fn-{next(serial)}"
        tags.add(tag)  # before the fn can be in the table

        def fn(x: int) -> dict[str, Any]:
            return {"tag": tag}

        return fn

    def new_entry(args: dict[str, Any]) -> dict[str, Any]:
        return {"fn": fn_tagged(), "args": args, "returns": _RACE_RETURNS}

    table: dict[str, Any] = {"t": new_entry(_RACE_ARGS_OPEN)}
    gate = Gate(table)
    done = threading.Event()
    escaped: list[BaseException] = []
    envelopes: list[Any] = []
    models: list[Any] = []

    def replace() -> None:
        turn = 0
        try:
            while not done.is_set():
                turn += 1
                args = _RACE_ARGS_SHUT if turn % 2 else _RACE_ARGS_OPEN
                step = turn % 4
                if step == 0:
                    table["t"] = new_entry(args)  # a new dict with a new fn
                elif step == 1:
                    del table["t"]  # deleted, then added back
                    table["t"] = new_entry(args)
                elif step == 2:
                    table["t"]["args"] = args  # args swapped in place
                else:
                    table["t"]["fn"] = fn_tagged()  # fn swapped in place
        except BaseException as exc:
            escaped.append(exc)

    def call(index: int) -> None:
        mine: list[Any] = envelopes if index % 2 else models
        try:
            for n in range(RACE_CALLS_EACH):
                args = {"x": n % 7}
                if index % 2:
                    mine.append(gate.call_tool("t", args))
                else:
                    mine.append(gate.call_for_model("t", args))
        except BaseException as exc:
            escaped.append(exc)

    replacer = threading.Thread(target=replace)
    callers = [threading.Thread(target=call, args=(index,)) for index in range(RACE_THREADS)]
    replacer.start()
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    done.set()
    replacer.join()

    assert escaped == []
    assert len(envelopes) + len(models) == RACE_THREADS * RACE_CALLS_EACH
    for envelope in envelopes:
        assert_envelope(envelope)
        if envelope["ok"]:
            assert set(envelope["value"]) == {"tag"}
            assert envelope["value"]["tag"] in tags
        else:
            assert envelope["error"] in {"args:unknown_tool", "args:max:x"}
    for model in models:
        assert_model_answer(model)
        if model["ok"]:
            assert model["data"]["tag"] in tags
        else:
            assert model["error"]["code"] in {"UNKNOWN_TOOL", "INVALID_ARGUMENT"}


# -- Approvals that are not a list of approvals --------------------------------------------------

class IterRaises:
    """An iterable whose ``__iter__`` raises."""

    def __iter__(self) -> Iterator[Any]:
        raise _Boom("iter")


HOSTILE_APPROVALS = [
    pytest.param(None, id="none"),
    pytest.param(42, id="int"),
    pytest.param(IterRaises(), id="iter-raises"),
    pytest.param("approved", id="str"),
    pytest.param([object(), None], id="list-of-non-approvals"),
]


class DoneBody(CountingBody):
    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"done": True}


def authority_table(pay: Callable[..., Any], look: Callable[..., Any]) -> dict[str, Any]:
    """An irreversible write keyed by ``order`` and a public read, both answering ``done``."""
    args = {"order": {"type": "str"}}
    returns = {"done": {"type": "bool"}}
    return {
        "pay": {"fn": pay, "args": args, "returns": returns, "effect": "write",
                "risk": "irreversible", "key_args": ["order"]},
        "look": {"fn": look, "args": args, "returns": returns},
    }


@pytest.mark.parametrize("approvals", HOSTILE_APPROVALS)
def test_hostile_approvals_never_raise_and_approve_nothing(approvals: Any) -> None:
    """Non-Approval approvals give auth:approval for an irreversible write; a read ignores them."""
    pay, look = DoneBody(), DoneBody()
    gate = Gate(authority_table(pay, look), scope=agtool.RISKS)
    ids = {"scope": agtool.RISKS, "run_id": "run-1", "step_id": "step-1",
           "approvals": approvals}
    assert gate.call_tool("pay", {"order": "A-1"}, **ids) == refused("auth:approval")
    model = gate.call_for_model("pay", {"order": "A-1"}, **ids)
    assert_model_answer(model)
    assert model["error"]["code"] == "APPROVAL_REQUIRED"
    assert pay.count == 0
    assert gate.call_tool("look", {"order": "A-1"}, **ids) == {
        "ok": True, "value": {"done": True}, "error": ""}
    assert look.count == 1


# -- Per-call scopes -----------------------------------------------------------------------------

class ScopeContainsRaises:
    """A collection-like scope whose membership test raises."""

    def __contains__(self, item: object) -> bool:
        raise _Boom("contains")

    def __iter__(self) -> Iterator[str]:
        return iter(agtool.RISKS)

    def __len__(self) -> int:
        return len(agtool.RISKS)


class ScopeIterRaises:
    """A collection-like scope that says it holds everything but cannot be iterated."""

    def __contains__(self, item: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        raise _Boom("iter")

    def __len__(self) -> int:
        return len(agtool.RISKS)


BAD_SCOPES = [
    pytest.param("not_irreversible", id="str-holding-a-level-as-substring"),
    pytest.param("irreversible", id="str-naming-a-level"),
    pytest.param("read_public", id="str-naming-the-default-level"),
    pytest.param({"irreversible": False, "read_public": False}, id="dict-of-levels-to-false"),
    pytest.param({"read_public", "root"}, id="set-with-an-unknown-level"),
    pytest.param(["read_public", 3], id="list-with-a-non-str"),
    pytest.param(ScopeContainsRaises(), id="contains-raises"),
    pytest.param(ScopeIterRaises(), id="iter-raises"),
    pytest.param(42, id="int"),
]


@pytest.mark.parametrize("tool", ["look", "pay"])
@pytest.mark.parametrize("scope", BAD_SCOPES)
def test_bad_per_call_scope_is_refused_for_any_tool(scope: Any, tool: str) -> None:
    """A per-call scope that is not a collection of known risk names is auth:bad_scope, any tool."""
    pay, look = DoneBody(), DoneBody()
    gate = Gate(authority_table(pay, look), scope=agtool.RISKS)
    approval = gate.approve(tool, {"order": "A-1"})
    ids = {"scope": scope, "run_id": "run-1", "step_id": "step-1", "approvals": [approval]}
    assert gate.call_tool(tool, {"order": "A-1"}, **ids) == refused("auth:bad_scope")
    model = gate.call_for_model(tool, {"order": "A-1"}, **ids)
    assert_model_answer(model)
    assert model["ok"] is False
    assert model["error"]["code"] == "PERMISSION_DENIED"
    assert model["error"]["details"]["reason"] == "auth:bad_scope"
    assert pay.count == 0
    assert look.count == 0


@pytest.mark.parametrize("scope", [
    pytest.param({"read_public"}, id="set"),
    pytest.param(frozenset({"read_public"}), id="frozenset"),
    pytest.param(["read_public"], id="list"),
    pytest.param(("read_public",), id="tuple"),
    pytest.param(agtool.RISKS, id="every-level"),
])
def test_valid_per_call_scopes_are_honoured(scope: Any) -> None:
    """Sets, frozensets, lists and tuples of risk names grant exactly what they name."""
    pay, look = DoneBody(), DoneBody()
    gate = Gate(authority_table(pay, look), scope=agtool.RISKS)
    assert gate.call_tool("look", {"order": "A-1"}, scope=scope)["ok"] is True
    envelope = gate.call_tool("pay", {"order": "A-1"}, scope=scope, run_id="r", step_id="s")
    expected = "auth:approval" if "irreversible" in scope else "auth:scope:irreversible"
    assert envelope == refused(expected)
    assert gate.call_tool("look", {"order": "B-2"}, scope=[]) == refused("auth:scope:read_public")
    assert (look.count, pay.count) == (1, 0)


# -- Hostile args through call_for_model and writes ---------------------------------------------

@pytest.mark.parametrize("method", ["__contains__", "items", "get", "__iter__"])
@pytest.mark.parametrize(("real", "reason"), [
    pytest.param(VALID, "", id="valid"),
    pytest.param({**VALID, "region": "mars"}, "args:allowed:region", id="allowed"),
    pytest.param({**VALID, "sku_id": "A100"}, "args:unexpected:sku_id", id="unexpected"),
    pytest.param({"sku": "A100", "region": "seoul"}, "args:missing:limit", id="missing"),
])
def test_call_for_model_on_a_raising_dict_answers_normally(
        method: str, real: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture) -> None:
    """call_for_model on a dict whose reader raises answers as for a plain dict; one record."""
    caplog.set_level(logging.ERROR, logger="agtool")
    sink = ListSink()
    body = StockBody()
    gate = stock_gate(body, records=sink)
    answer = gate.call_for_model("stock_lookup", _raising(method)(real))
    assert_model_answer(answer)
    if reason:
        assert answer["error"]["details"]["reason"] == reason
        assert answer["error"]["code"] == "INVALID_ARGUMENT"
    else:
        assert answer["data"] == stock_answer(real)["value"]
    plain = stock_gate(StockBody()).call_for_model("stock_lookup", dict(real))
    assert without_request_id(answer) == without_request_id(plain)
    assert [record.reason for record in sink.records] == [reason]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert body.count == (0 if reason else 1)


class WriteBody(CountingBody):
    """A write body answering a fresh serial per run, so a second run cannot pass for a replay."""

    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"order": kwargs["order"], "serial": self.count}


@pytest.mark.parametrize("method", ["__contains__", "get", "__getitem__", "keys", "__iter__"])
def test_keyed_write_with_a_raising_dict_runs_once_per_key(method: str) -> None:
    """A keyed write sent twice as a dict whose method raises runs once; the second is a replay."""
    sink = ListSink()
    body = WriteBody()
    gate = Gate({"order": {
        "fn": body, "args": {"order": {"type": "str"}, "qty": {"type": "int"}},
        "returns": {"order": {"type": "str"}, "serial": {"type": "int"}},
        "effect": "write", "key_args": ["order"]}}, scope={"reversible_write"}, records=sink)
    cls = _raising(method)
    first = gate.call_tool("order", cls({"order": "A-1", "qty": 1}), run_id="r1", step_id="s1")
    second = gate.call_tool("order", cls({"order": "A-1", "qty": 1}), run_id="r1", step_id="s1")
    assert first == {"ok": True, "value": {"order": "A-1", "serial": 1}, "error": ""}
    assert second == first
    assert body.count == 1
    assert gate.stats("order").replayed == 1
    assert [record.replayed for record in sink.records] == [False, True]


# -- Hostile returned values: call_for_model never raises on them ------------------------------

class LyingDict(dict):  # type: ignore[type-arg]
    """A dict whose readers raise ``exc``: its storage holds its real contents."""

    exc: BaseException = RuntimeError("lie")

    def items(self) -> Any:
        raise self.exc

    def keys(self) -> Any:
        raise self.exc

    def values(self) -> Any:
        raise self.exc

    def __iter__(self) -> Any:
        raise self.exc


class LyingStr(str):
    """A str whose own methods raise: its characters are real."""

    def __str__(self) -> str:
        raise RuntimeError("lie")

    __repr__ = __str__

    def __len__(self) -> int:
        raise RuntimeError("lie")

    def encode(self, *_: Any, **__: Any) -> bytes:
        raise RuntimeError("lie")


SECRET_SPEC: dict[str, Any] = {"type": "str", "sensitive": True}
#: ``id -> (returns, a fresh hostile value)``: each passes the return check, which reads a
#: dict's own storage; only what a model is handed (redacted) reads it through its methods.
HOSTILE_RESULTS: dict[str, tuple[dict[str, Any], Callable[[], Any]]] = {
    "top-level-dict-with-a-secret": ({"a": {"type": "any"}, "s": SECRET_SPEC},
                                     lambda: LyingDict(a=1, s="hunter22")),
    "nested-dict-with-a-secret": ({"a": {"type": "dict", "item": {"s": SECRET_SPEC}}},
                                  lambda: {"a": LyingDict(s="hunter22")}),
    "dict-in-a-list-with-a-secret": ({"a": {"type": "list", "item": {"s": SECRET_SPEC}}},
                                     lambda: {"a": [LyingDict(s="hunter22")]}),
    "lying-str-beside-a-secret": ({"a": {"type": "any"}, "s": SECRET_SPEC},
                                  lambda: {"a": LyingStr("x"), "s": "hunter22"}),
    "lying-dict-beside-a-secret": ({"a": {"type": "any"}, "s": SECRET_SPEC},
                                   lambda: {"a": LyingDict(x=1), "s": "hunter22"}),
}


@pytest.mark.parametrize("twin", ["call_for_model", "acall_for_model"])
@pytest.mark.parametrize("case", list(HOSTILE_RESULTS))
def test_call_for_model_never_raises_on_a_hostile_returned_value(case: str, twin: str) -> None:
    """A returned value whose own methods lie is answered, never raised: a success with the
    secret redacted, or ``result:unrenderable`` when no redacted copy can be made; the secret
    is in neither; one record per call."""
    returns, make = HOSTILE_RESULTS[case]
    sink = ListSink()
    gate = Gate({"t": {"fn": lambda: make(), "args": {}, "returns": returns}}, records=sink)

    async def acall() -> dict[str, Any]:
        return await gate.acall_for_model("t", {})

    for _ in range(2):  # a miss, then what the memo answers
        answer = gate.call_for_model("t", {}) if twin == "call_for_model" else asyncio.run(acall())
        assert_model_answer(answer)
        if not answer["ok"]:
            assert answer["error"]["details"] == {"reason": "result:unrenderable"}
            assert answer["error"]["code"] == "BAD_RESULT"
        assert "hunter22" not in stored_strings(answer)
    assert len(sink.records) == 2


def stored_strings(value: object) -> list[str]:
    """Every str inside ``value``, read from the storage of dicts, lists and strs: a lying
    subclass's methods are never called."""
    if isinstance(value, str):
        return [str.__str__(value)]
    if isinstance(value, dict):
        return [text for pair in dict.items(value) for part in pair
                for text in stored_strings(part)]
    if isinstance(value, list):
        return [text for item in list.__iter__(value) for text in stored_strings(item)]
    return []


def test_a_keyboard_interrupt_from_a_returned_value_propagates_from_call_for_model() -> None:
    """Only an ``Exception`` from a hostile value is answered: an interrupt is let through."""
    class Interrupting(LyingDict):
        exc = KeyboardInterrupt()

    gate = Gate({"t": {"fn": lambda: Interrupting(a=1, s="x"), "args": {},
                       "returns": {"a": {"type": "int"}, "s": SECRET_SPEC}}})
    with pytest.raises(KeyboardInterrupt):
        gate.call_for_model("t", {})


# -- Model-chosen names: bounded and escaped wherever they are echoed ---------------------------

LONG = "Z" * 4_999_999 + "a"
LONG_TWIN = "Z" * 4_999_999 + "b"  # the same first 64 (and 4,999,999) characters
CONTROL = "bad\nname\r\x00\x1b[31m\u2028end\u2029\x7f\x85"
NAMES = [pytest.param(CONTROL, id="control-characters"),
         pytest.param(LONG, id="five-million-characters")]


def assert_echo_safe(text: str, name: str) -> None:
    """No raw control character or line separator, and no more than 64 characters of ``name``."""
    assert UNSAFE.search(text) is None, repr(text[:200])
    assert name[:65] not in text


def assert_logs_safe(caplog: pytest.LogCaptureFixture, name: str) -> None:
    """Every log record's message, and every string in its agtool_record, is echo-safe."""
    assert caplog.records
    for record in caplog.records:
        message = record.getMessage()
        assert_echo_safe(message, name)
        assert len(message) < 4 * ECHO_BOUND
        for text in strings_in(getattr(record, "agtool_record", {})):
            assert_echo_safe(text, name)


@pytest.mark.parametrize("name", NAMES)
def test_unexpected_arg_name_is_bounded_and_escaped_everywhere(
        name: str, caplog: pytest.LogCaptureFixture) -> None:
    """An invented arg name is echoed escaped, cut to 64 chars + a marker: reason, record, logs."""
    caplog.set_level(logging.DEBUG, logger="agtool")
    sink = ListSink()
    body = StockBody()
    gate = stock_gate(body, records=sink)
    args = {**VALID, name: 1}
    reason = gate.call_tool("stock_lookup", args)["error"]
    assert reason.startswith("args:unexpected:")
    assert_echo_safe(reason, name)
    assert len(reason) < ECHO_BOUND
    answer = gate.call_for_model("stock_lookup", args)
    assert_model_answer(answer)
    assert answer["error"]["details"]["reason"] == reason
    for text in strings_in(answer):
        assert_echo_safe(text, name)
        assert len(text) < 4 * ECHO_BOUND
    assert len(sink.records) == 2
    for record in sink.records:
        assert record.tool == "stock_lookup"
        assert record.reason == reason
    assert_logs_safe(caplog, name)
    assert body.count == 0


def called_unknown(name: object, caplog: pytest.LogCaptureFixture
                   ) -> tuple[ListSink, dict[str, Any]]:
    """Call ``name``, a tool no table has, through call_tool and call_for_model, logs at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="agtool")
    sink = ListSink()
    gate = stock_gate(StockBody(), records=sink)
    assert gate.call_tool(name, VALID) == refused("args:unknown_tool")
    answer = gate.call_for_model(name, VALID)
    assert_model_answer(answer)
    assert answer["error"]["code"] == "UNKNOWN_TOOL"
    return sink, answer


@pytest.mark.parametrize("name", NAMES)
def test_unknown_tool_name_is_bounded_and_escaped_everywhere(
        name: str, caplog: pytest.LogCaptureFixture) -> None:
    """An invented tool name is echoed escaped, cut to 64 chars + a marker: record, logs, model."""
    sink, answer = called_unknown(name, caplog)
    for text in strings_in(answer):
        assert_echo_safe(text, name)
    assert len(sink.records) == 2
    for record in sink.records:
        for text in (record.tool, record.reason):
            assert_echo_safe(text, name)
            assert len(text) < ECHO_BOUND
    assert sink.records[0].tool == sink.records[1].tool
    assert_logs_safe(caplog, name)


LONG_PAIRS = [
    pytest.param("Z" * 64 + "a" * 1000, "Z" * 64 + "b" * 1000, id="differ-at-char-65"),
    pytest.param(LONG, LONG_TWIN, id="differ-only-in-the-last-of-5M"),
]


@pytest.mark.parametrize(("name", "twin"), LONG_PAIRS)
def test_long_names_are_told_apart_and_stable(name: str, twin: str) -> None:
    """Two long names sharing 64 leading chars echo differently; one name always echoes alike."""
    sink = ListSink()
    gate = stock_gate(StockBody(), records=sink)
    other = stock_gate(StockBody(), records=sink)

    def reason(on: Gate, invented: str) -> str:
        return on.call_tool("stock_lookup", {**VALID, invented: 1})["error"]

    assert reason(gate, name) != reason(gate, twin)
    assert len(reason(gate, name)) < ECHO_BOUND
    assert reason(gate, name) == reason(gate, name) == reason(other, name)
    sink.records.clear()
    for on, tool in [(gate, name), (gate, twin), (gate, name), (other, name)]:
        on.call_tool(tool, VALID)
    tools_echoed = [record.tool for record in sink.records]
    assert tools_echoed[0] != tools_echoed[1]
    assert len(tools_echoed[0]) < ECHO_BOUND
    assert tools_echoed[0] == tools_echoed[2] == tools_echoed[3]


class ReprRaises:
    """A name whose repr and str both raise."""

    def __repr__(self) -> str:
        raise _Boom("repr")

    def __str__(self) -> str:
        raise _Boom("str")


@pytest.mark.parametrize("name", [
    pytest.param(10**5000, id="int-too-long-to-print"),
    pytest.param(ReprRaises(), id="repr-and-str-raise"),
])
def test_name_whose_repr_raises_still_leaves_one_record(
        name: object, caplog: pytest.LogCaptureFixture) -> None:
    """A tool name that cannot be printed leaves one record per call and no error about it."""
    sink, _ = called_unknown(name, caplog)
    assert len(sink.records) == 2
    for record in sink.records:
        assert isinstance(record.tool, str)
        assert len(record.tool) < ECHO_BOUND
        assert record.reason == "args:unknown_tool"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


class Unprintable:
    """A marker Hypothesis can print, standing for a name that cannot be printed.

    Hypothesis prints the arguments it draws, so the hostile name is made inside the test.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"Unprintable({self.kind!r})"

    def make(self) -> object:
        return 10**5000 if self.kind == "huge-int" else ReprRaises()


_NAME_CHARS = st.sampled_from("ab_:Z\n\r\t\x00\x1b\x7f\x85\u2028\u2029é한")
TOOL_NAMES = st.one_of(
    st.text(max_size=100),
    st.text(_NAME_CHARS, max_size=100),
    st.text(_NAME_CHARS, min_size=65, max_size=300),
    st.sampled_from(["stock_lookup", "legacy_stock", ""]),
    st.sampled_from([Unprintable("huge-int"), Unprintable("repr-raises")]),
    st.integers(),
    st.none(),
    st.binary(max_size=10),
    st.floats(),
    st.lists(st.text(max_size=3), max_size=3),
    st.tuples(st.text(max_size=3)),
)


@given(drawn=TOOL_NAMES, for_model=st.booleans())
@example(drawn=Unprintable("huge-int"), for_model=False)
@example(drawn=Unprintable("repr-raises"), for_model=True)
@example(drawn="x\n" * 50, for_model=False)
def test_every_call_leaves_exactly_one_safe_record(drawn: object, for_model: bool) -> None:
    """Whatever the tool name, each call leaves one record whose tool is a bounded, escaped str."""
    name = drawn.make() if isinstance(drawn, Unprintable) else drawn
    sink = ListSink()
    gate = Gate(tools.TOOLS, records=sink)
    if for_model:
        assert_model_answer(gate.call_for_model(name, VALID))
    else:
        assert_envelope(gate.call_tool(name, VALID))
    [record] = sink.records
    assert isinstance(record.tool, str)
    assert UNSAFE.search(record.tool) is None
    assert len(record.tool) < ECHO_BOUND
    assert UNSAFE.search(record.reason) is None


# -- Refusals cost O(1) in the refused input's size --------------------------------------------

#: Peak memory a refusal may allocate, whatever the size of what it refuses.
REFUSAL_PEAK_BYTES = 1_000_000
#: Guards: today's gate walks a refused 10**7-item list (about 20 s and several GB).
REFUSAL_TIMEOUT_SECONDS = 10
REFUSAL_ADDRESS_SPACE = 1024**3

_REFUSAL_SCRIPT = r"""
import io, json, logging, resource, sys, tracemalloc
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from agtool import Gate

stream = io.StringIO()
handler = logging.StreamHandler(stream)
logging.getLogger("agtool").addHandler(handler)  # agtool.calls propagates to it
logging.getLogger("agtool").setLevel(logging.DEBUG)
records = []
ran = []
table = {"t": {"fn": lambda **kw: ran.append(1) or {}, "returns": {}, "args": {
    "sku": {"type": "str"}, "code": {"type": "str", "required": False, "max_len": 8},
    "items": {"type": "list", "required": False, "max_len": 10, "item": {"type": "int"}}}}}
gate = Gate(table, records=records.append)

def build(size):
    case = sys.argv[1]
    if case == "max_len":
        return {"sku": "a", "items": [0] * size}
    if case == "extra_arg":
        return {"sku": "a", "junk": [0] * size}
    if case == "long_str":
        return {"sku": "a", "code": "x" * size}
    return {"sku": "a", **{f"k{i}": 0 for i in range(size)}}

small = build(11)  # the same path once, small, so that first-call setup is not counted
gate.call_tool("t", small)
gate.call_for_model("t", small)
args = build(int(sys.argv[3]))
tracemalloc.start()
envelope = gate.call_tool("t", args)
peak_envelope = tracemalloc.get_traced_memory()[1]
tracemalloc.reset_peak()
model = gate.call_for_model("t", args)
peak_model = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"envelope": envelope, "model": model, "peaks": [peak_envelope, peak_model],
                  "reasons": [r.reason for r in records[2:]], "ran": len(ran),
                  "log_chars": len(stream.getvalue())}, default=repr))
"""


def _refusal_reason_ok(case: str, reason: str) -> bool:
    if case == "max_len":
        return reason == "args:max_len:items"
    if case == "extra_arg":
        return reason == "args:unexpected:junk"
    if case == "long_str":
        return reason == "args:max_len:code"
    match = re.fullmatch(r"args:unexpected:k(\d+)", reason)
    return match is not None and int(match.group(1)) < 10**6


@pytest.mark.parametrize(("case", "size"), [
    pytest.param("max_len", 10**7, id="list-of-10M-for-max_len-10"),
    pytest.param("extra_arg", 10**7, id="list-of-10M-as-an-unexpected-arg"),
    # Its excerpt reads its head only: the whole string was digested (a 10 MB copy, 19 ms).
    pytest.param("long_str", 10**7, id="str-of-10M-for-max_len-8"),
    pytest.param("extra_keys", 10**6, id="args-with-1M-extra-keys", marks=pytest.mark.slow),
])
def test_refusal_costs_o1_in_the_refused_input(case: str, size: int) -> None:
    """A huge refused input is answered, recorded and logged within a small tracemalloc peak."""
    try:
        done = subprocess.run(  # noqa: S603  # runs this module's own script
            [sys.executable, "-c", _REFUSAL_SCRIPT, case, str(REFUSAL_ADDRESS_SPACE), str(size)],
            capture_output=True, text=True, timeout=REFUSAL_TIMEOUT_SECONDS,
            cwd=Path(__file__).resolve().parents[2], check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"refusing {case} ran past the {REFUSAL_TIMEOUT_SECONDS} s guard")
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    reason = seen["envelope"]["error"]
    assert _refusal_reason_ok(case, reason), reason
    assert seen["envelope"] == refused(reason)
    assert seen["model"]["error"]["details"]["reason"] == reason
    assert seen["reasons"] == [reason, reason]
    assert seen["ran"] == 0
    assert all(peak < REFUSAL_PEAK_BYTES for peak in seen["peaks"]), seen["peaks"]
    assert seen["log_chars"] < 10_000
    assert sum(len(text) for text in strings_in(seen["model"])) < 10_000
