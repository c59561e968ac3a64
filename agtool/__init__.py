"""agtool: contract tables and a call gate for the tools an LLM agent calls.

A contract table names each tool's function, argument contract and return
contract. ``Gate(table)`` validates it, then checks every call's arguments
before the body runs and its result after, remembers successes, and answers
failures as values with a short reason instead of raising.
"""

from ._contract import SPEC_KEYS, TYPES, Spec, ToolContract, check_table
from ._errors import AgtoolError, ContractError
from ._gate import Envelope, Gate, ToolStats
from ._reasons import ARG_CHECKS, ARG_REASONS, RESULT_CHECKS, STAGES, Reason, parse_reason

__all__ = [
    "ARG_CHECKS",
    "ARG_REASONS",
    "RESULT_CHECKS",
    "SPEC_KEYS",
    "STAGES",
    "TYPES",
    "AgtoolError",
    "ContractError",
    "Envelope",
    "Gate",
    "Reason",
    "Spec",
    "ToolContract",
    "ToolStats",
    "check_table",
    "parse_reason",
]

__version__ = "0.1.0"
