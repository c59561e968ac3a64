"""Every seeded bug is caught on every run: ten seeds, and each run fails exactly the right items.

The table (``fixtures/seeded_bugs.py``) holds a crashing body, a range bug, a
too-big bug and a clean tool; a conftest re-introduces, for the run, a real gate
bug once found only on lucky seeds: a write with ``key_args`` read through the
args' own ``__contains__``, which a hostile dict makes raise. The profile draws
three random examples per item, so what finds the bugs is what every run draws
(each allowed value and bound, each hostile class), not luck.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from seeded_bugs import FAILING, TOOLS  # noqa: E402

SEEDS = range(10)
#: The gate bug, as it was: ``key in args`` on the caller's dict, which may raise.
BUGGY_GATE = '''
import agtool.harness._checks as harness

real = harness.Gate


class KeyArgsThroughContains(real):
    def call_tool(self, name, args, *rest, **kwargs):
        contract = self.contract(name) if isinstance(name, str) else None
        if contract is not None and contract.key_args and isinstance(args, dict):
            [arg in args for arg in contract.key_args]  # the bug: the args' own method
        return super().call_tool(name, args, *rest, **kwargs)


def pytest_configure(config):
    harness.Gate = KeyArgsThroughContains


def pytest_unconfigure(config):
    harness.Gate = real


from hypothesis import settings

settings.register_profile("three", max_examples=3, deadline=None, database=None,
                          derandomize=False)
'''


@pytest.fixture(autouse=True)
def _keep_the_profile() -> Iterator[None]:
    current = settings.get_current_profile_name()
    yield
    settings.load_profile(current)


@pytest.mark.slow
def test_every_seeded_bug_fails_its_item_under_ten_seeds(pytester: pytest.Pytester) -> None:
    """Under ten seeds (and under ci), the crashing, range, too-big and hostile-dict bugs each
    fail their own item, and every other item (the clean tool's among them) passes."""
    pytester.makeconftest(BUGGY_GATE)
    pytester.syspathinsert(FIXTURES)
    items = {f"{tool}::{prop}" for tool in TOOLS for prop in ("returns", "envelope")
             if not (prop == "returns" and TOOLS[tool].get("effect") == "write")}
    # Ten seeds of a three-example profile, and the derandomized ci profile once.
    runs = [("three", f"--hypothesis-seed={seed}") for seed in SEEDS] + [("ci", "-q")]
    for profile, seed in runs:
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "--agtool-table=seeded_bugs:TOOLS", "--agtool-only",
            f"--hypothesis-profile={profile}", seed, "-rA", "-k", "returns or envelope")
        prefix = "agtool:seeded_bugs:TOOLS::"
        failed = {line.split()[1].removeprefix(prefix) for line in result.outlines
                  if line.startswith("FAILED ")}
        passed = {line.split()[1].removeprefix(prefix) for line in result.outlines
                  if line.startswith("PASSED ")}
        assert failed == FAILING, (seed, failed)
        assert passed == items - FAILING, (seed, passed)
