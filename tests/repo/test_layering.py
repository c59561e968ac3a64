"""The house keeps its layers: imports run one way, from the wings down to the core.

Read from the source with ``ast`` (every runtime import, lazy ones inside functions
included; ``if TYPE_CHECKING:`` blocks left out, since they never run):

- no import circle among agtool's modules;
- nothing in ``agtool/`` imports from outside it (the repository's ``reports``,
  ``bench``, ``strategies`` face, ``pytest_agtool``, ``tests``);
- no module inside agtool imports the package face ``agtool`` itself;
- the flat core (``agtool/_*.py``, ``_store/``, ``_jsonschema/``) imports no wing,
  and each wing imports only the core and the wings below it (``WING_FLOORS``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agtool"
FIRST_PARTY_OUTSIDE = {"reports", "bench", "strategies", "pytest_agtool", "tests"}
CORE = "core"
#: Each wing's floor: a module may import modules of its own wing and of lower floors.
#: A new wing must be given its floor here, which is the point: it says where it sits.
WING_FLOORS = {
    CORE: 0,
    "otel": 1,  # spans over the core's calls: agtool.mcp instruments the gates it makes
    "graph": 2, "langchain": 2, "mcp": 2, "pydantic_ai": 2, "openai_agents": 2,
    "keys_for": 2,
    "_stock_agent": 3, "harness": 3,
    "tools": 4,  # the reference stock agent's table, over _stock_agent
    "_cli": 5,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _wing(module: str) -> str:
    """``core``, a wing's name (``mcp``, ``harness``), or ``FACE`` for ``agtool`` itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return "FACE"
    if parts[1].startswith("_") and parts[1] not in WING_FLOORS:
        return CORE
    return parts[1]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    return {id(inner) for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)}


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every module ``module`` imports at run time, as a dotted name."""
    tree = ast.parse(path.read_text("utf-8"))
    skipped = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield full if full in MODULES else target


def _owner(name: str) -> str | None:
    """The module of agtool that ``name`` (a module or a name in one) is, if any."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


EDGES = sorted({(module, owner) for module, path in MODULES.items()
                for imported in _imports(module, path)
                if (owner := _owner(imported)) is not None and owner != module})


def test_the_graph_is_read() -> None:
    """The reading finds the package's modules and the core's arrows (a guard for the rest)."""
    assert {"agtool._gate", "agtool._store.sqlite", "agtool.mcp._proxy"} <= set(MODULES)
    assert ("agtool._gate", "agtool._memo") in EDGES
    assert len(EDGES) > 100


def test_no_import_circle() -> None:
    """No module of agtool reaches itself through its imports."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for source, target in EDGES:
        graph[source].add(target)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                pytest.fail("import circle: " + " -> ".join(
                    [*path[path.index(target):], target]))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_nothing_in_agtool_imports_from_outside_it() -> None:
    """The repository's tooling (reports, bench, strategies, pytest_agtool, tests) is above
    the package: agtool never reaches up into it."""
    outside = sorted((module, name) for module, path in MODULES.items()
                     for name in _imports(module, path)
                     if name.partition(".")[0] in FIRST_PARTY_OUTSIDE)
    assert outside == []


def test_no_inner_module_imports_the_face() -> None:
    """``agtool/__init__.py`` re-exports the modules; none of them imports it back."""
    assert [edge for edge in EDGES if edge[1] == "agtool"] == []


def test_every_wing_has_a_floor() -> None:
    """A new subpackage is placed on purpose: WING_FLOORS names every wing there is."""
    wings = {_wing(module) for module in MODULES} - {"FACE"}
    assert wings <= set(WING_FLOORS), sorted(wings - set(WING_FLOORS))


def test_imports_run_down_the_floors() -> None:
    """The core imports no wing, the face only the core, and a wing nothing above its floor."""
    upward = []
    for source, target in EDGES:
        low, high = _wing(target), _wing(source)
        if high == "FACE":
            if low != CORE:
                upward.append((source, target))
        elif low not in (high, CORE) and WING_FLOORS.get(low, 99) >= WING_FLOORS.get(high, 0):
            upward.append((source, target))
    assert upward == []
