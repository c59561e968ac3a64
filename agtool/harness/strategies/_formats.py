"""Strings of each format the gate checks (``agtool._formats.STRING_FORMATS``).

Drawn by construction, from the grammar of each format, and then kept only if
the gate's own checker agrees: the checker is the oracle, so a construction
that strays is dropped, never sent as a "valid" value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from hypothesis import strategies as st

from ..._formats import STRING_FORMATS

__all__ = ["format_text"]


def _label() -> st.SearchStrategy[str]:
    return st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)


def _hostnames() -> st.SearchStrategy[str]:
    # The last label has a letter: a name of digits only reads as an IPv4 address.
    top = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
    return st.builds(lambda labels, last: ".".join([*labels, last]),
                     st.lists(_label(), max_size=3), top)


def _times() -> st.SearchStrategy[str]:
    offsets = st.one_of(st.sampled_from(["Z", "z"]),
                        st.builds(lambda sign, hours, minutes: f"{sign}{hours:02}:{minutes:02}",
                                  st.sampled_from("+-"), st.integers(0, 23),
                                  st.integers(0, 59)))
    fractions = st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,6}", fullmatch=True))
    return st.builds(lambda hour, minute, second, fraction, offset:
                     f"{hour:02}:{minute:02}:{second:02}{fraction}{offset}",
                     st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), fractions,
                     offsets)


def _dates() -> st.SearchStrategy[str]:
    return st.dates().map(lambda day: day.isoformat())


_BUILDERS: dict[str, Callable[[], st.SearchStrategy[str]]] = {
    "date": _dates,
    "time": _times,
    "date-time": lambda: st.builds(lambda day, sep, time: f"{day}{sep}{time}", _dates(),
                                   st.sampled_from("Tt"), _times()),
    "email": lambda: st.builds(lambda local, host: f"{local}@{host}",
                               st.from_regex(r"[a-z0-9_+-]{1,8}(?:\.[a-z0-9]{1,4})?",
                                             fullmatch=True), _hostnames()),
    "hostname": _hostnames,
    "uri": lambda: st.builds(lambda scheme, host, path: f"{scheme}://{host}{path}",
                             st.sampled_from(["http", "https", "urn+x", "s3"]), _hostnames(),
                             st.from_regex(r"(?:/[A-Za-z0-9._~-]{0,6}){0,3}", fullmatch=True)),
    "uuid": lambda: st.uuids().map(str),
    "ipv4": lambda: st.ip_addresses(v=4).map(str),
    "ipv6": lambda: st.ip_addresses(v=6).map(str),
}


@functools.cache
def format_text(name: str) -> st.SearchStrategy[str]:
    """Strings the gate accepts as format ``name`` (one of ``STRING_FORMATS``)."""
    holds = STRING_FORMATS[name]
    return _BUILDERS[name]().filter(holds)
