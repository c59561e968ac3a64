"""agtool: contract tables and a call gate for the tools an LLM agent calls.

A contract table names each tool's function, argument contract and return
contract. ``Gate(table)`` validates it, then checks every call's arguments
before the body runs and its result after, remembers successes, and answers
failures as values with a short reason instead of raising. The same table is
exported as JSON Schema and provider tool specs, imported from them, and
linted. The reference tools and the agent graph live in ``agtool.tools``.
"""

from ._contract import SPEC_KEYS, TYPES, Spec, ToolContract, check_table
from ._errors import AgtoolError, ContractError
from ._gate import Envelope, Gate, ToolStats
from ._jsonschema import (
    STRICTER_THAN_JSON_SCHEMA,
    SchemaError,
    export_tools,
    from_json_schema,
    load_tools_file,
    output_schema,
    to_json_schema,
    tool_spec,
)
from ._lint import Finding, echo_match_rate, lint_file, lint_schema, lint_table
from ._reasons import ARG_CHECKS, ARG_REASONS, RESULT_CHECKS, STAGES, Reason, parse_reason

__all__ = [
    "ARG_CHECKS",
    "ARG_REASONS",
    "RESULT_CHECKS",
    "SPEC_KEYS",
    "STAGES",
    "STRICTER_THAN_JSON_SCHEMA",
    "TYPES",
    "AgtoolError",
    "ContractError",
    "Envelope",
    "Finding",
    "Gate",
    "Reason",
    "SchemaError",
    "Spec",
    "ToolContract",
    "ToolStats",
    "check_table",
    "echo_match_rate",
    "export_tools",
    "from_json_schema",
    "lint_file",
    "lint_schema",
    "lint_table",
    "load_tools_file",
    "output_schema",
    "parse_reason",
    "to_json_schema",
    "tool_spec",
]

__version__ = "0.1.0"
