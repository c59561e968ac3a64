"""Provider tools files and MCP listings into a contract table; imported tools' effects."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._contract import RISKS, parse_entry
from .._errors import ContractError, SchemaError
from .._reasons import shown
from .importer import _entry, _Importer

__all__ = ["IMPORTED_EFFECTS", "OPEN_WORLD_SOURCE", "ToolDefinition", "import_tool",
           "load_tools", "load_tools_file", "read_tools_file", "tool_definition"]


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
