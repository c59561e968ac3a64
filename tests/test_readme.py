"""The README's promises: its example runs, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_blocks_run(index: int) -> None:
    """Every Python block in the README executes and its asserts hold."""
    namespace: dict[str, object] = {}
    exec(compile(_blocks("python")[index], "README.md", "exec"), namespace)  # noqa: S102
    assert len(namespace) > 1  # it defined something besides __builtins__


def test_readme_diagram_is_the_graph() -> None:
    """The README's mermaid diagram is what build_graph() draws today."""
    from agtool import tools

    drawn = tools.build_graph().get_graph().draw_mermaid().strip()
    assert _blocks("mermaid") == [drawn + "\n"]


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
