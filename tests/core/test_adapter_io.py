"""What every framework adapter reads from a model and hands back to it."""

from __future__ import annotations

import json

import pytest

from agtool._adapter_io import answer_text, model_args


@pytest.mark.parametrize(("raw", "read"), [
    pytest.param('{"limit": "5"}', {"limit": "5"}, id="a str stays a str"),
    pytest.param('{"limit": true}', {"limit": True}, id="a bool stays a bool"),
    pytest.param('{"n": 99999999999999999999999}', {"n": 99999999999999999999999},
                 id="a big int stays an int"),
    pytest.param('{"n": 1.0}', {"n": 1.0}, id="a float stays a float"),
    pytest.param(b'{"a": 1}', {"a": 1}, id="bytes"),
    pytest.param("", {}, id="empty is no args"),
    pytest.param("not json", "not json", id="not JSON stays text"),
    pytest.param(b"\xff", b"\xff", id="not UTF-8 stays bytes"),
    pytest.param("[" * 100_000, "[" * 100_000, id="too deep stays text"),
    pytest.param({"a": 1}, {"a": 1}, id="a dict as given"),
])
def test_model_args_reads_json_without_coercing_anything(raw: object, read: object) -> None:
    """The model's JSON is parsed exactly; what is not JSON is left for the gate to refuse."""
    got = model_args(raw)
    assert got == read
    assert type(got) is type(read)
    if isinstance(read, dict):
        assert all(type(got[key]) is type(value) for key, value in read.items())


def test_answer_text_never_raises() -> None:
    """Values JSON lacks are written by their repr; an answer with no JSON text at all (one
    holding itself) becomes the structured error ``result:unrenderable``, with its id."""
    looped: dict[str, object] = {"ok": True, "request_id": "req_7"}
    looped["self"] = looped
    shown = json.loads(answer_text(looped))
    assert shown["ok"] is False
    assert shown["error"]["details"] == {"reason": "result:unrenderable"}
    assert shown["request_id"] == "req_7"
    assert answer_text({"ok": True, "data": {"s": {1}}}) == '{"ok": true, "data": {"s": "{1}"}}'
