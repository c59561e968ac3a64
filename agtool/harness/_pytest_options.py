"""What the ``pytest_agtool`` entry point hands the harness's pytest items.

The entry point owns the command-line options and the session's seed; it
builds one ``HarnessOptions`` when a harness option is given and puts it in
``config.stash[OPTIONS]`` before registering the items' modules. They read
it from there and never import the entry point, so the import arrows run one
way: ``pytest_agtool`` -> ``agtool.harness``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

__all__ = ["OPTIONS", "HarnessOptions", "options"]


@dataclass(frozen=True)
class HarnessOptions:
    """The harness options of one pytest session, decided once by the entry point."""

    #: The marker every harness item carries (``-m agtool``).
    marker: str
    #: The seed of every item, the same in each xdist worker.
    seed: int
    #: ``--hypothesis-seed`` as an int, ``None`` when none was given.
    given_seed: int | None
    #: ``--agtool-table`` values, ``MODULE:NAME``.
    tables: tuple[str, ...] = ()
    #: ``--agtool-stub-bodies``.
    stub_bodies: bool = False
    #: ``--agtool-reproduce``: a failing example's blob, or ``None``.
    reproduce: str | None = None
    #: ``--agtool-mcp`` values: commands or URLs.
    mcp_targets: tuple[str, ...] = ()
    #: ``--agtool-allow-writes``.
    allow_writes: bool = False
    #: ``--agtool-allow-tool`` values: tools called though they may write.
    mcp_allow_tools: tuple[str, ...] = ()
    #: ``--agtool-env`` values, ``NAME`` or ``NAME=VALUE``: what a started server gets.
    mcp_env: tuple[str, ...] = ()
    #: ``--agtool-examples``: a file of calls that should succeed, or ``None``.
    mcp_examples: str | None = None
    #: ``--agtool-item`` values, ``TOOL::LABEL``: the only MCP items collected.
    mcp_items: tuple[str, ...] = ()
    #: ``--agtool-timeout`` values, ``SECONDS`` or ``TOOL=SECONDS``.
    mcp_timeouts: tuple[str, ...] = ()
    #: ``--agtool-strict``: a warning fails its item.
    mcp_strict: bool = False


OPTIONS = pytest.StashKey[HarnessOptions]()


def options(config: pytest.Config) -> HarnessOptions:
    """This session's harness options."""
    return config.stash[OPTIONS]
