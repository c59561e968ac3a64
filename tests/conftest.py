"""Test-session setup: the harness's Hypothesis profiles, from their one registration.

``ci`` when ``CI`` is set in the environment, ``dev`` otherwise;
``pytest --hypothesis-profile=thorough`` (or any of the three) overrides both.
"""

from __future__ import annotations

from agtool.harness.strategies.profiles import load_default_profile

load_default_profile()
