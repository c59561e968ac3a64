"""``instrument(gate)``: one ``execute_tool`` span and two metrics per gated call.

The gate's four call methods are wrapped on that one gate object, and its
record sink is chained to one of this module's. A wrapper opens the span
(current while the body runs, so the body's own spans nest under it) or
adopts the framework's span for the same call; the gate's ``CallRecord`` for
the call reaches the sink inside that call and is handed to the wrapper
through a context variable; the wrapper then sets the record's attributes,
the status and the metrics. A record that no wrapper waits for (a gate made
from this one's settings, the MCP proxy's ungated calls) gets its span after
the fact, from the record's own latency.

A gate that is not instrumented, or ``instrument`` finding no tracer or meter
provider set, runs exactly as before: nothing is wrapped or chained.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from .._contract import ToolContract
from .._gate import Gate
from .._records import CallRecord, RecordSink, shown_tool
from ._attributes import (
    DURATION,
    ERROR_TYPE,
    OPERATION,
    REFUSALS,
    REQUEST_ID,
    TOOL_CALL_ID,
    TOOL_NAME,
    captured_args,
    captured_result,
    metric_attributes,
    record_attributes,
    span_name,
    start_attributes,
)

__all__ = ["CALL_METHODS", "CAPTURE_ENV", "instrument", "is_instrumented", "uninstrument"]

_log = logging.getLogger("agtool")


def _installed_version() -> str | None:
    """agtool's version as installed, for the instrumentation scope (none from a bare checkout)."""
    try:
        return importlib.metadata.version("agtool-gate")
    except importlib.metadata.PackageNotFoundError:
        return None


#: The gate's methods that make a call: each is wrapped on an instrumented gate.
CALL_METHODS = ("call_tool", "acall_tool", "call_for_model", "acall_for_model")
_SCOPE = "agtool.otel"
_VERSION = _installed_version()
#: The GenAI instrumentations' switch for capturing content (opentelemetry-util-genai).
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Its values that put content on spans; any other (``false``, ``event_only``) does not.
_CAPTURE_ON = frozenset({"true", "span_only", "span_and_event"})
#: Bucket bounds of the duration histogram, in seconds: the conventions' advice for GenAI
#: durations (10 ms to 82 s), with finer ones below it for calls answered from the memo.
_DURATION_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32,
                     0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


class _Slot:
    """One wrapped call waiting for its record: the sink fills it, the wrapper reads it."""

    __slots__ = ("prefix", "record", "span", "tool")

    def __init__(self, prefix: str, tool: str, span: Span) -> None:
        self.prefix = prefix  #: the gate's request-id prefix: a record of this gate's
        self.tool = tool
        self.span = span
        self.record: CallRecord | None = None


_CALL: ContextVar[_Slot | None] = ContextVar("agtool_otel_call", default=None)


def instrument(gate: Gate, *, tracer_provider: TracerProvider | None = None,
               meter_provider: MeterProvider | None = None,
               capture_content: bool | None = None) -> bool:
    """Trace and measure every call of ``gate``; ``False`` when there is nowhere to send it.

    Each call gets one ``execute_tool {tool}`` span (kind ``INTERNAL``), or,
    when the span current at the call is a framework's ``execute_tool`` span
    for the same tool (pydantic-ai, the MCP SDK's server), agtool's
    attributes on that span instead. Every call adds a point to the
    ``gen_ai.execute_tool.duration`` histogram (seconds) and every failed
    one to the ``agtool.refusals`` counter, both by tool and ``error.type``.

    The providers default to the global ones. With neither set (nor given),
    nothing is installed and the gate costs what it did: call ``instrument``
    after the SDK is configured. ``capture_content`` adds the arguments and
    the result (``gen_ai.tool.call.arguments`` / ``.result``), redacted as
    records are; off by default, as the conventions ask, unless the GenAI
    instrumentations' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is
    ``true``, ``span_only`` or ``span_and_event`` (how ``agtool mcp serve``
    and ``proxy`` are told). Instrumenting a gate again replaces the first
    instrumentation; ``uninstrument`` undoes it. Set the gate's ``records``
    sink before instrumenting it.
    """
    uninstrument(gate)
    tracer_provider = tracer_provider or _set_or_none(trace.get_tracer_provider())
    meter_provider = meter_provider or _set_or_none(metrics.get_meter_provider())
    if tracer_provider is None and meter_provider is None:
        return False
    if capture_content is None:
        capture_content = os.environ.get(CAPTURE_ENV, "").strip().lower() in _CAPTURE_ON
    _install(_Tracing(gate, tracer_provider, meter_provider, capture_content))
    return True


def _install(tracing: _Tracing) -> None:
    gate = tracing.gate
    for method in CALL_METHODS:
        setattr(gate, method, tracing.wrapped(method, getattr(gate, method)))
    gate.records = _Sink(tracing, gate.records)


def uninstrument(gate: Gate) -> None:
    """Undo ``instrument``: the gate's own methods and its own sink again."""
    sink = gate.records
    if not isinstance(sink, _Sink):
        return
    for method in CALL_METHODS:
        vars(gate).pop(method, None)
    gate.records = sink.previous


def is_instrumented(gate: Gate) -> bool:
    """Whether ``instrument`` has installed its wrappers on ``gate``."""
    sink = gate.records
    return isinstance(sink, _Sink) and sink.tracing.gate is gate


def _set_or_none(provider: Any) -> Any:
    """A global provider someone set, or ``None`` for the API's proxy or no-op default."""
    name = type(provider).__name__
    return None if name in ("ProxyTracerProvider", "NoOpTracerProvider",
                            "_ProxyMeterProvider", "NoOpMeterProvider") else provider


class _Sink:
    """The gate's record sink while it is instrumented: hands each record on, then to the
    sink the gate had (whose exceptions the gate logs, as before)."""

    __slots__ = ("previous", "tracing")

    def __init__(self, tracing: _Tracing, previous: RecordSink | None) -> None:
        self.tracing = tracing
        self.previous = previous

    def __call__(self, record: CallRecord) -> None:
        slot = _CALL.get()
        if (slot is not None and slot.record is None and slot.tool == record.tool
                and record.request_id.startswith(slot.prefix)):
            slot.record = record
        else:
            self.tracing.after_the_fact(record)
        if self.previous is not None:
            self.previous(record)

    def trace_copy(self, copy: Gate) -> None:
        """Instrument ``copy``, a gate made with this sink (the LangChain middleware's gate
        over the agent's own tools), as this sink's gate is: its calls get spans of their own
        instead of spans made after the fact."""
        copy.records = self.previous
        tracing = self.tracing
        _install(_Tracing(copy, tracing.tracer_provider, tracing.meter_provider,
                          tracing.capture))


class _Tracing:
    """The tracer, the instruments and the gate one instrumentation serves."""

    def __init__(self, gate: Gate, tracer_provider: TracerProvider | None,
                 meter_provider: MeterProvider | None, capture_content: bool) -> None:
        self.gate = gate
        self.prefix: str = gate._id_prefix  # every request id of this gate starts so
        self.capture = capture_content
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = (trace.get_tracer(_SCOPE, _VERSION, tracer_provider)
                       if tracer_provider is not None else None)
        meter = (meter_provider.get_meter(_SCOPE, _VERSION)
                 if meter_provider is not None else metrics.NoOpMeter(_SCOPE))
        self.duration = meter.create_histogram(
            DURATION, unit="s", description="Duration of tool executions through the gate",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)
        self.refusals = meter.create_counter(
            REFUSALS, unit="{call}", description="Gated calls that failed, by error.type")

    # -- the wrappers ------------------------------------------------------------------------

    def wrapped(self, method: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` (a bound call method of the gate) inside this call's span."""
        model = method.endswith("for_model")
        if method.startswith("a"):
            @functools.wraps(call)
            async def traced_async(name: object, args: object, echo: object = None,
                                   **options: Any) -> Any:
                with self.span(name, args, options) as finish:
                    answer = await call(name, args, echo, **options)
                    finish(answer, model)
                    return answer
            return traced_async

        @functools.wraps(call)
        def traced(name: object, args: object, echo: object = None, **options: Any) -> Any:
            with self.span(name, args, options) as finish:
                answer = call(name, args, echo, **options)
                finish(answer, model)
                return answer
        return traced

    @contextmanager
    def span(self, name: object, args: object, options: Mapping[str, Any]
             ) -> Iterator[Callable[[Mapping[str, Any], bool], None]]:
        """The call's span, current for the call; yields ``finish(answer, for_model)``."""
        tool = shown_tool(name)
        contract = self.gate.contract(name) if type(name) is str else None
        step_id = options.get("step_id")
        attributes = start_attributes(tool, contract, step_id)
        started = time.perf_counter()
        outer = _CALL.get()
        current = trace.get_current_span()
        opened: AbstractContextManager[Span]
        # A span an outer call of this gate already took is that call's, not this one's.
        if _same_call(current, tool, step_id) and (outer is None or outer.span is not current):
            current.set_attributes(attributes)
            opened = nullcontext(current)  # the framework's span: it ends it
        elif self.tracer is not None:
            opened = self.tracer.start_as_current_span(
                span_name(tool, contract is not None), kind=SpanKind.INTERNAL,
                attributes=attributes)
        else:  # metrics only
            opened = nullcontext(trace.INVALID_SPAN)
        with opened as span:
            slot = _Slot(self.prefix, tool, span)
            token = _CALL.set(slot)
            try:
                def finish(answer: Mapping[str, Any], for_model: bool) -> None:
                    self.finished(slot, contract, args, answer, for_model, options,
                                  time.perf_counter() - started)
                yield finish
            except BaseException as exc:  # an interrupt or cancellation: it propagates
                _interrupted(span, exc)
                raise
            finally:
                _CALL.reset(token)

    def finished(self, slot: _Slot, contract: ToolContract | None, args: object,
                 answer: Mapping[str, Any], for_model: bool, options: Mapping[str, Any],
                 seconds: float) -> None:
        """Set what the call came to on its span, and add it to the metrics; never raises."""
        try:
            record = slot.record
            span = slot.span
            if record is not None:
                self.describe(span, record, contract, bool(options.get("dry_run")))
                self.measure(record, seconds)
            if self.capture and span.is_recording():
                span.set_attribute("gen_ai.tool.call.arguments", captured_args(contract, args))
                if answer.get("ok") and contract is not None:
                    value = answer.get("data") if for_model else answer.get("value")
                    # A model's answer is already redacted; an envelope's value is not.
                    span.set_attribute("gen_ai.tool.call.result",
                                       captured_result(None if for_model else contract, value))
        except Exception:  # tracing must not break a call the gate answered
            _log.exception("span of a call to %s not completed", slot.tool)

    # -- what a record says ------------------------------------------------------------------

    def describe(self, span: Span, record: CallRecord, contract: ToolContract | None,
                 dry_run: bool) -> None:
        effect = "" if contract is None else contract.effect
        span.set_attributes(record_attributes(record, effect, dry_run))
        if not record.ok:
            span.set_status(Status(StatusCode.ERROR, record.code))

    def measure(self, record: CallRecord, seconds: float) -> None:
        attributes = metric_attributes(record)
        self.duration.record(seconds, attributes)
        if not record.ok:
            self.refusals.add(1, attributes)

    def after_the_fact(self, record: CallRecord) -> None:
        """The span of a call no wrapper saw, from its record: ended now, begun its latency ago."""
        try:
            contract = self.gate.contract(record.tool) if record.contract_hash else None
            current = trace.get_current_span()
            if _same_call(current, record.tool, None):
                current.set_attributes(start_attributes(record.tool, contract, None))
                self.describe(current, record, contract, False)
            elif self.tracer is not None:
                ended = time.time_ns()
                span = self.tracer.start_span(
                    span_name(record.tool, contract is not None), kind=SpanKind.INTERNAL,
                    attributes=start_attributes(record.tool, contract, None),
                    start_time=ended - int(record.latency_ms * 1e6))
                self.describe(span, record, contract, False)
                span.end(end_time=ended)
            self.measure(record, record.latency_ms / 1000)
        except Exception:
            _log.exception("span of a call to %s not made", record.tool)


def _interrupted(span: Span, exc: BaseException) -> None:
    """Mark a call that a ``BaseException`` ended (the SDK marks only an ``Exception``)."""
    name = type(exc).__qualname__
    span.set_attribute(ERROR_TYPE, name)
    span.set_status(Status(StatusCode.ERROR, name))


def _same_call(span: Span, tool: str, step_id: object) -> bool:
    """Whether ``span`` is a framework's open span for this very tool call.

    It is when it records, names the same tool with ``gen_ai.operation.name``
    ``execute_tool`` (pydantic-ai, the MCP SDK's ``tools/call`` server span),
    was not already taken by an agtool call, and carries no other call id.
    Only an SDK span shows its attributes; any other is never taken.
    """
    if not span.is_recording():
        return False
    attributes = getattr(span, "attributes", None)
    if not isinstance(attributes, Mapping):
        return False
    if attributes.get(OPERATION) != "execute_tool" or attributes.get(TOOL_NAME) != tool:
        return False
    if REQUEST_ID in attributes or ERROR_TYPE in attributes:
        return False  # another gated call's, or one that already ended in an error
    call_id = attributes.get(TOOL_CALL_ID)
    return call_id is None or type(step_id) is not str or call_id == step_id
