"""A support desk's tools for the framework adapters' tests, counting their own body runs.

One read (``search_tickets``: open tickets, none for any other status, so a
closed search is ``result:empty``), one reversible write keyed by its order
(``issue_refund``) and one external effect that needs an approval
(``send_email``). The counts are the bodies' own, never read from a gate.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ROWS", "SCOPE", "SEARCH_ARGS", "Desk"]

ROWS = [{"id": "T-1", "title": "Refund not received"}, {"id": "T-2", "title": "Wrong size"}]
SEARCH_ARGS = {"status": {"type": "str", "allowed": ["open", "closed"]},
               "limit": {"type": "int", "min": 1, "max": 20},
               "assignee": {"type": "str", "required": False}}
SEARCH_RETURNS = {"tickets": {"type": "list", "item": {"id": {"type": "str"},
                                                        "title": {"type": "str"}}}}
#: The scope that lets each of the desk's tools run.
SCOPE = {"read_public", "reversible_write", "external_effect"}


class Desk:
    """The tools and their table; ``searches``, ``refunds`` and ``emails`` record each run."""

    def __init__(self) -> None:
        self.searches: list[int] = []
        self.refunds: list[str] = []
        self.emails: list[str] = []
        self.table: dict[str, dict[str, Any]] = {
            "search_tickets": {"fn": self.search, "description": "Tickets by status.",
                               "args": SEARCH_ARGS, "returns": SEARCH_RETURNS},
            "issue_refund": {"fn": self.refund, "effect": "write", "risk": "reversible_write",
                             "key_args": ["order"],
                             "args": {"order": {"type": "str", "pattern": "O-[0-9]+"},
                                      "amount": {"type": "int", "min": 1, "max": 500}},
                             "returns": {"refund_id": {"type": "str"}}},
            "send_email": {"fn": self.email, "effect": "write", "risk": "external_effect",
                           "args": {"to": {"type": "str"}, "body": {"type": "str"}},
                           "returns": {"sent": {"type": "str"}}},
        }

    def search(self, status: str, limit: int, assignee: str | None = None) -> dict[str, Any]:
        self.searches.append(limit)
        return {"tickets": ROWS[:limit] if status == "open" else []}

    def refund(self, order: str, amount: int) -> dict[str, Any]:
        self.refunds.append(order)
        return {"refund_id": f"R-{len(self.refunds)}"}

    def email(self, to: str, body: str) -> dict[str, Any]:
        self.emails.append(to)
        return {"sent": to}

    def contracts_only(self) -> dict[str, dict[str, Any]]:
        """The table with ``fn`` s that must never run: for adapters whose bodies are the
        agent's own tools."""
        return {name: {**entry, "fn": _never} for name, entry in self.table.items()}


def _never(**_: Any) -> Any:
    raise AssertionError("the table's fn is never called: the agent's tools are the bodies")
