"""Taking a call's sensitive values out of text: upstream excerpts, tracebacks, any echo.

An upstream's error page, or a body's exception, may repeat what it was sent,
and seldom verbatim: JSON-escaped, URL-encoded (``quote`` or ``quote_plus``,
either hex case), HTML-escaped, as Python's ``repr`` writes it, or with its
whitespace collapsed, changed or dropped. A ``Scrubber`` is made from the
call's own sensitive values (the caller's, never the model's text) and replaces
each of those spellings with ``REDACTED``.

Its one regex is built from the sensitive values alone, each ``re.escape`` d,
as an alternation of whole spellings whose non-space parts are joined by
``\\s*``: no group is repeated and every ``\\s*`` is followed by a non-space
literal, so Python's ``re`` cannot backtrack more than a spelling's length at
any position of the text it is shown.

Beyond whole spellings, each value of at most ``SPELLED_CHARS`` characters
is also looked for character by character, each character in any of its
spellings and in any mix of them (``_char_spellings``): JSON's ``\\uXXXX``
of any character (a surrogate pair above the BMP) and ``\\/``, Python's
``\\x``/``\\u``/``\\U`` escapes, HTML named, decimal and hex entities
(leading zeros allowed), and URL percent-encoding of its UTF-8 bytes; and so
in each of its Unicode normal forms (NFC, NFD, NFKC, NFKD). Its UTF-8 bytes
are looked for as hex (either case) and as base64, standard and URL-safe, at
each of the three alignments it can have inside a longer encoded text (an
echoed ``Authorization: Basic`` header). Last, in a value of at least
``RUN_VALUE`` characters, any run of at least ``RUN_CHARS`` of its characters
(a prefix or suffix an upstream cut, a middle part) is taken out of the text
as written (``_runs``).

A value with fewer than ``MIN_CHARS`` non-space characters (a 3-digit PIN, a
flag) cannot be told apart from ordinary text, and values adding up to more
than ``MAX_CHARS`` characters cannot be looked for cheaply: where a call has
such a value its excerpts are dropped and its tracebacks are not logged
(``reliable`` is false), rather than risk them.
"""

from __future__ import annotations

import base64
import contextlib
import html
import html.entities
import json
import logging
import re
import traceback
import unicodedata
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

from ._contract import Spec, ToolContract

# ``REDACTED`` is defined here and made public through ``_records``, its one home in
# the package's exports.
__all__ = ["MAX_CHARS", "MIN_CHARS", "NO_SECRETS", "RUN_CHARS", "RUN_VALUE", "SPELLED_CHARS",
           "TRACEBACK_CHARS",
           "Scrubber", "call_secrets", "log_scrubbed", "scrub", "sensitive_args",
           "sensitive_returned"]

#: What a sensitive value is replaced with.
REDACTED = "[redacted]"
#: Fewer non-space characters than this, and a value is not looked for: its text is withheld.
MIN_CHARS = 4
#: The most characters a call's sensitive values may add up to before its text is withheld.
MAX_CHARS = 1 << 13
#: The most characters of a scrubbed traceback a log line carries.
TRACEBACK_CHARS = 1 << 15

#: Values up to this long are also looked for character by character, in any mix of spellings.
SPELLED_CHARS = 256
#: In a value this long or longer, any run of ``RUN_CHARS`` of its characters is taken out.
RUN_VALUE, RUN_CHARS = 12, 8
#: Base64 of fewer value bytes than this is not looked for: too likely in ordinary text.
_MIN_B64_BYTES = 6

_SPACE = re.compile(r"\s+")
_UNCOMPILED = object()
#: ``safe`` sets of common URL encoders: Python's ``quote`` (``/``), none, and
#: JavaScript's ``encodeURIComponent``.
_URL_SAFE = ("/", "", "-_.!~*'()")


def _spellings(value: str) -> set[str]:
    """Every spelling of ``value`` looked for; hex case is left to the regex (IGNORECASE)."""
    escaped = html.escape(value)
    decimal = escaped.replace("&#x27;", "&#39;")  # the entities other escapers write
    forms = {value, repr(value)[1:-1], ascii(value)[1:-1], json.dumps(value)[1:-1],
             json.dumps(value, ensure_ascii=False)[1:-1], escaped, decimal,
             decimal.replace("&quot;", "&#34;"), html.escape(value, quote=False)}
    with contextlib.suppress(UnicodeError):  # a lone surrogate has no UTF-8 bytes to encode
        forms.update(encode(value, safe=safe) for encode in (quote, quote_plus)
                     for safe in _URL_SAFE)
        forms.update(_byte_spellings(value.encode("utf-8")))
    return forms


def _byte_spellings(raw: bytes) -> set[str]:
    """``raw`` as hex, and as base64 (standard and URL-safe) wherever it sits in a longer
    encoded text: for each of the three alignments, the characters its bytes alone decide."""
    forms = {raw.hex()}
    for start in range(3):
        aligned = raw[start:start + 3 * ((len(raw) - start) // 3)]
        if len(aligned) >= _MIN_B64_BYTES:
            forms.update(_b64(aligned))
    whole = _b64(raw)  # the value alone, with its padding and without
    forms.update(whole)
    forms.update(form.rstrip("=") for form in whole)
    return forms


def _b64(raw: bytes) -> tuple[str, str]:
    return base64.b64encode(raw).decode("ascii"), base64.urlsafe_b64encode(raw).decode("ascii")


#: JSON's and Python's short escapes, by character.
_SHORT_ESCAPES = {"\"": ('\\"',), "\\": ("\\\\",), "/": ("\\/",), "\n": ("\\n",),
                  "\t": ("\\t",), "\r": ("\\r",), "\b": ("\\b",), "\f": ("\\f",),
                  "'": ("\\'",)}


def _char_spellings(ch: str) -> str:
    """A regex for one character in any of its spellings (hex case left to IGNORECASE)."""
    code = ord(ch)
    forms = {re.escape(ch)}
    forms.update(re.escape(form) for form in _SHORT_ESCAPES.get(ch, ()))
    if code > 0xFFFF:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.add(re.escape(f"\\u{high:04x}\\u{low:04x}"))
        forms.add(re.escape(f"\\U{code:08x}"))
    else:
        forms.add(re.escape(f"\\u{code:04x}"))
    if code < 0x100:
        forms.add(re.escape(f"\\x{code:02x}"))
    forms.add(f"&#0*{code};")
    forms.add(f"&#x0*{code:x};")
    name = html.entities.codepoint2name.get(code)
    if name is not None:
        forms.add(f"&{name};")
    if ch == "'":
        forms.add("&apos;")
    with contextlib.suppress(UnicodeError):
        forms.add(re.escape("".join(f"%{byte:02x}" for byte in ch.encode("utf-8"))))
    return "(?:" + "|".join(sorted(forms, key=len, reverse=True)) + ")"


#: One run of whitespace in a value, in any spelling: it may also be dropped in the text.
_SPACE_SPELLED = (r"(?:\s|\\[ntr]|\\u00(?:20|09|0a|0d|a0)|\\x(?:20|09|0a|0d|a0)|\+"
                  r"|%(?:20|09|0a|0d|c2%a0)|&#0*(?:32|9|10|13|160);|&#x0*(?:20|9|a|d|a0);"
                  r"|&nbsp;)*")


def _spelled(value: str) -> set[str]:
    """Regexes for ``value`` character by character, in each of its Unicode normal forms."""
    patterns = set()
    for form in {value, *(unicodedata.normalize(nf, value)
                          for nf in ("NFC", "NFD", "NFKC", "NFKD"))}:
        parts = []
        for piece in re.split(r"(\s+)", form):
            if not piece:
                continue
            parts.append(_SPACE_SPELLED if piece.isspace()
                         else "".join(_char_spellings(ch) for ch in piece))
        pattern = "".join(parts).strip()
        if pattern:
            patterns.add(pattern)
    return patterns


class Scrubber:
    """One call's sensitive values, ready to be taken out of any text.

    ``reliable`` is false when some value is too short or the values too long to
    be looked for: ``excerpt`` and ``exception_text`` then answer ``None`` and
    the text is withheld. ``text`` replaces what it can in any case. The regex is
    compiled when first needed: a call that raises with no text to scrub pays
    for none.
    """

    __slots__ = ("_longest", "_pattern", "_reliable", "_runs", "values")

    def __init__(self, values: Iterable[str]) -> None:
        self.values = tuple(values)
        self._pattern: re.Pattern[str] | object | None = _UNCOMPILED
        self._longest = 0
        self._runs = _Runs(())
        self._reliable = all(len("".join(value.split())) >= MIN_CHARS for value in self.values)

    @property
    def reliable(self) -> bool:
        """Whether every value can be looked for in every spelling."""
        if self._pattern is _UNCOMPILED:
            self._compile()  # which may find the values too long
        return self._reliable

    @property
    def empty(self) -> bool:
        """Whether there is nothing to look for: text passes unchanged."""
        return not self.values

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The regex of every spelling of every value; ``None`` for no values."""
        if self._pattern is _UNCOMPILED:
            self._compile()
        return self._pattern  # type: ignore[return-value]

    def _compile(self) -> None:
        if sum(map(len, self.values)) > MAX_CHARS:  # as written only, and never an excerpt
            self._reliable = False
            forms = set(self.values)
        else:
            forms = {form for value in self.values for form in _spellings(value)}
        parts = [form.split() for form in forms]
        parts = [part for part in parts if part]
        #: The longest match the regex can make in whitespace-collapsed text.
        self._longest = max((len(" ".join(part)) for part in parts), default=0)
        # Longest first: at one position, re takes the first alternative that matches,
        # so a value inside another never leaves the longer one half redacted.
        alternatives = sorted({r"\s*".join(map(re.escape, part)) for part in parts},
                              key=len, reverse=True)
        if self._reliable:
            spelled = {pattern for value in self.values if len(value) <= SPELLED_CHARS
                       for pattern in _spelled(value)}
            alternatives += sorted(spelled - set(alternatives), key=len, reverse=True)
            # A spelled character may take up to 12 characters of text (``&#x0001f600;``).
            self._longest = max([self._longest, *(
                12 * len(value) for value in self.values if len(value) <= SPELLED_CHARS)])
        # As written, and as an excerpt or an upstream collapses or drops its whitespace.
        self._runs = _Runs({form for value in self.values if len(value) >= RUN_VALUE
                            for form in (value, " ".join(value.split()), "".join(value.split()))})
        self._pattern = (re.compile("|".join(alternatives), re.IGNORECASE)
                         if alternatives else None)

    def text(self, text: str) -> str:
        """``text`` with every spelling of every value replaced, however short the value."""
        pattern = self.pattern
        return self._runs.out_of(text if pattern is None else pattern.sub(REDACTED, text))

    def excerpt(self, text: str, limit: int) -> str | None:
        """The first ``limit`` characters of ``text`` with its whitespace collapsed, scrubbed
        before it is cut; ``None`` when it cannot be scrubbed reliably."""
        if not self.reliable:
            return None
        pattern = self.pattern
        collapsed = _SPACE.sub(" ", text).strip()
        if pattern is None:
            return collapsed[:limit]
        # Only what reaches the cut is searched, so a megabyte error page costs no more
        # than its excerpt: a match starting before the cut ends within ``longest`` after.
        out: list[str] = []
        size = pos = 0
        while size < limit:
            need = limit - size
            found = pattern.search(collapsed, pos, pos + need + self._longest)
            if found is None or found.start() >= pos + need:
                out.append(collapsed[pos:pos + need])
                break
            piece = collapsed[pos:found.start()] + REDACTED
            out.append(piece)
            size += len(piece)
            pos = found.end()
        return self._runs.out_of("".join(out))[:limit]

    def exception_text(self, exc: BaseException) -> str | None:
        """``exc`` formatted as ``logging`` would (chained causes, contexts, notes and
        groups included), scrubbed and then cut; ``None`` if it cannot be done safely."""
        if not self.reliable:
            return None
        try:
            text = "".join(traceback.format_exception(exc))
        except Exception:  # notes that are not a list, a __str__ that fools the formatter
            return None
        scrubbed = self.text(text)
        if len(scrubbed) > TRACEBACK_CHARS:
            scrubbed = scrubbed[:TRACEBACK_CHARS] + "\n[traceback cut]"
        return scrubbed


class _Runs:
    """Any run of ``RUN_CHARS`` or more of a long value's characters, as written, found by
    its first ``RUN_CHARS`` (a dict of every such window of every value) and grown as far as
    the value goes: a truncated echo leaves none of the value's characters it has behind."""

    __slots__ = ("_windows",)

    def __init__(self, values: Iterable[str]) -> None:
        self._windows: dict[str, list[tuple[str, int]]] = {}
        for value in values:
            for start in range(len(value) - RUN_CHARS + 1):
                window = value[start:start + RUN_CHARS]
                if len("".join(window.split())) >= MIN_CHARS:  # never a run of spaces
                    self._windows.setdefault(window, []).append((value, start))

    def out_of(self, text: str) -> str:
        windows = self._windows
        if not windows or len(text) < RUN_CHARS:
            return text
        out: list[str] = []
        i = kept = 0
        while i <= len(text) - RUN_CHARS:
            found = windows.get(text[i:i + RUN_CHARS])
            if found is None:
                i += 1
                continue
            size = max(_common(text, i, value, start) for value, start in found)
            out.append(text[kept:i] + REDACTED)
            i = kept = i + size
        out.append(text[kept:])
        return "".join(out)


def _common(text: str, at: int, value: str, start: int) -> int:
    size = RUN_CHARS
    while (at + size < len(text) and start + size < len(value)
           and text[at + size] == value[start + size]):
        size += 1
    return size


#: The scrubber of a call with no sensitive values: text passes unchanged.
NO_SECRETS = Scrubber(())


def scrub(text: str, contract: ToolContract | None, args: object) -> str:
    """``text`` with every spelling of every sensitive argument value in it replaced."""
    return Scrubber(sensitive_args(contract, args)).text(text)


def call_secrets(contract: ToolContract | None, args: object, value: object = None) -> Scrubber:
    """The scrubber of one call: its sensitive arguments, and sensitive returned values."""
    return Scrubber(sensitive_args(contract, args) + sensitive_returned(contract, value))


def log_scrubbed(logger: logging.Logger, level: int, exc: BaseException, secrets: Scrubber,
                 message: str, *args: object) -> None:
    """Log ``message % args`` with ``exc``'s traceback, which may quote sensitive values.

    The record names the caller's line (``stacklevel=2``), as a direct ``logger`` call would.

    Without sensitive values the exception goes as ``exc_info``, as usual. With
    them the traceback is formatted here, scrubbed and put in the message, never
    passed as ``exc_info``, which every handler would format for itself, causes,
    contexts and notes included. If it cannot be scrubbed, only ``message`` is logged:
    say the exception's type in it.
    """
    if not logger.isEnabledFor(level):
        return
    if secrets.empty:
        logger.log(level, message, *args, exc_info=exc, stacklevel=2)
        return
    text = secrets.exception_text(exc)
    if text is None:
        logger.log(level, message + " (its traceback is withheld: a sensitive value is too "
                   "short or too long to scrub from it)", *args, stacklevel=2)
    else:
        logger.log(level, message + " (sensitive values scrubbed)\n%s", *args, text,
                   stacklevel=2)


def sensitive_args(contract: ToolContract | None, args: object) -> list[str]:
    """Every value, as text, of an argument the contract marks sensitive (at any depth)."""
    return _sensitive_values(contract.args if contract else {}, args)


def sensitive_returned(contract: ToolContract | None, value: object) -> list[str]:
    """Every value, as text, of a returned key the contract marks sensitive (at any depth)."""
    return _sensitive_values(contract.returns if contract else {}, value)


def _sensitive_values(specs: Mapping[str, Spec], args: object) -> list[str]:
    if not isinstance(args, dict):
        return []
    return [text for key, value in args.items() if key in specs
            for text in _sensitive_in(specs[key], value)]


def _sensitive_in(spec: Spec, value: object) -> list[str]:
    if spec.sensitive:
        return _leaves(value, 0)
    item = spec.item
    if isinstance(item, Mapping) and isinstance(value, dict):
        return _sensitive_values(item, value)  # a dict with named keys
    if item is None or not isinstance(value, list):
        return []
    if isinstance(item, Spec):
        return [text for element in value for text in _sensitive_in(item, element)]
    return [text for element in value for text in _sensitive_values(item, element)]


def _leaves(value: object, depth: int) -> list[str]:
    """Every scalar inside ``value``, as text."""
    if depth > 64:
        return []
    if isinstance(value, dict):
        return [text for item in value.values() for text in _leaves(item, depth + 1)]
    if isinstance(value, list):
        return [text for item in value for text in _leaves(item, depth + 1)]
    if type(value) in (str, int, float):
        try:
            return [text] if (text := str(value)) else []
        except ValueError:  # an int too long to print cannot be in the text either
            return []
    return []
