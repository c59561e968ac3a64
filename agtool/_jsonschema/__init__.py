"""JSON Schema out of a contract table, and contract entries out of JSON Schema.

Out: ``to_json_schema`` and ``output_schema`` give Draft 2020-12 schemas that
say exactly what the gate checks, and ``tool_spec`` / ``export_tools`` wrap
them as OpenAI, Anthropic or MCP tool definitions.

In: ``from_json_schema`` turns a schema in the same subset into a table entry,
and ``load_tools_file`` reads a JSON file of provider tool definitions into a
table. A keyword outside the subset is refused with ``SchemaError`` naming it
and where it is, never dropped: a dropped ``maximum`` is a hole in the gate.

Where the gate accepts less than the ``jsonschema`` package does on the
exported schema is listed once, in ``STRICTER_THAN_JSON_SCHEMA``. Patterns are
read by the gate with RE2 (``agtool._patterns``), not with JSON Schema's
ECMA 262 nor the ``jsonschema`` package's Python ``re``; the differences are
under its ``"pattern"`` entry. Entry keys that configure the gate rather than
the arguments (``effect``, ``risk``, ``key_args``, ``timeout``, ``ttl``,
``source``, ``trust``) are not schema and are not exported as such; on import,
an MCP tool's annotations give its ``effect`` and ``risk`` (``IMPORTED_EFFECTS``).

    AgtoolError
    └── ContractError (also a ValueError)
        └── SchemaError: a schema or tools file outside the subset, or malformed
"""


from __future__ import annotations

from .._errors import SchemaError
from .ecma import gate_pattern
from .export import (
    DIALECT,
    ECHO_KEYWORD,
    ECHO_NOTE,
    FORMATS,
    STRICTER_THAN_JSON_SCHEMA,
    Stricter,
    export_tools,
    mcp_annotations,
    openai_strict_problems,
    output_schema,
    to_json_schema,
    tool_spec,
)
from .importer import from_json_schema
from .toolfiles import (
    IMPORTED_EFFECTS,
    OPEN_WORLD_SOURCE,
    ToolDefinition,
    import_tool,
    load_tools,
    load_tools_file,
    read_tools_file,
    tool_definition,
)

__all__ = [
    "DIALECT",
    "ECHO_KEYWORD",
    "ECHO_NOTE",
    "FORMATS",
    "IMPORTED_EFFECTS",
    "OPEN_WORLD_SOURCE",
    "STRICTER_THAN_JSON_SCHEMA",
    "SchemaError",
    "Stricter",
    "ToolDefinition",
    "export_tools",
    "from_json_schema",
    "gate_pattern",
    "import_tool",
    "load_tools",
    "load_tools_file",
    "mcp_annotations",
    "openai_strict_problems",
    "output_schema",
    "read_tools_file",
    "to_json_schema",
    "tool_definition",
    "tool_spec",
]
