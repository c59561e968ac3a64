"""Known-good calls of an MCP tool: what a defect is planted on, so a refusal can be pinned.

A refusal proves something only when the same call without the defect is
accepted. Random valid draws seldom are on a real server (a path outside its
root, a timezone named ``""``, an entity that does not exist), so the harness
first looks for calls that succeed:

- the calls the user gives, ``--examples FILE``: a JSON object of tool name to
  a list of argument objects (``{"get_current_time": [{"timezone": "UTC"}]}``);
- the schema's own hints: the input schema's ``examples``, and for each
  argument its ``default``, ``examples``, ``const`` or first ``enum`` value,
  over the simplest valid call;
- every valid call the server accepted earlier in the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ExamplesError", "hinted_calls", "read_examples"]

#: The most hinted calls made of one schema: each is a round trip before the draws.
MAX_HINTED = 4


class ExamplesError(ValueError):
    """An ``--examples`` file that cannot be read as tool name -> list of calls."""


def read_examples(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The calls of an ``--examples`` file, per tool; ``ExamplesError`` naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ExamplesError(f"--examples {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ExamplesError(f"--examples {path}: expected an object of tool name -> list of "
                            f"argument objects, got {type(data).__name__}")
    calls: dict[str, list[dict[str, Any]]] = {}
    for tool, given in data.items():
        if not isinstance(given, list) or not all(isinstance(call, dict) for call in given):
            raise ExamplesError(f"--examples {path}: tool {tool!r}: expected a list of "
                                f"argument objects")
        calls[tool] = [dict(call) for call in given]
    return calls


def _hints(schema: Any) -> list[Any]:
    """The values a property's schema itself offers, most telling first."""
    if not isinstance(schema, dict):
        return []
    found: list[Any] = []
    if "default" in schema:
        found.append(schema["default"])
    examples = schema.get("examples")
    if isinstance(examples, list):
        found += examples
    if "const" in schema:
        found.append(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list):
        found += enum
    return found


def hinted_calls(input_schema: Mapping[str, Any], simplest: Mapping[str, Any] | None
                 ) -> list[dict[str, Any]]:
    """Calls made of the schema's own hints: its ``examples``, then the simplest valid call
    with each argument the schema offers a value for set to that value (its first, then its
    second), then the simplest call alone. Not checked here: the caller keeps the valid ones."""
    calls: list[dict[str, Any]] = [dict(example) for example in
                                   input_schema.get("examples") or [] if isinstance(example, dict)]
    properties = input_schema.get("properties")
    hints = {name: _hints(schema) for name, schema in
             (properties.items() if isinstance(properties, dict) else ())}
    hints = {name: values for name, values in hints.items() if values}
    base = dict(simplest or {})
    for rank in range(2):
        if hints and any(len(values) > rank for values in hints.values()):
            calls.append({**base, **{name: values[min(rank, len(values) - 1)]
                                     for name, values in hints.items()}})
    if simplest is not None:
        calls.append(base)
    return _distinct(calls)[:MAX_HINTED]


def _distinct(calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    kept = []
    for call in calls:
        key = json.dumps(call, sort_keys=True, default=repr)
        if key not in seen:
            seen.add(key)
            kept.append(call)
    return kept
