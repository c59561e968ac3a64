"""agtool: contract tables and a call gate for the tools an LLM agent calls.

A contract table names each tool's function, argument contract and return
contract. ``Gate(table)`` validates it, then checks every call's arguments
before the body runs and its result after, remembers successes, and answers
failures as values with a short reason instead of raising. The same table is
exported as JSON Schema and provider tool specs, imported from them, and
linted. Tools that touch the world declare their effect and risk: the gate
authorizes each call against the caller's scope, binds approvals to exact
arguments, runs each write once per idempotency key (``SqliteStore``), hands
the model structured errors and output marked by source and trust
(``Gate.call_for_model``), and writes one ``CallRecord`` per call. The
repair graph for any table is ``agtool.graph``; the adapters are
``agtool.langchain`` (LangChain agents, LangGraph ``ToolNode``) and
``agtool.mcp`` (serve a table, or proxy a server); ``agtool.otel`` gives each
call an OpenTelemetry span; the reference tools and the seed's stock agent live
in ``agtool.tools``.
"""

from ._answers import (
    CODES,
    RETRYABLE_CODES,
    UNTRUSTED_NOTE,
    error_code,
    is_retryable,
    model_error,
)
from ._authority import Approval, Approver
from ._contract import (
    EFFECTS,
    RISKS,
    SPEC_KEYS,
    TRUST_LEVELS,
    TYPES,
    Spec,
    ToolContract,
    check_table,
)
from ._errors import AgtoolError, ContractError, NotApplied, UpstreamError
from ._gate import DEFAULT_SCOPE, Gate
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
from ._jsonschema.lint import Finding, echo_match_rate, lint_file, lint_schema, lint_table
from ._memo import DEFAULT_MEMO_BYTES, DEFAULT_MEMO_SIZE, DEFAULT_MEMO_TTL, Memo
from ._outcome import Envelope
from ._reasons import (
    ARG_CHECKS,
    ARG_REASONS,
    RESULT_CHECKS,
    STAGES,
    WRITE_REASONS,
    Reason,
    parse_reason,
    shown,
)
from ._records import REDACTED, CallRecord, JsonLinesSink, RecordSink, contract_hash
from ._stats import ToolStats
from ._store import Claim, SqliteStore, StoredWrite, WriteStore
from ._store.postgres import PostgresStore

__all__ = [
    "ARG_CHECKS",
    "ARG_REASONS",
    "CODES",
    "DEFAULT_MEMO_BYTES",
    "DEFAULT_MEMO_SIZE",
    "DEFAULT_MEMO_TTL",
    "DEFAULT_SCOPE",
    "EFFECTS",
    "REDACTED",
    "RESULT_CHECKS",
    "RETRYABLE_CODES",
    "RISKS",
    "SPEC_KEYS",
    "STAGES",
    "STRICTER_THAN_JSON_SCHEMA",
    "TRUST_LEVELS",
    "TYPES",
    "UNTRUSTED_NOTE",
    "WRITE_REASONS",
    "AgtoolError",
    "Approval",
    "Approver",
    "CallRecord",
    "Claim",
    "ContractError",
    "Envelope",
    "Finding",
    "Gate",
    "JsonLinesSink",
    "Memo",
    "NotApplied",
    "PostgresStore",
    "Reason",
    "RecordSink",
    "SchemaError",
    "Spec",
    "SqliteStore",
    "StoredWrite",
    "ToolContract",
    "ToolStats",
    "UpstreamError",
    "WriteStore",
    "check_table",
    "contract_hash",
    "echo_match_rate",
    "error_code",
    "export_tools",
    "from_json_schema",
    "is_retryable",
    "lint_file",
    "lint_schema",
    "lint_table",
    "load_tools_file",
    "model_error",
    "output_schema",
    "parse_reason",
    "shown",
    "to_json_schema",
    "tool_spec",
]

__version__ = "0.1.0"
