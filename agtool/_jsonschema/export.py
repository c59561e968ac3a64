"""Out of a contract table: Draft 2020-12 schemas, provider tool definitions, MCP hints.

``to_json_schema`` and ``output_schema`` give schemas that say exactly what the gate
checks; ``tool_spec`` / ``export_tools`` wrap them as OpenAI, Anthropic or MCP tool
definitions. Where the gate accepts less than the ``jsonschema`` package does on the
exported schema is listed once, in ``STRICTER_THAN_JSON_SCHEMA``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from .._contract import Spec, ToolContract, parse_entry
from .._errors import ContractError, SchemaError
from .._patterns import fullmatcher
from .ecma import gate_pattern

__all__ = ["DIALECT", "ECHO_KEYWORD", "ECHO_NOTE", "FORMATS", "STRICTER_THAN_JSON_SCHEMA",
           "Stricter", "export_tools", "mcp_annotations", "openai_strict_problems",
           "output_schema", "to_json_schema", "tool_spec"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
FORMATS = ("openai", "anthropic", "mcp")
#: Marks an echo argument in an exported schema; read back by ``from_json_schema``.
ECHO_KEYWORD = "x-agtool-echo"
#: Appended to an echo argument's description, so the model is told in words too.
ECHO_NOTE = "Copy this value verbatim from your input: it is compared with the original."


# --- Where the gate is stricter than JSON Schema ---------------------------------------------


class Stricter(NamedTuple):
    """One place where the gate refuses what ``jsonschema`` accepts on the exported schema."""

    #: Why the two differ, in a sentence.
    why: str
    #: The gate's reading of the keyword: ``accepts(instance)`` for a type,
    #: ``accepts(pattern, instance)`` for ``pattern``; ``None`` when no schema can state it.
    accepts: Callable[..., bool] | None


def _gate_integer(value: object) -> bool:
    return type(value) is int


def _gate_number(value: object) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _gate_pattern_matches(pattern: str, value: str) -> bool:
    # What from_json_schema makes of the keyword is what the gate matches.
    return fullmatcher(gate_pattern(pattern))(value) is not None


#: Every difference between the gate and the ``jsonschema`` package validating
#: the exported schema, keyed by the JSON Schema type or keyword it narrows.
#: In each, the gate is the stricter: nothing the gate accepts is refused by the
#: schema, but for the negated class shorthands (``\\D``, ``\\W``, ``\\S``) named
#: under ``"pattern"``.
#: (``True`` is neither an integer nor a number in both, so it is not here.)
STRICTER_THAN_JSON_SCHEMA: Mapping[str, Stricter] = MappingProxyType({
    "integer": Stricter(
        "JSON Schema's integer is any number with a zero fraction, so 1.0 is one; the gate's "
        "int is an int, because a model that sends 1.0 has sent a float.",
        _gate_integer),
    "number": Stricter(
        "JSON Schema's number includes NaN and infinities where a validator is handed them "
        "(JSON text cannot carry them); the gate's floats are finite.",
        _gate_number),
    "pattern": Stricter(
        "The jsonschema package searches with Python's re, whose $ also matches before a "
        "final newline; in ECMA 262, JSON Schema's regex dialect, and in the gate's RE2 full "
        "match, the end is the end. RE2's \\d, \\w and \\b are ASCII, as in ECMA 262 and "
        "unlike Python's re, and its \\s is [\\t\\n\\f\\r ], narrower than both, so the "
        "gate is stricter on those; but it accepts more than Python's re on \\D, \\W and "
        "\\S, and more than ECMA 262 on \\S. Write explicit classes ([0-9], [^0-9]) for a "
        "pattern every validator reads alike.",
        _gate_pattern_matches),
    ECHO_KEYWORD: Stricter(
        "An echo argument must equal the value the caller passes as echo=; a schema cannot "
        "say which value that is, only that a string is required.",
        None),
})


# --- Out: contract -> JSON Schema ------------------------------------------------------------

_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
               "list": "array", "dict": "object"}


def _escape(key: str) -> str:
    """``key`` as one step of a JSON pointer."""
    return key.replace("~", "~0").replace("/", "~1")


def _contract_of(table: Mapping[str, Any], name: str) -> ToolContract:
    if not isinstance(table, Mapping):
        raise ContractError("", "", f"a contract table must be a dict, got {type(table).__name__}")
    if name not in table:
        raise ContractError(name, "", "no such tool in the table")
    return parse_entry(name, table[name])


def to_json_schema(table: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The Draft 2020-12 schema of ``name``'s arguments: what the gate checks, no more, no less.

    Arguments are closed (``additionalProperties: false`` on every object), a
    ``pattern`` is exported as ``^(?:pattern)$`` because the gate full-matches
    while JSON Schema searches (the text itself is kept, and the gate reads it
    with RE2), an echo argument is required and marked with
    ``ECHO_KEYWORD``, and an optional key that takes null for "not given"
    (``nullable``, the default) has the types ``[T, "null"]`` (and ``null`` in
    its ``enum``); one with ``nullable: False`` has ``T`` alone. The few
    values the gate refuses although the schema allows them, and how RE2 reads
    a pattern, are in ``STRICTER_THAN_JSON_SCHEMA``.
    """
    contract = _contract_of(table, name)
    return {"$schema": DIALECT, **_object_schema(name, contract.args, True, "")}


def output_schema(table: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The Draft 2020-12 schema of what ``name`` returns, as the gate checks it.

    Returned objects are open (extra keys are allowed), an optional key may be
    null unless it says ``nullable: False``, and a top-level
    returned list has ``minItems: 1`` unless its contract sets ``min_len``:
    an empty result is refused as ``result:empty``.
    """
    contract = _contract_of(table, name)
    schema = _object_schema(name, contract.returns, False, "")
    for key, spec in contract.returns.items():
        if spec.type == "list" and spec.min_len is None:
            schema["properties"][key]["minItems"] = 1
    return {"$schema": DIALECT, **schema}


def _object_schema(tool: str, specs: Mapping[str, Spec], closed: bool, where: str
                   ) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {key: _spec_schema(tool, spec, closed, f"{where}/properties/{_escape(key)}",
                                         nullable=spec.null_is_absent)
                       for key, spec in specs.items()},
        # An echo argument is refused when missing, whatever its `required` says.
        "required": [key for key, spec in specs.items() if spec.required or spec.echo],
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def _spec_schema(tool: str, spec: Spec, closed: bool, where: str, nullable: bool = False
                 ) -> dict[str, Any]:
    if spec.type == "dict" and spec.item is not None:
        named = _object_schema(tool, spec.item, closed, where)  # type: ignore[arg-type]
        if spec.description:
            named = {"type": "object", "description": spec.description, **named}
        if nullable:
            named["type"] = ["object", "null"]
        return named
    # Null is a second type, not an anyOf: strict mode and every validator read it alike,
    # and the keywords beside it (bounds, pattern, items) apply to their own type only.
    schema: dict[str, Any] = {"type": [_JSON_TYPES[spec.type], "null"] if nullable
                              else _JSON_TYPES[spec.type]}
    description = " ".join(part for part in (spec.description, ECHO_NOTE if spec.echo else "")
                           if part)
    if description:
        schema["description"] = description
    if spec.allowed is not None:
        schema["enum"] = [*spec.allowed, None] if nullable else list(spec.allowed)
    for keyword, bound in (("minimum", spec.min), ("maximum", spec.max)):
        if bound is not None:
            schema[keyword] = bound
    low, high = ("minLength", "maxLength") if spec.type == "str" else ("minItems", "maxItems")
    for keyword, bound in ((low, spec.min_len), (high, spec.max_len)):
        if bound is not None:
            schema[keyword] = bound
    if spec.pattern is not None:
        schema["pattern"] = _export_pattern(tool, spec.pattern, f"{where}/pattern")
    if isinstance(spec.item, Spec):
        schema["items"] = _spec_schema(tool, spec.item, closed, f"{where}/items")
    elif spec.item is not None:
        schema["items"] = _object_schema(tool, spec.item, closed, f"{where}/items")
    if spec.echo:
        schema[ECHO_KEYWORD] = True
    return schema


def _export_pattern(tool: str, pattern: str, where: str) -> str:
    wrapped = f"^(?:{pattern})$"
    try:
        # Compiled, never matched: Python's re is what the jsonschema package reads
        # the export with, so a pattern it refuses would make the schema unusable.
        re.compile(wrapped)
    except re.error as exc:
        # Inline global flags, for one, are legal only at the very start of a regex;
        # RE2-only syntax (\pL, \z, \Q...\E) is no JSON Schema regex either.
        raise SchemaError("", tool, where, f"pattern {pattern!r} cannot be anchored for JSON "
                          f"Schema ({exc}); write it without global inline flags or "
                          f"RE2-only syntax") from exc
    return wrapped


# --- Out: provider tool definitions ----------------------------------------------------------

_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def openai_strict_problems(table: Mapping[str, Any], name: str) -> list[str]:
    """Why ``name`` cannot be exported with OpenAI's ``strict: true``; empty when it can.

    Strict mode requires every property and says "optional" as ``[T, "null"]``,
    which is what the gate reads a null for an optional key as: "not given". So
    a nullable optional key (the default) is exported listed in ``required``,
    typed nullable. What strict mode cannot say keeps a tool at ``strict:
    false`` with its exact schema: an optional key with ``nullable: False``
    (strict mode has no "may be left out but not null"), a keyword strict mode
    lacks (``minLength``/``maxLength``), a free-form object (strict mode needs
    every key named), or an echo argument (its marker is outside strict mode's
    keywords, and the value it must equal is beyond any schema).
    """
    contract = _contract_of(table, name)
    return list(_strict_problems(contract.args, ""))


def _strict_problems(specs: Mapping[str, Spec], prefix: str) -> Iterator[str]:
    for key, spec in specs.items():
        path = f"{prefix}{key}"
        if spec.echo:
            yield f"{path}: an echo argument; strict mode cannot carry its marker"
        elif not spec.required and not spec.nullable:
            yield (f"{path}: optional but nullable: False; strict mode requires every "
                   f"property and says optional only as null")
        yield from _strict_value_problems(spec, path)


def _strict_value_problems(spec: Spec, path: str) -> Iterator[str]:
    if spec.type == "str" and (spec.min_len is not None or spec.max_len is not None):
        yield f"{path}: minLength/maxLength are not in strict mode's keywords"
    if spec.type == "dict" and spec.item is None:
        yield f"{path}: a free-form object; strict mode needs every key named"
    if spec.type == "dict" and spec.item is not None:
        yield from _strict_problems(spec.item, f"{path}.")  # type: ignore[arg-type]
    elif isinstance(spec.item, Spec):
        yield from _strict_value_problems(spec.item, f"{path}[]")
    elif spec.item is not None:
        yield from _strict_problems(spec.item, f"{path}[].")


def tool_spec(table: Mapping[str, Any], name: str, format: str) -> dict[str, Any]:
    """``name`` as a tool definition for ``format``: ``openai``, ``anthropic`` or ``mcp``.

    - ``openai``: a Chat Completions function tool, ``strict`` exactly when
      ``openai_strict_problems`` finds nothing, and then with every property
      listed in ``required`` (the optional ones typed nullable: null is "not
      given");
    - ``anthropic``: ``{"name", "description", "input_schema"}``;
    - ``mcp``: ``{"name", "description", "inputSchema", "outputSchema",
      "annotations"}``, the annotations from ``effect`` and ``risk``
      (``mcp_annotations``).

    Schemas are those of ``to_json_schema`` and ``output_schema`` without
    ``$schema``, which each provider fixes for itself.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {list(FORMATS)}")
    contract = _contract_of(table, name)
    if format != "mcp" and not _PROVIDER_NAME.fullmatch(name):
        raise SchemaError("", name, "", f"{format} tool names are 1 to 64 letters, digits, "
                          f"'_' or '-'")
    schema = _without_dialect(to_json_schema(table, name))
    described = {"description": contract.description} if contract.description else {}
    if format == "openai":
        strict = not openai_strict_problems(table, name)
        if strict:
            schema = _all_required(schema)
        return {"type": "function", "function": {"name": name, **described,
                                                 "parameters": schema, "strict": strict}}
    if format == "anthropic":
        return {"name": name, **described, "input_schema": schema}
    return {"name": name, **described, "inputSchema": schema,
            "outputSchema": _without_dialect(output_schema(table, name)),
            "annotations": mcp_annotations(contract)}


def _all_required(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every object's properties all required: strict mode's form.

    Only for a schema whose optional keys are all nullable: strict mode's model
    says null for "not given", and the gate reads that null as absent.
    """
    schema = dict(schema)
    if "properties" in schema:
        schema["properties"] = {key: _all_required(child)
                                for key, child in schema["properties"].items()}
        schema["required"] = list(schema["properties"])
    if isinstance(schema.get("items"), dict):
        schema["items"] = _all_required(schema["items"])
    return schema


def export_tools(table: Mapping[str, Any], format: str) -> list[dict[str, Any]]:
    """Every tool of ``table``, in table order, as ``tool_spec`` gives it."""
    return [tool_spec(table, name, format) for name in table]


def _without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


def mcp_annotations(contract: ToolContract) -> dict[str, bool]:
    """MCP's hints for a contract's effect and risk: what ``IMPORTED_EFFECTS`` reads back.

    A read is ``readOnlyHint``, and ``openWorldHint`` when its output is
    untrusted; a write is ``destructiveHint`` when ``irreversible``, and
    ``openWorldHint`` when it acts outside the system (``external_effect``).
    Every tool is ``idempotentHint``: a read changes nothing, and the gate
    answers a write's repeat under the same idempotency key from its store.
    (No hint says a write's output is untrusted, nor that a read is sensitive.)
    """
    read = contract.effect == "read"
    return {"readOnlyHint": read,
            "destructiveHint": contract.risk == "irreversible",
            "idempotentHint": True,
            "openWorldHint": contract.trust == "untrusted" if read
            else contract.risk == "external_effect"}
