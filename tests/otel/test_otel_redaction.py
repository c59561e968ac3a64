"""agtool.otel's captured content never holds a sensitive value (promise 8), whatever the
model sends: a property test over args that put a secret in every sensitive position, under
names the contract does not declare (at any depth), and in the body's sensitive returns.

The oracle is the exported text itself: the secret's marker must not occur in it, while a
non-sensitive marker placed beside it must (so the test sees that content was captured).
"""

from __future__ import annotations

from typing import Any

import pytest
from _spellings import ENCODERS, leaks
from _tables import EVERY_KIND, echoing_pay_table
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agtool import Gate
from agtool.otel import instrument

SECRET = "SECRET-QZX"  # noqa: S105 - a marker, not a secret
SHOWN = "shown-mark"
ARGS: dict[str, Any] = {
    "user": {"type": "str"},
    "password": {"type": "str", "sensitive": True},
    "tokens": {"type": "list", "required": False, "item": {"type": "str", "sensitive": True}},
    "cards": {"type": "list", "required": False,
              "item": {"number": {"type": "str", "sensitive": True}, "label": {"type": "str"}}},
    "profile": {"type": "dict", "required": False,
                "item": {"pin": {"type": "str", "sensitive": True}, "city": {"type": "str"}}},
}
RETURNS: dict[str, Any] = {"user": {"type": "str"}, "session": {"type": "str", "sensitive": True},
                           "cards": {"type": "list", "item": {
                               "number": {"type": "str", "sensitive": True},
                               "label": {"type": "str"}}}}

secret = st.text("abc", max_size=3).map(lambda tail: SECRET + tail)
# Names the model might use that the contract does not declare: misspellings of the
# sensitive ones and inventions.
undeclared = st.sampled_from(["pasword", "passwd", "cvv", "token", "secret", "pin_code"])


@st.composite
def careless_args(draw: st.DrawFn) -> dict[str, Any]:
    args: dict[str, Any] = {"user": SHOWN, "password": draw(secret)}
    if draw(st.booleans()):
        args["tokens"] = draw(st.lists(secret, max_size=3))
    if draw(st.booleans()):
        card = {"number": draw(secret), "label": SHOWN}
        card.update(draw(st.dictionaries(undeclared, secret, max_size=2)))
        args["cards"] = [card]
    shape = draw(st.sampled_from(["none", "dict", "misshapen"]))
    if shape == "dict":
        profile = {"pin": draw(secret), "city": SHOWN}
        profile.update(draw(st.dictionaries(undeclared, secret, max_size=2)))
        args["profile"] = profile
    elif shape == "misshapen":  # not the dict declared: shown as sent, as it holds no name
        args["profile"] = SHOWN
    args.update(draw(st.dictionaries(undeclared, secret, max_size=2)))
    return args


def body(user: str, password: str, **rest: Any) -> dict[str, Any]:
    return {"user": user, "session": SECRET + "-session",
            "cards": [{"number": SECRET + "-card", "label": SHOWN}]}


@settings(max_examples=60, deadline=None)
@given(args=careless_args(), for_model=st.booleans())
def test_no_sensitive_value_reaches_an_exported_span(args: dict[str, Any],
                                                     for_model: bool) -> None:
    """With content captured, the exported span shows the non-sensitive values and never the
    secret, wherever the model put it and whether the gate ran or refused the call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gate = Gate({"login": {"fn": body, "args": ARGS, "returns": RETURNS}})
    assert instrument(gate, tracer_provider=provider, capture_content=True)
    call = gate.call_for_model if for_model else gate.call_tool
    call("login", args)
    text = "\n".join(span.to_json() for span in exporter.get_finished_spans())
    provider.shutdown()
    assert SHOWN in text
    assert SECRET not in text


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_an_upstream_echo_reaches_no_span_in_any_spelling(
        encoding: str, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """Each encoder of tests/_spellings.py: an upstream failing with the card so spelled leaves
    it in no exported span (attributes, events, status), with content captured."""
    provider, exporter = spans
    gate = Gate(echoing_pay_table(ENCODERS[encoding]))
    assert instrument(gate, tracer_provider=provider, capture_content=True)
    answers = [gate.call_for_model("pay", {"card": EVERY_KIND, "amount": 5}),
               gate.call_tool("pay", {"card": EVERY_KIND, "amount": 5})]
    assert [answer["ok"] for answer in answers] == [False, False]
    exported = [span.to_json() for span in exporter.get_finished_spans()]
    assert len(exported) == 2
    assert any("UPSTREAM_ERROR" in text or "upstream" in text for text in exported)
    assert leaks(EVERY_KIND, *exported) == []
