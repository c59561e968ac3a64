"""Contract tables the tests share, written by hand."""

from __future__ import annotations

from typing import Any


def _ticket(**args: Any) -> dict[str, Any]:
    return {"id": "T-0001", "tags": ["a"]}


#: A table written to have every argument check and every result check, nested ones included.
TICKETS: dict[str, dict[str, Any]] = {
    "open_ticket": {
        "fn": _ticket,
        "args": {
            "request_id": {"type": "str", "echo": True},
            "title": {"type": "str", "min_len": 3, "max_len": 40},
            "queue": {"type": "str", "allowed": ["billing", "tech"]},
            "priority": {"type": "int", "min": 1, "max": 5},
            "ref": {"type": "str", "pattern": "T-[0-9]{4}", "required": False},
            "tags": {"type": "list", "max_len": 3, "required": False,
                     "item": {"type": "str", "min_len": 1}},
            "notes": {"type": "list", "min_len": 1, "required": False,
                      "item": {"author": {"type": "str"}, "score": {"type": "float", "min": 0}}},
        },
        "returns": {
            "id": {"type": "str", "pattern": "T-[0-9]{4}"},
            "tags": {"type": "list", "max_len": 3, "item": {"type": "str"}},
            "state": {"type": "str", "allowed": ["open", "held"], "required": False},
        },
    },
}
