"""Contract tables the tests share, written by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agtool import UpstreamError


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
            "due": {"type": "str", "format": "date", "required": False},
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


#: A card with a character of each kind the spellings of tests/_spellings.py treat apart,
#: and its RARE character, so a hit of the oracle is a leak.
EVERY_KIND = "O'Brien/é & <co> 4242-\u01c2-漢9999"


def echoing_pay_table(encode: Callable[[str], str], **entry: Any) -> dict[str, Any]:
    """A ``pay`` tool with a sensitive ``card`` whose upstream fails quoting it as ``encode``
    spells it: what each channel's test of the spellings runs."""
    def pay(card: str, amount: int) -> Any:
        raise UpstreamError(502, "card=" + encode(card) + " declined")

    return {"pay": {"fn": pay, "args": {"card": {"type": "str", "sensitive": True},
                                        "amount": {"type": "int"}},
                    "returns": {"ok": {"type": "bool"}}, **entry}}
