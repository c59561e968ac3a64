"""The public surface: ``agtool.__all__`` is exactly the public names, and each resolves."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import agtool

#: The public names the package defines. A name added to or dropped from the package
#: must be added to or dropped from here too, on purpose.
PUBLIC = {
    "ARG_CHECKS",
    "ARG_REASONS",
    "RESULT_CHECKS",
    "SPEC_KEYS",
    "STAGES",
    "TYPES",
    "AgtoolError",
    "ContractError",
    "Envelope",
    "Gate",
    "Reason",
    "Spec",
    "ToolContract",
    "ToolStats",
    "check_table",
    "parse_reason",
    "STRICTER_THAN_JSON_SCHEMA",
    "SchemaError",
    "export_tools",
    "from_json_schema",
    "load_tools_file",
    "output_schema",
    "to_json_schema",
    "tool_spec",
    "Finding",
    "echo_match_rate",
    "lint_file",
    "lint_schema",
    "lint_table",
    # Issue 7: safe side effects.
    "CODES",
    "DEFAULT_SCOPE",
    "EFFECTS",
    "REDACTED",
    "RETRYABLE_CODES",
    "RISKS",
    "TRUST_LEVELS",
    "UNTRUSTED_NOTE",
    "WRITE_REASONS",
    "Approval",
    "Approver",
    "CallRecord",
    "Claim",
    "JsonLinesSink",
    "RecordSink",
    "SqliteStore",
    "StoredWrite",
    "PostgresStore",
    "NotApplied",
    "UpstreamError",
    "WriteStore",
    "contract_hash",
    "DEFAULT_MEMO_BYTES",
    "DEFAULT_MEMO_SIZE",
    "DEFAULT_MEMO_TTL",
    "Memo",
    "shown",
    "error_code",
    "is_retryable",
    "model_error",
}

# Every private module below agtool, subpackages' modules included; a private
# package's ``__init__`` only re-exports its modules' names, so it is no home.
PRIVATE_MODULES = sorted(
    info.name.removeprefix("agtool.")
    for info in pkgutil.walk_packages(agtool.__path__, "agtool.")
    if info.name.removeprefix("agtool.").startswith("_") and not info.ispkg
    and not info.name.endswith(".__main__")  # runs a command when imported
)


def test_all_is_exactly_the_public_names() -> None:
    """agtool.__all__ lists every public name once and nothing else."""
    assert set(agtool.__all__) == PUBLIC
    assert len(agtool.__all__) == len(set(agtool.__all__))


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_resolves_to_a_private_modules_export(name: str) -> None:
    """Every public name is an attribute of the package, re-exported from one private module."""
    value = getattr(agtool, name)
    homes = [
        module_name for module_name in PRIVATE_MODULES
        if name in getattr(importlib.import_module(f"agtool.{module_name}"), "__all__", ())
    ]
    assert len(homes) == 1, homes
    assert getattr(importlib.import_module(f"agtool.{homes[0]}"), name) is value


def test_star_import_gives_the_public_names() -> None:
    """``from agtool import *`` binds exactly the public names."""
    namespace: dict[str, object] = {}
    exec("from agtool import *", namespace)  # noqa: S102 - the statement under test
    namespace.pop("__builtins__")
    assert set(namespace) == PUBLIC


def test_private_modules_are_found() -> None:
    """The package keeps its code in private modules, the gate's among them."""
    assert {"_contract", "_compile", "_errors", "_gate", "_memo", "_reasons"} <= set(
        PRIVATE_MODULES)


@pytest.mark.parametrize("module_name", PRIVATE_MODULES)
def test_private_module_declares_all(module_name: str) -> None:
    """Each private module has an ``__all__`` of names it actually defines."""
    module: ModuleType = importlib.import_module(f"agtool.{module_name}")
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list | tuple)
    assert len(exported) == len(set(exported))
    for name in exported:
        assert hasattr(module, name), f"agtool.{module_name}.__all__ names missing {name!r}"


def test_reference_module_all_resolves() -> None:
    """Every name agtool.tools exports exists in it."""
    from agtool import tools

    for name in tools.__all__:
        assert hasattr(tools, name)
