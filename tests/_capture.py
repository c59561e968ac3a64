"""The ``agtool`` logger's records at DEBUG, as a plain and a structured handler see them."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


class Captured(logging.Handler):
    """Every record under ``agtool``, formatted as a plain handler would: exc_info included."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))
        # A structured handler reads the record's own fields, not the formatted line.
        self.texts.append(repr({key: item for key, item in vars(record).items()
                                if key not in ("exc_info", "exc_text")}))


@contextlib.contextmanager
def capturing() -> Iterator[Captured]:
    """The ``agtool`` logger's records at DEBUG, inside the ``with``."""
    handler = Captured()
    logger = logging.getLogger("agtool")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
