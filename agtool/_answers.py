"""What a model is handed: structured errors made from the gate's reasons.

``model_error`` is a pure function of the reason, the contract and the
arguments: the same failed call always gives the same ``code``, ``retryable``
and ``message``, and ``retryable`` is decided here, never by the model.
``transport_failure`` reads a tool body's exception as an upstream failure
(an HTTP status, a refused connection) so that an error page is never handed
to a model as data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ._contract import Spec, ToolContract
from ._errors import UpstreamError
from ._reasons import parse_reason

__all__ = ["CODES", "EXCERPT_CHARS", "RETRYABLE_CODES", "error_code", "is_retryable",
           "model_error", "transport_failure"]

#: Every code a model can be answered with.
CODES = (
    "INVALID_ARGUMENT",  # an argument breaks the contract: fix it, do not repeat it
    "UNKNOWN_TOOL",
    "NOT_FOUND",  # the upstream answered 404
    "EMPTY_RESULT",  # the tool ran and found nothing
    "RESULT_TOO_LARGE",
    "BAD_RESULT",  # the tool answered something its contract refuses
    "UPSTREAM_ERROR",
    "TIMEOUT",
    "RATE_LIMITED",
    "PERMISSION_DENIED",
    "APPROVAL_REQUIRED",
    "CONFLICT",  # the idempotency key was used with other arguments
    "IN_PROGRESS",  # the same write is running elsewhere
    "INTERNAL",  # the tool or its caller is broken; nothing the model can do
)
#: Codes worth repeating the same call for, after a pause.
RETRYABLE_CODES = frozenset({"TIMEOUT", "RATE_LIMITED", "IN_PROGRESS"})
#: How much of an upstream's answer ``details.raw_excerpt`` keeps.
EXCERPT_CHARS = 200

_BY_STAGE_CHECK = {
    ("args", "unknown_tool"): "UNKNOWN_TOOL",
    ("args", "bad_contract"): "INTERNAL",
    ("result", "empty"): "EMPTY_RESULT",
    ("result", "too_big"): "RESULT_TOO_LARGE",
    ("result", "shape"): "BAD_RESULT",
    ("result", "range"): "BAD_RESULT",
    ("auth", "scope"): "PERMISSION_DENIED",
    ("auth", "approval"): "APPROVAL_REQUIRED",
    ("write", "no_key"): "INTERNAL",
    ("write", "conflict"): "CONFLICT",
    ("write", "in_progress"): "IN_PROGRESS",
    ("write", "store"): "UPSTREAM_ERROR",
}


def error_code(reason: str) -> str:
    """The stable code of a ``call_tool`` reason (``""`` for success)."""
    stage, check, _ = parse_reason(reason)
    if not stage:
        return ""
    code = _BY_STAGE_CHECK.get((stage, check))
    if code is not None:
        return code
    if stage == "args":
        return "INVALID_ARGUMENT"
    if stage == "timeout":
        return "TIMEOUT"
    if stage == "upstream":
        return {"404": "NOT_FOUND", "429": "RATE_LIMITED"}.get(check, "UPSTREAM_ERROR")
    return "INTERNAL"  # raised, or a reason from a newer vocabulary


def is_retryable(reason: str) -> bool:
    """Whether the same call may succeed if made again: decided by code, from the reason alone.

    Timeouts, rate limits, a write running elsewhere, an unreachable store, a
    refused connection and upstream 5xx answers are; argument errors, empty
    results, refusals of authority and conflicts never are.
    """
    stage, check, _ = parse_reason(reason)
    if stage == "upstream":
        return check == "connection" or check == "429" or check.startswith("5")
    return error_code(reason) in RETRYABLE_CODES or reason == "write:store"


def model_error(reason: str, contract: ToolContract | None, args: object,
                details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"code", "retryable", "message", "details"}`` for a failed call.

    ``details`` always holds the gate's ``reason``; an argument error adds
    ``fields``, one ``{"path", "issue", "rule", …}`` per argument at fault,
    with the contract's ``allowed`` values or bounds when they say what to send.
    """
    stage, check, arg = parse_reason(reason)
    fields: list[dict[str, Any]] = []
    if stage == "args" and arg:
        fields.append(_field_issue(contract, args, check, arg))
    more = {"fields": fields} if fields else {}
    return {
        "code": error_code(reason),
        "retryable": is_retryable(reason),
        "message": _message(reason, contract, fields),
        "details": {"reason": reason, **more, **(details or {})},
    }


def _show(value: object) -> str:
    text = value if type(value) is str else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _listed(values: Any) -> str:
    return ", ".join(_show(value) for value in values)


_RULES: dict[str, Callable[[Spec], str]] = {
    "type": lambda spec: f"must be of type {spec.type}",
    "min": lambda spec: f"must be at least {spec.min}",
    "max": lambda spec: f"must be at most {spec.max}",
    "min_len": lambda spec: f"must have at least {spec.min_len} "
                            + ("characters" if spec.type == "str" else "items"),
    "max_len": lambda spec: f"must have at most {spec.max_len} "
                            + ("characters" if spec.type == "str" else "items"),
    "pattern": lambda spec: f"must match {spec.pattern}",
    "echo": lambda spec: "must repeat the value you were given, unchanged",
}


def _field_issue(contract: ToolContract | None, args: object, check: str,
                 arg: str) -> dict[str, Any]:
    spec = contract.args.get(arg) if contract is not None else None
    given = args.get(arg) if isinstance(args, dict) else None
    shown = "[redacted]" if spec is not None and spec.sensitive else _show(given)
    issue: dict[str, Any] = {"path": arg, "rule": check}
    if check == "missing":
        issue["issue"] = "is required"
    elif check == "unexpected":
        known = _listed(contract.args) if contract is not None else ""
        issue["issue"] = "is not an argument" + (f"; arguments: {known}" if known else "")
    elif spec is None:
        issue["issue"] = f"breaks its {check} rule"
    elif check == "allowed" and spec.allowed is not None:
        issue["issue"] = f"must be one of {_listed(spec.allowed)}; got {shown}"
        issue["allowed"] = list(spec.allowed)
    elif check == "type" and not _is_item_defect(spec, check, given):
        issue["issue"] = f"must be of type {spec.type}; got {type(given).__name__}"
        issue["type"] = spec.type
    elif check in _RULES and not _is_item_defect(spec, check, given):
        issue["issue"] = f"{_RULES[check](spec)}; got {shown}"
        issue.update({key: value for key, value in (("min", spec.min), ("max", spec.max))
                      if check in ("min", "max") and value is not None})
    else:
        issue["issue"] = f"has an item that breaks its {check} rule"
    return issue


def _is_item_defect(spec: Spec, check: str, given: object) -> bool:
    """Whether a reason reported against a list argument is about one of its items."""
    if spec.type != "list":
        return False
    if check == "type":
        return isinstance(given, list)
    if check in ("min_len", "max_len") and isinstance(given, list):
        own = spec.min_len if check == "min_len" else spec.max_len
        if own is not None and (len(given) < own if check == "min_len" else len(given) > own):
            return False
    return True


def _message(reason: str, contract: ToolContract | None, fields: list[dict[str, Any]]) -> str:
    stage, check, arg = parse_reason(reason)
    if fields:
        return f"{arg} {fields[0]['issue']}"
    tool = contract.name if contract is not None else "the tool"
    if stage == "args":
        return {"unknown_tool": "no such tool; choose one of the tools you were given",
                "not_object": "arguments must be a JSON object",
                "bad_contract": f"{tool} is misconfigured; use another tool"}.get(check, reason)
    if stage == "result":
        return {"empty": f"{tool} found nothing for these arguments",
                "too_big": f"{tool} answered more than its contract allows; narrow the request",
                }.get(check, f"{tool} answered a value its contract refuses")
    if stage == "auth":
        if check == "scope":
            return f"this caller may not use {arg} tools such as {tool}"
        return f"{tool} needs an approval of these exact arguments before it runs"
    if stage == "write":
        return {"no_key": f"{tool} writes: the caller must give a run id and step id",
                "conflict": "this idempotency key was already used with other arguments",
                "in_progress": "the same write is running elsewhere; try again shortly",
                }.get(check, "the idempotency store is unavailable; try again shortly")
    if stage == "timeout":
        return f"{tool} did not answer in time; the same call may be tried again"
    if stage == "upstream":
        return (f"{tool}'s upstream failed ({check}); "
                + ("the same call may be tried again" if is_retryable(reason)
                   else "do not repeat this call"))
    return f"{tool} failed ({check or reason}); do not repeat this call"


_SPACE = re.compile(r"\s+")


def transport_failure(exc: BaseException) -> tuple[str, dict[str, Any]] | None:
    """``("upstream:<status>", details)`` for an exception that is a transport failure, else None.

    Recognised: ``agtool.UpstreamError``, any exception carrying an HTTP
    status of 400 or more (``status_code`` or ``status`` on itself or on its
    ``response``, as ``requests`` and ``httpx`` raise them), and the standard
    ``ConnectionError``. ``details`` keeps the status, a short whitespace-
    collapsed ``raw_excerpt`` of the answer and ``retry_after_ms`` when given.
    """
    if isinstance(exc, ConnectionError):
        return "upstream:connection", {}
    response = getattr(exc, "response", None)
    status = _status_of(exc) or _status_of(response)
    if status is None:
        return None
    details: dict[str, Any] = {"status": status}
    body = exc.body if isinstance(exc, UpstreamError) else getattr(response, "text", "")
    if isinstance(body, str) and body:
        details["raw_excerpt"] = _SPACE.sub(" ", body).strip()[:EXCERPT_CHARS]
    retry_after = exc.retry_after if isinstance(exc, UpstreamError) else _header_retry(response)
    if retry_after is not None:
        details["retry_after_ms"] = round(retry_after * 1000)
    return f"upstream:{status}", details


def _status_of(thing: object) -> int | None:
    for name in ("status_code", "status"):
        status = _attribute(thing, name)
        if type(status) is int and 400 <= status <= 599:
            return status
    return None


def _attribute(thing: object, name: str) -> object:
    try:
        return getattr(thing, name, None)
    except Exception:  # a property that raises has no value to read
        return None


def _header_retry(response: object) -> float | None:
    try:
        value = response.headers.get("retry-after")  # type: ignore[attr-defined]
        seconds = float(value)
    except Exception:  # no headers, no such header, or an HTTP date: no hint
        return None
    return seconds if 0 <= seconds < 86400 else None
