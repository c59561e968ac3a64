"""The harness: what must never happen at the gate, proved on every run.

- The checks (``check_refused``, ``check_memo``, ``check_returns`` and the rest):
  plain functions over a gate built by ``instrument``, raising ``AssertionError``
  with a readable account when a promise breaks. Tests, the pytest items and the
  report all call them.
- ``agtool.harness.strategies``: the Hypothesis strategies that feed them, all
  derived from a contract table.
- The items ``pytest --agtool-table`` and ``--agtool-mcp`` collect
  (``_pytest_table``, ``_pytest_mcp``), registered by the ``pytest_agtool`` entry
  point with the options it owns, and the check of an MCP server from the outside
  (``_mcp_check``, behind ``agtool check --mcp``).
"""

from __future__ import annotations

from ._checks import (
    ENVELOPE_KEYS,
    LAST,
    REAL,
    Body,
    LastCall,
    body_of,
    check_bad_result,
    check_envelope,
    check_hostile,
    check_interrupted,
    check_memo,
    check_refused,
    check_replaced,
    check_returns,
    contents,
    echo_of,
    instrument,
    last_call,
    raised_at,
    same_value,
    show,
    writes,
)

__all__ = [
    "ENVELOPE_KEYS",
    "LAST",
    "REAL",
    "Body",
    "LastCall",
    "body_of",
    "check_bad_result",
    "check_envelope",
    "check_hostile",
    "check_interrupted",
    "check_memo",
    "check_refused",
    "check_replaced",
    "check_returns",
    "contents",
    "echo_of",
    "instrument",
    "last_call",
    "raised_at",
    "same_value",
    "show",
    "writes",
]
