"""Exceptions agtool raises.

Only programming mistakes raise; bad arguments and bad results are data
(reasons returned by the gate), never exceptions.

    AgtoolError
    └── ContractError (also a ValueError): a malformed contract table
        └── SchemaError: a JSON Schema or tools file that cannot become a contract exactly
"""

from __future__ import annotations

__all__ = ["AgtoolError", "ContractError"]


class AgtoolError(Exception):
    """Root of every exception agtool raises."""


class ContractError(AgtoolError, ValueError):
    """A contract table is malformed.

    Raised when a table is registered (``Gate(table)``, ``check_table``), never
    while a call is being gated. ``tool``, ``field`` and ``problem`` say where
    and what: ``field`` is a dotted path such as ``args.limit.max``.
    """

    def __init__(self, tool: str, field: str, problem: str) -> None:
        self.tool = tool
        self.field = field
        self.problem = problem
        where = f"tool {tool!r}" + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")
