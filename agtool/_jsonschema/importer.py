"""Into a contract entry: a JSON Schema in the dialect's subset, refused where it is not."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NoReturn
from urllib.parse import unquote

from .._contract import parse_entry
from .._errors import ContractError, SchemaError
from .._patterns import pattern_problem
from .ecma import _re2_escapes, gate_pattern
from .export import _JSON_TYPES, ECHO_KEYWORD, ECHO_NOTE, _escape

__all__ = ["from_json_schema"]


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
