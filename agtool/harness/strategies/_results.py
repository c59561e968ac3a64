"""Returned values for one tool of any contract table: valid ones, and ones wrong in one way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..._reasons import RESULT_CHECKS
from ._args import DefectSite, Table, contract_of
from ._specs import RESULT_KIND, bad_object, object_sites, valid_object

__all__ = ["BadResult", "bad_results", "result_sites", "valid_results"]


@dataclass(frozen=True)
class BadResult:
    """A returned value wrong in exactly one way, and what the gate must say about it."""

    value: Any
    kind: str  #: one of ``RESULT_CHECKS``; also what ``validate_result`` must answer
    site: DefectSite
    how: str = ""

    @property
    def reason(self) -> str:
        """What ``validate_result`` must answer: the kind itself, ``range``."""
        return self.kind

    @property
    def error(self) -> str:
        """What ``call_tool`` must answer in ``error``: ``result:range``."""
        return "result:" + self.kind


def valid_results(table: Table, name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Values ``name``'s return contract accepts, sometimes with keys it does not name."""
    return valid_object(contract_of(table, name).returns, results=True, top=True)


def result_sites(table: Table, name: str) -> list[DefectSite]:
    """Every place a value returned by ``name`` can be wrong in exactly one way.

    ``kind`` is the result reason (``range``), ``check`` the check behind it
    (``min``); the first site is the value not being a dict at all.
    """
    returns = contract_of(table, name).returns
    sites = []
    for check, path in object_sites(returns, results=True, top=True):
        key, rest = (path[0][1:], path[1:]) if path else ("", ())
        sites.append(DefectSite(RESULT_KIND[check], key, rest, check))
    return sites


def bad_results(table: Table, name: str, kind: str | None = None
                ) -> st.SearchStrategy[BadResult]:
    """Returned values wrong in exactly one way; of ``kind`` (``shape``, ``range``…) if given.

    ``InvalidArgument`` when the return contract leaves no way to be wrong
    that way (no list or length bound means nothing can be ``too_big``).
    """
    if kind is not None and kind not in RESULT_CHECKS:
        raise InvalidArgument(f"kind={kind!r}; expected one of {list(RESULT_CHECKS)}")
    contract = contract_of(table, name)
    sites = [site for site in result_sites(table, name) if kind is None or site.kind == kind]
    if not sites:
        raise InvalidArgument(f"tool {name!r}: its return contract cannot be broken as {kind!r}")
    return _bad_result(contract.returns, tuple(sites))


@st.composite
def _bad_result(draw: st.DrawFn, returns: Any, sites: tuple[DefectSite, ...]) -> BadResult:
    site = draw(st.sampled_from(sites))
    path = (("." + site.arg,) if site.arg else ()) + site.path
    value, how = draw(bad_object(returns, path, site.check, results=True, top=True))
    event(f"bad result kind: {site.kind}")
    event(f"bad result made by: {how}")
    note(f"bad result at {site}: {how}")
    return BadResult(value, site.kind, site, how)
