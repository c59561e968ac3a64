"""ECMA-262 patterns, as JSON Schema writes them, read as the gate's RE2 full match."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

__all__ = ["gate_pattern"]


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
