"""The MCP check's options: per-tool opt-in for writes, the server's environment, the
known-good calls file, time limits, and the flags a replay command carries back."""

from __future__ import annotations

import json
from pathlib import Path

import _lax_server
import pytest
from hypothesis import settings
from mcp.client._memory import InMemoryTransport  # the SDK's own in-process transport

from agtool.harness._mcp_check import run_check
from agtool.harness._mcp_options import (
    CheckOptions,
    OptionError,
    parse_env,
    parse_timeouts,
)
from agtool.harness._mcp_target import environment_scrubber

SMALL = settings(max_examples=2, database=None, deadline=None)


def test_a_write_tool_allowed_by_name_is_called_and_no_other() -> None:
    """--allow-tool NAME calls that write tool (its items run and find its defect) while
    writes stay off for the rest."""
    results = run_check("lax", transport=lambda: InMemoryTransport(_lax_server.app),
                        settings=SMALL, canary="c", allow_tools=("delete_everything",),
                        only={"delete_everything::refused[type:confirm]",
                              "delete_everything::accepts"})
    outcomes = {result.item.name: result.outcome for result in results}
    assert outcomes["delete_everything::refused[type:confirm]"] == "failed"
    assert outcomes["delete_everything::accepts"] == "passed"
    off = run_check("lax", transport=lambda: InMemoryTransport(_lax_server.app),
                    settings=SMALL, canary="c", only={"delete_everything::accepts"})
    assert off[0].outcome == "skipped"
    assert "--allow-tool delete_everything" in off[0].message


def test_env_takes_the_callers_value_or_the_one_given() -> None:
    """--env NAME copies the caller's value, NAME=VALUE gives one; a name not set, or no
    name, is an error naming the option."""
    assert parse_env(["TOKEN", "MODE=fast"], {"TOKEN": "t-1", "OTHER": "x"}) == {
        "TOKEN": "t-1", "MODE": "fast"}
    with pytest.raises(OptionError, match="--env MISSING: the variable is not set"):
        parse_env(["MISSING"], {})
    with pytest.raises(OptionError, match="expected NAME or NAME=VALUE"):
        parse_env(["=x"], {})


def test_timeouts_are_per_call_or_per_tool() -> None:
    """SECONDS is every call's limit, TOOL=SECONDS one tool's; nothing else is a time."""
    assert parse_timeouts(["3", "slow=60", "a=b=1.5"]) == (3.0, {"slow": 60.0, "a=b": 1.5})
    for wrong in ("0", "-1", "soon", "=4"):
        with pytest.raises(OptionError):
            parse_timeouts([wrong])


def test_an_examples_file_is_read_per_tool_or_refused_saying_why(tmp_path: Path) -> None:
    """A JSON object of tool -> list of argument objects is read as is; anything else is an
    error naming the file and the problem."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"count_items": [{"limit": 2}]}))
    options = CheckOptions.read(allow_writes=False, allow_tools=[], env=[],
                                examples_file=str(good), timeout=None, tool_timeouts=[],
                                strict=False)
    assert options.examples == {"count_items": [{"limit": 2}]}
    for text, problem in (("[1]", "expected an object"), ('{"t": {"a": 1}}', "list of"),
                          ("{", "Expecting")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(OptionError, match=problem):
            CheckOptions.read(allow_writes=False, allow_tools=[], env=[],
                              examples_file=str(bad), timeout=None, tool_timeouts=[],
                              strict=False)


def test_replay_flags_carry_every_option_but_a_value_given_on_the_command_line() -> None:
    """The replay has every flag the calls depend on; an --env NAME=VALUE comes back as
    --env NAME (the value may be a secret)."""
    options = CheckOptions.read(allow_writes=True, allow_tools=["rename"],
                                env=["TOKEN=secret-value-123"], examples_file=None,
                                timeout=4, tool_timeouts=["slow=30"], strict=True)
    flags = options.replay_flags()
    assert flags == ["--allow-writes", "--allow-tool=rename", "--env=TOKEN", "--timeout=4",
                     "--tool-timeout=slow=30", "--strict"]
    assert "secret-value-123" not in " ".join(flags + options.replay_flags(pytest=True))
    assert options.replay_flags(pytest=True)[0] == "--agtool-allow-writes"


def test_the_scrubber_takes_out_every_long_value_of_the_environment() -> None:
    """Values of six characters or more are replaced in every spelling; shorter ones (a
    flag, a digit) are left, since they cannot be told apart from ordinary text."""
    scrubber = environment_scrubber({"API_KEY": "sk-live-42-abcdef", "DEBUG": "1"},
                                    {"PASSED": "given-value"})
    text = scrubber.text('{"key": "sk-live-42-abcdef", "n": 1, "p": "given-value"}')
    assert "sk-live-42-abcdef" not in text
    assert "given-value" not in text
    assert '"n": 1' in text
