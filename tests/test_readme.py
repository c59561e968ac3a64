"""The README's promises: its example runs, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_readme_example_runs() -> None:
    """The README's gated-tool example executes and its asserts hold."""
    namespace: dict[str, object] = {}
    exec(compile(_blocks("python")[0], "README.md", "exec"), namespace)  # noqa: S102
    assert "gate" in namespace


def test_readme_has_exactly_two_commands() -> None:
    """The README gives two shell commands: the main job and the tests."""
    commands = [block.strip() for block in _blocks("sh")]
    assert len(commands) == 2
    assert commands[0].endswith("python -m reports")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run contains the README's test command verbatim, so CI tests what users run."""
    test_command = _blocks("sh")[1].strip()
    ci_lines = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert test_command in ci_lines
