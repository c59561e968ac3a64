"""The string formats the gate checks exactly: one small plain checker per format.

JSON Schema's ``format`` names a syntax; validators may or may not check it.
The gate checks the common ones, each by the standard that defines it, and
no other (an unknown format is not a check the gate makes):

- ``date``, ``time``, ``date-time``: RFC 3339 ``full-date``, ``full-time``
  (an offset is required) and ``date-time`` (``T`` and ``Z`` in either
  case); no leap second (``:60``), as the ``jsonschema`` package reads them;
- ``email``: RFC 5322's ``addr-spec`` without comments or folding white space
  (a dot-atom or quoted local part, a host name or an address literal);
- ``uri``: RFC 3986 ``URI``: a scheme, then only characters the grammar
  allows, each ``%`` followed by two hex digits;
- ``uuid``: RFC 4122's string form, 8-4-4-4-12 hex digits, nothing around it;
- ``ipv4``, ``ipv6``: the ``ipaddress`` module (no leading zeros, no zone id);
- ``hostname``: RFC 1123 labels of letters, digits and inner hyphens, 1 to 63
  characters each, 253 in all.

Every checker takes a ``str`` and answers a ``bool``; it never raises.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from datetime import date
from types import MappingProxyType

__all__ = ["STRING_FORMATS"]

_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", re.ASCII)
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
                   r"(?:([zZ])|([+-])([0-9]{2}):([0-9]{2}))", re.ASCII)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}", re.ASCII)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_ATOM = re.compile(rf"{_ATEXT}(?:\.{_ATEXT})*", re.ASCII)
# A quoted local part: printable ASCII but \ and ", or a backslash pair.
_QUOTED = re.compile(r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"', re.ASCII)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*", re.ASCII)
# Every character RFC 3986's URI grammar may hold: unreserved, reserved and "%".
_URI_CHARS = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]*", re.ASCII)
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})", re.ASCII)
_PORT = re.compile(r"[0-9]*", re.ASCII)


def _is_date(text: str) -> bool:
    found = _DATE.fullmatch(text)
    if found is None:
        return False
    try:
        date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:  # 2021-02-29, month 13: a date no calendar has
        return False
    return True


def _is_time(text: str) -> bool:
    found = _TIME.fullmatch(text)
    if found is None:
        return False
    hour, minute, second = int(found[1]), int(found[2]), int(found[3])
    offset_hours, offset_minutes = (0, 0) if found[5] else (int(found[7]), int(found[8]))
    # Seconds stop at 59: a leap second is too rare in a tool call to be worth a reading
    # that validators (rfc3339-validator, under jsonschema) do not share.
    return not (hour > 23 or minute > 59 or second > 59 or offset_hours > 23
                or offset_minutes > 59)


def _is_date_time(text: str) -> bool:
    day, separator, time = text[:10], text[10:11], text[11:]
    return separator in ("T", "t") and _is_date(day) and _is_time(time)


def _is_hostname(text: str) -> bool:
    if not text or len(text) > 253:
        return False
    return all(_LABEL.fullmatch(label) for label in text.split("."))


def _parses(address: Callable[[str], object], text: str) -> bool:
    try:
        address(text)
    except ValueError:
        return False
    return True


def _is_ipv4(text: str) -> bool:
    return _parses(ipaddress.IPv4Address, text)


def _is_ipv6(text: str) -> bool:
    # A zone id (%eth0) is an interface of this machine, not part of an address.
    return "%" not in text and _parses(ipaddress.IPv6Address, text)


def _is_email(text: str) -> bool:
    local, at, domain = text.rpartition("@")
    if not at or not local or len(local) > 64:
        return False
    if not (_DOT_ATOM.fullmatch(local) or _QUOTED.fullmatch(local)):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal[:5].lower() == "ipv6:":
            return _is_ipv6(literal[5:])
        return _is_ipv4(literal)
    return _is_hostname(domain)


def _is_uri(text: str) -> bool:
    scheme, colon, rest = text.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme):
        return False
    if not _URI_CHARS.fullmatch(rest) or _PERCENT.search(rest) or rest.count("#") > 1:
        return False
    if rest.startswith("//"):
        authority = re.split(r"[/?#]", rest[2:], maxsplit=1)[0]
        after = rest[2 + len(authority):]
        if "[" in after or "]" in after:
            return False
        host_port = authority.rpartition("@")[2]
        if host_port.startswith("["):
            host, bracket, port = host_port[1:].partition("]")
            if not bracket or (port and not port.startswith(":")):
                return False
            if not host.lower().startswith("v") and not _is_ipv6(host):
                return False
            port = port[1:]
        else:
            if "[" in host_port or "]" in host_port:
                return False
            port = host_port.rpartition(":")[2] if ":" in host_port else ""
        return _PORT.fullmatch(port) is not None
    # Brackets belong to an IP literal in an authority, and nowhere else.
    return "[" not in rest and "]" not in rest


def _is_uuid(text: str) -> bool:
    return _UUID.fullmatch(text) is not None


#: Each format the gate checks, and its checker: ``checker(text) -> bool``.
STRING_FORMATS: Mapping[str, Callable[[str], bool]] = MappingProxyType({
    "date": _is_date,
    "time": _is_time,
    "date-time": _is_date_time,
    "email": _is_email,
    "uri": _is_uri,
    "uuid": _is_uuid,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "hostname": _is_hostname,
})
