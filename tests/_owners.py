"""Owners for tests: one made by a real process that has since exited."""

from __future__ import annotations

import subprocess
import sys


def exited_owner() -> str:
    """The owner a process of this host named for a claim, once that process has exited."""
    done = subprocess.run([sys.executable, "-c",
                           "from agtool._store import new_owner; print(new_owner())"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()
