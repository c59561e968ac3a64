"""The MCP harness's verdicts on servers with one defect each (tests/_defect_server.py).

Each test pins one rule of the verdicts: a failure only where the server breaks
what it declared, a warning where its schema is looser than its behaviour, and
inconclusive where a refusal cannot be pinned on its defect. Every one of them
gives another verdict on the harness as it was before (a refusal for any reason
passed, a refused valid call failed, an extra argument on an open object failed,
and nothing looked at errors said as successes, a listing that changes, a
planted secret or a frozen server). The fast tests reach the servers in this
process; the slow ones start them as subprocesses, where their environment is
the harness's to set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

import _defect_server
import pytest
from hypothesis import settings
from mcp.client._memory import InMemoryTransport  # the SDK's own in-process transport

from agtool._cli import main
from agtool.harness._mcp_check import ItemResult, run_check
from agtool.harness._mcp_target import CANARY_NAME

SMALL = settings(max_examples=4, database=None, deadline=None)
SERVER = Path(_defect_server.__file__)
CANARY = "agtool-canary-in-process"


def check(name: str, **options: Any) -> dict[str, ItemResult]:
    """Every item of the defect server ``name``, in this process, by ``tool::label``."""
    options.setdefault("canary", CANARY)
    results = run_check(name, transport=lambda: InMemoryTransport(_defect_server.build(name)),
                        settings=SMALL, **options)
    return {result.item.name: result for result in results}


def of(items: dict[str, ItemResult], outcome: str, tool: str = "") -> set[str]:
    return {name for name, result in items.items()
            if result.outcome == outcome and name.startswith(tool)}


def stdio(name: str) -> str:
    return f"{sys.executable} {SERVER} {name}"


# --- In process -------------------------------------------------------------------------------


def test_an_error_answered_as_a_success_fails_naming_it() -> None:
    """A server that answers a call its schema refuses with an error text and isError false
    fails the refusal items, said as an error answered as a success; its valid calls pass."""
    items = check("errors_as_successes")
    assert items["lookup::accepts"].outcome == "passed"
    failed = of(items, "failed")
    assert {"lookup::refused[type:id]", "lookup::refused[min:id]",
            "lookup::mistake[bool-for-int]"} <= failed
    message = items["lookup::refused[type:id]"].message
    assert "answered an error as a success" in message
    assert "isError false" in message
    assert "Error: invalid arguments:\\u2028" in message  # escaped, not a line break


def test_a_coerced_int_is_found_once_the_defect_is_planted_on_a_call_that_succeeds(
        tmp_path: Path) -> None:
    """Every random path is refused, so without a known-good call no refusal pins on its
    defect: each is inconclusive, never a pass, and the tool is named as never accepted.
    Given a call that succeeds (--examples), `true` and "2" for the int `head` are planted
    on it, accepted, and fail."""
    from agtool.harness._mcp_check import never_accepted

    blind = check("coercing")
    assert of(blind, "passed", "read_head::refused") == set()
    assert of(blind, "passed", "read_head::mistake") == set()
    assert "read_head::refused[type:head]" in of(blind, "inconclusive")
    assert "cannot be pinned" in blind["read_head::refused[type:head]"].message
    assert never_accepted(list(blind.values())) == ["read_head"]
    given = {"read_head": [{"path": _defect_server.ALLOWED, "head": 2}]}
    items = check("coercing", examples=given)
    # Any path is admitted by the schema, and only one is read: a warning, not a failure.
    assert items["read_head::accepts"].outcome == "warned"
    assert "for 'path' of tool 'read_head'" in items["read_head::accepts"].message
    assert {"read_head::refused[type:head]", "read_head::mistake[bool-for-int]",
            "read_head::mistake[string-number]"} <= of(items, "failed")
    assert "read_head::refused[max:head]" in of(items, "failed")  # 4 is read as 3 lines
    # A refusal pinned by the accepted call without the defect passes.
    assert items["read_head::refused[type:path]"].outcome == "passed"
    assert "/allowed/notes.txt" in items["read_head::mistake[bool-for-int]"].message


def test_a_given_call_outside_the_schema_or_refused_warns_saying_so() -> None:
    """A known-good call that its own schema refuses is not sent, and one the server refuses
    is said to be refused: either way the user's examples are wrong, and told so."""
    items = check("coercing", examples={"read_head": [{"path": 5, "head": 2},
                                                      {"path": "/elsewhere", "head": 1}]},
                  only={"read_head::accepts"})
    message = items["read_head::accepts"].message
    assert items["read_head::accepts"].outcome == "warned"
    assert 'the call given for tool \'read_head\', {"path": 5, "head": 2}, is outside its ' \
           "inputSchema" in message
    assert "a call given as known-good (--examples)" in message


def test_a_schema_looser_than_the_server_warns_naming_the_argument() -> None:
    """A number the schema admits and the server refuses warns (never fails), naming the
    argument and what to tighten; an empty success where the known call found something
    warns as a lookup with no match. Neither changes the exit status."""
    items = check("too_strict")
    refused = items["get_resource::accepts"]
    assert refused.outcome == "warned"
    assert "for 'resourceId' of tool 'get_resource'; the server refuses it" in refused.message
    assert "minimum/maximum" in refused.message
    empty = items["find::accepts"]
    assert empty.outcome == "warned"
    assert "empty success" in empty.message
    assert "{\"name\": \"apple\"}" in empty.message
    assert of(items, "failed") == set()


def test_a_server_that_refuses_everything_passes_no_refusal() -> None:
    """Refused for the wrong reason is not refused for the planted one: every refusal item
    of a tool that refuses all calls is inconclusive, none passes."""
    items = check("refuses_everything")
    refusals = {name for name in items if "::refused[" in name or "::mistake[" in name}
    assert refusals
    assert {name for name in refusals if items[name].outcome == "inconclusive"} == refusals
    assert items["search::accepts"].outcome == "warned"


def test_a_listing_that_changes_after_a_call_fails() -> None:
    """A description that changes once the tool is called (a rug pull) fails `listing`,
    quoting the description before and after."""
    items = check("rug_pull")
    listing = items["weather::listing"]
    assert listing.outcome == "failed"
    assert "changed during the run: its description was" in listing.message
    assert "id_rsa" in listing.message
    assert items["weather::accepts"].outcome == "passed"


def test_a_long_running_tool_is_named_not_failed() -> None:
    """A call still at work when its time limit ends, on a server that answers a ping, makes
    the tool long-running: inconclusive, naming the option that gives it more time; its later
    calls are not sent."""
    items = check("long_running", timeout=0.5)
    accepts = items["slow::accepts"]
    assert accepts.outcome == "inconclusive"
    assert "long-running, not failed" in accepts.message
    assert "--tool-timeout slow=SECONDS" in accepts.message
    assert of(items, "failed") == set()
    assert sum(result.examples for result in items.values()) == 1


def test_the_canary_in_an_answer_fails_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool that answers its environment, canary included, fails `secret`; every value of
    the caller's environment is scrubbed from what is printed about an answer."""
    monkeypatch.setenv(CANARY_NAME, CANARY)
    monkeypatch.setenv(_defect_server.DUMMY_KEY, "sk-dummy-0123456789abcdef")
    items = check("env_leak")
    leak = items["get_env::secret"]
    assert leak.outcome == "failed"
    assert f"answered the value of {CANARY_NAME}" in leak.message
    assert items["echo_env::secret"].outcome == "passed"
    shown = items["echo_env::accepts"]
    assert shown.outcome == "failed"  # a text where a number was promised
    assert "outside its outputSchema" in shown.message
    assert "[redacted]" in shown.message
    assert all("sk-dummy-0123456789abcdef" not in result.message for result in items.values())


def test_only_the_items_named_run(tmp_path: Path) -> None:
    """`only` runs exactly the items named; a refusal item alone first looks for calls that
    succeed, as a whole run would, so it sends the same calls."""
    given = {"read_head": [{"path": _defect_server.ALLOWED, "head": 2}]}
    whole = check("coercing", examples=given)
    alone = check("coercing", examples=given, only={"read_head::mistake[bool-for-int]"})
    assert list(alone) == ["read_head::mistake[bool-for-int]"]
    assert alone["read_head::mistake[bool-for-int]"].message == (
        whole["read_head::mistake[bool-for-int]"].message)


# --- Subprocesses ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_server_frozen_by_a_call_fails(capsys: pytest.CaptureFixture[str]) -> None:
    """A call that blocks the whole server (no answer to the ping after it) fails the item
    as a frozen server, and the next item starts it again."""
    # Two items of the nine: the freeze, and one after it (the other seven cost a minute).
    assert main(["check", "--mcp", stdio("freezes"), "--timeout", "1", "--max-examples", "3",
                 "--seed", "1", "--item", "evaluate::accepts",
                 "--item", "evaluate::refused[missing:expr]"]) == 1
    out = capsys.readouterr().out
    fails = [line for line in out.splitlines() if line.startswith("FAIL evaluate")]
    assert len(fails) == 2
    assert "no answer to a ping" in fails[0]
    assert "the server is frozen" in fails[0]
    # The next item ran on a server started again: it answered (the defect it has).
    assert "evaluate({}) answered 2" in fails[1]


@pytest.mark.slow
def test_the_server_gets_a_safe_environment_and_the_canary(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A started server sees the SDK's safe environment, the variables named with --env and
    the canary, never the rest of the caller's; a tool that answers its environment fails
    `secret`; no caller value reaches the console, JUnit or NDJSON."""
    monkeypatch.setenv("AGTOOL_TEST_CALLER_SECRET", "caller-secret-do-not-leak-42")
    monkeypatch.setenv(_defect_server.DUMMY_KEY, "sk-dummy-0123456789abcdef")
    junit, ndjson = tmp_path / "check.xml", tmp_path / "check.ndjson"
    results = run_check(stdio("env_leak"), settings=SMALL, env={"PASSED_ON": "visible"},
                        only={"get_env::accepts", "get_env::secret"})
    assert {result.item.name: result.outcome for result in results} == {
        "get_env::accepts": "passed", "get_env::secret": "failed"}
    status = main(["check", "--mcp", stdio("env_leak"), "--env", _defect_server.DUMMY_KEY,
                   "--max-examples", "2", "--seed", "4", "--junit", str(junit),
                   "--ndjson", str(ndjson)])
    assert status == 1
    written = junit.read_text() + ndjson.read_text()
    assert "FAIL get_env secret" in capsys.readouterr().out
    assert "sk-dummy-0123456789abcdef" not in written
    assert "caller-secret-do-not-leak-42" not in written


def _env_of_server(env: dict[str, str] | None) -> dict[str, str]:
    """What ``get_env`` answers when the harness starts the server."""
    from agtool.harness._mcp_check import McpTarget

    with McpTarget(stdio("env_leak"), env=env) as target:
        answer = target.call("get_env", {})
        environment: dict[str, str] = json.loads(answer.text)
        environment["__canary__"] = target.canary
        return environment


@pytest.mark.slow
def test_a_started_server_sees_only_what_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's variables stay out of the server: only the SDK's defaults, the ones
    named, and the canary (random, made per target) are there."""
    from mcp.client.stdio import get_default_environment

    monkeypatch.setenv("AGTOOL_TEST_CALLER_SECRET", "caller-secret-do-not-leak-42")
    seen = _env_of_server({"PASSED_ON": "visible"})
    canary = seen.pop("__canary__")
    assert seen.pop(CANARY_NAME) == canary
    assert canary.startswith("agtool-canary-")
    assert seen.pop("PASSED_ON") == "visible"
    assert "AGTOOL_TEST_CALLER_SECRET" not in seen
    # What is left is the SDK's safe set (the interpreter may add a few of its own).
    assert set(get_default_environment()) <= set(seen)
    assert not {name for name in seen if name in os.environ
                and name not in get_default_environment() and name not in _PLATFORM}


#: Variables a Python or libc start-up sets in the child by itself.
_PLATFORM: Collection[str] = {"LC_CTYPE", "PWD", "SHLVL", "_"}


@pytest.mark.slow
def test_warnings_change_the_status_only_under_strict(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A server whose schemas are only looser than it exits 0 with WARN lines, and 1 under
    --strict; a tool no call of which is accepted gets a NEVER ACCEPTED line saying how to
    give one."""
    args = ["check", "--mcp", stdio("too_strict"), "--max-examples", "2", "--seed", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "WARN get_resource accepts:" in out
    assert "FAIL" not in out
    assert main([*args, "--strict", "--item", "get_resource::accepts"]) == 1  # the WARN one
    capsys.readouterr()
    assert main(["check", "--mcp", stdio("refuses_everything"), "--max-examples", "2"]) == 0
    out = capsys.readouterr().out
    assert "NEVER ACCEPTED search: no call of it was accepted" in out
    assert "--examples FILE" in out
    assert "INCONCLUSIVE search refused[" in out
