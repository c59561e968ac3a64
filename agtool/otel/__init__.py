"""OpenTelemetry spans and metrics for a gate's calls.

::

    from agtool.otel import instrument
    instrument(gate)             # after the SDK's providers are set

One ``execute_tool {tool}`` span per call (or agtool's attributes on the
framework's own ``execute_tool`` span for the same call), with the GenAI
conventions' attributes (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``error.type`` = the error code) and agtool's (``agtool.reason``,
``agtool.memo_hit``, ``agtool.replayed``, ``agtool.effect``, ``agtool.risk``,
``agtool.write.state``, ``agtool.contract_hash``, ``agtool.args_digest``);
arguments and results only with ``capture_content=True``, redacted. Metrics:
the ``gen_ai.execute_tool.duration`` histogram and the ``agtool.refusals``
counter. ``import agtool`` never imports OpenTelemetry; this module needs the
``otel`` extra (``pip install 'agtool-gate[otel]'``).
"""

from __future__ import annotations

try:
    import opentelemetry.trace as _api  # noqa: F401 - imported for the one-line error below
except ImportError:
    raise ImportError("agtool.otel needs the otel extra: pip install 'agtool-gate[otel]'") from None

from ._attributes import DURATION, MAX_CAPTURED_CHARS, OTHER_TOOL, REFUSALS
from ._instrument import CAPTURE_ENV, instrument, is_instrumented, uninstrument

__all__ = ["CAPTURE_ENV", "DURATION", "MAX_CAPTURED_CHARS", "OTHER_TOOL", "REFUSALS",
           "instrument", "is_instrumented", "uninstrument"]
