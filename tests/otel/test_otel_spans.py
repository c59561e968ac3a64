"""agtool.otel: one execute_tool span and two metrics per gated call, read back from the
OpenTelemetry SDK's in-memory exporters.

Expected values come from elsewhere than the span code: the gate's own answer and
``CallRecord`` (given to a sink of the test's own), ``contract_hash`` of the contract,
the body's call counter, and spans the test opens itself.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agtool import CallRecord, Gate, contract_hash
from agtool.otel import instrument, is_instrumented, uninstrument

SKU_ARGS: dict[str, Any] = {"sku": {"type": "str", "min_len": 1},
                            "limit": {"type": "int", "min": 1, "max": 5}}
SKU_RETURNS: dict[str, Any] = {"sku": {"type": "str"}, "count": {"type": "int", "min": 0}}
GOOD = {"sku": "A1", "limit": 2}
ORDER_ARGS: dict[str, Any] = {"order": {"type": "str", "min_len": 1},
                              "qty": {"type": "int", "min": 1}}
ORDER_RETURNS: dict[str, Any] = {"order": {"type": "str"}, "status": {"type": "str"}}
WRITE_SCOPE = frozenset({"read_public", "reversible_write"})


class Body:
    """A body that counts its runs and answers the sku with a count."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.runs += 1
        return {"sku": kwargs["sku"], "count": 4}


@dataclass
class Telemetry:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def instrument(self, gate: Gate, **options: Any) -> Gate:
        assert instrument(gate, tracer_provider=self.tracer_provider,
                          meter_provider=self.meter_provider, **options)
        return gate

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def units(self) -> dict[str, str]:
        data = self.reader.get_metrics_data()
        return {metric.name: metric.unit for resource in data.resource_metrics
                for scope in resource.scope_metrics for metric in scope.metrics}

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        if data is None:  # nothing was ever measured
            return []
        return [point for resource in data.resource_metrics for scope in resource.scope_metrics
                for metric in scope.metrics if metric.name == name
                for point in metric.data.data_points]


@pytest.fixture
def otel(spans: tuple[TracerProvider, InMemorySpanExporter]) -> Iterator[Telemetry]:
    tracer_provider, exporter = spans
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(tracer_provider, meter_provider, exporter, reader)
    meter_provider.shutdown()


def sku_gate(body: Any = None, **options: Any) -> Gate:
    return Gate({"sku_count": {"fn": body or Body(), "args": SKU_ARGS, "returns": SKU_RETURNS,
                               "description": "Units of one sku."}}, **options)


def only(spans: list[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [span.name for span in spans]
    return spans[0]


# -- one span per call -------------------------------------------------------------------------

def test_a_successful_call_is_one_internal_span_with_the_records_ids(otel: Telemetry) -> None:
    """A call that runs is one INTERNAL ``execute_tool sku_count`` span, status unset, carrying
    the conventions' attributes and the ids of the very record the gate wrote (and no run
    id, which a record does not carry either)."""
    records: list[CallRecord] = []
    gate = otel.instrument(sku_gate(records=records.append))
    answer = gate.call_for_model("sku_count", GOOD, step_id="call_7", run_id="run_1")
    assert answer["ok"]
    span = only(otel.finished())
    (record,) = records
    assert span.name == "execute_tool sku_count"
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    contract = gate.contract("sku_count")
    assert contract is not None
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "sku_count",
        "gen_ai.tool.type": "function", "gen_ai.tool.call.id": "call_7",
        "gen_ai.tool.description": "Units of one sku.",
        "agtool.effect": "read", "agtool.risk": "read_public",
        "agtool.request_id": answer["request_id"], "agtool.memo_hit": False,
        "agtool.replayed": False, "agtool.contract_hash": contract_hash(contract),
        "agtool.args_digest": record.args_digest}
    assert record.request_id == answer["request_id"]


def test_a_refused_call_carries_the_code_as_error_type_never_the_reason(
        otel: Telemetry) -> None:
    """An extra argument is refused before the body; the span's ``error.type`` is the code
    (the reason names the model's own argument, which would make error.type unbounded)."""
    body = Body()
    gate = otel.instrument(sku_gate(body))
    answer = gate.call_tool("sku_count", {**GOOD, "colour_chosen_by_model": 1}, step_id="c1")
    assert answer["error"] == "args:unexpected:colour_chosen_by_model"
    assert body.runs == 0
    span = only(otel.finished())
    attributes = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "INVALID_ARGUMENT"
    assert attributes["error.type"] == "INVALID_ARGUMENT"
    assert attributes["agtool.reason"] == "args:unexpected:colour_chosen_by_model"
    assert "agtool.args_digest" not in attributes  # nothing was checked to digest
    assert all("colour_chosen_by_model" not in str(value) for key, value in attributes.items()
               if key != "agtool.reason")


def test_an_unknown_tool_is_named_in_no_span_name_and_no_metric(otel: Telemetry) -> None:
    """A name the model made up stays out of the span's name and out of metric attributes."""
    gate = otel.instrument(sku_gate())
    assert gate.call_tool("made_up_by_the_model", GOOD)["error"] == "args:unknown_tool"
    span = only(otel.finished())
    assert span.name == "execute_tool"
    assert (span.attributes or {})["gen_ai.tool.name"] == "made_up_by_the_model"
    (point,) = otel.points("agtool.refusals")
    assert dict(point.attributes) == {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": "_OTHER",
                                      "error.type": "UNKNOWN_TOOL"}


def test_async_calls_get_a_span_that_is_current_while_the_body_runs(otel: Telemetry) -> None:
    """``acall_tool`` and ``acall_for_model``: one span each, and a span the async body opens
    is its child (the body runs inside the gate's span)."""
    tracer = otel.tracer_provider.get_tracer("the-tools-own-code")

    async def body(sku: str, limit: int) -> dict[str, Any]:
        with tracer.start_as_current_span("inventory query"):
            await asyncio.sleep(0)
        return {"sku": sku, "count": limit}

    gate = otel.instrument(sku_gate(body))

    async def calls() -> tuple[Any, Any]:
        return (await gate.acall_tool("sku_count", GOOD, step_id="a"),
                await gate.acall_for_model("sku_count", {**GOOD, "limit": 3}, step_id="b"))

    first, second = asyncio.run(calls())
    assert first["ok"]
    assert second["ok"]
    spans = otel.finished()
    tools = [span for span in spans if span.name == "execute_tool sku_count"]
    queries = [span for span in spans if span.name == "inventory query"]
    assert [(span.attributes or {})["gen_ai.tool.call.id"] for span in tools] == ["a", "b"]
    assert len(queries) == 2
    for tool, query in zip(tools, queries, strict=True):
        assert query.parent is not None
        assert query.parent.span_id == tool.context.span_id


def test_a_memo_hit_says_so_and_runs_nothing(otel: Telemetry) -> None:
    """The second identical call is answered from the memo: ``agtool.memo_hit`` on its span."""
    body = Body()
    gate = otel.instrument(sku_gate(body))
    gate.call_tool("sku_count", GOOD)
    gate.call_tool("sku_count", GOOD)
    assert body.runs == 1
    hits = [(span.attributes or {})["agtool.memo_hit"] for span in otel.finished()]
    assert hits == [False, True]


def test_a_write_retried_under_its_key_is_replayed_and_done(otel: Telemetry) -> None:
    """A write's span says ``agtool.write.state=done``; its retry under the same run and step
    is ``agtool.replayed`` and runs no body."""
    runs: list[dict[str, Any]] = []

    def place(order: str, qty: int) -> dict[str, Any]:
        runs.append({"order": order})
        return {"order": order, "status": "placed"}

    gate = otel.instrument(Gate({"place": {"fn": place, "args": ORDER_ARGS,
                                           "returns": ORDER_RETURNS, "effect": "write",
                                           "risk": "reversible_write"}}, scope=WRITE_SCOPE))
    for _ in range(2):
        assert gate.call_tool("place", {"order": "A-1", "qty": 1}, run_id="r", step_id="s")["ok"]
    assert len(runs) == 1
    seen = [{key: (span.attributes or {})[key] for key in
             ("agtool.effect", "agtool.risk", "agtool.replayed", "agtool.write.state")}
            for span in otel.finished()]
    first = {"agtool.effect": "write", "agtool.risk": "reversible_write"}
    assert seen == [{**first, "agtool.replayed": False, "agtool.write.state": "done"},
                    {**first, "agtool.replayed": True, "agtool.write.state": "done"}]


def test_a_write_whose_outcome_is_lost_is_unknown_on_its_retry(otel: Telemetry) -> None:
    """A write body that times out on its own leaves its key unknown: the retry's span says
    ``UNKNOWN_OUTCOME`` and ``agtool.write.state=unknown``; the first says no state (its
    ``timeout`` alone cannot tell claimed from unknown)."""
    def place(order: str, qty: int) -> dict[str, Any]:
        raise TimeoutError("the payment provider did not answer")

    gate = otel.instrument(Gate({"place": {"fn": place, "args": ORDER_ARGS,
                                           "returns": ORDER_RETURNS, "effect": "write",
                                           "risk": "reversible_write"}}, scope=WRITE_SCOPE))
    assert gate.call_tool("place", {"order": "A-1", "qty": 1}, run_id="r", step_id="s")[
        "error"] == "timeout"
    assert gate.call_tool("place", {"order": "A-1", "qty": 1}, run_id="r", step_id="s")[
        "error"] == "write:unknown"
    first, retry = (dict(span.attributes or {}) for span in otel.finished())
    assert "agtool.write.state" not in first
    assert retry["error.type"] == "UNKNOWN_OUTCOME"
    assert retry["agtool.write.state"] == "unknown"


# -- a framework's span for the same call ------------------------------------------------------

def framework_span(otel: Telemetry, tool: str, **attributes: Any) -> Any:
    """A span as pydantic-ai opens one around a tool call, from the same provider."""
    tracer = otel.tracer_provider.get_tracer("a-framework")
    return tracer.start_as_current_span(
        f"execute_tool {tool}", attributes={"gen_ai.operation.name": "execute_tool",
                                            "gen_ai.tool.name": tool, **attributes})


def test_inside_a_frameworks_span_for_the_call_there_is_no_second_span(
        otel: Telemetry) -> None:
    """Under a framework's ``execute_tool sku_count`` span, the call adds its attributes to
    that span and opens none of its own: one span for one call."""
    gate = otel.instrument(sku_gate())
    with framework_span(otel, "sku_count", **{"gen_ai.tool.call.id": "call_9"}):
        answer = gate.call_for_model("sku_count", {**GOOD, "limit": 99}, step_id="call_9")
    span = only(otel.finished())
    attributes = dict(span.attributes or {})
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "a-framework"
    assert attributes["agtool.request_id"] == answer["request_id"]
    assert attributes["error.type"] == "INVALID_ARGUMENT"
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("outer", [
    pytest.param({"tool": "another_tool"}, id="another-tool"),
    pytest.param({"tool": "sku_count", "gen_ai.tool.call.id": "another_call"},
                 id="another-call-id"),
])
def test_a_span_for_another_call_gets_a_child_span(otel: Telemetry,
                                                   outer: dict[str, Any]) -> None:
    """A current span for another tool, or another call id, is a parent, never taken."""
    gate = otel.instrument(sku_gate())
    attributes = {key: value for key, value in outer.items() if key != "tool"}
    with framework_span(otel, outer["tool"], **attributes) as parent:
        gate.call_tool("sku_count", GOOD, step_id="call_9")
    child, ended_parent = otel.finished()
    assert child.name == "execute_tool sku_count"
    assert child.parent is not None
    assert child.parent.span_id == parent.get_span_context().span_id
    assert "agtool.request_id" not in (ended_parent.attributes or {})


def test_a_call_nested_in_a_body_of_the_same_tool_gets_its_own_span(otel: Telemetry) -> None:
    """A body calling its own tool again (through the same gate) under the framework's span:
    the outer call takes the framework's span, the inner one gets a span of its own."""
    gates: list[Gate] = []

    def body(sku: str, limit: int) -> dict[str, Any]:
        if limit > 1:
            gates[0].call_tool("sku_count", {"sku": sku, "limit": limit - 1})
        return {"sku": sku, "count": limit}

    gates.append(otel.instrument(sku_gate(body)))
    with framework_span(otel, "sku_count"):
        gates[0].call_tool("sku_count", GOOD)
    inner, outer = otel.finished()
    assert outer.name == inner.name == "execute_tool sku_count"
    assert inner.parent is not None
    assert inner.parent.span_id == outer.context.span_id
    ids = {(span.attributes or {})["agtool.request_id"] for span in (inner, outer)}
    assert len(ids) == 2


# -- content, opt-in and redacted ---------------------------------------------------------------

CARD = "4111-1111-1111-1111"
PIN = "PIN-0072-SECRET"


def charge_gate() -> Gate:
    def charge(card: str, amount: int) -> dict[str, Any]:
        return {"receipt": "R-77", "pin": PIN}
    return Gate({"charge": {
        "fn": charge, "args": {"card": {"type": "str", "sensitive": True},
                               "amount": {"type": "int", "min": 1}},
        "returns": {"receipt": {"type": "str"}, "pin": {"type": "str", "sensitive": True}}}})


def exported_text(otel: Telemetry) -> str:
    return "\n".join(span.to_json() for span in otel.finished())


def test_arguments_and_results_are_captured_only_on_opt_in(otel: Telemetry) -> None:
    """By default a span has neither ``gen_ai.tool.call.arguments`` nor ``.result``."""
    gate = otel.instrument(charge_gate())
    assert gate.call_tool("charge", {"card": CARD, "amount": 3})["ok"]
    attributes = only(otel.finished()).attributes or {}
    assert "gen_ai.tool.call.arguments" not in attributes
    assert "gen_ai.tool.call.result" not in attributes
    assert "R-77" not in exported_text(otel)


@pytest.mark.parametrize("method", ["call_tool", "call_for_model"])
def test_captured_content_is_redacted_as_records_are(otel: Telemetry, method: str) -> None:
    """With ``capture_content``, the exported spans show the amount and the receipt, and
    neither the card (a sensitive argument), nor the pin (a sensitive result), nor a value
    under a misspelt name (``crad``: undeclared, so redacted too)."""
    gate = otel.instrument(charge_gate(), capture_content=True)
    call = getattr(gate, method)
    assert call("charge", {"card": CARD, "amount": 3})["ok"]
    assert not call("charge", {"crad": CARD, "amount": 3})["ok"]
    good, misspelt = (dict(span.attributes or {}) for span in otel.finished())
    assert json.loads(good["gen_ai.tool.call.arguments"]) == {"card": "[redacted]", "amount": 3}
    assert json.loads(good["gen_ai.tool.call.result"]) == {"receipt": "R-77",
                                                           "pin": "[redacted]"}
    assert json.loads(misspelt["gen_ai.tool.call.arguments"]) == {"crad": "[redacted]",
                                                                  "amount": 3}
    assert "gen_ai.tool.call.result" not in misspelt
    text = exported_text(otel)
    assert CARD not in text
    assert PIN not in text


@pytest.mark.parametrize(("value", "captured"), [
    ("true", True), ("SPAN_ONLY", True), ("span_and_event", True), ("false", False),
    ("event_only", False), ("", False)])
def test_the_genai_content_switch_in_the_environment_opts_in(
        otel: Telemetry, monkeypatch: pytest.MonkeyPatch, value: str, captured: bool) -> None:
    """Without ``capture_content``, the GenAI instrumentations' environment switch decides
    (what a CLI user has); ``capture_content=False`` overrides it."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    gate = otel.instrument(charge_gate())
    gate.call_tool("charge", {"card": CARD, "amount": 3})
    refusing = otel.instrument(charge_gate(), capture_content=False)
    refusing.call_tool("charge", {"card": CARD, "amount": 3})
    by_env, by_argument = (dict(span.attributes or {}) for span in otel.finished())
    assert ("gen_ai.tool.call.arguments" in by_env) is captured
    assert "gen_ai.tool.call.arguments" not in by_argument


def test_an_instrumented_method_still_says_what_it_takes(otel: Telemetry) -> None:
    """The wrapped methods keep their names, docstrings and signatures (``__wrapped__``)."""
    import inspect

    gate = otel.instrument(sku_gate())
    for method in ("call_tool", "acall_tool", "call_for_model", "acall_for_model"):
        wrapped, own = getattr(gate, method), getattr(Gate, method)
        assert wrapped.__name__ == method
        assert wrapped.__doc__ == own.__doc__
        assert "step_id" in inspect.signature(wrapped).parameters


# -- metrics ----------------------------------------------------------------------------------

def test_durations_and_refusals_are_counted_by_tool_and_code(otel: Telemetry) -> None:
    """Every call is a duration point (seconds); every failed one counts as a refusal by code."""
    gate = otel.instrument(sku_gate())
    gate.call_tool("sku_count", GOOD)
    gate.call_tool("sku_count", GOOD)
    gate.call_tool("sku_count", {**GOOD, "limit": "2"})
    durations = {tuple(sorted(point.attributes.items())): point
                 for point in otel.points("gen_ai.execute_tool.duration")}
    base = (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "sku_count"))
    failed = tuple(sorted((*base, ("error.type", "INVALID_ARGUMENT"))))
    assert {key: point.count for key, point in durations.items()} == {base: 2, failed: 1}
    assert durations[base].sum > 0
    assert otel.units() == {"gen_ai.execute_tool.duration": "s", "agtool.refusals": "{call}"}
    (refused,) = otel.points("agtool.refusals")
    assert dict(refused.attributes) == dict(failed)
    assert refused.value == 1


def test_metrics_alone_make_no_span_and_touch_no_current_span(otel: Telemetry) -> None:
    """With a meter provider and no tracer provider: metrics, and no attribute is set on
    whatever span happens to be current (an agent's own)."""
    gate = sku_gate()
    assert instrument(gate, meter_provider=otel.meter_provider)
    with otel.tracer_provider.get_tracer("agent").start_as_current_span("agent turn"):
        gate.call_tool("sku_count", GOOD)
    (agent_turn,) = otel.finished()
    assert dict(agent_turn.attributes or {}) == {}
    (point,) = otel.points("gen_ai.execute_tool.duration")
    assert point.count == 1


# -- installing, chaining, uninstalling ---------------------------------------------------------

def test_the_gates_own_sink_still_gets_every_record_and_uninstrument_restores_it(
        otel: Telemetry) -> None:
    """The sink the gate had sees each call once while instrumented; ``uninstrument`` gives
    the gate back its own methods and sink, and calls make no span after it."""
    records: list[CallRecord] = []
    gate = otel.instrument(sku_gate(records=records.append))
    otel.instrument(gate)  # again: replaces, never stacks
    gate.call_tool("sku_count", GOOD)
    assert len(otel.finished()) == 1
    assert len(records) == 1
    uninstrument(gate)
    assert not is_instrumented(gate)
    assert "call_tool" not in vars(gate)
    gate.call_tool("sku_count", {**GOOD, "limit": 1})
    assert len(otel.finished()) == 1
    assert len(records) == 2
    assert gate.records is not None
    assert gate.records.__self__ is records  # type: ignore[attr-defined]


def test_a_sink_set_after_instrument_leaves_the_span_without_the_records_fields(
        otel: Telemetry) -> None:
    """The documented order matters: a sink set after ``instrument`` replaces agtool's, so
    the call's span has only what the wrapper knows (tool, call id), and no metric point."""
    records: list[CallRecord] = []
    gate = otel.instrument(sku_gate())
    gate.records = records.append
    assert gate.call_tool("sku_count", GOOD, step_id="c1")["ok"]
    attributes = dict(only(otel.finished()).attributes or {})
    assert attributes["gen_ai.tool.call.id"] == "c1"
    assert "agtool.request_id" not in attributes
    assert len(records) == 1
    assert otel.points("gen_ai.execute_tool.duration") == []


def test_a_broken_sink_of_the_gates_breaks_neither_the_call_nor_its_span(
        otel: Telemetry) -> None:
    """The gate logs a sink that raises, as before; the span is still complete."""
    def broken(record: CallRecord) -> None:
        raise RuntimeError("disk full")

    gate = otel.instrument(sku_gate(records=broken))
    assert gate.call_tool("sku_count", GOOD)["ok"]
    assert "agtool.request_id" in (only(otel.finished()).attributes or {})


def test_a_record_no_wrapper_waits_for_gets_a_span_after_the_fact(otel: Telemetry) -> None:
    """A gate made with this gate's sink (as the LangChain adapter makes one) is not wrapped:
    its record still becomes a span, timed from the record's latency, under the current span."""
    gate = otel.instrument(sku_gate())
    shadow = sku_gate(records=gate.records)
    assert not is_instrumented(shadow)  # it shares the sink, not the wrappers
    with otel.tracer_provider.get_tracer("agent").start_as_current_span("agent turn") as turn:
        answer = shadow.call_for_model("sku_count", GOOD)
    span, _ = otel.finished()
    attributes = dict(span.attributes or {})
    assert span.name == "execute_tool sku_count"
    assert attributes["agtool.request_id"] == answer["request_id"]
    assert attributes["agtool.effect"] == "read"
    assert span.parent is not None
    assert span.parent.span_id == turn.get_span_context().span_id
    assert (span.end_time or 0) - (span.start_time or 0) > 0


def test_a_body_interrupt_propagates_through_the_span(otel: Telemetry) -> None:
    """``KeyboardInterrupt`` from a body still propagates; the span ends, marked an error."""
    def body(sku: str, limit: int) -> dict[str, Any]:
        raise KeyboardInterrupt

    gate = otel.instrument(sku_gate(body))
    with pytest.raises(KeyboardInterrupt):
        gate.call_tool("sku_count", GOOD)
    span = only(otel.finished())
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "KeyboardInterrupt"


def test_cancellation_propagates_through_an_async_span(otel: Telemetry) -> None:
    """A cancelled ``acall_tool`` raises ``CancelledError`` to its awaiter; its span ends."""
    started = asyncio.Event()

    async def body(sku: str, limit: int) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(30)
        return {"sku": sku, "count": 0}

    gate = otel.instrument(sku_gate(body))

    async def cancelled() -> None:
        task = asyncio.ensure_future(gate.acall_tool("sku_count", GOOD))
        await started.wait()
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    span = only(otel.finished())
    assert span.name == "execute_tool sku_count"
    assert (span.attributes or {})["error.type"] == "CancelledError"


# -- nothing paid without a provider, nothing imported without the extra -------------------------

NO_PROVIDER = """
import sys
import agtool
assert not [m for m in sys.modules if m.startswith("opentelemetry")], "imported by agtool"
from agtool import Gate
from agtool.tools import TOOLS
import agtool.otel
gate = Gate(TOOLS)
print(agtool.otel.instrument(gate), sorted(vars(gate).keys() & {"call_tool", "acall_tool"}),
      gate.records)
"""


@pytest.mark.slow
def test_without_a_provider_nothing_is_imported_installed_or_paid() -> None:
    """In a fresh process: ``import agtool`` imports no OpenTelemetry, and ``instrument``
    with no provider set installs nothing (the gate keeps its methods and its fast path)."""
    done = subprocess.run(  # noqa: S603 - this file's own script
        [sys.executable, "-c", NO_PROVIDER], capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "[]", "None"]


def test_without_the_otel_extra_the_import_error_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """agtool.otel without opentelemetry installed: one line naming the extra."""
    import importlib

    import agtool

    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # what a missing package looks like
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    monkeypatch.delitem(sys.modules, "agtool.otel", raising=False)
    monkeypatch.delattr(agtool, "otel", raising=False)
    with pytest.raises(ImportError) as caught:
        importlib.import_module("agtool.otel")
    assert str(caught.value) == "agtool.otel needs the otel extra: pip install 'agtool-gate[otel]'"


def test_no_global_provider_in_this_process_means_instrument_declines() -> None:
    """With the API's default (proxy) providers, ``instrument`` answers False and wraps
    nothing; this test process never sets a global provider."""
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    gate = sku_gate()
    assert instrument(gate) is False
    assert not is_instrumented(gate)
    assert gate.records is None
