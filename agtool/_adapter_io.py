"""What a model hands an adapter and what it is handed back, for every framework adapter.

A framework gives a tool the model's arguments as JSON text or as the dict it
parsed from it; ``model_args`` reads them without coercing anything (``"5"``
stays a string, ``True`` a bool, an extra key stays there to be refused) and
leaves text that is not JSON as text, which the gate refuses as
``args:not_object`` with a structured error instead of the framework raising.
``answer_text`` is the JSON a gate's answer is handed to a model as.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["answer_text", "model_args"]


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


def answer_text(answer: dict[str, Any]) -> str:
    """A gate's answer as the JSON text a model reads; never raises."""
    try:
        return json.dumps(answer, ensure_ascii=False, default=repr)
    except ValueError:  # a value that holds itself has no JSON form
        return repr(answer)
