"""The MCP check on real third-party servers (tests/thirdparty), as bench/bench_harness_real.py
measures it: the defects found there by hand are found again, and nothing true fails.

Each server runs in its own sandbox of temporary state; the known-good calls are the ones
a user of the server would give (``--examples``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from thirdparty.fixture import sandboxed_server

from agtool.harness._mcp_check import ItemResult, run_check

SMALL = settings(max_examples=3, database=None, deadline=None)


def check(name: str, tmp_path: Path, only: set[str], **options: Any) -> dict[str, ItemResult]:
    argv, env, cwd = sandboxed_server(name, tmp_path)
    with open("/dev/null", "a") as errlog:
        results = run_check(shlex.join(argv), allow_writes=True, settings=SMALL, env=env,
                            cwd=str(cwd), errlog=errlog, only=only, **options)
    return {result.item.name: result for result in results}


@pytest.mark.slow
def test_the_everything_servers_environment_leak_fails_secret(tmp_path: Path) -> None:
    """`get-env` answers the server's environment, so the canary: `secret` fails; `echo`
    keeps it to itself and passes."""
    items = check("everything", tmp_path, {"get-env::secret", "echo::secret"},
                  examples={"echo": [{"message": "hello"}]})
    assert items["get-env::secret"].outcome == "failed"
    assert "AGTOOL_CANARY_TOKEN" in items["get-env::secret"].message
    assert items["echo::secret"].outcome == "passed"


@pytest.mark.slow
def test_the_git_servers_lax_integers_fail_once_a_repository_is_given(tmp_path: Path) -> None:
    """`max_count`, a declared integer, takes `false` and "0": found when the defect is
    planted on a call with the sandbox's repository, inconclusive without one."""
    repo = str(tmp_path / "git" / "state" / "repo")
    items = check("git", tmp_path, {"git_log::mistake[bool-for-int]", "git_log::accepts"},
                  examples={"git_log": [{"repo_path": repo}]})
    assert items["git_log::mistake[bool-for-int]"].outcome == "failed"
    assert "accepted a call its own inputSchema refuses" in (
        items["git_log::mistake[bool-for-int]"].message)
    blind = check("git", tmp_path / "again", {"git_log::mistake[bool-for-int]"})
    assert blind["git_log::mistake[bool-for-int]"].outcome == "inconclusive"
