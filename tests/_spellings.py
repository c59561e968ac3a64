"""The oracle of "no sensitive value anywhere": every spelling a service may echo a value in.

Each output is searched for the value as written, JSON-escaped both ways and with every
character ``\\uXXXX``-escaped (Go's and PHP's ``\\u003c`` and ``\\/`` too), URL-encoded
(``quote`` and ``quote_plus``, either hex case, every byte), HTML-escaped and as named,
decimal and hex entities, with its whitespace collapsed, in its Unicode normal forms, as
base64 (standard and URL-safe, at each alignment inside a longer encoded text) and hex of its
UTF-8 bytes, and, for a value of 12 or more characters, cut short at either end. It never
calls agtool's own scrubber. Values carry one character (``RARE``) that nothing else in any
output holds, so a hit is a leak, never a line number or a word of a log message.

``ENCODERS`` is the list of ways a body or an upstream echoes a value, one per spelling; the
tests of each channel (tests/core/test_secrets.py: excerpts, logs, records, model answers,
envelopes, plans; tests/store/, tests/mcp/, tests/otel/, tests/langchain/: store rows, MCP
error texts, spans, tool messages) run every encoder through it.
"""

from __future__ import annotations

import base64
import functools
import html
import html.entities
import json
import unicodedata
from collections.abc import Callable
from urllib.parse import quote, quote_plus

from hypothesis import strategies as st

RARE = "\u01c2"  # ǂ: in no log message, file name, reason or JSON key agtool writes
#: What drawn values are made of: quotes, %, +, &, spaces of several kinds, unicode.
ALPHABET = st.sampled_from(list("ab Z09'\"%+&<>/\\=;:\t\n\u00a0é€漢" + RARE))


def spellings(value: str) -> set[str]:
    """Every form of ``value`` the oracle looks for (independent of agtool's scrubber)."""
    raw = value.encode("utf-8")
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             html.escape(value), html.escape(value, quote=False),
             base64.b64encode(raw).decode().rstrip("="), raw.hex(), raw.hex().upper()}
    forms |= {spell(value) for spell in SPELLERS.values()}
    forms |= _embedded_base64(raw)
    if len(value) >= 12:  # a cut echo: what is left of the value, holding its RARE char
        forms |= {part for part in (value[:-3], value[3:]) if RARE in part}
    for encode in (quote, quote_plus):
        for safe in ("", "/"):
            encoded = encode(value, safe=safe)
            forms |= {encoded, _lower_hex(encoded)}
    # An upstream that collapsed the value's whitespace runs, or dropped them.
    forms |= {" ".join(form.split()) for form in forms} | {"".join(form.split()) for form in forms}
    return {form for form in forms if form}


def _embedded_base64(raw: bytes) -> set[str]:
    """What base64 of a longer text holding ``raw`` always shows of it: for each alignment,
    the characters that ``raw``'s bytes alone decide (at least six bytes of it)."""
    forms = set()
    for start in range(3):
        chunk = raw[start:start + 3 * ((len(raw) - start) // 3)]
        if len(chunk) >= 6:
            forms |= {base64.b64encode(chunk).decode(), base64.urlsafe_b64encode(chunk).decode()}
    return forms


def _every_char(template: str, value: str) -> str:
    return "".join(template % ord(ch) for ch in value)


def _named_entities(value: str) -> str:
    return "".join(f"&{html.entities.codepoint2name[ord(ch)]};"
                   if ord(ch) in html.entities.codepoint2name else ch for ch in value)


#: The value alone in each spelling a service echoes it in; the oracle looks for each.
SPELLERS: dict[str, Callable[[str], str]] = {
    "json-u-every-char": lambda v: _every_char("\\u%04x", v),
    "json-u-upper": lambda v: _every_char("\\u%04X", v),
    "json-go-php": lambda v: json.dumps(v)[1:-1].replace("<", "\\u003c").replace(
        ">", "\\u003e").replace("&", "\\u0026").replace("/", "\\/"),
    "html-decimal": lambda v: _every_char("&#%d;", v),
    "html-hex": lambda v: _every_char("&#x%X;", v),
    "html-named": _named_entities,
    "url-every-byte": lambda v: "".join(f"%{b:02X}" for b in v.encode("utf-8")),
    "hex": lambda v: v.encode("utf-8").hex(),
    "hex-upper": lambda v: v.encode("utf-8").hex().upper(),
    "nfd": lambda v: unicodedata.normalize("NFD", v),
    "nfkd": lambda v: unicodedata.normalize("NFKD", v),
    "nfkc": lambda v: unicodedata.normalize("NFKC", v),
}


def _echoed(spell: Callable[[str], str], value: str) -> str:
    return "card=" + spell(value) + ";"


def _lower_hex(encoded: str) -> str:
    out, i = [], 0
    while i < len(encoded):
        if encoded[i] == "%":
            out.append(encoded[i:i + 3].lower())
            i += 3
        else:
            out.append(encoded[i])
            i += 1
    return "".join(out)


def leaks(value: str, *outputs: object) -> list[str]:
    """Every spelling of ``value`` found in the outputs, each read as text and as JSON."""
    text = "\n".join(o if isinstance(o, str) else repr(o) + json.dumps(o, default=repr)
                     for o in outputs)
    return sorted(form for form in spellings(value) if form in text)


ENCODERS: dict[str, Callable[[str], str]] = {
    "verbatim": lambda v: v,
    "json": lambda v: json.dumps({"card": v}),
    "json-unicode": lambda v: json.dumps({"card": v}, ensure_ascii=False),
    "query": lambda v: "?card=" + quote_plus(v) + "&x=1",
    "query-lower": lambda v: "?card=" + _lower_hex(quote(v, safe="")),
    "html": lambda v: "<td>" + html.escape(v) + "</td>",
    "collapsed": lambda v: " ".join(v.split()),
    "respaced": lambda v: "\n\t ".join(v.split()),
    "basic-auth": lambda v: "Basic " + base64.b64encode(b"user:" + v.encode()).decode(),
    "base64-url-1": lambda v: base64.urlsafe_b64encode(b"x" + v.encode()).decode(),
    "base64-0": lambda v: base64.b64encode(v.encode()).decode(),
    "prefix": lambda v: v[:-3] if len(v) >= 12 else v,
    "suffix": lambda v: v[3:] if len(v) >= 12 else v,
    **{name: functools.partial(_echoed, spell) for name, spell in SPELLERS.items()},
}
