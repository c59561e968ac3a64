"""The harness's Hypothesis settings profiles, registered in one place.

``tests/conftest.py`` and the agtool pytest plugin both call
``register_profiles()``; ``pytest --hypothesis-profile=<name>`` picks one,
otherwise ``load_default_profile()`` picks ``ci`` when ``CI`` is set in the
environment and ``dev`` when not.

- ``dev``: fast, for the edit-test loop.
- ``ci``: derandomized (the same examples every run, so a red build is
  reproducible), no example database, more examples.
- ``thorough``: thousands of examples, for a nightly job.

No profile has a deadline: how long an example takes depends on the machine
and its load (two xdist workers on two cores), and a timing is never a verdict.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, settings

__all__ = ["DEFAULT_PROFILE", "PROFILES", "load_default_profile", "register_profiles"]

#: Profile name -> the settings it changes.
PROFILES: dict[str, dict[str, Any]] = {
    "dev": {"max_examples": 25, "stateful_step_count": 20},
    "ci": {"max_examples": 60, "stateful_step_count": 30, "derandomize": True,
           "database": None, "print_blob": True},
    "thorough": {"max_examples": 2000, "stateful_step_count": 50},
}
DEFAULT_PROFILE = "dev"


def register_profiles() -> None:
    """Register ``dev``, ``ci`` and ``thorough`` with Hypothesis (again is harmless)."""
    for name, changes in PROFILES.items():
        settings.register_profile(
            name, deadline=None, suppress_health_check=[HealthCheck.too_slow], **changes,
        )


def load_default_profile(environ: Mapping[str, str] | None = None) -> str:
    """Register the profiles and load ``ci`` if ``CI`` is set (and not empty), else ``dev``."""
    register_profiles()
    env = os.environ if environ is None else environ
    name = "ci" if env.get("CI") else DEFAULT_PROFILE
    settings.load_profile(name)
    return name
