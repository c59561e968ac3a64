"""The README's test command tells the truth on a machine without PostgreSQL.

Run for real in a subprocess, on a small part of the suite, with the session's
throwaway server switched off by a plugin (as on a machine without Debian's
binaries): the Postgres tests are one line saying how to enable them, the
closing count names them, the coverage floor leaves out the store that did not
run, and no line says FAIL while the run passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_without_postgres_the_run_says_so_in_one_line_and_passes(tmp_path: Path) -> None:
    """No server: one line for the group, its count named, postgres.py not in the floor."""
    (tmp_path / "no_server_here.py").write_text(
        "import _pg_server\n_pg_server.start = lambda: None\n", "utf-8")
    env = {key: value for key, value in os.environ.items()
           if key not in ("AGTOOL_TEST_POSTGRES", "CI")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT / "tests")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no_server_here", "-p", "no:cacheprovider",
         "tests/store/test_postgres.py", "tests/core/test_contract.py", "-m", "not slow",
         "--cov=agtool", "--cov-report=term-missing", "--cov-fail-under=1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout[-3000:]
    group = [line for line in lines if "PostgreSQL tests skipped:" in line]
    assert len(group) == 1
    assert "AGTOOL_TEST_POSTGRES" in group[0]
    assert not [line for line in lines if line.startswith("SKIPPED")]
    assert "skipped without PostgreSQL" in lines[-1]
    assert not [line for line in lines if "FAIL" in line]
    assert not [line for line in lines if line.startswith("agtool/_store/postgres.py")]
    assert [line for line in lines if line.startswith("agtool/_store/sqlite.py")]
