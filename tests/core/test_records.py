"""Call records, redaction, contract hashes and the model's view of output.

One ``CallRecord`` per call goes to the gate's sink and to the ``agtool.calls``
logger; records, logs, the JSON-lines file and everything handed to a model
never carry a value the contract marks sensitive. Expectations are built from
what each test planted (the calls it made, the secrets it drew); body runs are
counted by the bodies.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import json
import logging
import math
import re
import string
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from _bodies import CountingBody
from hypothesis import example, given
from hypothesis import strategies as st

import agtool
from agtool import (
    REDACTED,
    UNTRUSTED_NOTE,
    CallRecord,
    Gate,
    JsonLinesSink,
    UpstreamError,
    contract_hash,
)
from agtool._answers import error_code, marks_sensitive
from agtool._contract import ToolContract
from agtool._keys import Keys
from agtool._outcome import ANSWERED, HIT, PLAN, REPLAY, Outcome
from agtool._records import (
    _record_digest,
    args_digest,
    record_call,
    scrub,
    shown_tool,
)

#: The fields a record promises, written out here rather than read from the dataclass.
RECORD_FIELDS = {"request_id", "tool", "ok", "code", "reason", "latency_ms", "memo_hit",
                 "replayed", "args_digest", "contract_hash"}
HEX64 = re.compile(r"[0-9a-f]{64}")
#: One secret for the gates whose digests a test compares: digests are keyed by it.
SECRET = "test-records-secret-0123456789"  # noqa: S105 - a test's own secret
KEYS = Keys(SECRET)
MARK = "SECRET-"


class Body(CountingBody):
    """A counting body that, unless told otherwise, answers ``{"n": 1}``."""

    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"n": 1}


class ListSink:
    """A record sink keeping every record it is handed."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def __call__(self, record: CallRecord) -> None:
        self.records.append(record)


class Capture(logging.Handler):
    """Keeps every log record of the ``agtool`` loggers and its formatted text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@contextlib.contextmanager
def captured_logs(level: int = logging.DEBUG) -> Iterator[Capture]:
    """Attach a ``Capture`` to the ``agtool`` logger (parent of ``agtool.calls``) for a block."""
    logger = logging.getLogger("agtool")
    handler, old = Capture(), logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


# -- One record per call -------------------------------------------------------------------------


def record_table(look: Body, send: Body) -> dict[str, dict[str, Any]]:
    return {
        "look": {"fn": look, "args": {"q": {"type": "str", "max_len": 3}},
                 "returns": {"n": {"type": "int"}}},
        "empty": {"fn": lambda: {"rows": []}, "args": {},
                  "returns": {"rows": {"type": "list"}}},
        "bad": {"fn": lambda: {"n": "x"}, "args": {}, "returns": {"n": {"type": "int"}}},
        "private": {"fn": Body(), "args": {}, "returns": {}, "risk": "read_sensitive"},
        "send": {"fn": send, "args": {"to": {"type": "str"}}, "returns": {"n": {"type": "int"}},
                 "effect": "write", "risk": "reversible_write"},
        "wire": {"fn": Body(), "args": {"to": {"type": "str"}}, "returns": {},
                 "effect": "write", "risk": "irreversible"},
        "gateway": {"fn": _raises(UpstreamError(503, "down")), "args": {}, "returns": {}},
    }


def _raises(exc: Exception) -> Callable[..., Any]:
    def body(**kwargs: Any) -> Any:
        raise exc
    return body


W = {"run_id": "r", "step_id": "s1"}
# (method, tool, args, kwargs, ok, code, reason, memo_hit, replayed), in call order.
RECORDED_CALLS: list[tuple[str, str, Any, dict[str, Any], bool, str, str, bool, bool]] = [
    ("tool", "look", {"q": "a"}, {}, True, "", "", False, False),
    ("model", "look", {"q": "a"}, {}, True, "", "", True, False),
    ("tool", "look", {"q": "long"}, {}, False, "INVALID_ARGUMENT", "args:max_len:q", False,
     False),
    ("model", "look", {"q": "b"}, {}, True, "", "", False, False),
    ("tool", "look", {"q": "b"}, {}, True, "", "", True, False),
    ("tool", "look", {"q": "a"}, {"dry_run": True}, True, "", "", False, False),
    ("tool", "empty", {}, {}, False, "EMPTY_RESULT", "result:empty", False, False),
    ("model", "bad", {}, {}, False, "BAD_RESULT", "result:shape", False, False),
    ("tool", "private", {}, {}, False, "PERMISSION_DENIED", "auth:scope:read_sensitive",
     False, False),
    ("model", "wire", {"to": "x"}, W, False, "APPROVAL_REQUIRED", "auth:approval", False, False),
    ("tool", "send", {"to": "x"}, W, True, "", "", False, False),
    ("model", "send", {"to": "x"}, W, True, "", "", False, True),
    ("tool", "send", {"to": "x"}, W, True, "", "", False, True),
    ("model", "send", {"to": "x"}, {}, False, "INTERNAL", "write:no_key", False, False),
    ("tool", "gateway", {}, {}, False, "UPSTREAM_ERROR", "upstream:503", False, False),
    ("model", "nope", {}, {}, False, "UNKNOWN_TOOL", "args:unknown_tool", False, False),
]


def test_one_record_per_call_with_its_outcome() -> None:
    """Each call_tool and call_for_model call hands the sink exactly one record of its outcome.

    ok, code ("" on success), reason, memo_hit (memo hits only), replayed (write
    replays only), the contract hash and a 64-hex args digest are the ones the
    test expects for the call it made; call_for_model's request id and code are
    the record's; request ids are unique; latency is a non-negative number.
    """
    look, send = Body(), Body(lambda kwargs: {"n": 2})
    sink = ListSink()
    gate = Gate(record_table(look, send), records=sink,
                scope={"read_public", "reversible_write", "irreversible"})
    answers = []
    for method, tool, args, kwargs, *_ in RECORDED_CALLS:
        if method == "tool":
            answers.append(gate.call_tool(tool, args, **kwargs))
        else:
            answers.append(gate.call_for_model(tool, args, **kwargs))

    assert len(sink.records) == len(RECORDED_CALLS)
    for record, answer, expected in zip(sink.records, answers, RECORDED_CALLS, strict=True):
        method, tool, args, kwargs, ok, code, reason, memo_hit, replayed = expected
        assert isinstance(record, CallRecord)
        assert set(record.as_dict()) == RECORD_FIELDS
        assert (record.tool, record.ok, record.code, record.reason) == (tool, ok, code, reason)
        assert (record.memo_hit, record.replayed) == (memo_hit, replayed), expected
        assert isinstance(record.latency_ms, float)
        assert record.latency_ms >= 0
        # Only checked args are digested: a refusal of the args costs nothing in their size.
        refused = reason.startswith(("args:", "auth:scope", "auth:bad_scope"))
        assert record.args_digest == "" if refused else HEX64.fullmatch(record.args_digest)
        known = gate.contract(tool)
        assert record.contract_hash == ("" if known is None else contract_hash(known))
        if method == "model":
            assert answer["request_id"] == record.request_id
            assert answer["ok"] is ok
            if not ok:
                assert answer["error"]["code"] == code
                assert answer["error"]["details"]["reason"] == reason
        else:
            assert answer["ok"] is ok
            assert answer["error"] == reason
    ids = [record.request_id for record in sink.records]
    assert len(set(ids)) == len(ids)
    assert all(isinstance(request_id, str) and request_id for request_id in ids)
    assert look.count == 2  # q=a and q=b; every repeat was a memo hit
    assert send.count == 1  # the repeats were replays
    digests = {(tool, json.dumps(args, sort_keys=True)): record.args_digest
               for (_, tool, args, *_), record in zip(RECORDED_CALLS, sink.records, strict=True)}
    assert digests[("look", '{"q": "a"}')] != digests[("look", '{"q": "b"}')]


def test_request_ids_differ_across_gates() -> None:
    """Two gates never hand out the same request id, so records from both can share a file."""
    sink = ListSink()
    table = {"t": {"fn": Body(), "args": {}, "returns": {"n": {"type": "int"}}}}
    first, second = Gate(table, records=sink), Gate(table, records=sink)
    for _ in range(3):
        first.call_tool("t", {})
        second.call_tool("t", {})
    ids = [record.request_id for record in sink.records]
    assert len(ids) == 6
    assert len(set(ids)) == 6


def test_records_go_to_the_calls_logger_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """With no sink, each call logs one INFO record on agtool.calls carrying agtool_record."""
    caplog.set_level(logging.INFO, logger="agtool.calls")
    body = Body()
    gate = Gate({"t": {"fn": body, "args": {"q": {"type": "str"}},
                       "returns": {"n": {"type": "int"}}}})
    gate.call_tool("t", {"q": "a"})
    answer = gate.call_for_model("t", {"q": "a"})
    gate.call_tool("t", {"q": 1})
    logged = [record for record in caplog.records if record.name == "agtool.calls"]
    assert len(logged) == 3
    for record in logged:
        assert record.levelno == logging.INFO
        assert isinstance(record.agtool_record, dict)  # type: ignore[attr-defined]
        assert set(record.agtool_record) == RECORD_FIELDS  # type: ignore[attr-defined]
        assert record.agtool_record["request_id"] in record.getMessage()  # type: ignore[attr-defined]
    as_logged = [record.agtool_record for record in logged]  # type: ignore[attr-defined]
    assert [(r["ok"], r["memo_hit"], r["reason"]) for r in as_logged] == [
        (True, False, ""), (True, True, ""), (False, False, "args:type:q")]
    assert as_logged[1]["request_id"] == answer["request_id"]
    assert body.count == 1


def test_logged_record_is_the_sink_record(caplog: pytest.LogCaptureFixture) -> None:
    """With both a sink and the logger, the logged agtool_record is the sink's record as a dict."""
    caplog.set_level(logging.INFO, logger="agtool.calls")
    sink = ListSink()
    gate = Gate({"t": {"fn": Body(), "args": {}, "returns": {"n": {"type": "int"}}}},
                records=sink)
    gate.call_tool("t", {})
    gate.call_for_model("t", {"x": 1})
    logged = [record.agtool_record for record in caplog.records  # type: ignore[attr-defined]
              if record.name == "agtool.calls"]
    assert logged == [record.as_dict() for record in sink.records]
    assert len(logged) == 2


@pytest.mark.parametrize("exc", [RuntimeError("sink down"), OSError("disk full"), KeyError("k")])
def test_a_raising_sink_does_not_break_the_call(exc: Exception,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """A sink that raises leaves each call's answer intact and is logged on agtool."""
    caplog.set_level(logging.ERROR, logger="agtool")
    body = Body()
    gate = Gate({"t": {"fn": body, "args": {}, "returns": {"n": {"type": "int"}}}},
                records=_raises(exc))
    assert gate.call_tool("t", {}) == {"ok": True, "value": {"n": 1}, "error": ""}
    answer = gate.call_for_model("t", {})
    assert answer["ok"] is True
    assert answer["data"] == {"n": 1}
    assert gate.call_tool("t", {"x": 1})["error"] == "args:unexpected:x"
    assert body.count == 1
    errors = [record for record in caplog.records
              if record.name == "agtool" and record.levelno == logging.ERROR]
    assert len(errors) == 3


# -- JsonLinesSink -------------------------------------------------------------------------------


def test_json_lines_sink_writes_one_object_per_line(tmp_path: Path) -> None:
    """JsonLinesSink appends one JSON object per call, equal to the record, after what was there."""
    path = tmp_path / "calls.jsonl"
    path.write_text('{"earlier": true}\n', encoding="utf-8")
    file_sink, kept = JsonLinesSink(path), ListSink()

    def both(record: CallRecord) -> None:
        kept(record)
        file_sink(record)

    table = {"재고": {"fn": Body(), "args": {"q": {"type": "str"}},
                     "returns": {"n": {"type": "int"}}}}
    gate = Gate(table, records=both)
    gate.call_tool("재고", {"q": "a"})
    gate.call_for_model("재고", {"q": "a"})
    gate.call_tool("재고", {})
    gate.call_for_model("nope", {})

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert text.endswith("\n")
    assert lines[0] == '{"earlier": true}'
    rows = [json.loads(line) for line in lines[1:]]
    assert len(rows) == 4
    for row, record in zip(rows, kept.records, strict=True):
        assert isinstance(row, dict)
        assert set(row) == RECORD_FIELDS
        assert row == record.as_dict()
    assert [row["memo_hit"] for row in rows] == [False, True, False, False]
    assert [row["code"] for row in rows] == ["", "", "INVALID_ARGUMENT", "UNKNOWN_TOOL"]
    assert "재고" in text  # written as text, not \\u escapes


def test_json_lines_sink_accepts_a_str_path(tmp_path: Path) -> None:
    """A str path works as well as a Path, and the file is created on the first record."""
    path = tmp_path / "new.jsonl"
    gate = Gate({"t": {"fn": Body(), "args": {}, "returns": {"n": {"type": "int"}}}},
                records=JsonLinesSink(str(path)))
    assert not path.exists()
    gate.call_tool("t", {})
    [row] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert row["tool"] == "t"
    assert row["ok"] is True


# -- args_digest ---------------------------------------------------------------------------------

DIGEST_ARGS: dict[str, Any] = {
    "user": {"type": "str"},
    "limit": {"type": "int", "required": False},
    "password": {"type": "str", "sensitive": True},
    "tokens": {"type": "list", "required": False, "item": {"type": "str", "sensitive": True}},
    "cards": {"type": "list", "required": False,
              "item": {"number": {"type": "str", "sensitive": True}, "label": {"type": "str"}}},
}


def digest_of(args: dict[str, Any]) -> str:
    """The args_digest of the record of one call with ``args`` (on a fresh gate)."""
    sink = ListSink()
    gate = Gate({"t": {"fn": Body(), "args": DIGEST_ARGS, "returns": {"n": {"type": "int"}}}},
                records=sink, secret=SECRET)
    gate.call_tool("t", args)
    [record] = sink.records
    return record.args_digest


BASE = {"user": "ann", "limit": 3, "password": "pw-one", "tokens": ["tok-a", "tok-b"],
        "cards": [{"number": "4111-1", "label": "main"}]}


def test_args_digest_ignores_key_order() -> None:
    """The same args in another key order (nested dicts too) give the same digest."""
    reordered = {"cards": [{"label": "main", "number": "4111-1"}],
                 "tokens": ["tok-a", "tok-b"], "password": "pw-one", "limit": 3, "user": "ann"}
    assert list(reordered) != list(BASE)
    assert digest_of(reordered) == digest_of(BASE)


@pytest.mark.parametrize("changed", [
    pytest.param({**BASE, "user": "bob"}, id="user"),
    pytest.param({**BASE, "limit": 4}, id="limit"),
    pytest.param({**BASE, "cards": [{"number": "4111-1", "label": "spare"}]}, id="nested-label"),
    pytest.param({**BASE, "tokens": ["tok-a"]}, id="sensitive-list-length"),
    pytest.param({k: v for k, v in BASE.items() if k != "limit"}, id="optional-dropped"),
])
def test_args_digest_changes_with_a_non_sensitive_arg(changed: dict[str, Any]) -> None:
    """Changing what is not sensitive (a value, a nested label, how many items) changes it."""
    assert digest_of(changed) != digest_of(BASE)


@pytest.mark.parametrize("changed", [
    pytest.param({**BASE, "password": "pw-two"}, id="top-level"),
    pytest.param({**BASE, "tokens": ["tok-x", "tok-y"]}, id="list-items"),
    pytest.param({**BASE, "cards": [{"number": "5500-9", "label": "main"}]}, id="item-key"),
    pytest.param({**BASE, "password": REDACTED}, id="the-redaction-text-itself"),
])
def test_args_digest_ignores_sensitive_values(changed: dict[str, Any]) -> None:
    """Changing only sensitive values (top level, list items, keys of items) keeps the digest."""
    assert digest_of(changed) == digest_of(BASE)


secrets_ = st.text(string.ascii_letters + string.digits, min_size=8, max_size=16).map(
    lambda tail: MARK + tail)


@pytest.mark.slow
@given(first=secrets_, second=secrets_, user=st.text(string.ascii_lowercase, max_size=6))
def test_args_digest_is_blind_to_any_sensitive_value(first: str, second: str,
                                                     user: str) -> None:
    """Two calls differing only in sensitive values have one digest; another user another."""
    one = {"user": user, "password": first, "tokens": [first], "cards": [
        {"number": first, "label": "x"}]}
    two = {"user": user, "password": second, "tokens": [second], "cards": [
        {"number": second, "label": "x"}]}
    assert digest_of(one) == digest_of(two)
    assert digest_of({**one, "user": user + "z"}) != digest_of(one)


# -- No sensitive value leaves the gate ----------------------------------------------------------

PAY_ARGS: dict[str, Any] = {
    "card": {"type": "str", "sensitive": True, "pattern": r"[A-Za-z0-9-]{8,40}"},
    "amount": {"type": "int", "min": 1, "max": 100},
    "memo": {"type": "str", "sensitive": True, "required": False, "max_len": 30},
    "tokens": {"type": "list", "required": False, "max_len": 2,
               "item": {"type": "str", "sensitive": True}},
    "cards": {"type": "list", "required": False, "max_len": 2,
              "item": {"number": {"type": "str", "sensitive": True}, "label": {"type": "str"}}},
}
PAY_RETURNS: dict[str, Any] = {
    "receipt": {"type": "str"},
    "card": {"type": "str", "sensitive": True},
    "items": {"type": "list", "required": False,
              "item": {"number": {"type": "str", "sensitive": True}, "sku": {"type": "str"}}},
    "tokens": {"type": "list", "required": False, "item": {"type": "str", "sensitive": True}},
}

#: How a call's arguments break the contract, each with a sensitive value in play.
REFUSALS = (
    "card_pattern",  # a sensitive arg breaks its pattern
    "memo_max_len",  # a sensitive arg is too long
    "tokens_item_type",  # a list of sensitive items holds a non-str
    "tokens_max_len",  # a list of sensitive items is too long
    "cards_max_len",  # a list of dicts with a sensitive key is too long
    "cards_item_missing",  # an item with a sensitive key lacks its label
    "amount_min",  # a non-sensitive arg is refused while the secrets ride along
)


@st.composite
def pay_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    secrets = draw(st.lists(secrets_, min_size=4, max_size=4, unique=True))
    card, memo, token, number = secrets
    args: dict[str, Any] = {"card": card, "amount": draw(st.integers(1, 100))}
    if draw(st.booleans()):
        args["memo"] = memo
    if draw(st.booleans()):
        args["tokens"] = [token]
    if draw(st.booleans()):
        args["cards"] = [{"number": number, "label": "main"}]
    refusal = draw(st.one_of(st.none(), st.sampled_from(REFUSALS)))
    if refusal == "card_pattern":
        args["card"] = card + draw(st.sampled_from(["!", " ", "/x", "é"]))
    elif refusal == "memo_max_len":
        args["memo"] = memo + "-" * 30
    elif refusal == "tokens_item_type":
        args["tokens"] = [token, 7]
    elif refusal == "tokens_max_len":
        args["tokens"] = [token, memo, number]
    elif refusal == "cards_max_len":
        args["cards"] = [{"number": number, "label": "a"}, {"number": token, "label": "b"},
                         {"number": memo, "label": "c"}]
    elif refusal == "cards_item_missing":
        args["cards"] = [{"number": number}]
    elif refusal == "amount_min":
        args["amount"] = 0
    return {
        "secrets": secrets,
        "args": args,
        "refusal": refusal,
        "result": draw(st.sampled_from(["ok", "missing_receipt", "bad_item"])),
        "tool": draw(st.sampled_from(["look", "pay"])),
        "risk": draw(st.sampled_from(["reversible_write", "external_effect"])),
        "in_scope": draw(st.booleans()),
        "approved": draw(st.booleans()),
        "dry_run": draw(st.booleans()),
        "returned_secret": draw(secrets_),
    }


def pay_result(kind: str, args: dict[str, Any], secret: str) -> dict[str, Any]:
    """What the body answers: the caller's secrets and one of its own, kept or broken."""
    value: dict[str, Any] = {"receipt": "r-1", "card": args.get("card", secret),
                             "items": [{"number": secret, "sku": "a"}],
                             "tokens": [secret, *[t for t in args.get("tokens", [])
                                                  if isinstance(t, str)]]}
    if kind == "missing_receipt":
        del value["receipt"]
    elif kind == "bad_item":
        value["items"] = [{"number": secret, "sku": 5}]
    return value


def dumped(value: object) -> str:
    return json.dumps(value, default=repr, ensure_ascii=False)


@given(scenario=pay_scenarios())
def test_no_sensitive_value_reaches_records_logs_files_or_the_model(
    scenario: dict[str, Any],
) -> None:
    """No sensitive value (all drawn as SECRET-…) reaches a record, the JSON-lines file,
    the agtool logs (text and agtool_record), call_for_model's answer or a refusal.

    Secrets ride in sensitive args (top level, list items, keys of list items) and
    in sensitive returned keys (top level, list items, keys of list items), across
    success, memo hits and write replays, argument refusals that involve a
    sensitive value, refused results, scope and approval denials, and dry-run
    plans. Each scenario is called three times: call_for_model, call_tool, then
    call_for_model again. A valid, permitted, well-answered call must still
    hand the secret back to the Python caller through call_tool.
    """
    args, secret = scenario["args"], scenario["returned_secret"]
    look = Body(lambda kwargs: pay_result(scenario["result"], kwargs, secret))
    pay = Body(lambda kwargs: pay_result(scenario["result"], kwargs, secret))
    risk = scenario["risk"]
    table = {
        "look": {"fn": look, "args": PAY_ARGS, "returns": PAY_RETURNS, "risk": "read_sensitive"},
        "pay": {"fn": pay, "args": PAY_ARGS, "returns": PAY_RETURNS, "effect": "write",
                "risk": risk},
    }
    tool = scenario["tool"]
    tool_risk = "read_sensitive" if tool == "look" else risk
    scope = {tool_risk} if scenario["in_scope"] else {"read_public"}
    with tempfile.TemporaryDirectory() as folder, captured_logs() as logs:
        path = Path(folder) / "calls.jsonl"
        file_sink, kept = JsonLinesSink(path), ListSink()

        def both(record: CallRecord) -> None:
            kept(record)
            file_sink(record)

        gate = Gate(table, scope=scope, records=both)
        approvals = [gate.approve(tool, args)] if scenario["approved"] else []
        kwargs = {"run_id": "run", "step_id": "step", "approvals": approvals,
                  "dry_run": scenario["dry_run"]}
        answers = [gate.call_for_model(tool, args, **kwargs)]
        envelope = gate.call_tool(tool, args, **kwargs)
        answers.append(gate.call_for_model(tool, args, **kwargs))
        file_text = path.read_text(encoding="utf-8")

    assert len(kept.records) == 3
    assert len(file_text.splitlines()) == 3
    logged = [record.agtool_record for record in logs.records  # type: ignore[attr-defined]
              if record.name == "agtool.calls"]
    assert len(logged) == 3
    shown = {
        "records": dumped([record.as_dict() for record in kept.records]),
        "file": file_text,
        "log text": logs.text,
        "logged records": dumped(logged),
        "model answers": dumped(answers),
    }
    if scenario["dry_run"] or not envelope["ok"]:
        shown["call_tool answer"] = dumped(envelope)  # a plan or a refusal, never a value
    else:
        shown["call_tool error"] = envelope["error"]
    for where, text in shown.items():
        assert MARK not in text, f"a sensitive value reached the {where}: {text}"

    permitted = (scenario["in_scope"] and scenario["refusal"] is None
                 and (tool == "look" or risk != "external_effect" or scenario["approved"]))
    if permitted and not scenario["dry_run"] and scenario["result"] == "ok":
        # Not vacuous: the secrets did travel, and only the model's view dropped them.
        assert envelope["ok"] is True
        if tool == "pay":  # a replay of the first call: the store keeps no secret in clear
            assert envelope["value"]["card"] == REDACTED
            assert envelope["value"]["items"][0]["number"] == REDACTED
        else:
            assert envelope["value"]["card"] == args["card"]
            assert envelope["value"]["items"][0]["number"] == secret
        assert answers[0]["data"]["card"] == REDACTED


@pytest.mark.parametrize(("arg", "value"), [
    pytest.param("tokens", ["SECRET-aaaaaaaa", "SECRET-bbbbbbbb", "SECRET-cccccccc"],
                 id="list-of-sensitive-items-too-long"),
    pytest.param("cards", [{"number": "SECRET-aaaaaaaa", "label": "a"},
                           {"number": "SECRET-bbbbbbbb", "label": "b"},
                           {"number": "SECRET-cccccccc", "label": "c"}],
                 id="list-of-items-with-a-sensitive-key-too-long"),
])
def test_list_length_refusal_does_not_echo_sensitive_items(
    arg: str, value: list[Any], caplog: pytest.LogCaptureFixture,
) -> None:
    """A list argument refused for its length is not echoed when its items are sensitive.

    The message and details.fields[].issue may say how long the list may be, but
    not show the list: its items hold values the contract marks sensitive. Nor
    does the call's log (caplog.text, agtool_record) show them.
    """
    caplog.set_level(logging.DEBUG, logger="agtool")
    gate = Gate({"t": {"fn": Body(), "args": PAY_ARGS, "returns": {}}})
    answer = gate.call_for_model("t", {"card": "card-0000", "amount": 1, arg: value})
    assert answer["error"]["details"]["reason"] == f"args:max_len:{arg}"
    assert MARK not in dumped(answer), dumped(answer["error"])
    [logged] = [record for record in caplog.records if record.name == "agtool.calls"]
    assert MARK not in dumped(logged.agtool_record)  # type: ignore[attr-defined]
    assert MARK not in caplog.text


@pytest.mark.parametrize(("args", "reason"), [
    pytest.param({"card": "SECRET-abcdefgh!", "amount": 1}, "args:pattern:card", id="pattern"),
    pytest.param({"card": "card-0000", "amount": 1, "memo": "SECRET-abcdefgh" + "x" * 30},
                 "args:max_len:memo", id="max-len"),
])
def test_refusal_of_a_sensitive_arg_names_it_but_not_its_value(args: dict[str, Any],
                                                              reason: str) -> None:
    """The refusal names the argument and the rule, and shows REDACTED in place of the value."""
    gate = Gate({"t": {"fn": Body(), "args": PAY_ARGS, "returns": {}}})
    error = gate.call_for_model("t", args)["error"]
    assert error["details"]["reason"] == reason
    [field] = error["details"]["fields"]
    assert field["path"] == reason.rsplit(":", 1)[1]
    assert REDACTED in field["issue"]
    assert MARK not in dumped(error)


# -- Contract hash -------------------------------------------------------------------------------


_OTHER_RUNS: list[int] = []


def _other_fn(**kwargs: Any) -> dict[str, Any]:
    """Another body for the same contract: counts its runs in ``_OTHER_RUNS``."""
    _OTHER_RUNS.append(1)
    return {"n": 1}


HASH_ENTRY: dict[str, Any] = {
    "args": {"limit": {"type": "int", "max": 5}},
    "returns": {"n": {"type": "int"}},
}


def _replace(key: str, value: object) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda entry: {**entry, key: value}


# Changes of meaning: each must give a new hash and forget what the old contract remembered.
CHANGES = [
    pytest.param(_replace("args", {"limit": {"type": "int", "max": 6}}), id="max"),
    pytest.param(_replace("args", {"limit": {"type": "int", "max": 5, "sensitive": True}}),
                 id="sensitive"),
    pytest.param(_replace("args", {"limit": {"type": "int", "max": 5, "required": False}}),
                 id="required"),
    pytest.param(_replace("returns", {"n": {"type": "int", "min": 0}}), id="returns-min"),
    pytest.param(_replace("returns", {"n": {"type": "int"}, "m": {"type": "int",
                                                                  "required": False}}),
                 id="returns-key"),
    pytest.param(_replace("description", "counts things"), id="description"),
    pytest.param(_replace("risk", "read_sensitive"), id="risk"),
    pytest.param(_replace("source", "web"), id="source"),
    pytest.param(_replace("timeout", 5), id="timeout"),
    pytest.param(_replace("fn", _other_fn), id="fn"),
]


def hash_gate(body: Callable[..., Any]) -> tuple[Gate, dict[str, Any], ListSink]:
    table = {"t": {"fn": body, **copy.deepcopy(HASH_ENTRY)}}
    sink = ListSink()
    return Gate(table, scope={"read_public", "read_sensitive"}, records=sink), table, sink


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_contract_has_a_new_hash_and_runs_again(
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """A changed contract gets a new hash and cache key, and the next call runs, not hits."""
    runs: list[int] = []

    def body(**kwargs: Any) -> dict[str, Any]:
        runs.append(1)
        return {"n": 1}

    gate, table, sink = hash_gate(body)
    args = {"limit": 1}
    other_before = len(_OTHER_RUNS)
    gate.call_tool("t", args)
    gate.call_tool("t", args)
    assert len(runs) == 1  # the repeat was a memo hit
    old_hash = contract_hash(gate.contract("t"))  # type: ignore[arg-type]
    old_key = gate.cache_key("t", args)

    table["t"] = change(table["t"])
    new_hash = contract_hash(gate.contract("t"))  # type: ignore[arg-type]
    new_key = gate.cache_key("t", args)
    assert new_hash != old_hash
    assert new_key != old_key
    assert new_hash in new_key  # type: ignore[operator]
    assert old_hash in old_key  # type: ignore[operator]

    envelope = gate.call_tool("t", args)
    assert envelope["ok"], envelope
    # Ran again (this body or the swapped-in one): nothing the old contract remembered answered.
    assert len(runs) + len(_OTHER_RUNS) - other_before == 2
    assert [record.memo_hit for record in sink.records] == [False, True, False]
    assert [record.contract_hash for record in sink.records] == [old_hash, old_hash, new_hash]


@pytest.mark.parametrize("key", ["args", "returns"])
def test_an_equal_contract_in_new_dicts_keeps_its_hash_but_forgets_the_memo(key: str) -> None:
    """An entry's args or returns replaced by an equal copy: same hash, body runs again.

    The hash says what the contract declares, so an equal declaration keeps it;
    the gate still recompiles the replaced entry and drops what it remembered.
    """
    body = Body()
    gate, table, sink = hash_gate(body)
    gate.call_tool("t", {"limit": 1})
    old_hash = contract_hash(gate.contract("t"))  # type: ignore[arg-type]
    table["t"][key] = copy.deepcopy(table["t"][key])
    assert contract_hash(gate.contract("t")) == old_hash  # type: ignore[arg-type]
    gate.call_tool("t", {"limit": 1})
    assert body.count == 2
    assert [record.memo_hit for record in sink.records] == [False, False]


def test_an_in_place_change_is_seen_after_refresh() -> None:
    """A bound changed inside the entry's own dict gives a new hash after refresh(); runs again."""
    body = Body()
    gate, table, sink = hash_gate(body)
    gate.call_tool("t", {"limit": 1})
    old_hash = contract_hash(gate.contract("t"))  # type: ignore[arg-type]
    table["t"]["args"]["limit"]["max"] = 6
    gate.refresh()
    new_hash = contract_hash(gate.contract("t"))  # type: ignore[arg-type]
    assert new_hash != old_hash
    assert new_hash in gate.cache_key("t", {"limit": 1})  # type: ignore[operator]
    gate.call_tool("t", {"limit": 1})
    assert body.count == 2
    assert sink.records[-1].contract_hash == new_hash
    assert sink.records[-1].memo_hit is False


def test_contract_hash_is_a_function_of_the_declaration() -> None:
    """Two gates over equal tables agree on the hash; a short hex string, stable across calls."""
    first, _, _ = hash_gate(_other_fn)
    second, _, _ = hash_gate(_other_fn)
    one = contract_hash(first.contract("t"))  # type: ignore[arg-type]
    assert one == contract_hash(second.contract("t"))  # type: ignore[arg-type]
    assert re.fullmatch(r"[0-9a-f]+", one)
    assert first.cache_key("t", {"limit": 1}) == second.cache_key("t", {"limit": 1})


def test_cache_keys_of_two_hashes_never_meet() -> None:
    """Hash is in the key: the same args under two contracts give two keys."""
    gate, table, _ = hash_gate(_other_fn)
    before = gate.cache_key("t", {"limit": 1})
    table["t"] = {**table["t"], "description": "changed"}
    after = gate.cache_key("t", {"limit": 1})
    assert before != after


# -- What a model is told about output -----------------------------------------------------------

MODEL_RETURNS: dict[str, Any] = {
    "title": {"type": "str"},
    "token": {"type": "str", "sensitive": True},
    "rows": {"type": "list", "item": {"id": {"type": "str"},
                                      "ssn": {"type": "str", "sensitive": True}}},
    "keys": {"type": "list", "item": {"type": "str", "sensitive": True}},
}
FULL_VALUE: dict[str, Any] = {
    "title": "t", "token": "tok-1", "rows": [{"id": "a", "ssn": "111"}, {"id": "b", "ssn": "222"}],
    "keys": ["k1", "k2"], "extra": "undeclared",
}
REDACTED_VALUE: dict[str, Any] = {
    "title": "t", "token": REDACTED,
    "rows": [{"id": "a", "ssn": REDACTED}, {"id": "b", "ssn": REDACTED}],
    "keys": [REDACTED, REDACTED], "extra": "undeclared",
}


def model_gate(body: Body, **entry: Any) -> Gate:
    return Gate({"fetch": {"fn": body, "args": {"url": {"type": "str"}},
                           "returns": MODEL_RETURNS, **entry}})


@pytest.mark.parametrize(("entry", "origin", "trust"), [
    pytest.param({"source": "web"}, "web", "untrusted", id="web-defaults-untrusted"),
    pytest.param({}, "internal", "trusted", id="internal-defaults-trusted"),
    pytest.param({"source": "web", "trust": "trusted"}, "web", "trusted",
                 id="web-declared-trusted"),
    pytest.param({"source": "internal", "trust": "untrusted"}, "internal", "untrusted",
                 id="internal-declared-untrusted"),
])
def test_model_is_told_the_source_and_trust(entry: dict[str, Any], origin: str,
                                            trust: str) -> None:
    """source names tool, origin and trust; only untrusted output carries UNTRUSTED_NOTE."""
    gate = model_gate(Body(lambda kwargs: copy.deepcopy(FULL_VALUE)), **entry)
    expected: dict[str, Any] = {"tool": "fetch", "origin": origin, "trust": trust}
    if trust == "untrusted":
        expected["note"] = UNTRUSTED_NOTE
    for _ in range(2):  # a miss, then a memo hit
        answer = gate.call_for_model("fetch", {"url": "u"})
        assert set(answer) == {"ok", "data", "source", "request_id"}
        assert answer["ok"] is True
        assert answer["source"] == expected


def test_untrusted_note_is_the_documented_text() -> None:
    """The note handed with untrusted output tells the model it is data, not instructions."""
    assert agtool.UNTRUSTED_NOTE == UNTRUSTED_NOTE
    assert "instructions" in UNTRUSTED_NOTE


@pytest.mark.parametrize("source", ["web", "internal"])
def test_sensitive_returned_keys_are_redacted_for_the_model_only(source: str) -> None:
    """call_for_model redacts sensitive keys (top level, list items, item keys); call_tool not."""
    body = Body(lambda kwargs: copy.deepcopy(FULL_VALUE))
    gate = model_gate(body, source=source)
    first = gate.call_for_model("fetch", {"url": "u"})
    assert first["data"] == REDACTED_VALUE
    envelope = gate.call_tool("fetch", {"url": "u"})  # a memo hit: the memo kept it whole
    assert envelope["value"] == FULL_VALUE
    again = gate.call_for_model("fetch", {"url": "u"})
    assert again["data"] == REDACTED_VALUE
    assert body.count == 1


def test_failure_answers_carry_no_data_or_source() -> None:
    """A failed call_for_model answer has only ok, error and request_id."""
    gate = model_gate(Body(lambda kwargs: {"title": 1}), source="web")
    answer = gate.call_for_model("fetch", {"url": "u"})
    assert set(answer) == {"ok", "error", "request_id"}
    assert set(answer["error"]) == {"code", "retryable", "message", "details"}


@pytest.mark.parametrize("upstream_page", [
    pytest.param("<p>card {card} declined for {holder}</p>", id="both-values"),
    pytest.param("<pre>{{\"items\": [\"{item}\"]}}</pre>", id="a-value-inside-a-list-item"),
])
def test_an_upstream_page_echoing_a_sensitive_value_is_scrubbed(upstream_page: str) -> None:
    """An error page that repeats what it was sent reaches the model with those values redacted."""
    secrets = {"card": MARK + "card4242", "holder": MARK + "holder", "item": MARK + "item01"}
    page = upstream_page.format(**secrets)

    def declined(**args: Any) -> Any:
        raise UpstreamError(402, page)

    gate = Gate({"pay": {
        "fn": declined,
        "args": {"card": {"type": "str", "sensitive": True}, "holder": {"type": "dict",
                                                                          "sensitive": True},
                 "items": {"type": "list", "item": {"code": {"type": "str", "sensitive": True}}}},
        "returns": {}}})
    args = {"card": secrets["card"], "holder": {"name": secrets["holder"]},
            "items": [{"code": secrets["item"]}]}
    answer = gate.call_for_model("pay", args)
    excerpt = answer["error"]["details"]["raw_excerpt"]
    assert MARK not in json.dumps(answer)
    assert excerpt.count(REDACTED) == sum(secret in page for secret in secrets.values())


def test_scrub_finds_sensitive_values_wherever_the_contract_puts_them() -> None:
    """Sensitive list items, values inside a sensitive dict or list, and numbers are all scrubbed;
    values of arguments not marked sensitive are left alone."""
    gate = Gate({"t": {"fn": lambda **_: {}, "returns": {}, "args": {
        "pins": {"type": "list", "item": {"type": "str", "sensitive": True}},
        "vault": {"type": "dict", "sensitive": True},
        "amount": {"type": "int", "sensitive": True},
        "huge": {"type": "int", "sensitive": True},
        "note": {"type": "str"},
    }}})
    contract = gate.contract("t")
    huge = 10 ** 5000  # too long to print: it cannot be in any text either
    args = {"pins": ["pin-1111", "pin-2222"], "vault": {"keys": ["vk-9", {"x": "vk-8"}]},
            "amount": 424242, "huge": huge, "note": "plain-note"}
    text = "pin-1111 pin-2222 vk-9 vk-8 424242 plain-note"
    assert scrub(text, contract, args) == " ".join([REDACTED] * 5 + ["plain-note"])
    assert scrub(text, contract, ["not", "a", "dict"]) == text
    assert scrub(text, None, args) == text


def test_scrub_ends_on_a_sensitive_value_that_contains_itself() -> None:
    """A sensitive dict that holds itself is walked to a bounded depth, never forever."""
    cyclic: dict[str, Any] = {"token": "tok-cycle"}
    cyclic["self"] = cyclic
    gate = Gate({"t": {"fn": lambda **_: {}, "returns": {},
                       "args": {"blob": {"type": "dict", "sensitive": True}}}})
    assert scrub("id tok-cycle", gate.contract("t"), {"blob": cyclic}) == f"id {REDACTED}"


def test_unkeyable_arguments_cannot_be_approved() -> None:
    """Args with no canonical form (a set inside a free-form dict) have no digest: no
    ``repr`` stands in for one, so an approval of one such call covers none, not even itself."""
    body = Body()
    gate = Gate({"t": {"fn": body, "returns": {}, "effect": "write",
                       "risk": "irreversible", "args": {"opts": {"type": "dict"}}}},
                scope={"irreversible"})
    first, second = {"opts": {"ids": {1, 2}}}, {"opts": {"ids": {3}}}
    assert gate.cache_key("t", first) is None  # what makes this case: no exact key
    approval = gate.approve("t", first)
    assert approval.args_digest == "" == gate.approve("t", second).args_digest
    call = {"run_id": "r", "step_id": "s", "approvals": [approval]}
    assert gate.call_tool("t", second, **call)["error"] == "auth:approval"
    assert gate.call_tool("t", first, **call)["error"] == "auth:approval"
    assert body.count == 0


def test_returned_lists_are_redacted_item_by_item_and_kept_otherwise() -> None:
    """Sensitive item specs redact each item; other lists (of scalars, of untyped dicts) are
    handed to the model as they are."""
    value = {"pins": ["1111", "2222"], "tags": ["a", "b"], "raw": [{"k": 1}],
             "rows": [{"name": "ann", "phone": "010"}]}
    gate = Gate({"t": {"fn": lambda: copy.deepcopy(value), "args": {}, "returns": {
        "pins": {"type": "list", "item": {"type": "str", "sensitive": True}},
        "tags": {"type": "list", "item": {"type": "str"}},
        "raw": {"type": "list"},
        "rows": {"type": "list", "item": {"name": {"type": "str"},
                                          "phone": {"type": "str", "sensitive": True}}},
    }}})
    assert gate.call_for_model("t", {})["data"] == {
        "pins": [REDACTED, REDACTED], "tags": ["a", "b"], "raw": [{"k": 1}],
        "rows": [{"name": "ann", "phone": REDACTED}]}


def test_scrub_redacts_a_longer_secret_before_one_inside_it() -> None:
    """When one sensitive value contains another, no part of the longer one is left behind."""
    gate = Gate({"t": {"fn": lambda **_: {}, "returns": {}, "args": {
        "short": {"type": "str", "sensitive": True},
        "long": {"type": "str", "sensitive": True}}}})
    for short, long in (("abc", "abcdef"), ("zz", "azzb")):  # by length, not by letter
        args = {"short": short, "long": long}
        assert scrub(f"x {long} y", gate.contract("t"), args) == f"x {REDACTED} y"


def test_contract_hash_does_not_depend_on_the_order_specs_were_written() -> None:
    """The same arguments declared in another order are the same contract."""
    def entry(args: dict[str, Any]) -> dict[str, Any]:
        return {"t": {"fn": len, "args": args, "returns": {}}}

    one = {"a": {"type": "int"}, "b": {"type": "str"}}
    other = dict(reversed(list(one.items())))
    assert list(one) != list(other)
    first, second = Gate(entry(one)).contract("t"), Gate(entry(other)).contract("t")
    assert first is not None
    assert second is not None
    assert contract_hash(first) == contract_hash(second)


def test_latency_covers_the_body() -> None:
    """A body that sleeps 30 ms cannot be recorded as faster (a lower bound: no timing race)."""
    sink = ListSink()
    gate = Gate({"t": {"fn": lambda: time.sleep(0.03) or {}, "args": {}, "returns": {}}},
                records=sink)
    gate.call_tool("t", {})
    [record] = sink.records
    assert 30 <= record.latency_ms < 60_000


def test_a_call_to_a_name_that_is_not_a_str_is_recorded_by_its_type() -> None:
    """The record names the type of what the caller sent, never its repr (which may raise)."""
    sink = ListSink()
    gate = Gate({}, records=sink)
    gate.call_tool(42, {})
    gate.call_tool(10**5000, {})
    assert [record.tool for record in sink.records] == ["<int>", "<int>"]


def test_a_recorded_call_keeps_its_scope_and_echo() -> None:
    """With a sink, a call's own scope and echo values still decide it."""
    sink = ListSink()
    gate = Gate({"t": {"fn": lambda **_: {}, "returns": {}, "risk": "read_sensitive",
                       "args": {"rid": {"type": "str", "echo": True}}}}, records=sink)
    assert gate.call_tool("t", {"rid": "r-1"}, {"rid": "r-1"}, scope={"read_sensitive"})["ok"]
    assert gate.call_tool("t", {"rid": "r-1"}, {"rid": "r-2"}, scope={"read_sensitive"})[
        "error"] == "args:echo:rid"
    answer = gate.call_for_model("t", {"rid": "r-1"}, {"rid": "r-2"}, scope={"read_sensitive"})
    assert answer["error"]["details"]["reason"] == "args:echo:rid"
    assert gate.call_for_model("t", {"rid": "r-1"}, {"rid": "r-1"}, scope={"read_sensitive"})[
        "ok"] is True
    assert [record.reason for record in sink.records] == ["", "args:echo:rid", "args:echo:rid",
                                                           ""]


def test_request_ids_are_numbered_per_gate_under_a_random_prefix() -> None:
    """``req_<8 hex>_<n>``: the prefix tells gates (and processes) apart, n counts from 1."""
    sink = ListSink()
    gate = Gate({"t": {"fn": lambda **_: {}, "args": {}, "returns": {}, "timeout": 5}},
                records=sink)
    gate.call_tool("t", {})
    gate.call_tool("t", {})  # a memo hit of a read with a timeout
    first, second = (record.request_id for record in sink.records)
    match = re.fullmatch(r"(req_[0-9a-f]{8}_)(\d+)", first)
    assert match is not None
    assert (match.group(2), second) == ("1", match.group(1) + "2")
    assert [record.memo_hit for record in sink.records] == [False, True]


def test_json_lines_are_written_with_sorted_keys(tmp_path: Path) -> None:
    """Each line lists its fields in one order, so lines diff and grep alike."""
    path = tmp_path / "calls.jsonl"
    gate = Gate({"t": {"fn": lambda **_: {}, "args": {}, "returns": {}}},
                records=JsonLinesSink(path))
    gate.call_tool("t", {})
    [line] = path.read_text("utf-8").splitlines()
    assert list(json.loads(line)) == sorted(RECORD_FIELDS)


# -- record_call: the gate's one record step -----------------------------------------------------


def reference_record(request_id: str, name: object, contract: ToolContract | None,
                     contract_hash: str, outcome: Outcome, latency_ms: float) -> CallRecord:
    """The record the gate built before ``record_call``, the long way, field by field."""
    envelope = outcome.envelope
    reason = envelope["error"]
    return CallRecord(
        request_id=request_id, tool=shown_tool(name), ok=envelope["ok"],
        code=error_code(reason), reason=reason, latency_ms=round(latency_ms, 3),
        memo_hit=outcome.how == HIT, replayed=outcome.how == REPLAY,
        args_digest="" if outcome.args is None else args_digest(KEYS, contract, outcome.args),
        contract_hash="" if contract is None else contract_hash)


def record_as_gate(sink: Any, request_id: str, name: object,
                   contract: ToolContract | None, contract_hash: str, outcome: Outcome,
                   latency_ms: float) -> None:
    """``record_call`` as the gate calls it for a tool with ``contract``."""
    redact = contract if contract is not None and marks_sensitive(contract.args) else None
    record_call(sink, request_id, shown_tool(name), "" if contract is None else contract_hash,
                redact, error_code(outcome.envelope["error"]), outcome, latency_ms, KEYS)


def same_record(one: CallRecord, other: CallRecord) -> bool:
    """Equal field by field, and of one type each: NaN and -0.0 latencies count as written."""
    return repr(one.as_dict()) == repr(other.as_dict()) and all(
        type(getattr(one, field)) is type(getattr(other, field)) for field in RECORD_FIELDS)


def record_contracts() -> list[ToolContract | None]:
    """No contract; one without sensitive args; one with them at the top, in items, in keys."""
    plain = Gate({"t": {"fn": Body(), "returns": {}, "args": {
        "q": {"type": "str"}, "n": {"type": "int", "required": False},
        "rows": {"type": "list", "required": False, "item": {"id": {"type": "str"}}}}}})
    private = Gate({"t": {"fn": Body(), "args": DIGEST_ARGS, "returns": {}}})
    return [None, plain.contract("t"), private.contract("t")]


CONTRACTS = record_contracts()


class Colour(enum.Enum):
    RED = 1


class Label(str):
    pass


#: Scalars that the digest's canonical form must tell apart: 1, 1.0 and True; 0.0 and -0.0;
#: NaN; ints too long for orjson; lone surrogates; str subclasses and enums.
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(),
    st.sampled_from([0, 1, -1, 2**63, -(2**64), 10**400, 1.0, 0.0, -0.0, math.nan, math.inf,
                     -math.inf, 1e300, 5e-324, "", "1", "\ud800", "a\udfff", "[redacted]"]),
    st.floats(), st.text(max_size=8),
    st.sampled_from([Label("x"), Colour.RED, (1, 2), frozenset({1})]),
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=4), st.sampled_from([1, True])), inner,
                        max_size=3)),
    max_leaves=8,
)
#: Args as a gate's snapshot may hold them, with the names the test contracts declare.
record_args = st.dictionaries(
    st.one_of(st.sampled_from(["q", "n", "rows", "user", "password", "tokens", "cards"]),
              st.text(max_size=4)),
    st.one_of(json_like, st.lists(st.fixed_dictionaries(
        {"number": json_like, "label": json_like, "id": json_like}), max_size=2)),
    max_size=5)


@given(contract=st.sampled_from(CONTRACTS), args=st.one_of(record_args, json_like))
@example(contract=None, args={"sku": "A100", "region": "seoul", "limit": 2})
@example(contract=None, args={"a": 1, "b": True, "c": 1.0, "d": -0.0, "e": None})
@example(contract=None, args={"a": 10**400})
@example(contract=None, args={"a": math.nan})
@example(contract=None, args={"a": "\ud800"})
@example(contract=None, args={"a": "it's \"quoted\" \\ \x7f \n 재고"})
@example(contract=None, args={1: "a"})
@example(contract=CONTRACTS[2], args={"password": "pw", "user": "ann", "limit": 3})
def test_record_digest_is_args_digest(contract: ToolContract | None, args: Any) -> None:
    """The record's short way to the digest gives args_digest's hex string, byte for byte,
    for every JSON-like value (and some that are not), redacted or not."""
    expected = args_digest(KEYS, contract, args)
    assert _record_digest(KEYS, contract, args) == expected
    assert _record_digest(KEYS, contract, args) == expected  # the second time, from what it kept
    if contract is None:
        assert expected == KEYS.digest(args)


@given(secret=secrets_, user=st.text(string.ascii_lowercase, max_size=6))
def test_remembered_digests_hold_no_sensitive_value(secret: str, user: str) -> None:
    """What the digest step keeps for the next memo hit is the redacted args' text only."""
    contract = CONTRACTS[2]
    assert _record_digest(KEYS, contract, {"user": user, "password": secret}) == args_digest(
        KEYS, contract, {"user": user, "password": secret})
    assert KEYS.recent  # the step did keep something, and it is not the secret
    assert not any(MARK.encode() in text for text in KEYS.recent)


outcomes = st.builds(
    lambda ok, reason, how, args: Outcome(
        {"ok": ok, "value": None, "error": "" if ok else reason}, how, None, args),
    st.booleans(),
    st.sampled_from(["args:max_len:q", "args:unknown_tool", "upstream:503", "upstream:404",
                     "raised:KeyError", "auth:approval", "timeout", "result:empty", "odd"]),
    st.sampled_from([ANSWERED, HIT, REPLAY, PLAN]),
    st.one_of(st.none(), record_args),
)
names = st.one_of(st.sampled_from(["t", "stock_lookup", "재고", "x" * 64, "x" * 65, "a\nb",
                                   "\u2028", "", 42, None, 10**5000]), st.text(max_size=70))
#: Latencies near a tie of rounding to the microsecond, where it is easiest to get wrong:
#: n + 0.5 microseconds, and the floats either side of it.
near_ties = st.builds(lambda n, d: math.nextafter((n + 0.5) / 1000, math.inf * d),
                      st.integers(0, 10**9), st.sampled_from([-1, 0, 1]))
latencies = st.one_of(
    st.floats(), near_ties,
    st.sampled_from([0.0, -0.0, -0.0004, 0.0005, 0.0015, 0.0025, 2.675, 1e-9, 999_999.9995,
                     1e6, 1e20, 3]),
)


@given(outcome=outcomes, name=names, contract=st.sampled_from(CONTRACTS), latency=latencies)
def test_record_call_records_what_the_gate_recorded(outcome: Outcome, name: object,
                                                    contract: ToolContract | None,
                                                    latency: float) -> None:
    """record_call hands a sink the record the gate's long way built, field for field, writes
    it to a JsonLinesSink as the same bytes, and logs it at INFO as the same message."""
    chash = "" if contract is None else contract_hash(contract)
    expected = reference_record("req_1", name, contract, chash, outcome, latency)
    kept = ListSink()
    with tempfile.TemporaryDirectory() as folder, captured_logs(logging.INFO) as logs:
        path = Path(folder) / "calls.jsonl"
        file_sink = JsonLinesSink(path)
        record_as_gate(kept, "req_1", name, contract, chash, outcome, latency)
        record_as_gate(file_sink, "req_1", name, contract, chash, outcome, latency)
        file_sink(expected)  # the sink's own path, for a record built elsewhere
        file_sink.close()
        lines = path.read_bytes().splitlines(keepends=True)
    [record] = kept.records
    assert type(record) is CallRecord
    assert same_record(record, expected), (record, expected)
    old_line = orjson.dumps(expected.as_dict(), option=orjson.OPT_SORT_KEYS) + b"\n"
    assert lines == [old_line, old_line]
    logged = [entry for entry in logs.records if entry.name == "agtool.calls"]
    assert len(logged) == 2
    for entry in logged:
        assert entry.levelno == logging.INFO
        assert entry.getMessage() == " ".join(
            [expected.request_id, expected.tool, expected.reason or "ok"])
        assert repr(entry.agtool_record) == repr(expected.as_dict())  # type: ignore[attr-defined]


def test_record_call_logs_only_when_the_logger_listens(caplog: pytest.LogCaptureFixture) -> None:
    """Below INFO nothing is logged and the sink still gets its record; a raising sink raises."""
    caplog.set_level(logging.WARNING, logger="agtool.calls")
    outcome = Outcome({"ok": True, "value": 1, "error": ""}, HIT, None, {"q": "a"})
    kept = ListSink()
    record_as_gate(kept, "req_1", "t", None, "", outcome, 1.0)
    record_as_gate(None, "req_2", "t", None, "", outcome, 1.0)
    assert [entry for entry in caplog.records if entry.name == "agtool.calls"] == []
    assert [record.request_id for record in kept.records] == ["req_1"]

    def full(record: CallRecord) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        record_as_gate(full, "req_3", "t", None, "", outcome, 1.0)


def test_a_record_from_record_call_is_an_ordinary_frozen_call_record() -> None:
    """Equal, hashed and shown as the record built by its constructor; immutable; a dataclass."""
    outcome = Outcome({"ok": False, "value": None, "error": "args:max_len:q"}, ANSWERED, None,
                      {"q": "long"})
    kept = ListSink()
    record_as_gate(kept, "req_1", "t", None, "", outcome, 2.5)
    [record] = kept.records
    built = CallRecord(**record.as_dict())
    assert record == built
    assert hash(record) == hash(built)
    assert repr(record) == repr(built)
    assert dataclasses.asdict(record) == record.as_dict()
    assert dataclasses.replace(record, ok=True).ok is True
    assert list(record.as_dict()) == [field.name for field in dataclasses.fields(CallRecord)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.ok = True  # type: ignore[misc]
    assert record.ok is False
    assert record.code == "INVALID_ARGUMENT"


def test_json_lines_sink_is_whole_lines_across_threads_and_closes(tmp_path: Path) -> None:
    """Threads writing through record_call and the sink itself, while another closes the file
    again and again, leave one whole JSON line per record and lose none."""
    path = tmp_path / "calls.jsonl"
    sink = JsonLinesSink(path)
    outcome = Outcome({"ok": True, "value": 1, "error": ""}, HIT, None, {"q": "a" * 300})
    writers, each = 4, 200
    done = threading.Event()

    def write(number: int) -> None:
        for count in range(each):
            request_id = f"req_{number}_{count}"
            if count % 2:
                record_as_gate(sink, request_id, "t", None, "", outcome, 1.0)
            else:
                sink(reference_record(request_id, "t", None, "", outcome, 1.0))

    def close_again() -> None:
        while not done.is_set():
            sink.close()

    closer = threading.Thread(target=close_again)
    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    closer.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    closer.join()
    sink.close()
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert sorted(row["request_id"] for row in rows) == sorted(
        f"req_{number}_{count}" for number in range(writers) for count in range(each))


class ShortWrites:
    """A file that takes at most ``step`` bytes per write (none once ``step`` is 0)."""

    def __init__(self, step: int) -> None:
        self.step, self.data, self.closed, self.name = step, b"", False, "short"

    def write(self, data: bytes) -> int:
        taken = bytes(data[:self.step])
        self.data += taken
        return len(taken)

    def close(self) -> None:
        self.closed = True


def test_json_lines_sink_finishes_a_short_write(tmp_path: Path) -> None:
    """A write that takes part of a line is followed by the rest; one that takes none raises."""
    sink = JsonLinesSink(tmp_path / "calls.jsonl")
    record = reference_record("req_1", "t", None, "", Outcome(
        {"ok": True, "value": 1, "error": ""}), 1.0)
    out = ShortWrites(7)
    sink._out = out  # type: ignore[assignment]
    sink(record)
    assert out.data == orjson.dumps(record.as_dict(), option=orjson.OPT_SORT_KEYS) + b"\n"
    sink._out = ShortWrites(0)  # type: ignore[assignment]
    with pytest.raises(OSError, match="cut short"):
        sink(record)
