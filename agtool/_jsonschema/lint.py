"""Schema lint: where to look first in a tool's input schema.

Findings are prompts for review, not a score: a free-text field is rightly a
string, and a flag may rightly be a boolean. The rules (``RULES``):

- R1: a tool with three or more fields of which fewer than 75% are required;
- R2: a string with neither ``enum`` (or ``const``) nor ``pattern``;
- R3: a boolean switch;
- R4: sentinel ambiguity: a default that is explicitly null, or a null type
  where the gate cannot read null as "not given" (a property's ``[T, "null"]``
  or the null branch of its ``anyOf``/``oneOf`` is that, and is passed over);
- R5: an id-like string argument (``request_id``, ``*_id``) not marked echo;
- R6: a ``pattern`` RE2 cannot compile (the gate would refuse the table), or
  one a backtracking engine (Python's ``re``, most JSON Schema validators) may
  take exponential time on: a quantified group holding a quantifier
  (``(a+)+``) or alternatives that start alike (``(a|aa)*``). The gate is safe
  (RE2), but anyone else validating with the schema is not.

Seed 002's script had two bugs, fixed here: ``node.get("default") is None``
reported every node without a default as having a null one (only a declared
``"default": null`` is), and its walk reached only ``properties`` and dict
``items``. This walk reaches every subschema once: ``properties``,
``additionalProperties``, ``items`` in both forms, ``prefixItems``,
``anyOf``/``oneOf``/``allOf``/``not``, ``$defs``/``definitions`` and the
targets of local ``$ref``. Its echo rate counted an id missing on both sides
as a match and divided by zero on no samples; ``echo_match_rate`` does neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote

from .._contract import check_table
from .._errors import SchemaError
from .._patterns import pattern_problem

# _escape and _resolve are the JSON pointer helpers the importer follows refs with:
# one reading of a pointer for both; _structure, _class_end and _re2_escapes are
# its reading of a pattern.
from .ecma import _class_end, _re2_escapes, _structure
from .export import ECHO_KEYWORD, _escape, to_json_schema
from .schema_check import resolve_ref as _resolve
from .toolfiles import read_tools_file

__all__ = [
    "DENSITY_FLOOR",
    "RULES",
    "Finding",
    "echo_match_rate",
    "format_findings",
    "lint_file",
    "lint_schema",
    "lint_table",
]

RULES: Mapping[str, str] = MappingProxyType({
    "R1": "required-field density below 0.75 in a tool with three or more fields",
    "R2": "a string with neither enum nor pattern: an open vocabulary the model may invent",
    "R3": "a boolean switch: check it is not two tools, or a mode that wants an enum",
    "R4": "sentinel ambiguity: an explicit null default, or a null type the gate cannot read "
          "as 'not given'",
    "R5": "an id-like string argument not marked echo, so nobody compares it with the original",
    "R6": "a pattern RE2 cannot compile, or one a backtracking engine may take exponential "
          "time on (a nested quantifier, alternatives that start alike under a quantifier)",
})
#: R1's threshold: required fields / all fields, for tools with at least ``_MIN_FIELDS``.
DENSITY_FLOOR = 0.75
_MIN_FIELDS = 3
# `ticket_id`, `id`, `requestId`; not `paid` or `valid`.
_ID_LIKE = re.compile(r"(?:^|_)(?:id|ID|Id)$|[a-z0-9](?:Id|ID)$")
_CLOSED = ("enum", "const", "pattern")


@dataclass(frozen=True)
class Finding:
    """One review prompt: which rule, which tool, where (a JSON pointer) and what."""

    rule: str
    tool: str
    #: A JSON pointer into the tool's input schema; ``""`` is the tool as a whole.
    location: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """The finding as JSON-ready data."""
        return {"rule": self.rule, "tool": self.tool, "location": self.location,
                "message": self.message}


def lint_schema(schema: object, tool: str = "") -> list[Finding]:
    """Findings for one tool's input schema, in document order.

    A ``$ref`` that is not local (``#/...``) or points at nothing raises
    ``SchemaError``: a walk that skipped it would miss what it refers to.
    """
    return _lint(schema, tool, "", "")


def _lint(schema: object, tool: str, source: str, base: str) -> list[Finding]:
    if not isinstance(schema, Mapping):
        raise SchemaError(source, tool, base, f"an input schema must be an object, got "
                          f"{type(schema).__name__}")
    findings = list(_tool_findings(schema, tool))
    for where, node in _nodes(schema, tool, source, base):
        findings.extend(_node_findings(schema, node, tool, where))
    return findings


def _tool_findings(root: Mapping[str, Any], tool: str) -> Iterator[Finding]:
    properties = root.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = root.get("required")
    named = {key for key in required if key in properties} if isinstance(required, list) else set()
    if len(properties) >= _MIN_FIELDS and len(named) / len(properties) < DENSITY_FLOOR:
        yield Finding("R1", tool, "", f"{len(named)} of {len(properties)} fields are required "
                      f"(density {len(named) / len(properties):.2f} < {DENSITY_FLOOR}): "
                      f"check what the tool does when the model leaves the rest out")
    for key, child in properties.items():
        node = _deref(root, child)
        if (_ID_LIKE.search(str(key)) and "string" in _types(node)
                and child.get(ECHO_KEYWORD) is not True and node.get(ECHO_KEYWORD) is not True):
            yield Finding("R5", tool, f"/properties/{_escape(str(key))}",
                          f"{key!r} looks like an id: if the model copies it from its input, "
                          f"mark it echo so the gate compares it with the original")


def _node_findings(root: Mapping[str, Any], node: Mapping[str, Any], tool: str, where: str
                   ) -> Iterator[Finding]:
    types = _types(node)
    if "string" in types and not any(key in node for key in _CLOSED):
        yield Finding("R2", tool, where, "a string with neither enum nor pattern: can the "
                      "model invent a value your code does not know?")
    if "boolean" in types:
        yield Finding("R3", tool, where, "a boolean switch: is it two tools, or a mode that "
                      "wants an enum?")
    # "default" in node, not node.get("default") is None: no default is not a null default.
    if "default" in node and node["default"] is None:
        yield Finding("R4", tool, where, "an explicit null default: does null mean 'not "
                      "given', 'none found' or 'not looked up yet'?")
    if "null" in types and not _null_is_not_given(root, types, where):
        yield Finding("R4", tool, where, "a null type: does null mean 'not given', 'none "
                      "found' or 'not looked up yet'?")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        problem = pattern_problem(_re2_escapes(pattern)) or _backtracking_risk(pattern)
        if problem:
            yield Finding("R6", tool, f"{where}/pattern", f"pattern {pattern!r} {problem}")


# A property itself, or one branch of a property's anyOf/oneOf.
_PROPERTY = re.compile(r"/properties/[^/]+(?P<branch>/(?:anyOf|oneOf)/[0-9]+)?$")


def _null_is_not_given(root: Mapping[str, Any], types: set[str], where: str) -> bool:
    """Whether the gate reads this null as an optional key's "not given", which is no sentinel.

    A property typed ``[T, "null"]``, or the ``{"type": "null"}`` branch beside one
    schema in a property's ``anyOf``/``oneOf``: the gate hands the body no such
    key, so the body never sees the null.
    """
    found = _PROPERTY.search(where)
    if found is None:
        return False
    if not found["branch"]:
        return len(types) == 2
    branches = _resolve(root, "#" + where.rsplit("/", 1)[0])
    return types == {"null"} and isinstance(branches, list) and len(branches) == 2


_QUANTIFIERS = frozenset("*+{")


def _backtracking_risk(pattern: str) -> str:
    """Why a backtracking engine may take exponential time on ``pattern``, or ``""``.

    A heuristic over the pattern's text, not a proof: it looks for a group
    followed by ``*``, ``+`` or ``{`` whose body repeats too, or whose
    alternatives start with the same atom, so one input splits many ways.
    """
    marks = list(_structure(pattern))
    opened: list[int] = []  # positions in marks of the groups still open
    for position, (index, char, depth) in enumerate(marks):
        if char == "(":
            opened.append(position)
        elif char == ")" and opened:
            start = opened.pop()
            if pattern[index + 1:index + 2] not in _QUANTIFIERS:
                continue
            body = marks[start + 1:position]
            group = pattern[marks[start][0]:index + 1]
            if any(inner in _QUANTIFIERS for _, inner, _ in body):
                return (f"repeats {group!r}, which repeats inside: a nested quantifier can "
                        f"take exponential time in a backtracking engine")
            bars = [at for at, inner, level in body if inner == "|" and level == depth + 1]
            firsts = [_first_atom(pattern, at + 1) for at in [marks[start][0], *bars]]
            if len(set(firsts)) < len(firsts):
                return (f"repeats {group!r}, whose alternatives start alike: that can take "
                        f"exponential time in a backtracking engine")
    return ""


def _first_atom(pattern: str, index: int) -> str:
    """The atom starting at ``index``, after a group's ``?:``: an escape, a class or a char."""
    if pattern.startswith("?:", index):
        index += 2
    if pattern.startswith("\\", index):
        return pattern[index:index + 2]
    if pattern.startswith("[", index):
        return pattern[index:_class_end(pattern, index)]
    return pattern[index:index + 1]


def _types(node: object) -> set[str]:
    kind = node.get("type") if isinstance(node, Mapping) else None
    if isinstance(kind, str):
        return {kind}
    return {each for each in kind if isinstance(each, str)} if isinstance(kind, list) else set()


def _deref(root: Mapping[str, Any], node: object) -> Mapping[str, Any]:
    """``node`` with local ``$ref``s followed (the walk reports broken ones), or ``{}``."""
    seen: set[str] = set()
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if ref in seen or not ref.startswith("#"):
            return {}
        seen.add(ref)
        node = _resolve(root, ref)
    return node if isinstance(node, Mapping) else {}


def _nodes(root: Mapping[str, Any], tool: str, source: str, base: str
           ) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every subschema once, as ``(JSON pointer, schema)``, depth first in document order."""
    seen: set[str] = set()
    pending: list[tuple[str, object]] = [("", root)]
    while pending:
        where, node = pending.pop()
        if where in seen or not isinstance(node, Mapping):
            continue  # a boolean schema (true/false) has nothing to review
        seen.add(where)
        yield where, node
        pending.extend(reversed(list(_children(root, where, node, tool, source, base))))


def _children(root: Mapping[str, Any], where: str, node: Mapping[str, Any], tool: str,
              source: str, base: str) -> Iterator[tuple[str, object]]:
    for key in ("properties", "$defs", "definitions"):
        members = node.get(key)
        if isinstance(members, Mapping):
            for name, child in members.items():
                yield f"{where}/{key}/{_escape(str(name))}", child
    for key in ("additionalProperties", "additionalItems", "not", "items"):
        if isinstance(node.get(key), Mapping):
            yield f"{where}/{key}", node[key]
    for key in ("items", "prefixItems", "anyOf", "oneOf", "allOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            for index, child in enumerate(branches):
                yield f"{where}/{key}/{index}", child
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref) if ref.startswith("#") else None
        if target is None:
            raise SchemaError(source, tool, f"{base}{where}/$ref",
                              f"{ref!r} cannot be followed: only local references to "
                              f"existing schemas are")
        # Keyed by the pointer the walk would reach the target by, so it is reported once.
        yield unquote(ref[1:]), target


def lint_table(table: Mapping[str, Any]) -> list[Finding]:
    """Findings for every tool of a contract table, read through its exported schema."""
    check_table(table)
    return [finding for name in table for finding in lint_schema(to_json_schema(table, name),
                                                                 name)]


def lint_file(path: str | Path) -> list[Finding]:
    """Findings for every tool in a tools file (the formats ``read_tools_file`` reads)."""
    return [finding for definition in read_tools_file(path)
            for finding in _lint(definition.input_schema, definition.name, str(path),
                                 definition.input_at)]


def format_findings(findings: Iterable[Finding]) -> str:
    """A plain-text table of findings, one a line, with a count at the end."""
    rows = [(finding.rule, finding.tool, finding.location or "-", finding.message)
            for finding in findings]
    if not rows:
        return "no findings"
    header = ("RULE", "TOOL", "LOCATION", "FINDING")
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(3)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
             + "  " + row[3] for row in [header, *rows]]
    count = f"{len(rows)} finding{'s' if len(rows) != 1 else ''} to review (prompts, not a score)"
    return "\n".join([*lines, count])


_MISSING: Any = object()


def echo_match_rate(samples: Iterable[Mapping[str, Any]], field: str = "request_id"
                    ) -> float | None:
    """The share of samples whose ``args[field]`` is exactly ``input[field]``.

    A sample is ``{"input": {...}, "args": {...}}``: what the model was given
    and what it called the tool with. A value missing (or null) on either side
    is a miss, never a match, and ``1`` does not match ``True``. No samples give
    ``None``: no rate, rather than a division by zero.
    """
    total = hits = 0
    for index, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            raise TypeError(f"sample {index} must be a mapping with 'input' and 'args', got "
                            f"{type(sample).__name__}")
        total += 1
        given, echoed = _value(sample.get("input"), field), _value(sample.get("args"), field)
        if given is not _MISSING and type(given) is type(echoed) and given == echoed:
            hits += 1
    return hits / total if total else None


def _value(side: object, field: str) -> Any:
    value = side.get(field) if isinstance(side, Mapping) else None
    return _MISSING if value is None else value
