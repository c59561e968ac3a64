"""Into a contract entry: a JSON Schema in the dialect's subset, refused where it is not."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, NoReturn

from .._contract import parse_entry
from .._errors import ContractError, SchemaError
from .._formats import STRING_FORMATS
from .._patterns import pattern_problem
from .._reasons import shown
from .ecma import _re2_escapes, gate_pattern
from .export import _JSON_TYPES, ECHO_KEYWORD, ECHO_NOTE, _escape
from .schema_check import (
    compile_schema_check,
    inside_resource,
    json_equal,
    ref_pointer,
    resolve_ref,
    resource_holding,
    resources_of,
)

__all__ = ["IMPORT_DIFFERENCES", "RECURSION_DEPTH", "ImportDifference", "from_json_schema",
           "open_objects", "schema_is_open"]

_log = logging.getLogger("agtool")
#: How many levels of nesting a recursive ``$ref`` (a tree: A -> B -> A) is
#: expanded to in the specs before its deeper values are left to the whole-schema
#: check (``schema_check``, which reads every level): the gate's checks
#: are straight-line code, so a contract is finite, and a model's arguments rarely
#: nest deeper. Each list and each object with named keys is one level.
RECURSION_DEPTH = 3
#: How many schemas deep the importer reads before refusing: far past any contract the
#: gate can hold (``MAX_ITEM_DEPTH``), and far short of Python's own recursion limit,
#: so a hostile listing nested a thousand levels is a SchemaError, not a RecursionError.
_MAX_SCHEMA_DEPTH = 64


_DIALECT_TYPES = {json_type: name for name, json_type in _JSON_TYPES.items()}
#: Keywords that validate nothing: read (``description``) or passed over, never a hole.
#: (``contentMediaType`` and ``contentEncoding`` are annotations in 2020-12, not assertions.)
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly", "contentMediaType",
                          "contentEncoding", "$id", "$anchor", "$dynamicAnchor"})
#: What a schema of any type may hold: the annotations, and ``format``, which is no
#: annotation: the gate checks the formats of ``STRING_FORMATS`` on strings (read apart,
#: ``read_format``), so wherever keywords are merged or shared, it is one of them.
_ANYWHERE = _ANNOTATIONS | {"format"}
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
#: The keywords that apply another schema of the document where they stand.
_REFERENCES = ("$ref", "$dynamicRef")
#: Keywords the dialect has no spec for: the spec says the rest, and the whole schema
#: is checked apart too (``schema_check``), after the specs, so that both must hold.
_CHECKED_APART = frozenset({"multipleOf", "uniqueItems", "prefixItems", "contains",
                            "minContains", "maxContains", "patternProperties",
                            "propertyNames", "minProperties", "maxProperties",
                            "dependentRequired", "dependentSchemas", "not", "if", "then",
                            "else", "unevaluatedProperties", "unevaluatedItems"})
#: Those of them that hold for a value of any type (the rest are a type's keywords).
_ANY_TYPE_APART = frozenset({"not", "if", "then", "else"})
_TYPE_KEYWORDS = {
    "string": frozenset({"enum", "const", "minLength", "maxLength", "pattern"}),
    "integer": frozenset({"enum", "const", "multipleOf"}) | _BOUNDS,
    "number": frozenset({"enum", "const", "multipleOf"}) | _BOUNDS,
    "boolean": frozenset({"enum", "const"}),
    "array": frozenset({"items", "minItems", "maxItems", "uniqueItems", "prefixItems",
                        "contains", "minContains", "maxContains", "unevaluatedItems"}),
    "object": frozenset({"properties", "required", "additionalProperties",
                         "patternProperties", "propertyNames", "minProperties",
                         "maxProperties", "dependentRequired", "dependentSchemas",
                         "unevaluatedProperties"}),
}
#: Keywords that combine schemas: read as a union (``anyOf``/``oneOf``) or merged
#: (``allOf``, see ``_merge``).
_UNIONS = ("anyOf", "oneOf")
#: What an ``allOf`` merges exactly: the tightest bound, the named keys of every branch.
_LOWS = ("minimum", "exclusiveMinimum", "minLength", "minItems")
_HIGHS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems")
#: Keywords of which a merge keeps the first: each branch's holds, the rest are checked apart.
_FIRST_KEPT = ("pattern", "format", ECHO_KEYWORD, "anyOf", "oneOf")
#: A root's keywords that say nothing of a value there.
_DOCUMENT_KEYWORDS = frozenset({"$schema", "$defs", "definitions"})
_SPEC_KEYS = {"enum": "allowed", "const": "allowed", "minimum": "min", "maximum": "max",
              "minLength": "min_len", "maxLength": "max_len", "minItems": "min_len",
              "maxItems": "max_len", "pattern": "pattern"}
_ROOT_KEYWORDS = frozenset({"type", "allOf"}) | _DOCUMENT_KEYWORDS | _ANYWHERE \
    | _TYPE_KEYWORDS["object"]
_NULL_HINT = ("null is read by the gate only as an optional key's 'not given' ([T, \"null\"] "
              "or an anyOf of one schema and {\"type\": \"null\"} on a property); a list "
              "item, a whole schema or a value that is only null cannot be null")
_HINTS = {
    "nullable": _NULL_HINT,
}
#: What deref answers for a recursive reference met too deep: a mapping, told apart by identity.
_CUT: Mapping[str, Any] = MappingProxyType({})


class ImportDifference(NamedTuple):
    """One place where the gate's reading of an imported schema differs from JSON Schema's."""

    #: Why, in a sentence or two.
    why: str
    #: ``True``: the gate refuses values the source schema admits; ``False``: it
    #: admits some the source schema refuses (and the harness, not the gate, sees them).
    stricter: bool


#: Every difference between the gate on an imported contract and JSON Schema on
#: the source schema, keyed by the keyword it concerns (``STRICTER_THAN_JSON_SCHEMA``
#: lists those between the gate and its own exported schema, which hold here too).
IMPORT_DIFFERENCES: Mapping[str, ImportDifference] = MappingProxyType({
    "additionalProperties": ImportDifference(
        "An argument object that names its keys is closed by the gate whether or not the "
        "schema says additionalProperties: false: a model's unnamed argument is a typo or a "
        "hallucination, and a server that drops it runs with defaults. open_objects() names "
        "where the source schema was open.", True),
    "type": ImportDifference(
        "A schema without type but with a type's keywords (properties, items, pattern, "
        "minimum, ...) is read as that type; JSON Schema lets values of every other type "
        "pass. A schema with none of them takes any JSON value but null.", True),
    "null": ImportDifference(
        "Null is read only as an optional key's 'not given': a required key, a list item or "
        "a typeless value that is null is refused, where {} or a null branch admits it.",
        True),
    "format": ImportDifference(
        "A format outside STRING_FORMATS is left unchecked, as JSON Schema 2020-12 does by "
        "default, and named in a warning on the agtool logger.", False),
    "results": ImportDifference(
        "A returned object is open where the output schema leaves it open: a key it does "
        "not name passes unchecked. One closed by additionalProperties: false refuses "
        "other keys (the schema is checked apart, as for the keywords of _CHECKED_APART).",
        False),
    "patternProperties": ImportDifference(
        "Top-level arguments are closed whatever the schema says: an argument that only "
        "patternProperties, a schema in additionalProperties or one in "
        "unevaluatedProperties admits is refused. Deeper, such an object is a free-form "
        "dict whose keys the whole-schema check reads.", True),
})


def _no_fn(**kwargs: Any) -> Any:  # pragma: no cover - replaced before any call
    raise NotImplementedError


class _Importer:
    """Turns one tool's schemas into dialect specs, naming any refusal by JSON pointer."""

    def __init__(self, source: str, tool: str, root: object, base: str, results: bool) -> None:
        self.source, self.tool, self.root, self.base = source, tool, root, base
        #: Returned objects are open and argument objects closed, as in the gate.
        self.results = results
        #: The ``$ref``s being expanded, outermost first, and how deep the specs nest now.
        self.expanding: list[str] = []
        self.depth = 0
        self.schemas_deep = 0
        #: Keywords met that are checked apart, on the whole schema (``schema_check``),
        #: and how many times one was met.
        self.apart: set[str] = set()
        self.apart_met = 0
        #: Where the document's ``$id`` resources below its root are: a reference inside
        #: one is resolved against it, which the importer does not do.
        self.resources = resources_of(root)

    def checked_apart(self, keyword: str) -> None:
        self.apart.add(keyword)
        self.apart_met += 1

    def error(self, where: str, problem: str) -> SchemaError:
        return SchemaError(self.source, self.tool, self.base + where, problem)

    def fail(self, where: str, problem: str) -> NoReturn:
        raise self.error(where, problem)

    def warn(self, where: str, problem: str) -> None:
        # Names come from someone else's server: shown() keeps each on one line.
        origin = f"{shown(self.source)}: " if self.source else ""
        _log.warning("%stool '%s', at '%s': %s", origin, shown(self.tool),
                     shown(self.base + where), problem)

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
        if "allOf" in node:
            # The arguments the branches name, together; what else they say, checked apart.
            node = {**self.merged(node, "")[0], "type": "object"}
            for keyword in set(node) - _ANNOTATIONS - {"type", "properties", "required",
                                                         "additionalProperties"}:
                self.checked_apart(keyword)
        conditional = [name for name in _named_in_place(self.root, self.root, 0)
                       if name not in node.get("properties", {})]
        if conditional:
            # An argument a then, a dependentSchemas or a union's branch names is one the
            # schema admits (on a condition the schema check reads): any value, optional.
            node = {**node, "properties": {**node.get("properties", {}),
                                           **{name: {} for name in conditional}}}
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
            with self.frame():
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
        it has one), from a null branch of ``anyOf``/``oneOf`` (the rest being
        one schema, or a union of the others), and from OpenAPI's ``nullable``.
        """
        node, where, note = self.deref(node, where)
        if node is _CUT:
            return node, where, note, False
        if any(keyword in node for keyword in _REFERENCES):
            # A reference with keywords beside it: a null they admit must be admitted by
            # its target too, which the merge of the two says (``merged``).
            return node, where, note, False
        for keyword in _UNIONS:
            branches = node.get(keyword)
            if not (isinstance(branches, list) and len(branches) >= 2
                    and _has_null_branch(branches)):
                continue
            nulls = [index for index, branch in enumerate(branches)
                     if isinstance(branch, Mapping) and branch.get("type") == "null"]
            for index in nulls:
                if set(branches[index]) - _ANYWHERE - {"type"}:
                    self.fail(f"{where}/{keyword}/{index}", "a null branch holds only type")
            rest = [branch for index, branch in enumerate(branches) if index not in nulls]
            if len(rest) > 1 or len(nulls) > 1:
                # Null and a union of the rest: the union is read where it stands.
                return {**node, keyword: rest}, where, note, True
            extra = sorted(set(node) - _ANNOTATIONS - {keyword})
            if extra:
                self.fail(f"{where}/{_escape(extra[0])}", f"is not allowed beside a nullable "
                          f"{keyword}; put it in the non-null branch")
            index = next(number for number in range(len(branches)) if number not in nulls)
            if isinstance(node.get("description"), str):
                note = node["description"]
            inner, inner_where, inner_note = self.deref(branches[index],
                                                        f"{where}/{keyword}/{index}")
            return inner, inner_where, inner_note if note is None else note, True
        kind = node.get("type")
        if (isinstance(kind, list) and len(kind) >= 2 and "null" in kind
                and all(isinstance(each, str) for each in kind) and len(set(kind)) == len(kind)):
            others = [each for each in kind if each != "null"]
            node = {**node, "type": others[0] if len(others) == 1 else others}
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
        """Named keys may be closed (``false``) or open (absent, ``true``), never typed.

        Closed is the gate's own reading of arguments. An open argument object is
        closed by the gate all the same (``STRICTER_THAN_JSON_SCHEMA``, and
        ``open_objects`` says where the source was open); a returned object is
        open in the gate, closed or not: the gate checks the keys it names.
        """
        closure = node.get("additionalProperties")
        if isinstance(closure, Mapping) or (closure is False and self.results):
            self.checked_apart("additionalProperties")  # other keys' schema, or a closed result
        elif closure not in (None, False, True):
            self.fail(f"{where}/additionalProperties", "must be a schema (an object or a "
                      "boolean)")

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

    @contextlib.contextmanager
    def frame(self) -> Iterator[None]:
        """The references followed inside are no longer being expanded once it ends."""
        mark = len(self.expanding)
        try:
            yield
        finally:
            del self.expanding[mark:]

    def spec(self, node: object, where: str, top: bool, note: str | None = None
             ) -> dict[str, Any]:
        with self.frame():
            node, where, found = self.deref(node, where)
            return self.spec_of(node, where, top, found if note is None else note)

    def spec_of(self, node: Mapping[str, Any], where: str, top: bool, note: str | None
                ) -> dict[str, Any]:
        if self.schemas_deep >= _MAX_SCHEMA_DEPTH:
            self.fail(where, f"schemas nest deeper than {_MAX_SCHEMA_DEPTH} levels")
        self.schemas_deep += 1
        try:
            return self.read_spec(node, where, top, note)
        finally:
            self.schemas_deep -= 1

    def read_spec(self, node: Mapping[str, Any], where: str, top: bool, note: str | None
                  ) -> dict[str, Any]:
        if node is _CUT:
            return self.described({"type": "any"}, {}, where, note)
        node, where = self.merged(node, where)
        union = self.union_keyword(node, where)
        if union is not None:
            return self.union(node, where, union, note)
        kind = node.get("type")
        if isinstance(kind, list) and len(kind) > 1 and "null" not in kind:
            return self.several_types(node, where, note)
        json_type = self.type_of(node, where)
        self.read_format(node, where, json_type)
        echo_here = top and not self.results
        allowed = _ANYWHERE | {"type"} | _TYPE_KEYWORDS.get(json_type, frozenset())
        self.refuse_unknown(node, where, allowed | ({ECHO_KEYWORD} if echo_here else set()))
        if json_type == "any":
            return self.described({"type": "any"}, node, where, note)
        if json_type == "object" and node.get("properties") and not _names_others(node):
            return self.named_object(node, where, note)
        if json_type == "object":
            return self.free_object(node, where, note)
        spec: dict[str, Any] = {"type": _DIALECT_TYPES[json_type]}
        self.described(spec, node, where, note)
        for keyword, key in _SPEC_KEYS.items():
            if keyword in node:
                spec[key] = [node[keyword]] if keyword == "const" else node[keyword]
        self.bounds(spec, node, where)
        if "pattern" in spec:
            spec["pattern"] = self.pattern(spec["pattern"], f"{where}/pattern")
        if json_type == "string" and node.get("format") in STRING_FORMATS:
            spec["format"] = node["format"]
        if ECHO_KEYWORD in node:
            spec["echo"] = node[ECHO_KEYWORD]
            spec["description"] = _strip_echo_note(spec.get("description", ""))
        if "items" in node and "prefixItems" not in node:  # else items holds past the prefix
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

    def described(self, spec: dict[str, Any], node: Mapping[str, Any], where: str,
                  note: str | None) -> dict[str, Any]:
        description = node.get("description", note)
        if description is not None:
            spec["description"] = self.description(description, where)
        return spec

    def read_format(self, node: Mapping[str, Any], where: str, json_type: str) -> None:
        """Check the type of ``format``, and name one the gate leaves unchecked."""
        if "format" not in node:
            return
        name = node["format"]
        if not isinstance(name, str):
            self.fail(f"{where}/format", "must be a string")
        if json_type == "string" and name not in STRING_FORMATS:
            # Unknown formats are annotations in 2020-12: left unchecked, said, never a refusal.
            self.warn(f"{where}/format", f"format {name!r} is not checked by the gate (it "
                      f"checks {', '.join(sorted(STRING_FORMATS))})")

    def bounds(self, spec: dict[str, Any], node: Mapping[str, Any], where: str) -> None:
        """``exclusiveMinimum``/``exclusiveMaximum`` (numbers, or draft 4's flags) into the spec."""
        for keyword, key in (("exclusiveMinimum", "min"), ("exclusiveMaximum", "max")):
            if keyword not in node:
                continue
            value = node[keyword]
            if type(value) is bool:  # draft 4: a flag on minimum / maximum
                if value and key not in spec:
                    self.fail(f"{where}/{keyword}", f"is true, but there is no "
                              f"{'minimum' if key == 'min' else 'maximum'}")
                if value:
                    spec[f"{key}_exclusive"] = True
                continue
            if type(value) not in (int, float):
                self.fail(f"{where}/{keyword}", f"must be a number, got {json.dumps(value)}")
            inclusive = spec.get(key)
            tighter = inclusive is None or (value >= inclusive if key == "min"
                                            else value <= inclusive)
            if tighter:
                spec[key], spec[f"{key}_exclusive"] = value, True

    def merged(self, node: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], str]:
        """An ``allOf`` merged into the node that holds it (``_merge``); a ``$ref`` with
        keywords beside it is merged with them as one more schema of that ``allOf``.

        An ``allOf`` of one schema beside annotations only (as pydantic writes a
        described ``$ref``) is that schema. Otherwise the merge
        admits every value the ``allOf`` admits, and where it may admit more (a
        keyword dropped or only one of two kept), the whole schema is checked apart.
        """
        references = [({keyword: node[keyword]}, where) for keyword in _REFERENCES
                      if keyword in node]
        branches = node.get("allOf")
        if branches is None and not references:
            return node, where
        if branches is not None and (not isinstance(branches, list) or not branches):
            self.fail(f"{where}/allOf", "must be a non-empty list of schemas")
        outer = {key: value for key, value in node.items()
                 if key != "allOf" and key not in _REFERENCES}
        parts: list[Mapping[str, Any]] = [outer]
        note: str | None = None
        schemas = references + [(branch, f"{where}/allOf/{index}")
                                for index, branch in enumerate(branches or ())]
        for branch, branch_where in schemas:
            inner, inner_where, found = self.deref(branch, branch_where)
            note = found if note is None else note
            if inner is _CUT:
                continue  # deeper than the recursion is read: any value, as a $ref there
            if "allOf" in inner or any(keyword in inner for keyword in _REFERENCES):
                self.schemas_deep += 1  # a hostile allOf nested a thousand times is refused
                try:
                    if self.schemas_deep >= _MAX_SCHEMA_DEPTH:
                        self.fail(inner_where, f"schemas nest deeper than {_MAX_SCHEMA_DEPTH} "
                                  f"levels")
                    inner, _ = self.merged(inner, inner_where)
                finally:
                    self.schemas_deep -= 1
            parts.append(inner)
        if len(parts) == 2 and not set(outer) - _ANNOTATIONS:
            merged: Mapping[str, Any] | None = {**parts[1], **outer}
        else:
            merged, exact = _merge(parts)
            if merged is None or not exact:
                self.checked_apart("allOf")
        if merged is None:
            merged = {}  # no value keeps every branch: the specs take any, the check none
        if "description" not in merged and note is not None:
            merged = {**merged, "description": note}
        return merged, where

    def union_keyword(self, node: Mapping[str, Any], where: str) -> str | None:
        found = [keyword for keyword in _UNIONS if keyword in node]
        if len(found) > 1:
            self.fail(f"{where}/oneOf", "anyOf and oneOf together are an intersection of "
                      "unions the dialect cannot say")
        if not found:
            return None
        branches = node[found[0]]
        if not isinstance(branches, list) or not branches:
            self.fail(f"{where}/{found[0]}", "must be a non-empty list of schemas")
        if _has_null_branch(branches):
            self.fail(f"{where}/{found[0]}", _NULL_HINT)
        return found[0]

    def union(self, node: Mapping[str, Any], where: str, keyword: str, note: str | None
              ) -> dict[str, Any]:
        """``anyOf`` / ``oneOf``: type ``any`` with one spec per branch.

        Keywords beside the union hold for every branch, so each branch gets
        them (S and (B1 or B2) is (S and B1) or (S and B2); for exactly one, too).
        """
        shared = {key: value for key, value in node.items()
                  if key not in _ANNOTATIONS and key != keyword}
        specs: list[dict[str, Any]] = []
        apart_before = self.apart_met
        for index, branch in enumerate(node[keyword]):
            at = f"{where}/{keyword}/{index}"
            with self.frame():
                found = self.branch(branch, at, keyword, shared)
            if found is None:
                continue
            spec = found
            spec.pop("description", None)
            if spec["type"] == "any" and "any_of" not in spec and "one_of" not in spec:
                if keyword == "oneOf":
                    self.checked_apart(keyword)  # then only values no other branch takes
                return self.described({"type": "any"}, node, where, note)  # one takes all
            if spec["type"] == "any" and (keyword == "anyOf") == ("any_of" in spec):
                specs.extend(spec.get("any_of", spec.get("one_of", [])))  # flattened
            elif spec["type"] == "any":
                # A union of the other kind: its branches, which take at least what it
                # takes; how many of them hold is counted by the schema check.
                specs.extend(spec.get("any_of", spec.get("one_of", [])))
                self.checked_apart(keyword)
            else:
                specs.append(spec)
        if not specs:
            return self.described({"type": "any"}, node, where, note)  # checked apart
        # A oneOf's branches read without their keywords checked apart may overlap where
        # JSON Schema's do not: the specs take any of them, and the schema check counts.
        one_of = keyword == "oneOf" and self.apart_met == apart_before
        if keyword == "oneOf" and not one_of:
            self.checked_apart("oneOf")
        union: dict[str, Any] = {"type": "any", "one_of" if one_of else "any_of": specs}
        self.described(union, node, where, note)
        self.validate(union, node, where)
        return union

    def branch(self, node: object, where: str, keyword: str, shared: Mapping[str, Any]
               ) -> dict[str, Any] | None:
        """A branch's spec with the keywords beside the union in it; ``None`` when no
        value keeps both (the branch then takes nothing)."""
        inner, where, _ = self.deref(node, where)
        if inner is not _CUT:
            shared = _for_types(shared, inner.get("type"))
            clash = sorted(set(shared) & set(inner) - {"type"} - _ANNOTATIONS)
            if clash or ("type" in shared and "type" in inner
                         and shared["type"] != inner["type"]):
                # What the branch and the keywords beside the union both say, as allOf.
                merged, exact = _merge([shared, inner])
                if merged is None or not exact:
                    self.checked_apart("allOf")
                if merged is None:
                    return None
                inner = merged
            else:
                inner = {**shared, **inner}
            if keyword == "oneOf" and "type" not in inner:
                # A type inferred for a branch is stricter than JSON Schema's, which lets
                # this branch hold too for values of other types: the schema check counts.
                self.checked_apart(keyword)
        return self.spec(inner, where, top=False)

    def several_types(self, node: Mapping[str, Any], where: str, note: str | None
                      ) -> dict[str, Any]:
        """``type: [A, B]``: a union of one branch per type, with the keywords of each type."""
        kinds = node["type"]
        if not all(isinstance(kind, str) and kind in _TYPE_KEYWORDS for kind in kinds):
            self.fail(f"{where}/type", f"unknown type in {kinds!r}")
        if len(set(kinds)) != len(kinds):
            self.fail(f"{where}/type", f"lists a type twice: {kinds!r}")
        known = set().union(*(_TYPE_KEYWORDS[kind] for kind in kinds))
        self.refuse_unknown(node, where, _ANYWHERE | {"type"} | known)
        branches = []
        for kind in kinds:
            branch = {**{key: value for key, value in node.items()
                         if key in _TYPE_KEYWORDS[kind] or key == "format"}, "type": kind}
            # enum and const hold whatever the type: each branch keeps the values of its own.
            values = node.get("enum", [node["const"]] if "const" in node else None)
            if isinstance(values, list):
                branch.pop("const", None)
                branch["enum"] = [value for value in values
                                  if _json_type_of(value) == kind
                                  or (kind == "number" and _json_type_of(value) == "integer")]
                if not branch["enum"]:
                    continue  # no listed value is of this type: the branch takes nothing
            branches.append(branch)
        if not branches:
            self.fail(f"{where}/enum", f"no listed value is of the types {kinds!r}")
        return self.union({**{key: value for key, value in node.items()
                              if key in _ANYWHERE}, "anyOf": branches}, where, "anyOf", note)

    def item(self, node: object, where: str) -> dict[str, Any] | None:
        if node is True or node == {}:
            return None  # any item: the dialect's list without `item`
        if isinstance(node, list):
            self.fail(where, "a list of item schemas is a tuple; the dialect has no tuples")
        self.depth += 1
        try:
            with self.frame():
                node, where, _ = self.deref(node, where)
                if node is _CUT:
                    return None
                node, where = self.merged(node, where)
                if (node is not _CUT and self.union_keyword(node, where) is None
                        and node.get("type", _inferred(node)) == "object"
                        and node.get("properties") and not _names_others(node)):
                    self.refuse_unknown(node, where,
                                        _ANYWHERE | _TYPE_KEYWORDS["object"] | {"type"})
                    return self.members(node, where)
                return self.spec_of(node, where, top=False, note=None)
        finally:
            self.depth -= 1

    def named_object(self, node: Mapping[str, Any], where: str, note: str | None
                     ) -> dict[str, Any]:
        self.depth += 1
        try:
            spec: dict[str, Any] = {"type": "dict", "item": self.members(node, where)}
        finally:
            self.depth -= 1
        return self.described(spec, node, where, note)

    def free_object(self, node: Mapping[str, Any], where: str, note: str | None
                    ) -> dict[str, Any]:
        """A dict whose keys the dialect leaves open; what the schema says of them is
        checked apart (named keys beside patternProperties, required, a closure)."""
        if node.get("required") or node.get("properties") or \
                node.get("additionalProperties", True) is not True:
            self.checked_apart("properties")
        return self.described({"type": "dict"}, node, where, note)

    def deref(self, node: object, where: str) -> tuple[Mapping[str, Any], str, str | None]:
        """Follow local ``$ref``s to a schema, keeping the first description on the way.

        A reference already being expanded further out (a recursive schema) is
        expanded again while the specs nest less than ``RECURSION_DEPTH`` levels;
        deeper, ``_CUT`` is answered: the specs read the value there as any JSON, and the
        whole schema is checked apart, which reads it.
        """
        if node is _CUT:
            return node, where, None
        seen: list[str] = []
        note: str | None = None
        while isinstance(node, Mapping) and ("$ref" in node or "$dynamicRef" in node):
            keyword = "$ref" if "$ref" in node else "$dynamicRef"
            if set(node) - _ANNOTATIONS - {keyword}:
                # In 2020-12 a reference applies in place, beside the keywords with it, as
                # one schema of an allOf does: ``merged`` reads it so.
                break
            if keyword == "$dynamicRef":
                # Followed as $ref in one resource (the schema check refuses one with
                # nested $id resources), and checked apart, to any depth.
                self.checked_apart(keyword)
            if note is None and isinstance(node.get("description"), str):
                note = node["description"]
            ref = node[keyword]
            if not isinstance(ref, str) or not ref.startswith("#"):
                self.fail(f"{where}/{keyword}", f"only local references (#/...) are "
                          f"followed, got {ref!r}: one to another document cannot be "
                          f"enforced without the network")
            inside = resource_holding(self.resources, where)
            if inside is not None:
                self.fail(f"{where}/{keyword}", inside_resource(ref, inside))
            if ref in seen:
                self.fail(f"{where}/{keyword}", f"reference {ref!r} refers to itself and to "
                          f"no schema")
            if ref in self.expanding and self.depth >= RECURSION_DEPTH:
                # The specs stop here; the whole-schema check reads the rest, to any depth,
                # so a tree deeper than the specs is no hole in the gate.
                self.checked_apart(keyword)
                self.warn(f"{where}/{keyword}", f"recursive reference {ref!r} is read by "
                          f"the specs to {RECURSION_DEPTH} levels of nesting; deeper, by the "
                          f"whole-schema check (a refusal there says args:schema)")
                return _CUT, where, note
            seen.append(ref)
            target = resolve_ref(self.root, ref)
            if target is None:
                self.fail(f"{where}/{keyword}", f"{ref!r} points at nothing")
            node, where = target, ref_pointer(self.root, ref)
        self.expanding.extend(seen)
        if node is True:
            return {}, where, note  # the schema that takes anything
        if node is False:
            # The schema that takes nothing: no spec says so, so the specs take any value
            # there and the whole-schema check refuses each one.
            self.checked_apart("false")
            return {}, where, note
        if not isinstance(node, Mapping):
            self.fail(where, f"a schema must be an object or a boolean, got {json.dumps(node)}")
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
            self.fail(f"{where}/type", f"several types {kind!r}; list them without null")
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
            raise self.error(where, "has no type, and its values are of several types or "
                             "not scalars; the dialect needs one type")
        return _inferred(node)

    def refuse_unknown(self, node: Mapping[str, Any], where: str, allowed: frozenset[str]
                       ) -> None:
        for keyword in node:
            if keyword not in allowed and keyword not in _ANY_TYPE_APART:
                self.refuse(node, where, keyword)  # a type's keyword on another: a slip
            if keyword in _CHECKED_APART:
                self.checked_apart(keyword)

    def refuse(self, node: Mapping[str, Any], where: str, keyword: str) -> NoReturn:
        if keyword == ECHO_KEYWORD:
            self.fail(f"{where}/{keyword}", "echo applies to top-level string arguments only")
        hint = _HINTS.get(keyword, "it is outside the subset the gate checks")
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
            if key in ("min", "max", "min_exclusive", "max_exclusive") and not keywords:
                # A bound read from exclusiveMinimum / exclusiveMaximum is named by it.
                low = key.startswith("min")
                keywords = ["exclusiveMinimum" if low else "exclusiveMaximum"]
            if key == "echo":
                keywords = [ECHO_KEYWORD]
            suffix = f"/{keywords[0]}" if keywords else ""
            raise SchemaError(self.source, self.tool, self.base + where + suffix,
                              exc.problem) from exc


def open_objects(schema: object) -> tuple[str, ...]:
    """JSON pointers of the argument objects that ``schema`` leaves open and the gate closes.

    An object that names its keys (and the root, always) without
    ``additionalProperties: false`` admits other keys in JSON Schema; the gate
    refuses them (``IMPORT_DIFFERENCES["additionalProperties"]``). A harness reads
    this to tell "the server's schema allows extra keys" from "the server broke its
    schema". Every schema in the document is looked at, ``$defs`` included.
    """
    found: list[str] = []
    _walk_open(schema, "", True, found, 0)
    return tuple(found)


def _walk_open(node: object, where: str, root: bool, found: list[str], depth: int) -> None:
    if depth > _MAX_SCHEMA_DEPTH:
        return  # deeper than the importer reads: such a schema is refused, not imported
    if isinstance(node, list):
        for index, child in enumerate(node):
            _walk_open(child, f"{where}/{index}", False, found, depth + 1)
        return
    if not isinstance(node, Mapping):
        return
    names_keys = root or (isinstance(node.get("properties"), Mapping) and bool(node["properties"]))
    if names_keys and node.get("additionalProperties", True) is True \
            and node.get("unevaluatedProperties", True) is True:
        found.append(where)
    for key, child in node.items():
        if key in ("properties", "$defs", "definitions", "patternProperties") and \
                isinstance(child, Mapping):
            for name, inner in child.items():
                _walk_open(inner, f"{where}/{key}/{_escape(str(name))}", False, found,
                           depth + 1)
        elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems", "not",
                     "additionalProperties", "if", "then", "else", "contains"):
            _walk_open(child, f"{where}/{key}", False, found, depth + 1)


def schema_is_open(definition: Any) -> bool:
    """Whether a ``ToolDefinition``'s input schema admits an argument it does not name."""
    return bool(open_objects(definition.input_schema))


def _inferred(node: Mapping[str, Any]) -> str:
    """The type of a schema without ``type``, read from the keywords it has.

    ``properties`` makes an object, ``items`` an array, ``pattern`` a string and
    ``minimum`` a number, stricter than JSON Schema, where a keyword holds for
    its own type and lets every other pass (``STRICTER_THAN_JSON_SCHEMA``). A
    schema with none of them takes any value.
    """
    for json_type in ("object", "array", "string", "number"):
        if set(node) & (_TYPE_KEYWORDS[json_type] - {"enum", "const"}):
            return json_type
    return "any"


def _json_type_of(value: object) -> str | None:
    if type(value) is bool:
        return "boolean"
    if type(value) is int:
        return "integer"
    if type(value) is float:
        return "number"
    return "string" if type(value) is str else None


def _names_others(node: Mapping[str, Any]) -> bool:
    """Whether an object's schema says what keys beyond its named ones hold: then the
    dialect's closed dict of named keys would refuse keys the schema admits. (With
    ``unevaluatedProperties``, keys an ``if``/``then``/``else`` or a ``dependentSchemas``
    names are admitted too, on a condition only the schema check reads.)"""
    return "patternProperties" in node or isinstance(node.get("additionalProperties"), Mapping) \
        or isinstance(node.get("unevaluatedProperties"), Mapping) \
        or ("unevaluatedProperties" in node and ("if" in node or "dependentSchemas" in node))


def _merge(parts: list[Mapping[str, Any]]) -> tuple[dict[str, Any] | None, bool]:
    """One schema every value keeping all of ``parts`` keeps, and whether it is exact.

    Types and values meet, bounds take the tightest, named keys and ``required``
    join (a key named twice holds both schemas: an ``allOf`` of them), ``items``
    hold together; of ``pattern``, ``format`` or a union it keeps the first;
    anything else is dropped. ``None`` when no value keeps every part. Not
    exact (the caller then checks the schema apart) when something was dropped.
    """
    merged: dict[str, Any] = {}
    exact = True
    types: list[str] | None = None
    values: list[Any] | None = None
    #: unevaluatedProperties admits keys a dropped if/then/else, dependentSchemas or union
    #: evaluates: the merged object must then not be closed to the keys it names.
    unevaluated = any(part.get("unevaluatedProperties", True) is not True for part in parts)
    for part in parts:
        for keyword, value in part.items():
            if keyword in _DOCUMENT_KEYWORDS:
                continue
            if keyword in _ANNOTATIONS:
                merged.setdefault(keyword, value)
            elif keyword == "type" and _type_list(value) is not None:
                kinds = _type_list(value) or []
                types = kinds if types is None else _meet(types, kinds)
            elif keyword in ("enum", "const") and (keyword == "const" or isinstance(value, list)):
                listed = [value] if keyword == "const" else value
                values = listed if values is None else [
                    kept for kept in values if any(json_equal(kept, each) for each in listed)]
            elif keyword in _LOWS + _HIGHS and type(value) in (int, float):
                tighter = max if keyword in _LOWS else min
                merged[keyword] = tighter(merged.get(keyword, value), value)
            elif keyword == "properties" and isinstance(value, Mapping):
                named = merged.setdefault("properties", {})
                for name, inner in value.items():
                    named[name] = inner if _same(named.get(name, inner), inner) else \
                        {"allOf": [named[name], inner]}
            elif keyword == "required" and isinstance(value, list):
                required = merged.setdefault("required", [])
                required.extend(name for name in value if name not in required)
            elif keyword == "items" and "prefixItems" not in part:
                merged["items"] = value if _same(merged.get("items", value), value) else \
                    {"allOf": [merged["items"], value]}
            elif keyword in _FIRST_KEPT and not (keyword in _UNIONS and set(_UNIONS) & set(merged)):
                exact = exact and _same(merged.setdefault(keyword, value), value)
            elif keyword == "patternProperties" or (
                    keyword in ("additionalProperties", "unevaluatedProperties")
                    and isinstance(value, Mapping)):
                merged["additionalProperties"] = {}  # keys beyond the named: a free dict
                exact = False
            elif not (keyword in ("additionalProperties", "unevaluatedProperties",
                                  "unevaluatedItems") and value is True):
                exact = False  # said in the schema check, not the specs
                if unevaluated and keyword in ("if", "then", "else", "dependentSchemas",
                                               *_UNIONS):
                    merged["additionalProperties"] = {}
    if types is not None:
        kinds = [kind for kind in types if kind != "null"]  # IMPORT_DIFFERENCES["null"]
        if not types:
            return None, exact
        if kinds:
            merged["type"] = kinds[0] if len(kinds) == 1 else kinds
            allowed = set().union(*(_TYPE_KEYWORDS.get(kind, frozenset()) for kind in kinds))
            for keyword in [key for key in merged if _is_typed(key) and key not in allowed]:
                del merged[keyword]  # another type's keyword says nothing of these values
    if values is not None:
        # Only the listed values every other merged keyword admits: the dialect holds an
        # enum to its own bounds and type.
        try:
            keeps = compile_schema_check(merged)
        except SchemaError:
            keeps = _any_value
        values = [value for value in values if keeps(value)]
        if not values:
            return None, exact
        merged["enum"] = values
    if "type" not in merged and len({kind for kind, keywords in _TYPE_KEYWORDS.items()
                                     if kind not in ("integer", "boolean")
                                     and set(merged) & (keywords - {"enum", "const"})}) > 1:
        # Keywords of several types and no type: any value, all of it checked apart.
        return {key: value for key, value in merged.items() if not _is_typed(key)}, False
    if merged.get("required"):
        named = merged.setdefault("properties", {})
        for name in merged["required"]:
            named.setdefault(name, {})  # required and named nowhere: any value
    return merged, exact


def _same(one: object, two: object) -> bool:
    """The same schema, as JSON: ``{"const": 1}`` is not ``{"const": True}``."""
    return json.dumps(one, sort_keys=True, default=repr) == json.dumps(two, sort_keys=True,
                                                                       default=repr)


def _any_value(value: object) -> bool:
    return True


def _type_list(value: object) -> list[str] | None:
    kinds = [value] if isinstance(value, str) else value
    if isinstance(kinds, list) and all(kind in _TYPE_KEYWORDS or kind == "null"
                                       for kind in kinds):
        return list(kinds)
    return None


def _meet(one: list[str], two: list[str]) -> list[str]:
    """The types both lists allow: an integer is a number."""
    met = [kind for kind in one if kind in two or (kind == "integer" and "number" in two)]
    return met + [kind for kind in two if kind == "integer" and "number" in one
                  and kind not in met]


def _for_types(shared: Mapping[str, Any], kind: object) -> Mapping[str, Any]:
    """The keywords beside a union that hold for a branch of type ``kind``: another
    type's (``unevaluatedProperties`` beside a string branch) says nothing of its values."""
    kinds = _type_list(kind) if kind is not None else None
    if not kinds:
        return shared
    allowed = set().union(*(_TYPE_KEYWORDS.get(each, frozenset()) for each in kinds))
    return {key: value for key, value in shared.items()
            if not _is_typed(key) or key in allowed}


def _is_typed(keyword: str) -> bool:
    return keyword not in ("enum", "const") and any(
        keyword in keywords for keywords in _TYPE_KEYWORDS.values())


def _has_null_branch(branches: object) -> bool:
    return isinstance(branches, list) and any(
        isinstance(branch, Mapping) and branch.get("type") == "null" for branch in branches)


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

    Reads, as JSON Schema does: ``type`` (one, or several: a union),
    ``properties``, ``required``, ``additionalProperties`` (``false``, ``true``
    or absent), ``enum``/``const``, ``minimum``/``maximum`` and
    ``exclusiveMinimum``/``exclusiveMaximum`` (numbers, or draft 4's flags),
    ``minLength``/``maxLength``, ``minItems``/``maxItems``, ``pattern``,
    ``format`` (``STRING_FORMATS`` checked; any other named in a warning and
    left unchecked), ``items`` (one schema), ``anyOf``/``oneOf`` (type ``any``
    with branches; keywords beside them hold in every branch), ``allOf``
    (merged: types and values meet, bounds take the tightest, named keys join,
    the root's arguments included; what does not merge is checked apart),
    ``ECHO_KEYWORD``, local ``$ref`` (to a pointer or an anchor; a recursive one
    expanded to ``RECURSION_DEPTH`` levels, and checked apart to any depth; with
    keywords beside it, merged with them as one schema of an ``allOf``), ``false``
    (checked apart: it takes nothing), ``$dynamicRef`` (followed as ``$ref`` in the one
    document, and checked apart to any depth), and
    annotations (``description`` kept;
    ``title``, ``default``, ``examples``, ``contentMediaType`` and the like
    validate nothing and are passed over). The keywords of ``_CHECKED_APART``
    (``multipleOf``, ``not``, ``if``, ``patternProperties``, ``prefixItems``,
    ``unevaluatedProperties``, ``unevaluatedItems``, ...), a schema in
    ``additionalProperties`` and what an ``allOf`` says beyond its merge have no
    spec: the entry's
    ``schema_checks`` checks the whole schema (``compile_schema_check``) after
    the specs. A schema with no type and none of a
    type's keywords takes any JSON value. An argument that a ``then``, a
    ``dependentSchemas`` or a union's branch of the root names is an optional
    argument of any value (the schema check says when it may be given). What
    cannot be enforced (a remote ``$ref``; a ``$dynamicRef`` beside nested ``$id``
    resources; a ``$ref`` inside one) and malformed keywords raise ``SchemaError``
    naming the keyword by JSON pointer; ``IMPORT_DIFFERENCES`` lists where the
    gate reads a schema otherwise than JSON Schema does.

    Null is read only on a property, as the dialect's "not given": ``type:
    [T, "null"]``, an ``anyOf``/``oneOf`` with a ``{"type": "null"}`` branch,
    or OpenAPI's ``nullable: true`` make it optional with null allowed, even
    when ``required`` lists it (OpenAI strict mode's way of saying optional); a
    property left out of ``required`` that does not admit null becomes
    ``nullable: False``. An object with ``properties`` is a ``dict`` with named
    keys (``item``), or a list's items.

    Argument objects are closed whether or not the schema says
    ``additionalProperties: false``: the gate refuses unnamed arguments
    (``open_objects`` says where the schema was open). Returned objects are
    open unless the schema closes them (then checked apart). A ``pattern``
    keeps JSON Schema's search meaning (see ``gate_pattern``); one RE2 cannot
    compile (a lookaround, a backreference) raises ``SchemaError``. A returned
    list may be empty unless ``minItems`` says otherwise. Without ``output`` the
    result is only required to be an object. Without ``fn`` the entry's body
    raises ``NotImplementedError``.
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
    checks: dict[str, Any] = {}
    if args.apart:
        checks["args"] = ArgsSchemaCheck(args.root, args.source, args.tool, args.base)
    if returns is not None and returns.apart:
        checks["returns"] = SchemaCheck(returns.root, returns.source, returns.tool,
                                        returns.base)
    if checks:
        entry["schema_checks"] = checks
    parse_entry(args.tool or "tool", entry)  # every spec was checked where it was read
    return entry


class SchemaCheck:
    """Whether a value keeps a whole JSON Schema (``compile_schema_check``).

    Hashed by its schema (``digest``): a contract that checks another schema is another.
    """

    def __init__(self, schema: object, source: str = "", tool: str = "", base: str = ""
                 ) -> None:
        self.keeps = compile_schema_check(schema, source=source, tool=tool, base=base)
        text = json.dumps(schema, sort_keys=True, default=repr)
        self.digest = "schema:" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def __call__(self, value: Any) -> bool:
        return self.keeps(value)


class ArgsSchemaCheck(SchemaCheck):
    """``None`` when checked args keep the input schema, else the argument that breaks it.

    The argument is the first whose value breaks its own property's schema; ``""``
    when each keeps its own and the object breaks a rule about several (``not``,
    ``dependentRequired``, ``minProperties``, ...).
    """

    def __init__(self, schema: object, source: str = "", tool: str = "",
                 base: str = "") -> None:
        super().__init__(schema, source, tool, base)
        self.own = {key: compile_schema_check(inner[0] if len(inner) == 1 else {"allOf": inner},
                                              root=schema, source=source, tool=tool,
                                              base=f"{base}/properties/{_escape(key)}")
                    for key, inner in _argument_schemas(schema, schema, 0).items()}

    def __call__(self, value: Any) -> str | None:  # type: ignore[override]
        if self.keeps(value):
            return None
        return next((key for key, keeps in self.own.items()
                     if key in value and not keeps(value[key])), "")


def _named_in_place(root: object, node: object, depth: int) -> list[str]:
    """Keys named by the subschemas ``node`` applies on a condition to the value itself."""
    found: list[str] = []
    if not isinstance(node, Mapping) or depth >= _MAX_SCHEMA_DEPTH:
        return found
    subschemas = [node.get(key) for key in ("if", "then", "else")]
    subschemas += [*(node.get("dependentSchemas") or {}).values()] \
        if isinstance(node.get("dependentSchemas"), Mapping) else []
    for key in (*_UNIONS, "allOf"):
        subschemas += node[key] if isinstance(node.get(key), list) else []
    for sub in subschemas:
        while isinstance(sub, Mapping) and isinstance(sub.get("$ref"), str) \
                and depth < _MAX_SCHEMA_DEPTH:
            sub, depth = resolve_ref(root, sub["$ref"]), depth + 1
        if isinstance(sub, Mapping):
            named = sub.get("properties")
            found.extend(name for name in (named if isinstance(named, Mapping) else ())
                         if isinstance(name, str) and name and name not in found)
            found.extend(name for name in _named_in_place(root, sub, depth + 1)
                         if name not in found)
    return found


def _argument_schemas(root: object, node: object, depth: int) -> dict[str, list[Any]]:
    """Each argument's schemas: its ``properties`` entry and those of the root's ``allOf``."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) \
            and depth < _MAX_SCHEMA_DEPTH:
        node, depth = resolve_ref(root, node["$ref"]), depth + 1
    found: dict[str, list[Any]] = {}
    if not isinstance(node, Mapping) or depth >= _MAX_SCHEMA_DEPTH:
        return found
    properties = node.get("properties")
    for key, inner in (properties.items() if isinstance(properties, Mapping) else ()):
        found.setdefault(key, []).append(inner)
    for branch in node.get("allOf", []) if isinstance(node.get("allOf"), list) else []:
        for key, inner in _argument_schemas(root, branch, depth + 1).items():
            found.setdefault(key, []).extend(inner)
    return found


class _Unimplemented:
    """The body of a tool loaded without a function."""

    def __init__(self, tool: str, source: str) -> None:
        self.tool, self.source = tool, source

    def __call__(self, **kwargs: Any) -> Any:
        origin = f" from {self.source}" if self.source else ""
        raise NotImplementedError(f"tool {self.tool!r} was loaded{origin} without a function; "
                                  f"pass it in fns={{name: callable}}")
