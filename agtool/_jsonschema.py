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

import json
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, NoReturn
from urllib.parse import unquote

from ._contract import RISKS, Spec, ToolContract, parse_entry
from ._errors import ContractError
from ._patterns import fullmatcher, pattern_problem
from ._reasons import shown

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
    "tool_definitions",
    "tool_spec",
]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
FORMATS = ("openai", "anthropic", "mcp")
#: Marks an echo argument in an exported schema; read back by ``from_json_schema``.
ECHO_KEYWORD = "x-agtool-echo"
#: Appended to an echo argument's description, so the model is told in words too.
ECHO_NOTE = "Copy this value verbatim from your input: it is compared with the original."


class SchemaError(ContractError):
    """A JSON Schema or a tools file that cannot become a contract entry exactly.

    ``source`` is the file (or ``""``), ``tool`` the tool's name, ``field`` a
    JSON pointer to the offending keyword (``/properties/amount/maximum``) and
    ``problem`` what is wrong with it.
    """

    def __init__(self, source: str, tool: str, field: str, problem: str) -> None:
        super().__init__(tool, field, problem)
        self.source = source
        where = [part for part in (source, f"tool {tool!r}" if tool else "",
                                   f"at {field!r}" if field else "") if part]
        self.args = (", ".join(where) + f": {problem}" if where else problem,)


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


# --- In: JSON Schema -> contract -------------------------------------------------------------

_DIALECT_TYPES = {json_type: name for name, json_type in _JSON_TYPES.items()}
#: Keywords that validate nothing: read (``description``) or passed over, never a hole.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly"})
_TYPE_KEYWORDS = {
    "string": frozenset({"enum", "const", "minLength", "maxLength", "pattern"}),
    "integer": frozenset({"enum", "const", "minimum", "maximum"}),
    "number": frozenset({"enum", "const", "minimum", "maximum"}),
    "boolean": frozenset({"enum", "const"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
}
_SPEC_KEYS = {"enum": "allowed", "const": "allowed", "minimum": "min", "maximum": "max",
              "minLength": "min_len", "maxLength": "max_len", "minItems": "min_len",
              "maxItems": "max_len", "pattern": "pattern"}
_ROOT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "$schema",
                            "$defs", "definitions"}) | _ANNOTATIONS
_NULL_HINT = ("null is read by the gate only as an optional key's 'not given' ([T, \"null\"] "
              "or an anyOf of one schema and {\"type\": \"null\"} on a property); a list "
              "item, a whole schema or a value that is only null cannot be null")
_HINTS = {
    "exclusiveMinimum": "use minimum", "exclusiveMaximum": "use maximum",
    "anyOf": "the dialect has no unions", "oneOf": "the dialect has no unions",
    "allOf": "the dialect has no unions", "prefixItems": "the dialect has no tuples",
    "format": "the gate cannot check formats; use pattern",
    "nullable": _NULL_HINT,
}


def _no_fn(**kwargs: Any) -> Any:  # pragma: no cover - replaced before any call
    raise NotImplementedError


class _Importer:
    """Turns one tool's schemas into dialect specs, naming any refusal by JSON pointer."""

    def __init__(self, source: str, tool: str, root: object, base: str, results: bool) -> None:
        self.source, self.tool, self.root, self.base = source, tool, root, base
        #: Returned objects are open and argument objects closed, as in the gate.
        self.results = results

    def error(self, where: str, problem: str) -> SchemaError:
        return SchemaError(self.source, self.tool, self.base + where, problem)

    def fail(self, where: str, problem: str) -> NoReturn:
        raise self.error(where, problem)

    def top(self) -> dict[str, dict[str, Any]]:
        node = self.root
        if not isinstance(node, Mapping):
            self.fail("", f"a schema must be an object, got {type(node).__name__}")
        self.refuse_unknown(node, "", _ROOT_KEYWORDS)
        if node.get("type") != "object":
            self.fail("/type", f"the {'output' if self.results else 'input'} schema must "
                      f"have type 'object', got {node.get('type')!r}")
        for key in ("$defs", "definitions"):
            if key in node and not isinstance(node[key], Mapping):
                self.fail(f"/{key}", "must be an object of schemas")
        return self.members(node, "")

    def members(self, node: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
        self.check_closure(node, where)
        properties = node.get("properties", {})
        if not isinstance(properties, Mapping):
            self.fail(f"{where}/properties", "must be an object of schemas")
        required = self.required(node, where, properties)
        specs: dict[str, dict[str, Any]] = {}
        for key, child in properties.items():
            if not isinstance(key, str) or not key:
                self.fail(f"{where}/properties", "property names must be non-empty strings")
            at = f"{where}/properties/{_escape(key)}"
            node, at, note, nullable = self.nullable(child, at)
            spec = self.spec(node, at, top=where == "", note=note)
            if nullable and spec.get("echo"):
                self.fail(at, "an echo argument is never null: it must be copied verbatim")
            if nullable:
                # Listed in `required` or not, a property that may be null is one the
                # model may leave out: OpenAI strict mode's way of saying optional.
                spec["required"] = False
            elif key not in required and not spec.get("echo"):
                spec["required"] = False
                spec["nullable"] = False  # the schema refuses null here, and so does the gate
            specs[key] = spec
        return specs

    def nullable(self, node: object, where: str
                 ) -> tuple[Mapping[str, Any], str, str | None, bool]:
        """A property's schema with its null alternative taken off, and whether it had one.

        Null is read from ``type: [T, "null"]`` (with null in its ``enum``, if
        it has one), from ``anyOf``/``oneOf`` of one schema and
        ``{"type": "null"}``, and from OpenAPI's ``nullable``.
        """
        node, where, note = self.deref(node, where)
        for keyword in ("anyOf", "oneOf"):
            branches = node.get(keyword)
            if not (isinstance(branches, list) and len(branches) == 2
                    and _has_null_branch(branches)):
                continue
            extra = sorted(set(node) - _ANNOTATIONS - {keyword})
            if extra:
                self.fail(f"{where}/{_escape(extra[0])}", f"is not allowed beside a nullable "
                          f"{keyword}; put it in the non-null branch")
            index = next(number for number, branch in enumerate(branches)
                         if not (isinstance(branch, Mapping) and branch.get("type") == "null"))
            null = branches[1 - index]
            if set(null) - _ANNOTATIONS - {"type"}:
                self.fail(f"{where}/{keyword}/{1 - index}", "a null branch holds only type")
            if isinstance(node.get("description"), str):
                note = node["description"]
            inner, inner_where, inner_note = self.deref(branches[index],
                                                        f"{where}/{keyword}/{index}")
            return inner, inner_where, inner_note if note is None else note, True
        kind = node.get("type")
        if (isinstance(kind, list) and len(kind) == 2 and "null" in kind
                and all(isinstance(each, str) for each in kind) and kind[0] != kind[1]):
            node = {**node, "type": kind[1 - kind.index("null")]}
            values = node.get("enum")
            if not isinstance(values, list) or None in values:
                if isinstance(values, list):
                    node["enum"] = [value for value in values if value is not None]
                return node, where, note, "const" not in node
            return node, where, note, False  # an enum without null refuses it anyway
        if "nullable" in node:
            flag = node["nullable"]
            if type(flag) is not bool:
                self.fail(f"{where}/nullable", "must be a boolean")
            node = {key: value for key, value in node.items() if key != "nullable"}
            if flag and isinstance(node.get("enum"), list):
                node["enum"] = [value for value in node["enum"] if value is not None]
            return node, where, note, flag
        return node, where, note, False

    def check_closure(self, node: Mapping[str, Any], where: str) -> None:
        closure = node.get("additionalProperties")
        if self.results and closure is False:
            self.fail(f"{where}/additionalProperties",
                      "returned objects are open in the gate, so a closed one cannot be checked")
        if not self.results and closure not in (None, False):
            self.fail(f"{where}/additionalProperties",
                      "arguments are closed in the gate; only false (or leaving it out) fits")

    def required(self, node: Mapping[str, Any], where: str, properties: Mapping[str, Any]
                 ) -> frozenset[str]:
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(key, str) for key in required):
            self.fail(f"{where}/required", "must be a list of property names")
        for index, key in enumerate(required):
            if key not in properties:
                self.fail(f"{where}/required/{index}", f"names {key!r}, which properties "
                          f"does not define")
        return frozenset(required)

    def spec(self, node: object, where: str, top: bool, note: str | None = None
             ) -> dict[str, Any]:
        node, where, found = self.deref(node, where)
        note = found if note is None else note
        json_type = self.type_of(node, where)
        echo_here = top and not self.results
        allowed = _ANNOTATIONS | {"type"} | _TYPE_KEYWORDS[json_type]
        self.refuse_unknown(node, where, allowed | ({ECHO_KEYWORD} if echo_here else set()))
        if json_type == "object" and node.get("properties"):
            return self.named_object(node, where, note)
        if json_type == "object":
            return self.free_object(node, where, note)
        spec: dict[str, Any] = {"type": _DIALECT_TYPES[json_type]}
        description = node.get("description", note)
        if description is not None:
            spec["description"] = self.description(description, where)
        for keyword, key in _SPEC_KEYS.items():
            if keyword in node:
                spec[key] = [node[keyword]] if keyword == "const" else node[keyword]
        if "pattern" in spec:
            spec["pattern"] = self.pattern(spec["pattern"], f"{where}/pattern")
        if ECHO_KEYWORD in node:
            spec["echo"] = node[ECHO_KEYWORD]
            spec["description"] = _strip_echo_note(spec.get("description", ""))
        if "items" in node:
            item = self.item(node["items"], f"{where}/items")
            if item is not None:
                spec["item"] = item
        self.validate(spec, node, where)
        if self.results and top and json_type == "array":
            # The gate refuses an empty top-level returned list unless min_len says
            # otherwise: an absent minItems is min_len 0, and 1 is the gate's default.
            min_len = spec.pop("min_len", 0)
            if min_len != 1:
                spec["min_len"] = min_len
        return spec

    def item(self, node: object, where: str) -> dict[str, Any] | None:
        if node is True or node == {}:
            return None  # any item: the dialect's list without `item`
        if isinstance(node, list):
            self.fail(where, "a list of item schemas is a tuple; the dialect has no tuples")
        node, where, _ = self.deref(node, where)
        if self.type_of(node, where) == "object" and node.get("properties"):
            self.refuse_unknown(node, where, _ANNOTATIONS | _TYPE_KEYWORDS["object"] | {"type"})
            return self.members(node, where)
        return self.spec(node, where, top=False)

    def named_object(self, node: Mapping[str, Any], where: str, note: str | None
                     ) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": "dict", "item": self.members(node, where)}
        description = node.get("description", note)
        if description is not None:
            spec["description"] = self.description(description, where)
        return spec

    def free_object(self, node: Mapping[str, Any], where: str, note: str | None
                    ) -> dict[str, Any]:
        if node.get("required"):
            self.fail(f"{where}/required", "names keys, but the object has no properties")
        if node.get("additionalProperties", True) is not True:
            self.fail(f"{where}/additionalProperties", "a free-form object must allow any key")
        spec: dict[str, Any] = {"type": "dict"}
        description = node.get("description", note)
        if description is not None:
            spec["description"] = self.description(description, where)
        return spec

    def deref(self, node: object, where: str) -> tuple[Mapping[str, Any], str, str | None]:
        """Follow local ``$ref``s to a schema, keeping the first description on the way."""
        seen: list[str] = []
        note: str | None = None
        while isinstance(node, Mapping) and "$ref" in node:
            extra = sorted(set(node) - _ANNOTATIONS - {"$ref"})
            if extra:
                self.fail(f"{where}/{extra[0]}", "is not allowed beside $ref")
            if note is None and isinstance(node.get("description"), str):
                note = node["description"]
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                self.fail(f"{where}/$ref", f"only local references (#/...) are followed, "
                          f"got {ref!r}")
            if ref in seen:
                self.fail(f"{where}/$ref", f"recursive reference {ref!r}")
            seen.append(ref)
            target = _resolve(self.root, ref)
            if target is None:
                self.fail(f"{where}/$ref", f"{ref!r} points at nothing")
            node, where = target, unquote(ref[1:])
        if not isinstance(node, Mapping):
            self.fail(where, f"a schema must be an object, got {json.dumps(node)}")
        return node, where, note

    def type_of(self, node: Mapping[str, Any], where: str) -> str:
        if "type" not in node:
            return self.inferred_type(node, where)
        kind = node["type"]
        if isinstance(kind, list) and len(kind) == 1:
            kind = kind[0]
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            self.fail(f"{where}/type", _NULL_HINT)
        if isinstance(kind, list):
            self.fail(f"{where}/type", f"several types {kind!r}; the dialect has no unions")
        if not isinstance(kind, str) or kind not in _TYPE_KEYWORDS:
            self.fail(f"{where}/type", f"unknown type {kind!r}")
        return str(kind)

    def inferred_type(self, node: Mapping[str, Any], where: str) -> str:
        values = node.get("enum", [node["const"]] if "const" in node else None)
        if isinstance(values, list) and values:
            kinds = {_json_type_of(value) for value in values}
            if kinds == {"integer", "number"}:
                return "number"
            if len(kinds) == 1 and None not in kinds:
                return str(kinds.pop())
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                self.refuse(node, where, key)
        raise self.error(where, "has no type; the dialect needs one (string, integer, "
                         "number, boolean, array or object)")

    def refuse_unknown(self, node: Mapping[str, Any], where: str, allowed: frozenset[str]
                       ) -> None:
        for keyword in node:
            if keyword not in allowed:
                self.refuse(node, where, keyword)

    def refuse(self, node: Mapping[str, Any], where: str, keyword: str) -> NoReturn:
        if keyword == ECHO_KEYWORD:
            self.fail(f"{where}/{keyword}", "echo applies to top-level string arguments only")
        hint = _HINTS.get(keyword, "it is outside the subset the gate checks")
        if keyword in ("anyOf", "oneOf") and _has_null_branch(node[keyword]):
            hint = _NULL_HINT
        self.fail(f"{where}/{_escape(str(keyword))}",
                  f"keyword {keyword!r} is not supported: {hint}")

    def description(self, value: object, where: str) -> str:
        if not isinstance(value, str):
            self.fail(f"{where}/description", "must be a string")
        return value

    def pattern(self, value: object, where: str) -> str:
        if not isinstance(value, str):
            self.fail(where, "must be a string")
        # Checked before gate_pattern wraps it, so the problem quotes the schema's text.
        problem = pattern_problem(_re2_escapes(value))
        if problem:
            self.fail(where, problem)
        return gate_pattern(value)

    def validate(self, spec: Mapping[str, Any], node: Mapping[str, Any], where: str) -> None:
        """Have the dialect check the spec, naming the JSON keyword it came from."""
        try:
            parse_entry(self.tool or "tool", {"fn": _no_fn, "args": {"x": spec}, "returns": {}})
        except ContractError as exc:
            key = exc.field.removeprefix("args.x").removeprefix(".")
            keywords = [keyword for keyword, mapped in _SPEC_KEYS.items()
                        if mapped == key and keyword in node]
            if key == "echo":
                keywords = [ECHO_KEYWORD]
            suffix = f"/{keywords[0]}" if keywords else ""
            raise SchemaError(self.source, self.tool, self.base + where + suffix,
                              exc.problem) from exc


def _json_type_of(value: object) -> str | None:
    if type(value) is bool:
        return "boolean"
    if type(value) is int:
        return "integer"
    if type(value) is float:
        return "number"
    return "string" if type(value) is str else None


def _has_null_branch(branches: object) -> bool:
    return isinstance(branches, list) and any(
        isinstance(branch, Mapping) and branch.get("type") == "null" for branch in branches)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _resolve(root: object, ref: str) -> object:
    """The node a local ``#/a/b`` reference points at, or ``None``."""
    node = root
    for raw in unquote(ref[1:]).split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _strip_echo_note(description: str) -> str:
    return description.removesuffix(ECHO_NOTE).rstrip()


def from_json_schema(
    schema: Mapping[str, Any],
    *,
    output: Mapping[str, Any] | None = None,
    fn: Callable[..., Any] | None = None,
    description: str = "",
    name: str = "",
) -> dict[str, Any]:
    """A contract entry from an input schema (and optionally an output schema).

    Accepts the subset ``to_json_schema`` writes: ``type`` (one per schema:
    string, integer, number, boolean, array, object), ``properties``,
    ``required``, ``additionalProperties``, ``enum``/``const``, ``minimum``/
    ``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``,
    ``pattern``, ``items`` (one schema), ``ECHO_KEYWORD``, local ``$ref`` into
    ``$defs``, and annotations (``description`` kept; ``title``, ``default``,
    ``examples`` and the like validate nothing and are passed over). Anything
    else raises ``SchemaError`` naming the keyword by JSON pointer.

    Null is read only on a property, as the dialect's "not given": ``type:
    [T, "null"]``, an ``anyOf``/``oneOf`` of one schema and ``{"type":
    "null"}``, or OpenAPI's ``nullable: true`` make it optional with null
    allowed, even when ``required`` lists it (OpenAI strict mode's way of
    saying optional); a property left out of ``required`` that does not admit
    null becomes ``nullable: False``. An object with ``properties`` is a
    ``dict`` with named keys (``item``), or a list's items.

    Argument objects are closed whether or not the schema says
    ``additionalProperties: false``: the gate refuses unnamed arguments. A
    ``pattern`` keeps JSON Schema's search meaning (see ``gate_pattern``); one
    RE2 cannot compile (a lookaround, a backreference) raises ``SchemaError``.
    Without ``output`` the result is only required to be an object. Without
    ``fn`` the entry's body raises ``NotImplementedError``.
    """
    return _entry(_Importer("", name, schema, "", results=False),
                  None if output is None else _Importer("", name, output, "", results=True),
                  fn, description)


def _entry(args: _Importer, returns: _Importer | None, fn: Callable[..., Any] | None,
           description: str) -> dict[str, Any]:
    entry = {
        "fn": _Unimplemented(args.tool, args.source) if fn is None else fn,
        "args": args.top(),
        "returns": {} if returns is None else returns.top(),
        "description": description,
    }
    parse_entry(args.tool or "tool", entry)  # every spec was checked where it was read
    return entry


class _Unimplemented:
    """The body of a tool loaded without a function."""

    def __init__(self, tool: str, source: str) -> None:
        self.tool, self.source = tool, source

    def __call__(self, **kwargs: Any) -> Any:
        origin = f" from {self.source}" if self.source else ""
        raise NotImplementedError(f"tool {self.tool!r} was loaded{origin} without a function; "
                                  f"pass it in fns={{name: callable}}")


# --- Patterns: JSON Schema's search and the gate's full match --------------------------------


def _structure(pattern: str) -> Iterator[tuple[int, str, int]]:
    """``(index, char, depth)`` of each char outside escapes and character classes.

    A ``(`` and its ``)`` are reported at the same depth.
    """
    depth, index = 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _class_end(pattern, index)
            continue
        if char == ")":
            depth -= 1
        yield index, char, depth
        if char == "(":
            depth += 1
        index += 1


def _class_end(pattern: str, start: int) -> int:
    index = start + 1
    if pattern[index:index + 1] == "^":
        index += 1
    if pattern[index:index + 1] == "]":
        index += 1  # a "]" first in a class is a literal in Python's re
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1


# An ECMA 262 \uXXXX or \u{X...} escape; any other escape pair, kept as it is.
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|u\{([0-9A-Fa-f]{1,6})\}|.)", re.DOTALL)


def _re2_escapes(pattern: str) -> str:
    """``pattern`` with ECMA 262's ``\\uXXXX`` escapes spelt as RE2's ``\\x{XXXX}``."""
    def spell(escape: re.Match[str]) -> str:
        code = escape.group(1) or escape.group(2)
        return f"\\x{{{code}}}" if code else escape.group(0)

    return _ESCAPE.sub(spell, pattern)


def gate_pattern(pattern: str) -> str:
    """The gate's full-match regex (RE2) for JSON Schema's search ``pattern``.

    ``^(?:X)$`` (what ``to_json_schema`` writes) gives ``X``; ``^X$`` with no
    top-level ``|`` gives ``X``; anything else is searched for:
    ``(?s:.*?)(?:pattern)(?s:.*)``. A bare ``$`` keeps its ECMA meaning, the end
    of input, which is also RE2's; ``\\uXXXX`` becomes RE2's ``\\x{XXXX}``.
    RE2 reads ``\\d``, ``\\w`` and ``\\b`` as ASCII, as ECMA 262 does, and
    ``\\s`` as ``[\\t\\n\\f\\r ]``, narrower than ECMA's: write explicit
    classes for a pattern that must mean the same to every JSON Schema validator.
    """
    pattern = _re2_escapes(pattern)
    marks = list(_structure(pattern))
    last = len(pattern) - 1
    anchored = (pattern.startswith("^") and any(index == last and char == "$"
                                                for index, char, _ in marks))
    if anchored and pattern.startswith("^(?:") and _closing(marks, 1) == last - 1:
        return pattern[4:-2]
    if anchored and not any(char == "|" and depth == 0 for _, char, depth in marks):
        return pattern[1:-1]
    return f"(?s:.*?)(?:{pattern})(?s:.*)"


def _closing(marks: Sequence[tuple[int, str, int]], opening: int) -> int | None:
    depth = next(depth for index, _, depth in marks if index == opening)
    return next((index for index, char, level in marks
                 if index > opening and char == ")" and level == depth), None)


# --- Tools files -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolDefinition:
    """One tool read from a provider's tool list, schemas untouched.

    ``input_at`` and ``output_at`` are JSON pointers to the schemas in the file.
    """

    name: str
    format: str
    description: str
    input_schema: Any
    output_schema: Any
    input_at: str
    output_at: str
    #: An MCP tool's ``annotations`` (``readOnlyHint`` and the like); ``None`` when it has none.
    annotations: Mapping[str, Any] | None = None


_EMPTY_OBJECT: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": {}})
# Keys each format may carry beside its schemas: metadata that validates nothing.
# Anything else is refused, so a misspelt "outputschema" is not read as "no output".
_TOOL_KEYS = {
    "openai": frozenset({"name", "description", "parameters", "strict"}),
    "anthropic": frozenset({"name", "description", "input_schema", "type", "cache_control"}),
    "mcp": frozenset({"name", "title", "description", "inputSchema", "outputSchema",
                      "annotations", "_meta", "icons"}),
}


def read_tools_file(path: str | Path) -> list[ToolDefinition]:
    """The tools in a JSON file of OpenAI, Anthropic or MCP tool definitions.

    The file holds a list of tools, or an object with a ``"tools"`` list (an MCP
    ``tools/list`` result, a request body). Each tool's format is read from its
    keys: ``function`` or ``"type": "function"`` (OpenAI Chat Completions or
    Responses), ``input_schema`` (Anthropic), ``inputSchema`` (MCP).
    ``SchemaError`` names the file, the tool and the JSON pointer of a problem.
    """
    source = str(path)
    try:
        text = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(source, "", "", f"cannot be read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(source, "", "", f"is not JSON: {exc}") from exc
    return _definitions(data, source)


def _definitions(data: object, source: str) -> list[ToolDefinition]:
    prefix = ""
    if isinstance(data, Mapping) and "tools" in data:
        data, prefix = data["tools"], "/tools"
    if not isinstance(data, list):
        raise SchemaError(source, "", prefix, "expected a list of tool definitions or an "
                          "object with a 'tools' list")
    definitions: list[ToolDefinition] = []
    seen: dict[str, str] = {}
    for index, item in enumerate(data):
        where = f"{prefix}/{index}"
        definition = _definition(item, where, source)
        if definition.name in seen:
            raise SchemaError(source, definition.name, where,
                              f"defined twice (first at {seen[definition.name]!r})")
        seen[definition.name] = where
        definitions.append(definition)
    return definitions


def _definition(item: object, where: str, source: str) -> ToolDefinition:
    if not isinstance(item, Mapping):
        raise SchemaError(source, "", where, f"a tool definition must be an object, got "
                          f"{type(item).__name__}")
    body, at, format_ = item, where, _format_of(item, where, source)
    if format_ == "openai" and "function" in item:
        _refuse_keys(source, item, where, frozenset({"type", "function"}), "openai")
        if item.get("type", "function") != "function":
            raise SchemaError(source, "", f"{where}/type", "an OpenAI tool's type must be "
                              "'function'")
        body, at = item["function"], f"{where}/function"
        if not isinstance(body, Mapping):
            raise SchemaError(source, "", at, "must be an object")
    elif format_ == "openai":
        body = {key: value for key, value in item.items() if key != "type"}
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError(source, "", f"{at}/name", "a tool needs a non-empty string name")
    _refuse_keys(source, body, at, _TOOL_KEYS[format_], format_, name)
    description = body.get("description", "")
    if not isinstance(description, str):
        raise SchemaError(source, name, f"{at}/description", "must be a string")
    key = {"openai": "parameters", "anthropic": "input_schema", "mcp": "inputSchema"}[format_]
    output_key = "outputSchema" if format_ == "mcp" else ""
    return ToolDefinition(name=name, format=format_, description=description,
                          input_schema=body.get(key, _EMPTY_OBJECT),
                          output_schema=body.get(output_key), input_at=f"{at}/{key}",
                          output_at=f"{at}/{output_key}" if output_key else "",
                          annotations=_annotations(body.get("annotations"), f"{at}/annotations",
                                                   source, name))


def _format_of(item: Mapping[str, Any], where: str, source: str) -> str:
    if "function" in item or item.get("type") == "function":
        return "openai"
    if "input_schema" in item:
        return "anthropic"
    if "inputSchema" in item:
        return "mcp"
    raise SchemaError(source, str(item.get("name", "")), where,
                      "not an OpenAI, Anthropic or MCP tool: expected a 'function', "
                      "'input_schema' or 'inputSchema' key")


def _refuse_keys(source: str, body: Mapping[str, Any], where: str, known: frozenset[str],
                 format_: str, tool: str = "") -> None:
    for key in body:
        if key not in known:
            raise SchemaError(source, tool, f"{where}/{key}",
                              f"unknown key for an {format_} tool; expected {sorted(known)}")


def load_tools_file(
    path: str | Path, fns: Mapping[str, Callable[..., Any]] | None = None, *,
    effects: Mapping[str, str | Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """A contract table from a tools file (see ``read_tools_file`` and ``load_tools``)."""
    return _table(read_tools_file(path), str(path), fns, effects)


def load_tools(
    data: object, fns: Mapping[str, Callable[..., Any]] | None = None, *,
    effects: Mapping[str, str | Mapping[str, Any]] | None = None, source: str = "",
) -> dict[str, dict[str, Any]]:
    """A contract table from tool definitions already in memory (an MCP ``tools/list``).

    ``data`` is what a tools file holds (a list of OpenAI, Anthropic or MCP
    tools, or an object with a ``"tools"`` list), as plain JSON values.
    ``fns`` maps tool names to their functions; a tool without one gets a body
    that raises ``NotImplementedError``, so the gate answers
    ``raised:NotImplementedError`` until it is given one. A name in ``fns``
    that the tools do not define is an error, not a spare. MCP tools'
    ``outputSchema`` becomes the return contract; other tools' results are only
    required to be objects.

    Each tool's effect and risk come from its MCP annotations (see
    ``IMPORTED_EFFECTS``); a tool that does not say it is read-only (every
    OpenAI or Anthropic tool) is imported as an ``irreversible`` write, as
    MCP's defaults read, and a warning on the ``agtool`` logger says so.
    ``effects`` overrides that per tool: an effect (``"read"``, ``"write"``),
    a risk level, or a mapping of entry keys (``{"risk": "reversible_write",
    "key_args": ["order_id"]}``).
    """
    return _table(_definitions(data, source), source, fns, effects)


def _table(definitions: list[ToolDefinition], source: str,
           fns: Mapping[str, Callable[..., Any]] | None,
           effects: Mapping[str, str | Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    functions = dict(fns or {})
    overrides = dict(effects or {})
    names = {definition.name for definition in definitions}
    for label, given in (("fns", functions), ("effects", overrides)):
        for name in given:
            if name not in names:
                raise SchemaError(source, name, "", f"is in {label} but "
                                  f"{'the file' if source else 'the tool list'} does not "
                                  f"define it")
    for name, fn in functions.items():
        if not callable(fn):
            raise SchemaError(source, name, "", f"fns[{name!r}] must be callable, got "
                              f"{type(fn).__name__}")
    return {definition.name: import_tool(definition, functions.get(definition.name),
                                         overrides.get(definition.name), source)
            for definition in definitions}


def tool_definitions(data: object, source: str = "") -> list[ToolDefinition]:
    """The tools in ``data`` (what ``read_tools_file`` reads from a file), schemas untouched."""
    return _definitions(data, source)


def tool_definition(item: object, source: str = "", where: str = "") -> ToolDefinition:
    """One tool definition (``where`` is its JSON pointer in ``source``), schemas untouched."""
    return _definition(item, where, source)


def import_tool(definition: ToolDefinition, fn: Callable[..., Any] | None = None,
                effect: str | Mapping[str, Any] | None = None, source: str = ""
                ) -> dict[str, Any]:
    """One tool's contract entry; ``SchemaError`` if its schemas cannot be enforced exactly.

    ``effect`` is as in ``load_tools``' ``effects``; without it the annotations decide.
    """
    args = _Importer(source, definition.name, definition.input_schema, definition.input_at,
                     results=False)
    returns = None if definition.output_schema is None else _Importer(
        source, definition.name, definition.output_schema, definition.output_at, results=True)
    entry = _entry(args, returns, fn, definition.description)
    entry.update(_effect_keys(definition, effect, source))
    try:
        parse_entry(definition.name, entry)  # an override's key_args or ttl is checked here
    except SchemaError:
        raise
    except ContractError as exc:
        raise SchemaError(source, definition.name, "", f"effects: {exc.field}: {exc.problem}"
                          ) from exc
    return entry


# --- Effects of imported tools ---------------------------------------------------------------

#: How an imported tool's MCP annotations become its effect and risk, read as
#: MCP's spec reads an absent hint (``readOnlyHint`` false, ``destructiveHint``
#: true, ``openWorldHint`` true). ``idempotentHint`` changes nothing: the gate
#: runs every write once per idempotency key anyway, and a hint from a server
#: is no reason to run one twice.
IMPORTED_EFFECTS: Mapping[str, str] = MappingProxyType({
    "readOnlyHint: true": "read, read_public; untrusted output unless openWorldHint is false",
    "destructiveHint: true (or absent)": "write, irreversible (needs an approval)",
    "destructiveHint: false, openWorldHint: true (or absent)":
        "write, external_effect (needs an approval)",
    "destructiveHint: false, openWorldHint: false": "write, reversible_write",
    "no readOnlyHint (every OpenAI and Anthropic tool)":
        "as readOnlyHint false: a write, with a warning naming the override",
})
_HINTS_KNOWN = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
#: Where an open-world read's output comes from, in the model's answer.
OPEN_WORLD_SOURCE = "open_world"
_EFFECT_KEYS = frozenset({"effect", "risk", "key_args", "timeout", "ttl", "source", "trust"})
_imports_log = logging.getLogger("agtool")


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


def _annotations(value: object, where: str, source: str, tool: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SchemaError(source, tool, where, "annotations must be an object")
    for hint in _HINTS_KNOWN:
        if hint in value and type(value[hint]) is not bool:
            # A hint that is not a bool cannot be read either way; guessing is a hole.
            raise SchemaError(source, tool, f"{where}/{hint}", "must be true or false")
    return value


def _effect_keys(definition: ToolDefinition, effect: str | Mapping[str, Any] | None,
                 source: str) -> dict[str, Any]:
    if effect is not None:
        return _override(definition.name, effect, source)
    hints = definition.annotations or {}
    open_world = hints.get("openWorldHint", True)
    if hints.get("readOnlyHint") is True:
        return {"effect": "read", "risk": "read_public",
                **({"source": OPEN_WORLD_SOURCE, "trust": "untrusted"} if open_world else {})}
    if hints.get("destructiveHint", True):
        risk = "irreversible"
    else:
        risk = "external_effect" if open_world else "reversible_write"
    if "readOnlyHint" not in hints:
        _imports_log.warning(
            "%stool '%s' does not say it is read-only (no readOnlyHint): imported as a write "
            "of risk %r, which the default scope refuses; if it only reads, say so "
            "(effects={'%s': 'read'}, or agtool mcp proxy --effect %s=read)",
            # Names come from someone else's server: shown() keeps each on one line.
            f"{shown(source)}: " if source else "", shown(definition.name), risk,
            shown(definition.name), shown(definition.name))
    return {"effect": "write", "risk": risk}


def _override(tool: str, effect: str | Mapping[str, Any], source: str) -> dict[str, Any]:
    if isinstance(effect, str):
        if effect in ("read", "write"):
            return {"effect": effect, "risk": "read_public" if effect == "read"
                    else "reversible_write"}
        if effect not in RISKS:
            raise SchemaError(source, tool, "", f"effects[{tool!r}] must be 'read', 'write' or "
                              f"a risk level {list(RISKS)}, got {effect!r}")
        return {"effect": "read" if effect.startswith("read") else "write", "risk": effect}
    if not isinstance(effect, Mapping) or not set(effect) <= _EFFECT_KEYS:
        raise SchemaError(source, tool, "", f"effects[{tool!r}] must be a str or a mapping of "
                          f"the entry keys {sorted(_EFFECT_KEYS)}")
    return dict(effect)
