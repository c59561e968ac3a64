"""A whole JSON Schema checked as JSON Schema 2020-12 reads it, for what the dialect cannot say.

The importer reads a schema into the dialect's specs, which the gate compiles.
Some keywords have no spec (``multipleOf``, ``uniqueItems``, ``not``,
``if``/``then``/``else``, ``patternProperties``, ``propertyNames``,
``dependentRequired``, ``dependentSchemas``, ``prefixItems``, ``contains``,
``minProperties``/``maxProperties``, ``unevaluatedProperties``/``unevaluatedItems``,
``$dynamicRef``, an ``allOf`` of several schemas, a returned object's
``additionalProperties: false``): for a schema that uses one, the importer
adds ``compile_schema_check(schema)`` to the entry (``schema_checks``), and
the gate runs it after its own checks, so a value passes only if it keeps
both. The check reads every keyword of the schema, the dialect's too, so it
alone is JSON Schema's answer.

``unevaluatedProperties`` and ``unevaluatedItems`` read the keys and items that
the keywords beside them, and the subschemas that hold of the value in place
(``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/``else``, ``dependentSchemas``,
``$ref``, ``$dynamicRef``), evaluated, as 2020-12's annotations say: a node
that holds one is checked in one pass that also answers what it evaluated
(``_Compiler.annotated``), so nesting costs no more than the value's size.
A ``$dynamicRef`` is followed within the one document: with no ``$id`` below
the root there is one resource, and its dynamic scope always names the anchor
a plain ``$ref`` would.

``compile_schema_check`` raises ``SchemaError`` (naming the keyword by JSON
pointer) for a keyword it does not read (a remote ``$ref``, which would need
the network; a ``$dynamicRef`` in a document with ``$id`` resources below its
root, whose dynamic scope could change its target; a local ``$ref`` inside such a
resource, which JSON Schema resolves against it, not against the document) or a keyword's value JSON
Schema does not allow (``multipleOf: 0``). A check takes a JSON value and answers a ``bool``;
it never raises for a JSON value (a value nested past Python's recursion
limit raises ``RecursionError``, which the gate reads as a refusal).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any, TypeVar
from urllib.parse import unquote

from .._errors import SchemaError
from .._formats import STRING_FORMATS
from .._patterns import fullmatcher, pattern_problem
from .ecma import _re2_escapes, gate_pattern
from .export import ECHO_KEYWORD, _escape

__all__ = ["CHECKED_KEYWORDS", "compile_schema_check", "inside_resource", "json_equal",
           "ref_pointer", "resolve_ref", "resource_holding", "resources_of"]

Check = Callable[[Any], bool]

#: Keywords that say nothing about a value: passed over.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly", "contentMediaType",
                          "contentEncoding", "contentSchema", "$id", "$anchor", "$schema",
                          "$dynamicAnchor", "$defs", "definitions", "$vocabulary",
                          ECHO_KEYWORD})
#: Every keyword the check reads (besides annotations).
CHECKED_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "format", "items", "prefixItems",
    "contains", "minContains", "maxContains", "minItems", "maxItems", "uniqueItems",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "allOf",
    "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "nullable", "$dynamicRef",
    "unevaluatedProperties", "unevaluatedItems"})
#: Keywords that apply a subschema to the value itself: what it evaluates, the node does.
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "if", "dependentSchemas", "$ref",
                       "$dynamicRef"})
_UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")
#: Keywords whose value is a schema, a list of schemas, or an object of schemas: where
#: subschemas are (for anchors and ``$id`` resources), never inside ``const`` or ``enum``.
_ONE_SCHEMA = ("items", "contains", "additionalProperties", "unevaluatedProperties",
               "unevaluatedItems", "propertyNames", "not", "if", "then", "else")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: What annotate answers for a value that breaks the schema; else the evaluated keys or
#: indices (an empty set for a value that is neither an object nor an array).
Annotate = Callable[[Any], "set[Any] | None"]
_Compiled = TypeVar("_Compiled")
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
#: As the importer's own bound: a hostile listing nested a thousand levels is refused.
_MAX_SCHEMA_DEPTH = 64


def json_equal(one: object, two: object) -> bool:
    """Equality as JSON Schema reads it: ``1 == 1.0``, but ``True`` is no number."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(json_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(json_equal(one[key], two[key]) for key in one)
    if _is_number(one) and _is_number(two):
        return one == two
    return type(one) is type(two) and one == two


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _is_type(value: object, name: str) -> bool:
    if name == "integer":
        return type(value) is int or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return _is_number(value)
    return {"null": value is None, "boolean": type(value) is bool,
            "string": isinstance(value, str), "array": isinstance(value, list),
            "object": isinstance(value, dict)}[name]


def _sized(kind: type[str | list[Any] | dict[str, Any]], least: int | None, most: int | None
           ) -> Check:
    """A length bound that holds for values of ``kind`` and lets any other pass."""
    def sized(value: Any) -> bool:
        if not isinstance(value, kind):
            return True
        return (least is None or len(value) >= least) and (most is None or len(value) <= most)
    return sized


def _multiple(value: float, step: float) -> bool:
    # As jsonschema computes it: a float step by division, with Fraction past overflow.
    if isinstance(step, float) or isinstance(value, float):
        quotient = value / step
        try:
            return int(quotient) == quotient
        except (OverflowError, ValueError):
            return (Fraction(value) / Fraction(step)).denominator == 1
    return value % step == 0


class _Compiler:
    """Compiles one schema document; local ``$ref``s are compiled once, when first met."""

    def __init__(self, source: str, tool: str, root: object, base: str) -> None:
        self.source, self.tool, self.root, self.base = source, tool, root, base
        self.refs: dict[str, Check] = {}
        self.ref_annotations: dict[str, Annotate] = {}
        #: Compiled once per node of the document (by identity): a node met twice (by
        #: a check and by an annotation of the node above) is not compiled twice.
        self.compiled: dict[int, Check] = {}
        self.annotators: dict[int, Annotate] = {}
        self.depth = 0
        self.anchors, self.resources = _anchors_and_resources(root)

    def fail(self, where: str, problem: str) -> SchemaError:
        return SchemaError(self.source, self.tool, self.base + where, problem)

    def nested(self, read: Callable[[Any, str], _Compiled], node: Any, where: str
               ) -> _Compiled:
        """``read(node, where)`` one level deeper, refused past ``_MAX_SCHEMA_DEPTH``."""
        if self.depth >= _MAX_SCHEMA_DEPTH:
            raise self.fail(where, f"schemas nest deeper than {_MAX_SCHEMA_DEPTH} levels")
        self.depth += 1
        try:
            return read(node, where)
        finally:
            self.depth -= 1

    def schema(self, node: object, where: str) -> Check:
        if id(node) in self.compiled:
            return self.compiled[id(node)]
        check = self.nested(self.read, node, where)
        if isinstance(node, Mapping):
            self.compiled[id(node)] = check
        return check

    def read(self, node: object, where: str) -> Check:
        if node is True:
            return lambda value: True
        if node is False:
            return lambda value: False
        if not isinstance(node, Mapping):
            raise self.fail(where, f"a schema must be an object or a boolean, "
                            f"got {type(node).__name__}")
        if any(keyword in node for keyword in _UNEVALUATED):
            annotate = self.annotated(node, where)
            return lambda value: annotate(value) is not None
        checks = [self.keyword(node, keyword, value, at)
                  for keyword, value, at in self.keywords(node, where)]
        if len(checks) == 1:
            return checks[0]
        return lambda value: all(check(value) for check in checks)

    def keywords(self, node: Mapping[str, Any], where: str) -> Iterator[tuple[str, Any, str]]:
        """Each keyword of ``node`` that says something of a value, with its pointer."""
        for keyword, value in node.items():
            if keyword in _ANNOTATIONS or keyword in ("minContains", "maxContains", "then",
                                                        "else"):
                continue  # read with contains, with if
            if keyword not in CHECKED_KEYWORDS:
                raise self.fail(f"{where}/{_escape(str(keyword))}", f"keyword {keyword!r} is "
                                f"not supported: it is outside what the gate checks")
            yield keyword, value, f"{where}/{_escape(keyword)}"

    def keyword(self, node: Mapping[str, Any], keyword: str, value: Any, at: str) -> Check:
        reader: Callable[..., Check] = getattr(self, "k_" + keyword.lstrip("$"))
        return reader(node, value, at)

    # -- any type -------------------------------------------------------------------------

    def k_type(self, node: Mapping[str, Any], kinds: Any, at: str) -> Check:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(names, list) or not all(name in _TYPES for name in names):
            raise self.fail(at, f"unknown type {kinds!r}")
        if node.get("nullable") is True:
            names = [*names, "null"]
        return lambda value: any(_is_type(value, name) for name in names)

    def k_nullable(self, node: Mapping[str, Any], flag: Any, at: str) -> Check:
        if type(flag) is not bool:
            raise self.fail(at, "must be a boolean")
        return lambda value: True  # OpenAPI's: read with type

    def k_enum(self, node: Mapping[str, Any], values: Any, at: str) -> Check:
        if not isinstance(values, list):
            raise self.fail(at, "must be a list")
        return lambda value: any(json_equal(value, each) for each in values)

    def k_const(self, node: Mapping[str, Any], expected: Any, at: str) -> Check:
        return lambda value: json_equal(value, expected)

    def target(self, ref: Any, at: str) -> tuple[object, str]:
        """The node a local reference points at, and its pointer."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise self.fail(at, f"only local references (#/...) are followed, got {ref!r}: "
                            f"one to another document cannot be enforced without the network")
        if at.endswith("/$dynamicRef") and self.resources:
            raise self.fail(at, f"$dynamicRef in a document with $id resources below its "
                            f"root (at {self.resources[0]!r}) is not supported: its dynamic "
                            f"scope could change what it refers to")
        inside = resource_holding(self.resources, at)
        if inside is not None:
            raise self.fail(at, inside_resource(ref, inside))
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            found = self.anchors.get(fragment)
            if found is None:
                raise self.fail(at, f"{ref!r} points at nothing")
            return found
        target = resolve_ref(self.root, ref)
        if target is None:
            raise self.fail(at, f"{ref!r} points at nothing")
        return target, fragment

    def k_ref(self, node: Mapping[str, Any], ref: Any, at: str) -> Check:
        target, where = self.target(ref, at)
        if ref not in self.refs:
            # Set before the target is compiled: a reference inside it to itself (a tree)
            # is looked up when a value is checked, by then compiled.
            self.refs[ref] = lambda value: True
            self.refs[ref] = self.schema(target, where)
        return lambda value: self.refs[ref](value)

    def k_dynamicRef(self, node: Mapping[str, Any], ref: Any, at: str) -> Check:
        # One resource: its dynamic scope is itself, so the anchor is the one $ref finds.
        return self.k_ref(node, ref, at)

    def ref_annotated(self, ref: Any, at: str) -> Annotate:
        target, where = self.target(ref, at)
        if ref not in self.ref_annotations:
            self.ref_annotations[ref] = lambda value: set()
            self.ref_annotations[ref] = self.annotated(target, where)
        return lambda value: self.ref_annotations[ref](value)

    # -- what a value's keys and items were evaluated by (unevaluated*) ---------------------

    def annotated(self, node: object, where: str) -> Annotate:
        """``node`` as a check that also answers which keys or items of the value it evaluated.

        ``None`` when the value breaks ``node``. Keywords that apply a subschema in place
        add what that subschema evaluated, when it holds (for ``anyOf``, every branch that
        holds; ``not`` adds nothing), and ``unevaluated*`` checks the rest, then has
        evaluated all.
        """
        if node is True:
            return lambda value: set()
        if node is False:
            return lambda value: None
        if not isinstance(node, Mapping):
            raise self.fail(where, f"a schema must be an object or a boolean, "
                            f"got {type(node).__name__}")
        if id(node) in self.annotators:
            return self.annotators[id(node)]
        annotate = self.nested(self.annotator, node, where)
        self.annotators[id(node)] = annotate
        return annotate

    def annotator(self, node: Mapping[str, Any], where: str) -> Annotate:
        local: list[Check] = []
        applied: list[Annotate] = []
        for keyword, value, at in self.keywords(node, where):
            if keyword in _UNEVALUATED:
                continue  # read last, over what the rest evaluated
            if keyword in _IN_PLACE:
                applied.append(getattr(self, "a_" + keyword.lstrip("$"))(node, value, at))
            else:
                local.append(self.keyword(node, keyword, value, at))
        own = self.own_annotations(node, where)
        rest_keys = self.unevaluated(node, "unevaluatedProperties", where)
        rest_items = self.unevaluated(node, "unevaluatedItems", where)

        def annotate(value: Any) -> set[Any] | None:
            if not all(check(value) for check in local):
                return None
            seen = _all_held(applied, value)
            if seen is None:
                return None
            seen |= own(value)
            if isinstance(value, dict) and rest_keys is not None:
                if not all(rest_keys(item) for key, item in value.items() if key not in seen):
                    return None
                return set(value)
            if isinstance(value, list) and rest_items is not None:
                if not all(rest_items(item) for index, item in enumerate(value)
                           if index not in seen):
                    return None
                return set(range(len(value)))
            return seen
        return annotate

    def unevaluated(self, node: Mapping[str, Any], keyword: str, where: str) -> Check | None:
        return self.schema(node[keyword], f"{where}/{keyword}") if keyword in node else None

    def own_annotations(self, node: Mapping[str, Any], where: str
                        ) -> Callable[[Any], set[Any]]:
        """The keys or items ``node``'s own keywords evaluate, of a value that keeps them."""
        listed = node.get("properties")
        names: Mapping[str, Any] = listed if isinstance(listed, Mapping) else {}
        patterns = [self.matcher(pattern, f"{where}/patternProperties")
                    for pattern in node.get("patternProperties", {})]
        all_keys = "additionalProperties" in node
        prefix = node.get("prefixItems")
        prefixed = len(prefix) if isinstance(prefix, list) else 0
        all_items = "items" in node
        contains = (self.schema(node["contains"], f"{where}/contains")
                    if "contains" in node else None)

        def own(value: Any) -> set[Any]:
            if isinstance(value, dict):
                if all_keys:
                    return set(value)
                return {key for key in value if key in names
                        or any(match(key) is not None for match in patterns)}
            if isinstance(value, list):
                if all_items:
                    return set(range(len(value)))
                found = set(range(min(prefixed, len(value))))
                if contains is not None:
                    found.update(index for index, item in enumerate(value) if contains(item))
                return found
            return set()
        return own

    def branches(self, listed: Any, at: str) -> list[Annotate]:
        return self.each_of(listed, at, self.annotated)

    def a_allOf(self, node: Mapping[str, Any], listed: Any, at: str) -> Annotate:
        branches = self.branches(listed, at)
        return lambda value: _all_held(branches, value)

    def a_anyOf(self, node: Mapping[str, Any], listed: Any, at: str) -> Annotate:
        branches = self.branches(listed, at)

        def any_of(value: Any) -> set[Any] | None:
            # Every branch is tried: each that holds evaluates what it evaluates.
            held = [found for found in (branch(value) for branch in branches)
                    if found is not None]
            return set().union(*held) if held else None
        return any_of

    def a_oneOf(self, node: Mapping[str, Any], listed: Any, at: str) -> Annotate:
        branches = self.branches(listed, at)

        def one_of(value: Any) -> set[Any] | None:
            held = [found for found in (branch(value) for branch in branches)
                    if found is not None]
            return held[0] if len(held) == 1 else None
        return one_of

    def a_if(self, node: Mapping[str, Any], inner: Any, at: str) -> Annotate:
        condition = self.annotated(inner, at)
        where = at.rsplit("/", 1)[0]
        then = self.annotated(node.get("then", True), f"{where}/then")
        otherwise = self.annotated(node.get("else", True), f"{where}/else")

        def if_then_else(value: Any) -> set[Any] | None:
            found = condition(value)
            if found is None:
                return otherwise(value)
            after = then(value)
            return None if after is None else found | after
        return if_then_else

    def a_dependentSchemas(self, node: Mapping[str, Any], listed: Any, at: str) -> Annotate:
        if not isinstance(listed, Mapping):
            raise self.fail(at, "must be an object of schemas")
        named = {key: self.annotated(inner, f"{at}/{_escape(str(key))}")
                 for key, inner in listed.items()}

        return lambda value: _all_held([annotate for key, annotate in named.items()
                                        if key in value], value) \
            if isinstance(value, dict) else set()

    def a_ref(self, node: Mapping[str, Any], ref: Any, at: str) -> Annotate:
        return self.ref_annotated(ref, at)

    def a_dynamicRef(self, node: Mapping[str, Any], ref: Any, at: str) -> Annotate:
        return self.ref_annotated(ref, at)

    # -- combinations ---------------------------------------------------------------------

    def each_of(self, listed: Any, at: str, read: Callable[[Any, str], _Compiled]
                ) -> list[_Compiled]:
        if not isinstance(listed, list) or not listed:
            raise self.fail(at, "must be a non-empty list of schemas")
        return [read(each, f"{at}/{index}") for index, each in enumerate(listed)]

    def subschemas(self, listed: Any, at: str) -> list[Check]:
        return self.each_of(listed, at, self.schema)

    def k_allOf(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        checks = self.subschemas(listed, at)
        return lambda value: all(check(value) for check in checks)

    def k_anyOf(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        checks = self.subschemas(listed, at)
        return lambda value: any(check(value) for check in checks)

    def k_oneOf(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        checks = self.subschemas(listed, at)
        return lambda value: sum(1 for check in checks if check(value)) == 1

    def k_not(self, node: Mapping[str, Any], inner: Any, at: str) -> Check:
        check = self.schema(inner, at)
        return lambda value: not check(value)

    def k_if(self, node: Mapping[str, Any], inner: Any, at: str) -> Check:
        condition = self.schema(inner, at)
        where = at.rsplit("/", 1)[0]
        then = self.schema(node.get("then", True), f"{where}/then")
        otherwise = self.schema(node.get("else", True), f"{where}/else")
        return lambda value: then(value) if condition(value) else otherwise(value)

    # -- numbers --------------------------------------------------------------------------

    def number(self, value: Any, at: str) -> float:
        if not _is_number(value) or not math.isfinite(value):
            raise self.fail(at, f"must be a finite number, got {value!r}")
        return value  # type: ignore[no-any-return]

    def k_multipleOf(self, node: Mapping[str, Any], step: Any, at: str) -> Check:
        if self.number(step, at) <= 0:
            raise self.fail(at, f"must be greater than 0, got {step!r}")
        return lambda value: not _is_number(value) or _multiple(value, step)

    def k_minimum(self, node: Mapping[str, Any], low: Any, at: str) -> Check:
        self.number(low, at)
        strict = node.get("exclusiveMinimum") is True  # draft 4's flag
        return lambda value: not _is_number(value) or value > low or (not strict
                                                                      and value == low)

    def k_maximum(self, node: Mapping[str, Any], high: Any, at: str) -> Check:
        self.number(high, at)
        strict = node.get("exclusiveMaximum") is True
        return lambda value: not _is_number(value) or value < high or (not strict
                                                                       and value == high)

    def k_exclusiveMinimum(self, node: Mapping[str, Any], low: Any, at: str) -> Check:
        if type(low) is bool:
            return lambda value: True  # draft 4: read with minimum
        self.number(low, at)
        return lambda value: not _is_number(value) or value > low

    def k_exclusiveMaximum(self, node: Mapping[str, Any], high: Any, at: str) -> Check:
        if type(high) is bool:
            return lambda value: True
        self.number(high, at)
        return lambda value: not _is_number(value) or value < high

    # -- strings --------------------------------------------------------------------------

    def count(self, value: Any, at: str) -> int:
        if type(value) is float and value.is_integer():
            value = int(value)
        if type(value) is not int or value < 0:
            raise self.fail(at, f"must be a non-negative integer, got {value!r}")
        return value

    def k_minLength(self, node: Mapping[str, Any], low: Any, at: str) -> Check:
        return _sized(str, self.count(low, at), None)

    def k_maxLength(self, node: Mapping[str, Any], high: Any, at: str) -> Check:
        return _sized(str, None, self.count(high, at))

    def matcher(self, pattern: Any, at: str) -> Callable[[str], object]:
        if not isinstance(pattern, str):
            raise self.fail(at, "must be a string")
        problem = pattern_problem(_re2_escapes(pattern))
        if problem:
            raise self.fail(at, problem)
        return fullmatcher(gate_pattern(pattern))

    def k_pattern(self, node: Mapping[str, Any], pattern: Any, at: str) -> Check:
        match = self.matcher(pattern, at)
        return lambda value: not isinstance(value, str) or match(value) is not None

    def k_format(self, node: Mapping[str, Any], name: Any, at: str) -> Check:
        if not isinstance(name, str):
            raise self.fail(at, "must be a string")
        known = STRING_FORMATS.get(name)
        if known is None:
            return lambda value: True  # an annotation in 2020-12 (the importer names it)
        return lambda value: not isinstance(value, str) or known(value)

    # -- arrays ---------------------------------------------------------------------------

    def k_items(self, node: Mapping[str, Any], inner: Any, at: str) -> Check:
        if isinstance(inner, list):
            raise self.fail(at, "a list of item schemas is draft 4's tuple; use prefixItems")
        check = self.schema(inner, at)
        skip = len(node.get("prefixItems", [])) if isinstance(node.get("prefixItems"),
                                                               list) else 0
        return lambda value: not isinstance(value, list) or all(map(check, value[skip:]))

    def k_prefixItems(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        checks = self.subschemas(listed, at)
        return lambda value: not isinstance(value, list) or all(
            check(item) for check, item in zip(checks, value, strict=False))

    def k_contains(self, node: Mapping[str, Any], inner: Any, at: str) -> Check:
        check = self.schema(inner, at)
        where = at.rsplit("/", 1)[0]
        least = self.count(node.get("minContains", 1), f"{where}/minContains")
        most = (self.count(node["maxContains"], f"{where}/maxContains")
                if "maxContains" in node else None)

        def contains(value: Any) -> bool:
            if not isinstance(value, list):
                return True
            found = sum(1 for item in value if check(item))
            return found >= least and (most is None or found <= most)
        return contains

    def k_minItems(self, node: Mapping[str, Any], low: Any, at: str) -> Check:
        return _sized(list, self.count(low, at), None)

    def k_maxItems(self, node: Mapping[str, Any], high: Any, at: str) -> Check:
        return _sized(list, None, self.count(high, at))

    def k_uniqueItems(self, node: Mapping[str, Any], flag: Any, at: str) -> Check:
        if type(flag) is not bool:
            raise self.fail(at, "must be a boolean")
        if not flag:
            return lambda value: True
        return lambda value: not isinstance(value, list) or not any(
            json_equal(value[index], other) for index in range(len(value))
            for other in value[index + 1:])

    # -- objects --------------------------------------------------------------------------

    def named(self, listed: Any, at: str) -> dict[str, Check]:
        if not isinstance(listed, Mapping):
            raise self.fail(at, "must be an object of schemas")
        return {key: self.schema(inner, f"{at}/{_escape(str(key))}")
                for key, inner in listed.items()}

    def k_properties(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        checks = self.named(listed, at)
        return lambda value: not isinstance(value, dict) or all(
            check(value[key]) for key, check in checks.items() if key in value)

    def k_patternProperties(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        if not isinstance(listed, Mapping):
            raise self.fail(at, "must be an object of schemas")
        checks = [(self.matcher(pattern, f"{at}/{_escape(str(pattern))}"),
                   self.schema(inner, f"{at}/{_escape(str(pattern))}"))
                  for pattern, inner in listed.items()]
        return lambda value: not isinstance(value, dict) or all(
            check(item) for key, item in value.items() for match, check in checks
            if match(key) is not None)

    def k_additionalProperties(self, node: Mapping[str, Any], inner: Any, at: str) -> Check:
        check = self.schema(inner, at)
        named = node.get("properties", {})
        patterns = [self.matcher(pattern, at) for pattern in node.get("patternProperties", {})]

        def others_keep(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            return all(check(item) for key, item in value.items() if key not in named
                       and not any(match(key) is not None for match in patterns))
        return others_keep

    def k_propertyNames(self, node: Mapping[str, Any], inner: Any, at: str) -> Check:
        check = self.schema(inner, at)
        return lambda value: not isinstance(value, dict) or all(map(check, value))

    def k_required(self, node: Mapping[str, Any], names: Any, at: str) -> Check:
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise self.fail(at, "must be a list of property names")
        return lambda value: not isinstance(value, dict) or all(name in value for name in names)

    def k_minProperties(self, node: Mapping[str, Any], low: Any, at: str) -> Check:
        return _sized(dict, self.count(low, at), None)

    def k_maxProperties(self, node: Mapping[str, Any], high: Any, at: str) -> Check:
        return _sized(dict, None, self.count(high, at))

    def k_dependentRequired(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        if not isinstance(listed, Mapping) or not all(
                isinstance(names, list) and all(isinstance(name, str) for name in names)
                for names in listed.values()):
            raise self.fail(at, "must be an object of lists of property names")
        return lambda value: not isinstance(value, dict) or all(
            name in value for key, names in listed.items() if key in value for name in names)

    def k_dependentSchemas(self, node: Mapping[str, Any], listed: Any, at: str) -> Check:
        checks = self.named(listed, at)
        return lambda value: not isinstance(value, dict) or all(
            check(value) for key, check in checks.items() if key in value)


def _all_held(annotators: list[Annotate], value: Any) -> set[Any] | None:
    """What all of ``annotators`` evaluated of ``value``, or ``None`` if one does not hold."""
    seen: set[Any] = set()
    for annotate in annotators:
        found = annotate(value)
        if found is None:
            return None
        seen |= found
    return seen


def resources_of(root: object) -> list[str]:
    """The pointers of the ``$id`` resources of a document below its root."""
    return _anchors_and_resources(root)[1]


def _anchors_and_resources(root: object) -> tuple[dict[str, tuple[object, str]], list[str]]:
    """The plain-name anchors of a document's root resource (``$anchor``,
    ``$dynamicAnchor``), each with its node and pointer, and the pointers of its ``$id``
    resources below the root. An anchor inside one of those is that resource's: a
    ``#name`` of the root's never names it."""
    anchors: dict[str, tuple[object, str]] = {}
    resources: list[str] = []
    stack: list[tuple[object, str, int, bool]] = [(root, "", 0, True)]
    while stack:
        node, where, depth, in_root = stack.pop()
        if not isinstance(node, Mapping) or depth > _MAX_SCHEMA_DEPTH:
            continue
        if where and "$id" in node:
            resources.append(where)
            in_root = False
        for keyword in ("$anchor", "$dynamicAnchor"):
            if in_root and isinstance(node.get(keyword), str):
                anchors.setdefault(node[keyword], (node, where))
        for keyword in _ONE_SCHEMA:
            if keyword in node:
                stack.append((node[keyword], f"{where}/{keyword}", depth + 1, in_root))
        for keyword in _SCHEMA_LISTS:
            if isinstance(node.get(keyword), list):
                stack.extend((each, f"{where}/{keyword}/{index}", depth + 1, in_root)
                             for index, each in enumerate(node[keyword]))
        for keyword in _SCHEMA_MAPS:
            if isinstance(node.get(keyword), Mapping):
                stack.extend((each, f"{where}/{keyword}/{_escape(str(key))}", depth + 1,
                              in_root) for key, each in node[keyword].items())
    return anchors, sorted(resources)


def resource_holding(resources: list[str], where: str) -> str | None:
    """The pointer of the innermost ``$id`` resource below the root that holds ``where``."""
    holding = [pointer for pointer in resources
               if where == pointer or where.startswith(pointer + "/")]
    return max(holding, key=len) if holding else None


def inside_resource(ref: str, resource: str) -> str:
    """Why a local reference inside an ``$id`` resource below the root is refused."""
    return (f"{ref!r} is inside the $id resource at {resource!r}, against which JSON Schema "
            f"resolves it; only references in the root resource are followed")


def resolve_ref(root: object, ref: str,
                anchors: Mapping[str, tuple[object, str]] | None = None) -> object:
    """The node a local reference points at (``#/a/b``, or ``#name`` of an anchor), or ``None``."""
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        found = (_anchors_and_resources(root)[0] if anchors is None else anchors).get(fragment)
        return None if found is None else found[0]
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


def ref_pointer(root: object, ref: str) -> str:
    """The JSON pointer of what a local reference points at (an anchor's, for ``#name``)."""
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        found = _anchors_and_resources(root)[0].get(fragment)
        return fragment if found is None else found[1]
    return fragment


def compile_schema_check(schema: object, *, root: object = None, source: str = "",
                         tool: str = "", base: str = "") -> Check:
    """``check(value) -> bool``: whether ``value`` keeps ``schema`` as JSON Schema 2020-12 reads it.

    ``root`` is the document its ``$ref``s point into (``schema`` itself by
    default). Formats are checked as the gate checks them (``STRING_FORMATS``;
    any other passes), patterns as the gate reads them (RE2, searched).
    ``SchemaError`` names, by JSON pointer under ``base``, the first keyword it
    cannot check.
    """
    return _Compiler(source, tool, schema if root is None else root, base).schema(schema, "")
