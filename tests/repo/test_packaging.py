"""What `pip install agtool` installs is what its gate, plugin and CLI import.

The plugin once needed Hypothesis, which only the dev extra installed: a plain
install then ended `pytest --agtool-table=...` in an INTERNALERROR. These tests
read the imports themselves, so a new third-party import that no dependency
provides fails here, not on a user's machine.
"""

from __future__ import annotations

import ast
import configparser
import functools
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="pyproject is read with tomllib (Python 3.11+)")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
FIRST_PARTY = {"agtool", "strategies", "reports", "pytest_agtool", "bench"}
# The plugin runs inside pytest, so pytest is there whenever the plugin is imported.
PRESENT_WITH_THE_PLUGIN = {"pytest", "_pytest"}
# Modules that belong to an extra: they may import it, and only it, beyond the core.
EXTRA_MODULES = {"langchain": re.compile(r"agtool/langchain/\w+\.py"),
                 "mcp": re.compile(r"agtool/(mcp/\w+|harness/_mcp_\w+)\.py"),
                 "postgres": re.compile(r"agtool/_store/postgres\.py"),
                 "pydantic-ai": re.compile(r"agtool/pydantic_ai/\w+\.py"),
                 "openai-agents": re.compile(r"agtool/openai_agents/\w+\.py"),
                 "otel": re.compile(r"agtool/otel/\w+\.py")}
# agtool.keys_for reads a durable engine's ids through the engine's own package, imported
# inside the function a step running in that engine calls: never a dependency of agtool.
ENGINE_IMPORTS = {"agtool/_engine_keys.py": {"dbos", "temporalio"}}


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
    engines = ENGINE_IMPORTS.get(path.relative_to(ROOT).as_posix(), set())
    for root in sorted(_third_party(path) - engines):
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


# --- the wheel: what `pip install agtool-gate` puts on a machine --------------------------------

_SKIP_IN_COPY = shutil.ignore_patterns(".git", ".venv", ".thirdparty", "build", "dist",
                                       "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built by pip from a copy (the build leaves files behind)."""
    source = tmp_path_factory.mktemp("source") / "agtool"
    shutil.copytree(ROOT, source, ignore=_SKIP_IN_COPY)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)  # noqa: S603 - pip
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.slow
def test_the_wheel_holds_agtool_and_the_plugin_entry_point_only(built_wheel: Path) -> None:
    """Two import roots (agtool, pytest_agtool), every module of agtool/, and nothing else."""
    with zipfile.ZipFile(built_wheel) as wheel:
        names = wheel.namelist()
        metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
        assert "Name: agtool-gate\n" in wheel.read(metadata).decode()
    roots = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert roots == {"agtool", "pytest_agtool.py"}
    shipped = {name for name in names if name.startswith("agtool/") and name.endswith(".py")}
    in_tree = {path.relative_to(ROOT).as_posix() for path in (ROOT / "agtool").rglob("*.py")}
    assert shipped == in_tree
    assert "agtool/py.typed" in names


@pytest.mark.slow
def test_the_wheel_declares_the_command_and_the_pytest_plugin(built_wheel: Path) -> None:
    """The console script and the pytest11 entry point, exactly."""
    with zipfile.ZipFile(built_wheel) as wheel:
        points = next(name for name in wheel.namelist() if name.endswith("entry_points.txt"))
        parser = configparser.ConfigParser()
        parser.read_string(wheel.read(points).decode())
    assert {section: dict(parser[section]) for section in parser.sections()} == {
        "console_scripts": {"agtool": "agtool._cli:main"},
        "pytest11": {"agtool": "pytest_agtool"},
    }


@pytest.mark.slow
def test_the_installed_wheel_works_away_from_the_checkout(built_wheel: Path,
                                                          tmp_path: Path) -> None:
    """Unpacked alone on a path, the wheel's agtool gates a call, and no repository tooling
    (reports, strategies, bench) comes with it."""
    site = tmp_path / "site"
    with zipfile.ZipFile(built_wheel) as wheel:
        wheel.extractall(site)
    away = tmp_path / "elsewhere"
    away.mkdir()
    probe = (
        "import importlib.util, agtool, agtool.tools\n"
        f"assert agtool.__file__.startswith({str(site)!r}), agtool.__file__\n"
        "gate = agtool.Gate(agtool.tools.TOOLS)\n"
        "print(gate.call_tool('stock_lookup', {'sku_id': 'A-1'})['error'])\n"
        "print(sorted(m for m in ('reports', 'strategies', 'bench')\n"
        "             if importlib.util.find_spec(m) is not None))\n")
    done = subprocess.run(  # noqa: S603 - the probe above, run by this interpreter
        [sys.executable, "-P", "-c", probe], cwd=away, capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(site)})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["args:unexpected:sku_id", "[]"]
