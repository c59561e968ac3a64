"""Finding the contract table a ``module:NAME`` names: one loader for the CLI and the plugin.

A table usually lives in the project being worked on, which is not installed:
``agtool export --table myapp.tools:TOOLS`` run in the project's folder and
``pytest --agtool-table=myapp.tools:TOOLS`` run from its rootdir must both
find ``myapp``. So a module that cannot be found on ``sys.path`` is looked for
once more under ``root`` (the current folder, or pytest's rootdir).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import Any

from ._errors import TableError

__all__ = ["load_table"]


def load_table(spec: str, root: str | os.PathLike[str] | None = None, *,
               option: str = "--table") -> Mapping[str, Any]:
    """The mapping ``module:NAME`` names; ``TableError`` saying what is wrong if it cannot.

    ``root`` is where to look for a module not found on ``sys.path``;
    ``option`` is how the spec was given, for the message. The table is not
    validated here: the caller decides what a malformed entry means.
    """
    where = f"{option}={spec}"
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise TableError(f"{where}: expected MODULE:NAME, e.g. myapp.tools:TOOLS")
    try:
        module = _import(module_name, root)
    except Exception as exc:
        raise TableError(f"{where}: cannot import {module_name!r}: "
                         f"{type(exc).__name__}: {exc}") from exc
    try:
        table = getattr(module, attribute)
    except AttributeError:
        raise TableError(f"{where}: module {module_name!r} has no {attribute!r}") from None
    if not isinstance(table, Mapping):
        raise TableError(f"{where}: {attribute} is a {type(table).__name__}, "
                         "not a contract table (a dict of tool name -> entry)")
    return table


def _import(module_name: str, root: str | os.PathLike[str] | None) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only when the missing module is the one asked for (or its package): a
        # table module whose own imports fail must say so, not be searched for.
        folder = None if root is None else os.path.abspath(root)
        if folder is None or folder in sys.path or not module_name.startswith(exc.name or "\0"):
            raise
        sys.path.insert(0, folder)
        return importlib.import_module(module_name)
