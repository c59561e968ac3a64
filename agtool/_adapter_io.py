"""What a model hands an adapter and what it is handed back, for every framework adapter.

A framework gives a tool the model's arguments as JSON text or as the dict it
parsed from it; ``model_args`` reads them without coercing anything (``"5"``
stays a string, ``True`` a bool, an extra key stays there to be refused) and
leaves text that is not JSON as text, which the gate refuses as
``args:not_object`` with a structured error instead of the framework raising.
``answer_text`` is the JSON a gate's answer is handed to a model as; an answer
that has none (a value whose ``repr`` raises, a key JSON cannot write, a list
that holds itself, nesting past the recursion limit, an int past Python's
int-to-str limit) is handed over as the structured error
``result:unrenderable`` instead (``rendered``), never raised into the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._answers import unrenderable

__all__ = ["answer_text", "model_args", "rendered"]

#: ``json.dumps(answer, ensure_ascii=False, default=repr)`` without making its encoder anew
#: on every call, as ``json.dumps`` does for any argument of its own.
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=repr).encode


def model_args(raw: object) -> object:
    """The model's args as the gate must see them: JSON text parsed, anything else as given.

    Empty text is no arguments (``{}``), as the frameworks read it; text that is
    not JSON is returned unparsed, so the gate answers it ``args:not_object``.
    """
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if not isinstance(raw, str):
        return raw
    if not raw.strip():
        return {}
    try:
        # The standard parser, not orjson: orjson reads an int beyond 64 bits as a float.
        return json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past what a parser will read
        return raw


def rendered(answer: dict[str, Any], default: Callable[[Any], Any] = repr
             ) -> tuple[dict[str, Any], str]:
    """``(answer, its JSON text)``, or, for an answer that has no JSON text, the
    ``result:unrenderable`` error answer and its text; never raises.

    ``default`` writes what JSON has no form for (a ``datetime``, an object),
    as ``json.dumps`` calls it; one that raises makes the answer unrenderable.
    """
    try:
        text = _ENCODE(answer) if default is repr else \
            json.dumps(answer, ensure_ascii=False, default=default)
        return answer, text
    except Exception:  # TypeError, ValueError, RecursionError, or the default's own
        refusal = unrenderable(None, _request_id(answer))
        return refusal, json.dumps(refusal, ensure_ascii=False)


def _request_id(answer: object) -> object:
    try:
        return dict.get(answer, "request_id") if isinstance(answer, dict) else None
    except Exception:  # a key that cannot be compared: the id is not needed
        return None


def answer_text(answer: dict[str, Any]) -> str:
    """A gate's answer as the JSON text a model reads (see ``rendered``); never raises."""
    return rendered(answer)[1]
