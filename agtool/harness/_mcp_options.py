"""What a check of an MCP server is run with, read once from ``agtool check`` or pytest's
options, and written back as the flags of a replay command that selects one item.

``--env NAME`` passes the caller's value of ``NAME`` to the server, ``--env
NAME=VALUE`` that value; ``--timeout SECONDS`` is every call's limit and
``--tool-timeout TOOL=SECONDS`` one tool's (pytest reads both from
``--agtool-timeout [TOOL=]SECONDS``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import AgtoolError
from ._mcp_known import read_examples
from ._mcp_target import CALL_TIMEOUT

__all__ = ["CheckOptions", "OptionError", "command_line", "parse_env", "parse_timeouts"]


class OptionError(AgtoolError, ValueError):
    """An option of the check that cannot be read: its message names the option."""


def parse_env(given: Sequence[str], environ: Mapping[str, str] | None = None
              ) -> dict[str, str]:
    """``NAME`` (the caller's value) or ``NAME=VALUE``, each; a named variable that is not
    set is an ``OptionError``."""
    environ = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for item in given:
        name, has_value, value = item.partition("=")
        if not name:
            raise OptionError(f"--env {item!r}: expected NAME or NAME=VALUE")
        if not has_value:
            if name not in environ:
                raise OptionError(f"--env {name}: the variable is not set here")
            value = environ[name]
        env[name] = value
    return env


def _seconds(option: str, text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise OptionError(f"{option} {text!r}: expected a number of seconds above 0")
    return seconds


def parse_timeouts(given: Sequence[str], option: str = "--tool-timeout"
                   ) -> tuple[float | None, dict[str, float]]:
    """``SECONDS`` (every call) or ``TOOL=SECONDS`` (one tool's), each."""
    default: float | None = None
    per_tool: dict[str, float] = {}
    for item in given:
        tool, has_tool, seconds = item.rpartition("=")
        if has_tool:
            if not tool:
                raise OptionError(f"{option} {item!r}: expected TOOL=SECONDS")
            per_tool[tool] = _seconds(option, seconds)
        else:
            default = _seconds(option, seconds)
    return default, per_tool


@dataclass(frozen=True)
class CheckOptions:
    """Everything a check's calls depend on, besides the target and the seed."""

    allow_writes: bool = False
    allow_tools: tuple[str, ...] = ()
    env_names: tuple[str, ...] = ()  #: as given, for the replay command (never the values)
    env: Mapping[str, str] = field(default_factory=dict)
    examples_file: str = ""
    examples: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    timeout: float = CALL_TIMEOUT
    tool_timeouts: Mapping[str, float] = field(default_factory=dict)
    strict: bool = False

    @classmethod
    def read(cls, *, allow_writes: bool, allow_tools: Sequence[str], env: Sequence[str],
             examples_file: str | None, timeout: float | None,
             tool_timeouts: Sequence[str], strict: bool) -> CheckOptions:
        """The options as given on a command line; ``OptionError`` for one that is wrong."""
        try:
            examples = read_examples(examples_file) if examples_file else {}
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        default, per_tool = parse_timeouts(tool_timeouts)
        return cls(allow_writes, tuple(allow_tools),
                   tuple(item.partition("=")[0] for item in env),
                   parse_env(env), examples_file or "", examples,
                   timeout if timeout is not None else default or CALL_TIMEOUT, per_tool,
                   strict)

    def replay_flags(self, *, pytest: bool = False) -> list[str]:
        """The flags that make the same calls again (a ``NAME=VALUE`` env is given back as
        ``NAME``: its value is not printed)."""
        prefix = "--agtool-" if pytest else "--"
        flags: list[str] = []
        if self.allow_writes:
            flags.append(prefix + "allow-writes")
        flags += [f"{prefix}allow-tool={name}" for name in self.allow_tools]
        flags += [f"{prefix}env={name}" for name in self.env_names]
        if self.examples_file:
            flags.append(f"{prefix}examples={self.examples_file}")
        if self.timeout != CALL_TIMEOUT:
            flags.append(f"{prefix}timeout={self.timeout:g}")
        timeout_flag = f"{prefix}timeout" if pytest else "--tool-timeout"
        flags += [f"{timeout_flag}={tool}={seconds:g}"
                  for tool, seconds in self.tool_timeouts.items()]
        if self.strict:
            flags.append(prefix + "strict")
        return flags


def command_line(words: Sequence[str]) -> str:
    """``words`` as one shell command line."""
    return shlex.join(words)
