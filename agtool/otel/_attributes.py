"""What a gated call's span and metrics say: attribute names and values, no OpenTelemetry.

The names follow the OpenTelemetry GenAI conventions (v1.41.1,
``gen-ai-spans.md``, "Execute tool span"; Development status) where they
have one, and ``agtool.*`` where they do not (memo, replay, effect, risk,
the write's key, the contract, the keyed args digest). Every value comes
from a ``CallRecord``, the tool's contract or what the caller named the
call, so nothing here can carry a value a record could not, except the
opt-in arguments and result, which are redacted as records redact them and
cut at ``MAX_CAPTURED_CHARS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .._contract import Spec, ToolContract
from .._reasons import WRITE_IN_PROGRESS, WRITE_UNKNOWN, parse_reason, shown
from .._records import REDACTED, CallRecord, redact_value

__all__ = [
    "ARGUMENTS",
    "DURATION",
    "ERROR_TYPE",
    "MAX_CAPTURED_CHARS",
    "OPERATION",
    "OTHER_TOOL",
    "REFUSALS",
    "REQUEST_ID",
    "RESULT",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "captured_args",
    "captured_result",
    "metric_attributes",
    "record_attributes",
    "span_name",
    "start_attributes",
    "write_state",
]

OPERATION = "gen_ai.operation.name"
EXECUTE_TOOL = "execute_tool"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_DESCRIPTION = "gen_ai.tool.description"
ERROR_TYPE = "error.type"
ARGUMENTS = "gen_ai.tool.call.arguments"
RESULT = "gen_ai.tool.call.result"
REQUEST_ID = "agtool.request_id"
#: The histogram of call durations, in seconds (semantic-conventions-genai ``execute-tool.md``).
DURATION = "gen_ai.execute_tool.duration"
#: The counter of failed calls, by ``error.type`` (no convention has one yet).
REFUSALS = "agtool.refusals"
#: The tool name a metric carries for a name the table does not have: the model chose it,
#: and a metric's attributes must stay few (the conventions' ``_OTHER``).
OTHER_TOOL = "_OTHER"
#: How much of the opt-in arguments or result a span carries, as JSON text.
MAX_CAPTURED_CHARS = 4096


def span_name(tool: str, known: bool) -> str:
    """``execute_tool {tool}``; a name the table lacks is not put in a span's name."""
    return f"{EXECUTE_TOOL} {tool}" if known else EXECUTE_TOOL


def start_attributes(tool: str, contract: ToolContract | None,
                     step_id: object) -> dict[str, Any]:
    """What is known of a call before it runs: the tool, its contract, its call id.

    Not its run id: a record carries none (a thread id may name a user), nor does a span.
    """
    attributes: dict[str, Any] = {OPERATION: EXECUTE_TOOL, TOOL_NAME: tool,
                                  TOOL_TYPE: "function"}
    if type(step_id) is str:
        attributes[TOOL_CALL_ID] = shown(step_id)
    if contract is not None:
        if contract.description:
            attributes[TOOL_DESCRIPTION] = contract.description
        attributes["agtool.effect"] = contract.effect
        attributes["agtool.risk"] = contract.risk
    return attributes


def record_attributes(record: CallRecord, effect: str, dry_run: bool) -> dict[str, Any]:
    """What the call's record says: how it ended, and the ids a record carries."""
    attributes: dict[str, Any] = {
        REQUEST_ID: record.request_id, "agtool.memo_hit": record.memo_hit,
        "agtool.replayed": record.replayed}
    if record.contract_hash:
        attributes["agtool.contract_hash"] = record.contract_hash
    if record.args_digest:
        attributes["agtool.args_digest"] = record.args_digest
    if not record.ok:
        # The code, never the reason, is ``error.type``: a reason may echo a name the model
        # chose (``args:unexpected:<name>``), which no backend can group by.
        attributes[ERROR_TYPE] = record.code
        attributes["agtool.code"] = record.code  # kept if a framework's error.type replaces it
        attributes["agtool.reason"] = record.reason
    if dry_run:
        attributes["agtool.dry_run"] = True
    elif effect == "write":
        state = write_state(record)
        if state:
            attributes["agtool.write.state"] = state
    return attributes


def write_state(record: CallRecord) -> str:
    """What the answer of a write's call says of its idempotency key, or ``""``.

    ``done``: its outcome is stored (this call's, or an earlier one replayed);
    ``claimed``: another call's body holds it now; ``unknown``: a body started
    and its outcome was not recorded. A call refused before its key was claimed
    says nothing, nor does one whose answer leaves the key in one of two states:
    ``timeout`` (still claimed by a body running on past the contract's timeout,
    or unknown after a body's own ``TimeoutError``) and a retryable upstream
    failure (unknown, or freed by a body that said nothing was applied).
    """
    if record.ok or record.replayed:
        return "done"
    reason = record.reason
    if reason == WRITE_UNKNOWN:
        return "unknown"
    if reason == WRITE_IN_PROGRESS:
        return "claimed"
    stage, check, _ = parse_reason(reason)
    if stage in ("result", "raised") or (stage == "upstream" and check[:1] == "4"
                                         and check != "429"):
        return "done"  # the body's own failure, kept: a repeat is answered it
    return ""


def metric_attributes(record: CallRecord) -> dict[str, Any]:
    """A metric point's few attributes: the tool (if the table has it) and the code."""
    attributes: dict[str, Any] = {
        OPERATION: EXECUTE_TOOL,
        TOOL_NAME: record.tool if record.contract_hash else OTHER_TOOL}
    if not record.ok:
        attributes[ERROR_TYPE] = record.code
    return attributes


def captured_args(contract: ToolContract | None, args: object) -> str:
    """The call's arguments as a span may carry them (opt-in), as JSON text.

    Every value the contract marks sensitive is redacted, as in records. So is
    every value under a name the contract does not declare, at any depth (a
    misspelt ``pasword`` is still a password), and every value of a tool the
    table lacks: only declared, non-sensitive values are shown.
    """
    if not isinstance(args, dict):
        return _json(REDACTED)
    return _json(_declared({} if contract is None else contract.args, args))


def _declared(specs: Mapping[str, Spec], value: dict[Any, Any]) -> dict[str, Any]:
    """``value`` with only what ``specs`` name and do not mark sensitive left in clear."""
    return {_key(key): _declared_value(specs[key], item) if key in specs else REDACTED
            for key, item in value.items()}


def _declared_value(spec: Spec, value: object) -> object:
    if spec.sensitive:
        return REDACTED
    item = spec.item
    if isinstance(item, Mapping):  # named keys: a dict of them, or a list of such dicts
        if isinstance(value, dict):
            return _declared(item, value)
        if isinstance(value, list):
            return [_declared(item, element) if isinstance(element, dict) else element
                    for element in value]
    elif isinstance(item, Spec) and isinstance(value, list):
        return [_declared_value(item, element) for element in value]
    return value


def captured_result(contract: ToolContract | None, value: object) -> str:
    """A returned value as a span may carry it (opt-in), sensitive keys redacted, as JSON."""
    return _json(value if contract is None else redact_value(contract, value))


def _key(key: object) -> str:
    return shown(key) if type(key) is str else f"<{type(key).__name__}>"


def _json(value: object) -> str:
    try:
        text = orjson.dumps(value, default=_unwritten, option=orjson.OPT_NON_STR_KEYS).decode()
    except Exception:  # a value nested too deep, or whose own methods raise
        return '"<not JSON>"'
    return text if len(text) <= MAX_CAPTURED_CHARS else text[:MAX_CAPTURED_CHARS] + "...(cut)"


def _unwritten(value: object) -> str:
    # Its type only: str() of an arbitrary object may hold what redaction took out.
    return f"<{type(value).__name__}>"
