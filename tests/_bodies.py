"""The counting tool body the tests share: it records each call and answers what it is told."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CountingBody:
    """A tool body that records each call's arguments in ``calls`` and answers ``make(kwargs)``.

    Without ``make`` it answers ``default(kwargs)``: ``{}`` here, a test module's own
    answer in its subclass. A ``make`` that raises makes the body raise.
    """

    def __init__(self, make: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.make = make or self.default

    def default(self, kwargs: dict[str, Any]) -> Any:
        return {}

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.make(kwargs)

    @property
    def count(self) -> int:
        return len(self.calls)
