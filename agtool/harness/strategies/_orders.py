"""Orders for the agent graph: a valid call with defects planted, some a repair can fix.

An order is what ``agtool.tools.handle`` takes: the tool's arguments, plus
``tool`` naming it. Which defects are repairable is not decided here but by
the ``can_repair`` given (the graph's own ``can_repair``, or a test's idea of
it), so the same strategy serves any graph and any table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..._reasons import shown
from ._args import DefectSite, Table, contract_of, defect_sites, permuted, plant
from ._specs import invented_keys, valid_object

__all__ = ["Order", "orders"]


@dataclass(frozen=True)
class Order:
    """An order for the graph, and the gate errors its planted defects give, one per defect."""

    fields: dict[str, Any]
    tool: str
    repairable_errors: tuple[str, ...]  #: errors ``can_repair`` accepts, in no particular order
    unrepairable_error: str = ""  #: the one error no repair fixes, or ``""``

    @property
    def repairable(self) -> bool:
        """Whether every planted defect is one ``can_repair`` accepts."""
        return not self.unrepairable_error

    @property
    def errors(self) -> tuple[str, ...]:
        """Every error the planted defects give."""
        return self.repairable_errors + ((self.unrepairable_error,) if self.unrepairable_error
                                         else ())


def orders(table: Table, name: str, *, can_repair: Callable[[str], bool],
           repairable: bool = True, fixes: tuple[int, int] = (1, 2),
           base: st.SearchStrategy[dict[str, Any]] | None = None,
           tool_field: bool = True) -> st.SearchStrategy[Order]:
    """Orders for tool ``name``: ``base`` (valid arguments) with defects on distinct arguments.

    Between ``fixes[0]`` and ``fixes[1]`` defects whose gate error
    ``can_repair`` accepts are planted, and, unless ``repairable``, one more
    it refuses. Only top-level argument defects are planted, one per
    argument, so each repair has one thing to fix. ``tool_field`` adds
    ``"tool": name`` to the order.
    """
    contract = contract_of(table, name)
    if tool_field and "tool" in contract.args:
        raise InvalidArgument(f"tool {name!r} has an argument called 'tool', which an order "
                              "uses to name the tool")
    low, high = fixes
    if not 0 <= low <= high:
        raise InvalidArgument(f"fixes={fixes!r} must be (low, high) with 0 <= low <= high")
    sites = tuple(site for site in defect_sites(table, name) if not site.path)
    return _order(table, name, sites, can_repair, repairable, low, high,
                  valid_object(contract.args) if base is None else base, tool_field)


@st.composite
def _order(draw: st.DrawFn, table: Table, name: str, sites: tuple[DefectSite, ...],
           can_repair: Callable[[str], bool], repairable: bool, low: int, high: int,
           base: st.SearchStrategy[dict[str, Any]], tool_field: bool) -> Order:
    specs = contract_of(table, name).args
    args = dict(draw(base))
    extra = draw(invented_keys(specs))
    error_of = {site: "args:" + f"{site.kind}:{shown(site.arg or extra)}" for site in sites}
    fixable: dict[str, list[DefectSite]] = {}
    unfixable: dict[str, list[DefectSite]] = {}
    for site in sites:
        group = fixable if can_repair(error_of[site]) else unfixable
        group.setdefault(site.arg, []).append(site)
    # The unrepairable defect's argument first, so enough others are left to repair.
    broken = [arg for arg in unfixable if len(fixable.keys() - {arg}) >= low]
    if (not repairable and not broken) or len(fixable) < low:
        raise InvalidArgument(f"tool {name!r} cannot take {low} repairable defect(s) on distinct "
                              f"arguments{'' if repairable else ' and an unrepairable one'}")
    last = None if repairable else draw(st.sampled_from(broken))
    others = draw(st.permutations([arg for arg in fixable if arg != last]))
    planted = [draw(st.sampled_from(fixable[arg]))
               for arg in others[:draw(st.integers(low, min(high, len(others))))]]
    errors = tuple(error_of[site] for site in planted)
    if last is not None:
        planted.append(draw(st.sampled_from(unfixable[last])))
    for site in planted:
        plant(draw, args, specs, site, extra)
    fields = draw(permuted(args))
    if tool_field:
        fields["tool"] = name
    order = Order(fields, name, errors, "" if last is None else error_of[planted[-1]])
    event(f"order: {len(errors)} repairable defect(s)"
          + ("" if repairable else f", then {order.unrepairable_error}"))
    note(f"order errors planted: {order.errors}")
    return order
