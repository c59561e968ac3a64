"""What `pip install agtool` installs is what its gate, plugin and CLI import.

The plugin once needed Hypothesis, which only the dev extra installed: a plain
install then ended `pytest --agtool-table=...` in an INTERNALERROR. These tests
read the imports themselves, so a new third-party import that no dependency
provides fails here, not on a user's machine.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="pyproject is read with tomllib (Python 3.11+)")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
FIRST_PARTY = {"agtool", "strategies", "reports", "pytest_agtool", "bench"}
# The plugin runs inside pytest, so pytest is there whenever the plugin is imported.
PRESENT_WITH_THE_PLUGIN = {"pytest", "_pytest"}
# Modules that belong to an extra: they may import it, and only it, beyond the core.
EXTRA_MODULES = {"langchain": re.compile(r"agtool/langchain/\w+\.py"),
                 "mcp": re.compile(r"agtool/(mcp/\w+|harness/_mcp_check)\.py"),
                 "postgres": re.compile(r"agtool/_store/postgres\.py")}


def _distribution(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _requirements(group: str | None) -> set[str]:
    project = PYPROJECT["project"]
    listed = project["dependencies"] if group is None else project[
        "optional-dependencies"][group]
    return {_distribution(requirement) for requirement in listed}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.partition(".")[0])
    return roots


def _third_party(path: Path) -> set[str]:
    return {root for root in _imported_roots(path)
            if root not in sys.stdlib_module_names and root not in FIRST_PARTY
            and root not in PRESENT_WITH_THE_PLUGIN}


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return dict(packages_distributions())  # reads every installed distribution: once


def _providers(root: str) -> set[str]:
    return {name.lower().replace("_", "-") for name in _distributions().get(root, [])}


def _installed_sources() -> list[Path]:
    return [*sorted((ROOT / "agtool").rglob("*.py")), ROOT / "pytest_agtool.py"]


def _extra_of(path: Path) -> str | None:
    relative = path.relative_to(ROOT).as_posix()
    return next((extra for extra, pattern in EXTRA_MODULES.items()
                 if pattern.fullmatch(relative)), None)


@pytest.mark.parametrize("path", _installed_sources(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_import_is_a_declared_dependency(path: Path) -> None:
    """Each third-party import of an installed module comes from a core dependency, or
    from its own extra for the modules of an extra."""
    extra = _extra_of(path)
    allowed = _requirements(None) | (_requirements(extra) if extra else set())
    for root in sorted(_third_party(path)):
        providers = _providers(root)
        assert providers, f"{path.name} imports {root!r}, which no installed distribution provides"
        assert providers & allowed, (
            f"{path.name} imports {root!r} (from {sorted(providers)}), but pyproject lists "
            f"none of them in {'the core dependencies' if extra is None else extra!r}")


def test_the_dev_extra_installs_every_extra() -> None:
    """`pip install -e '.[dev]'` (CI and the README) installs each extra's dependencies too,
    so the adapters' tests run instead of failing on an import."""
    dev = _requirements("dev")
    for extra in PYPROJECT["project"]["optional-dependencies"]:
        if extra != "dev":
            assert _requirements(extra) <= dev, extra


def test_the_harness_is_in_the_core() -> None:
    """The strategies the plugin draws from need Hypothesis, and a plain install has it."""
    strategies_imports = set().union(
        *(_third_party(path) for path in (ROOT / "agtool" / "harness" / "strategies").glob("*.py")))
    assert "hypothesis" in strategies_imports
    assert "hypothesis" in _requirements(None)
