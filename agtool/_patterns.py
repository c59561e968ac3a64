"""Contract patterns, matched with RE2 so that no argument can hang the gate.

A ``pattern`` is matched against strings a model sends. Python's ``re``
backtracks: ``(a+)+b`` against 32 ``a`` runs for over a minute, and the gate
would be a denial of service on itself. RE2 (google-re2) matches in time
linear in the input, whatever the pattern, because it has no backtracking;
the price is that it refuses what needs it: backreferences (``\\1``),
lookarounds (``(?=``, ``(?<=``), possessive and atomic groups, ``\\Z`` (RE2
spells it ``\\z``). Those are refused when a table is registered, so no
registered table ever falls back to a backtracking engine.

RE2's reading, which is the gate's: a match is of the whole string; ``$`` is
the end of the input, never "before a final newline"; ``\\d``, ``\\w``,
``\\s`` and ``\\b`` are ASCII (``\\s`` is ``[\\t\\n\\f\\r ]``); ``\\pL`` and
``[[:alpha:]]`` are Unicode and POSIX classes. Where RE2 would read as
literal text a brace that Python's ``re`` reads as a repetition (``x{,3}``,
``x{4294967296}``), the pattern is refused rather than silently read apart.

Size: each pattern may compile to at most ``MAX_PATTERN_MEMORY`` bytes of RE2
program and match-time cache (RE2's ``max_mem``, its default made explicit
here). A bigger program (``\\pL{1000}``) is refused at registration; a search
that outgrows the cache falls back to RE2's own NFA, which is still linear.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

# google-re2 ships no type information. Its public ``re2.compile(...).fullmatch``
# is a Python layer over ``_re2`` that encodes, maps byte offsets back to str
# offsets and builds a match object: 2 to 5 times the cost of asking ``_re2``
# directly (about 3.5-8.6 us against 1.6 us on an 8-char string; Python's ``re``
# is 0.4 us). ``tests/core/test_patterns.py`` pins the few ``_re2`` calls used here.
from re2 import _re2  # type: ignore[import-untyped]

__all__ = ["MAX_PATTERN_MEMORY", "fullmatcher", "pattern_problem"]

#: Bytes of RE2 program and match-time cache one pattern may use (RE2's ``max_mem``).
MAX_PATTERN_MEMORY = 8 << 20

_WHOLE = _re2.RE2.Anchor.ANCHOR_BOTH
#: RE2's largest repetition count; a count beyond int range it would read as text.
_MAX_REPEAT = 1000
# What RE2 skips as a unit (\Q...\E quoting, an escape, a character class), or a
# brace that may be a repetition. Python's re, on the text of a pattern RE2 has
# accepted, never on input: its branches start differently and each class found
# closes, so it runs in linear time.
_BRACES = re.compile(r"\\Q.*?(?:\\E|\Z)|\\.|\[\^?\]?(?:\\.|[^\]\\])*\]"
                     r"|\{([0-9]*)(,?)([0-9]*)\}", re.DOTALL)
_UNSUPPORTED = ("RE2 has no backtracking, so it has no backreferences, lookarounds, "
                "possessive or atomic groups, and spells \\Z as \\z")


def _options() -> Any:
    options = _re2.RE2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    # A refused pattern is reported once, as a ContractError, not also on stderr.
    options.log_errors = False
    # Only whether the text matches is asked: with no groups to track, RE2 answers
    # from its DFA.
    options.never_capture = True
    return options


_OPTIONS = _options()


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    """The RE2 program of ``pattern``; ``ValueError`` saying why RE2 refuses it."""
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("cannot be encoded as UTF-8 (a lone surrogate?)") from exc
    regexp = _re2.RE2(encoded, _OPTIONS)
    if not regexp.ok():
        # RE2 quotes the offending part, which may be most of a long pattern.
        error = regexp.error().decode("utf-8", "replace")
        error = error if len(error) <= 120 else error[:119] + "…"
        if error.startswith("pattern too large"):
            raise ValueError(f"compiles to more than RE2's {MAX_PATTERN_MEMORY >> 20} MiB "
                             f"budget for one pattern; split it or bound its repetitions")
        raise ValueError(f"is not a regex RE2 can compile: {error}; {_UNSUPPORTED}")
    # After RE2 accepts it: its classes are then closed, which keeps _BRACES linear.
    _refuse_literal_braces(pattern)
    return regexp


def _refuse_literal_braces(pattern: str) -> None:
    for brace in _BRACES.finditer(pattern):
        low, comma, high = (part or "" for part in brace.groups())  # "" for a skipped unit
        if comma and not low:
            raise ValueError(f"has {brace.group(0)}, which RE2 reads as literal text and "
                             f"Python's re as a repetition; write {{0{comma}{high}}}")
        # Digits counted first: int() refuses a string of more than 4300 of them.
        if any(len(count.lstrip("0")) > 4 or int(count or 0) > _MAX_REPEAT
               for count in (low, high)):
            count = brace.group(0) if len(brace.group(0)) <= 16 else brace.group(0)[:15] + "…"
            raise ValueError(f"repeats {count} times; RE2 allows at most {_MAX_REPEAT}")


def pattern_problem(pattern: str) -> str:
    """``""`` when RE2 accepts ``pattern``; otherwise what is wrong, as a short phrase."""
    try:
        _compiled(pattern)
    except ValueError as exc:
        return str(exc)
    return ""


@functools.lru_cache(maxsize=1024)
def fullmatcher(pattern: str) -> Callable[[str], object]:
    """``match(text)``: not ``None`` exactly when all of ``text`` matches ``pattern`` in RE2.

    ``match`` never raises for a ``str`` and takes time linear in ``len(text)``.
    A string UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``) does
    not match: RE2 reads UTF-8, and such a string is no text any pattern names.
    ``ValueError`` when ``pattern_problem(pattern)`` is not ``""``.
    """
    search = _compiled(pattern).Match

    def match(text: str) -> object | None:
        try:
            data = str.encode(text)  # str's own encode: a subclass's cannot lie or raise
        except UnicodeEncodeError:
            return None
        # Match gives the whole match's byte span first: (-1, -1) when there is none.
        return None if search(_WHOLE, data, 0, len(data))[0][0] < 0 else True

    return match
