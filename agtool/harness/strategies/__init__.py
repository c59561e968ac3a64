"""Hypothesis strategies for agtool, all derived from a contract table.

Nothing here is written for one tool: every strategy reads the table it is
given, so it works on the reference tools, on a user's own table, and on the
random tables ``contract_tables()`` draws. Each labels what it drew with
``hypothesis.event``, so ``pytest --hypothesis-show-statistics`` shows the mix.

- Arguments: ``valid_args``, ``defect_sites``, ``one_defect_args``,
  ``model_mistakes``, ``any_calls``.
- Hostile callers and the calls every run makes: ``hostile_calls``,
  ``hostile_examples`` (one per ``HOSTILE_CLASSES``), ``boundary_args``,
  ``simplest_args``; the interrupts a body may raise, ``INTERRUPTS``.
- Results: ``valid_results``, ``result_sites``, ``bad_results``.
- The graph: ``orders``. Whole tables: ``contract_tables``.
- Running the properties: ``property_test``, ``run_property``, ``property_cases``,
  and what each must never let happen, ``PROMISES``.
- Settings profiles: ``agtool.harness.strategies.profiles.register_profiles``.
"""

from __future__ import annotations

from ._args import (
    MISTAKES,
    DefectiveCall,
    DefectSite,
    Mistake,
    any_calls,
    defect_sites,
    mistake_kinds,
    model_mistakes,
    one_defect_args,
    permuted,
    valid_args,
)
from ._hostile import (
    HOSTILE_CLASSES,
    INTERRUPTS,
    HostileCall,
    boundary_args,
    hostile_calls,
    hostile_examples,
    simplest_args,
)
from ._orders import Order, orders
from ._properties import (
    PROMISES,
    PROPERTIES,
    PropertyRun,
    case_id,
    property_cases,
    property_test,
    run_property,
)
from ._results import BadResult, bad_results, result_sites, valid_results
from ._tables import contract_tables, generated_body
from .profiles import load_default_profile, register_profiles

__all__ = [
    "HOSTILE_CLASSES",
    "INTERRUPTS",
    "MISTAKES",
    "PROMISES",
    "PROPERTIES",
    "BadResult",
    "DefectSite",
    "DefectiveCall",
    "HostileCall",
    "Mistake",
    "Order",
    "PropertyRun",
    "any_calls",
    "bad_results",
    "boundary_args",
    "case_id",
    "contract_tables",
    "defect_sites",
    "generated_body",
    "hostile_calls",
    "hostile_examples",
    "load_default_profile",
    "mistake_kinds",
    "model_mistakes",
    "one_defect_args",
    "orders",
    "permuted",
    "property_cases",
    "property_test",
    "register_profiles",
    "result_sites",
    "run_property",
    "simplest_args",
    "valid_args",
    "valid_results",
]

# As Hypothesis does: a name added to a module but not exported (or the
# reverse) is caught on import, not by a user.
_unbound = set(__all__) - set(globals())
if _unbound:  # pragma: no cover - only a broken edit of this file gets here
    raise ImportError(f"agtool.harness.strategies.__all__ names what it does not import: "
                      f"{sorted(_unbound)}")
del _unbound
