"""agtool.otel in detail: the write state against the store's own, capture's edges, and
what a broken provider or a foreign span does to a call (nothing)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, use_span

from agtool import Gate, UpstreamError
from agtool.otel import MAX_CAPTURED_CHARS, instrument
from agtool.otel._attributes import captured_args, captured_result

ORDER_ARGS: dict[str, Any] = {"order": {"type": "str", "min_len": 1},
                              "qty": {"type": "int", "min": 1}}
ORDER_RETURNS: dict[str, Any] = {"order": {"type": "str"}, "status": {"type": "str"}}
WRITE_SCOPE = frozenset({"read_public", "reversible_write"})
ARGS = {"order": "A-1", "qty": 1}


def raises(exc: BaseException) -> Callable[..., Any]:
    def body(order: str, qty: int) -> Any:
        raise exc
    return body


def answers(value: object) -> Callable[..., Any]:
    return lambda order, qty: value


#: The store's states as a span names them.
AS_SPAN = {"done": "done", "unknown": "unknown", "pending": "claimed"}


@pytest.mark.parametrize("body", [
    pytest.param(answers({"order": "A-1", "status": "placed"}), id="ran"),
    pytest.param(answers({"order": "A-1"}), id="bad-result"),
    pytest.param(raises(ValueError("no such order")), id="raised"),
    pytest.param(raises(UpstreamError(404)), id="upstream-404"),
    pytest.param(raises(UpstreamError(503)), id="upstream-503"),
    pytest.param(raises(UpstreamError(429, applied=False)), id="upstream-429-not-applied"),
    pytest.param(raises(TimeoutError()), id="own-timeout"),
])
def test_a_writes_state_on_its_span_is_the_stores_state_of_its_key(
        spans: tuple[TracerProvider, InMemorySpanExporter], body: Callable[..., Any]) -> None:
    """Whatever the body does, a write state the span names is the one the store holds for
    the key (read from the store); a call and its retry are both checked."""
    provider, exporter = spans
    gate = Gate({"place": {"fn": body, "args": ORDER_ARGS, "returns": ORDER_RETURNS,
                           "effect": "write", "risk": "reversible_write"}}, scope=WRITE_SCOPE)
    assert instrument(gate, tracer_provider=provider)
    key = gate.idempotency_key("place", ARGS, "run", "step")
    assert key is not None
    named = []
    for _ in range(2):
        gate.call_tool("place", ARGS, run_id="run", step_id="step")
        stored = gate.store.lookup(key)
        said = (exporter.get_finished_spans()[-1].attributes or {}).get("agtool.write.state")
        if said is not None:
            assert stored is not None
            assert said == AS_SPAN[stored.state]
            named.append(said)
    # The retry knows, but of a key freed for it (nothing was applied) there is nothing to say.
    assert bool(named) == (gate.store.lookup(key) is not None)


def test_a_write_refused_before_its_key_is_claimed_names_no_state(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """Refused arguments, a missing step, a dry run: no key was claimed, so no state."""
    provider, exporter = spans
    gate = Gate({"place": {"fn": answers({"order": "A-1", "status": "placed"}),
                           "args": ORDER_ARGS, "returns": ORDER_RETURNS, "effect": "write",
                           "risk": "reversible_write"}}, scope=WRITE_SCOPE)
    assert instrument(gate, tracer_provider=provider)
    gate.call_tool("place", {"order": "", "qty": 1}, run_id="r", step_id="s")
    gate.call_tool("place", ARGS)
    gate.call_tool("place", ARGS, run_id="r", step_id="s", dry_run=True)
    seen = [dict(span.attributes or {}) for span in exporter.get_finished_spans()]
    assert [attributes.get("agtool.write.state") for attributes in seen] == [None] * 3
    assert [attributes.get("error.type") for attributes in seen] == [
        "INVALID_ARGUMENT", "INTERNAL", None]
    assert seen[2]["agtool.dry_run"] is True


# -- capture's edges ----------------------------------------------------------------------------

def test_captured_args_of_what_is_not_an_object_or_not_a_tool_show_no_value() -> None:
    """Args that are not a dict, and args of a tool the table lacks, show no value at all."""
    assert json.loads(captured_args(None, ["4111", "x"])) == "[redacted]"
    assert json.loads(captured_args(None, {"card": "4111", 7: "x"})) == {
        "card": "[redacted]", "<int>": "[redacted]"}


def test_captured_content_is_cut_and_never_uses_an_objects_own_text() -> None:
    """A long value is cut at MAX_CAPTURED_CHARS; an object is shown by its type only (its
    ``str`` may hold a secret); a value JSON cannot hold is a marker, never an exception."""
    class Holder:
        def __str__(self) -> str:
            return "holder-with-a-secret"

    long_text = captured_result(None, {"text": "x" * (2 * MAX_CAPTURED_CHARS)})
    assert len(long_text) < MAX_CAPTURED_CHARS + 20
    assert long_text.endswith("...(cut)")
    assert json.loads(captured_result(None, {"h": Holder()})) == {"h": "<Holder>"}
    deep: list[Any] = []
    for _ in range(1000):
        deep = [deep]
    assert captured_result(None, deep) == '"<not JSON>"'


# -- what the instrumentation must never do -------------------------------------------------------

class _BrokenHistogram:
    def record(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("exporter queue full")


class _BrokenMeter(metrics.NoOpMeter):
    def create_histogram(self, *args: Any, **kwargs: Any) -> Any:
        return _BrokenHistogram()


class _BrokenMeterProvider(metrics.NoOpMeterProvider):
    def get_meter(self, *args: Any, **kwargs: Any) -> metrics.Meter:
        return _BrokenMeter("broken")


def test_a_broken_meter_breaks_no_call_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A metrics backend that raises: the gate still answers (the call's and a record's
    after-the-fact span alike), and the failure is logged."""
    gate = Gate({"place": {"fn": answers({"order": "A-1", "status": "placed"}),
                           "args": ORDER_ARGS, "returns": ORDER_RETURNS}})
    assert instrument(gate, meter_provider=_BrokenMeterProvider())
    shadow = Gate(gate.table, records=gate.records)
    with caplog.at_level(logging.ERROR, logger="agtool"):
        assert gate.call_tool("place", ARGS)["ok"]
        assert shadow.call_tool("place", ARGS)["ok"]
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["span of a call to place not completed",
                        "span of a call to place not made"]


def test_a_span_that_is_not_the_sdks_is_never_taken(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """A current span whose attributes cannot be read (not the SDK's) is a parent, not
    adopted: the call gets its own span under it."""
    provider, exporter = spans

    class Foreign(NonRecordingSpan):
        def is_recording(self) -> bool:
            return True

    context = SpanContext(0x1F, 0x2F, is_remote=True, trace_flags=TraceFlags(1))
    gate = Gate({"place": {"fn": answers({"order": "A-1", "status": "placed"}),
                           "args": ORDER_ARGS, "returns": ORDER_RETURNS}})
    assert instrument(gate, tracer_provider=provider)
    with use_span(Foreign(context)):
        gate.call_tool("place", ARGS)
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert span.parent.span_id == 0x2F
    assert span.context.trace_id == 0x1F


def test_a_framework_span_that_already_failed_is_not_taken(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """A framework span for the tool that already carries an ``error.type`` (its validation
    failed, then it called the gate anyway) keeps its error; the call gets its own span."""
    provider, exporter = spans
    gate = Gate({"place": {"fn": answers({"order": "A-1", "status": "placed"}),
                           "args": ORDER_ARGS, "returns": ORDER_RETURNS}})
    assert instrument(gate, tracer_provider=provider)
    tracer = provider.get_tracer("framework")
    with tracer.start_as_current_span("execute_tool place", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "place",
            "error.type": "validation"}):
        gate.call_tool("place", ARGS)
    own, framework = exporter.get_finished_spans()
    assert (own.attributes or {})["agtool.request_id"]
    assert (framework.attributes or {})["error.type"] == "validation"


def test_a_record_under_a_frameworks_span_for_its_tool_is_set_on_that_span(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """A record no wrapper waits for (the MCP proxy's ungated call) inside the framework's
    span for that tool: its attributes go on that span, and no second span is made."""
    provider, exporter = spans
    gate = Gate({"place": {"fn": answers({"order": "A-1", "status": "placed"}),
                           "args": ORDER_ARGS, "returns": ORDER_RETURNS}})
    assert instrument(gate, tracer_provider=provider)
    shadow = Gate(gate.table, records=gate.records)
    tracer = provider.get_tracer("framework")
    with tracer.start_as_current_span("tools/call place", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "place"}):
        answer = shadow.call_for_model("place", {**ARGS, "qty": 0})
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["agtool.request_id"] == answer["request_id"]
    assert (span.attributes or {})["error.type"] == "INVALID_ARGUMENT"


def test_a_write_held_by_another_call_is_claimed_as_the_store_says(
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """While one call's body holds the key, a second call answers ``IN_PROGRESS`` and its span
    says ``claimed``: the store's ``pending``."""
    provider, exporter = spans
    started, release = threading.Event(), threading.Event()

    def place(order: str, qty: int) -> dict[str, Any]:
        started.set()
        release.wait(30)
        return {"order": order, "status": "placed"}

    gate = Gate({"place": {"fn": place, "args": ORDER_ARGS, "returns": ORDER_RETURNS,
                           "effect": "write", "risk": "reversible_write"}},
                scope=WRITE_SCOPE, pending_wait=0)
    assert instrument(gate, tracer_provider=provider)
    first = threading.Thread(target=gate.call_tool, args=("place", ARGS),
                             kwargs={"run_id": "r", "step_id": "s"})
    first.start()
    try:
        assert started.wait(30)
        assert gate.call_tool("place", ARGS, run_id="r", step_id="s")["error"] == (
            "write:in_progress")
        key = gate.idempotency_key("place", ARGS, "r", "s")
        assert key is not None
        stored = gate.store.lookup(key)
        assert stored is not None
        assert stored.state == "pending"
    finally:
        release.set()
        first.join(30)
    held, done = exporter.get_finished_spans()
    assert (held.attributes or {})["agtool.write.state"] == "claimed"
    assert (done.attributes or {})["agtool.write.state"] == "done"


def test_the_scope_names_the_installed_version_or_none(
        spans: tuple[TracerProvider, InMemorySpanExporter],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The instrumentation scope's version is agtool-gate's as installed; a checkout that is
    not installed gives none rather than failing."""
    import importlib.metadata

    from agtool.otel import _instrument

    assert _instrument._installed_version() == importlib.metadata.version("agtool-gate")

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert _instrument._installed_version() is None
