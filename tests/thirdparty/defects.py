"""The real contract defects of the pinned third-party servers, found by hand.

Each entry was found with the official client (``ClientSession``) in the
server's sandbox, before and beside the harness, and is kept here as data:
the call that shows it (``by_hand``), what its answer shows (``shows``), and
which harness finding reports it (``reported_by``). ``test_defects.py``
makes each call again with the official client on every run, so an entry
that stops being true (a new pinned release, a changed sandbox) fails there.

The ledger is the oracle of the harness's figures on real servers:
- a FAIL is true when it reports one of these defects, and counted false
  otherwise (a FAIL the ledger does not know waits for a hand check, and until
  then it costs precision);
- recall is the share of these defects reported as a FAIL or a WARN.

Like ``servers.py``, this module imports nothing from agtool.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Finding = dict[str, str]  # {"item": "tool::label", "verdict": ..., "message": ...}
Args = dict[str, Any]

#: The verdicts that report a defect: FAIL (a broken contract) and WARN (a loose schema).
REPORTING = ("failed", "warned")


@dataclass(frozen=True)
class Answer:
    """What the official client got back: the error flag and the text blocks, joined."""

    is_error: bool
    text: str


@dataclass(frozen=True)
class Defect:
    """One real defect of one tool (or, for ``tool=""``, of a whole server)."""

    server: str
    tool: str
    # coercion, secret, error-as-success, empty-success, loose-schema, open-object, dangling
    kind: str
    what: str  # one line, as the report says it
    # Given the sandbox's state folder: the calls, in order, that show it by hand.
    by_hand: Callable[[Path], list[tuple[str, Args]]] = field(repr=False)
    # Given the answers to those calls (and the canary planted in the server's environment).
    shows: Callable[[list[Answer], str], bool] = field(repr=False)
    reported_by: Callable[[Finding], bool] = field(repr=False)


def _tool(finding: Finding) -> str:
    return finding["item"].split("::", 1)[0]


def _reports(tool: str, verdicts: tuple[str, ...], *phrases: str) -> Callable[[Finding], bool]:
    """A finding on ``tool`` with one of ``verdicts`` whose message says every phrase."""
    return lambda f: (_tool(f) == tool and f["verdict"] in verdicts
                      and all(phrase in f["message"] for phrase in phrases))


def _open_object(finding: Finding) -> bool:
    # Any tool of the server: ``score`` only reads a server's own findings.
    return (finding["verdict"] in REPORTING
            and "the schema leaves the object open" in finding["message"])


def _accepted(answers: list[Answer], _canary: str) -> bool:
    return all(not answer.is_error for answer in answers)


def _error_said_as_success(phrase: str) -> Callable[[list[Answer], str], bool]:
    return lambda answers, _canary: all(not a.is_error and phrase in a.text for a in answers)


def _nothing(text: str) -> bool:
    """An answer with nothing in it: no text, or JSON whose every container is empty."""
    try:
        value = json.loads(text) if text.strip() else None
    except ValueError:
        return False

    def empty(v: Any) -> bool:
        if isinstance(v, dict):
            return all(empty(item) for item in v.values())
        return v in (None, "", [])

    return empty(value)


def _empty(answers: list[Answer], _canary: str) -> bool:
    # The last answer is the empty success; the ones before it found something.
    *found, last = answers
    return (all(not a.is_error and not _nothing(a.text) for a in found)
            and not last.is_error and _nothing(last.text))


def _refused(answers: list[Answer], _canary: str) -> bool:
    *accepted, refused = answers
    return all(not a.is_error for a in accepted) and refused.is_error


def _leaks(answers: list[Answer], canary: str) -> bool:
    return any(canary in answer.text for answer in answers)


def _repo(state: Path) -> Args:
    return {"repo_path": str(state / "repo")}


def _hello(state: Path) -> str:
    return str(state / "files" / "hello.txt")


def _coercion(tool: str, argument: str, extra: Callable[[Path], Args]) -> Defect:
    return Defect(
        "git", tool, "coercion",
        f"`{argument}`, declared an integer, takes `true`, `false` and `\"1\"`",
        lambda s: [(tool, {**_repo(s), **extra(s), argument: value})
                   for value in (True, False, "1")],
        _accepted,
        _reports(tool, ("failed",), "accepted a call its own inputSchema refuses",
                 f'"{argument}"'))


def _no_more(_state: Path) -> Args:
    return {}


def _main(_state: Path) -> Args:
    return {"target": "main"}


#: The one tool per server whose open object is shown by hand (the others are alike).
OPEN_OBJECT_SHOWN_ON = {
    "time": ("get_current_time", lambda _s: {"timezone": "UTC", "tz": "Asia/Seoul"}),
    "git": ("git_status", lambda s: {**_repo(s), "repo": "elsewhere"}),
    "sqlite": ("list_tables", lambda _s: {"schema": "temp"}),
    "filesystem": ("read_text_file", lambda s: {"path": _hello(s), "encoding": "latin-1"}),
    "memory": ("read_graph", lambda _s: {"depth": 2}),
    "everything": ("echo", lambda _s: {"message": "hello", "volume": 11}),
}


def _open_object_defect(server: str) -> Defect:
    tool, args = OPEN_OBJECT_SHOWN_ON[server]
    return Defect(server, "", "open-object",
                  "every tool silently drops an argument its schema does not name "
                  "(no `additionalProperties: false`)",
                  lambda s: [(tool, args(s))], _accepted, _open_object)


DEFECTS: tuple[Defect, ...] = (
    _coercion("git_diff_unstaged", "context_lines", _no_more),
    _coercion("git_diff_staged", "context_lines", _no_more),
    _coercion("git_diff", "context_lines", _main),
    _coercion("git_log", "max_count", _no_more),
    Defect("everything", "get-env", "secret",
           "hands back the server's whole environment, secrets included",
           lambda _s: [("get-env", {})], _leaks,
           _reports("get-env", ("failed",), "leaked a secret planted")),
    *(Defect("sqlite", tool, "error-as-success",
             f"answers its errors (`{said}`) with `isError: false`",
             lambda _s, tool=tool, wrong=wrong: [(tool, {"query": wrong})],
             _error_said_as_success(said),
             _reports(tool, REPORTING, "with what reads as an error, with isError false"))
      for tool, wrong, said in (
          ("read_query", "DELETE FROM items", "Only SELECT queries are allowed"),
          ("create_table", "SELECT 1", "Only CREATE TABLE statements are allowed"),
          ("write_query", "SELECT * FROM items", "SELECT queries are not allowed"))),
    Defect("sqlite", "describe_table", "empty-success",
           "a table that does not exist answers `[]`, a success",
           lambda _s: [("describe_table", {"table_name": "items"}),
                       ("describe_table", {"table_name": "no_such_table"})],
           _empty, _reports("describe_table", REPORTING, "with an empty success")),
    *(Defect("filesystem", tool, "empty-success",
             "a negative `head` or `tail` answers an empty success",
             lambda s, tool=tool: [(tool, {"path": _hello(s)}),
                                   (tool, {"path": _hello(s), "tail": -1})],
             _empty, _reports(tool, REPORTING, "with an empty success", "-1"))
      for tool in ("read_text_file", "read_file")),
    Defect("memory", "open_nodes", "empty-success",
           "a name that does not exist answers an empty success",
           lambda _s: [("open_nodes", {"names": ["sandbox"]}),
                       ("open_nodes", {"names": ["no such entity"]})],
           _empty, _reports("open_nodes", REPORTING, "with an empty success")),
    Defect("memory", "create_relations", "dangling",
           "a relation between entities that do not exist succeeds, left dangling",
           lambda _s: [("create_relations", {"relations": [
               {"from": "nobody", "to": "nowhere", "relationType": "knows"}]})],
           _error_said_as_success('"from": "nobody"'),
           _reports("create_relations", REPORTING, "not exist")),
    Defect("everything", "get-resource-reference", "loose-schema",
           "its schema admits any number for `resourceId`, and it refuses 0, "
           "negatives and 1.5",
           lambda _s: [("get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
                       ("get-resource-reference", {"resourceType": "Text", "resourceId": 0})],
           _refused, _reports("get-resource-reference", REPORTING, "your schema admits")),
    *(Defect("time", tool, "loose-schema",
             "its schema admits `\"\"`, which it refuses as a missing required argument",
             lambda _s, tool=tool, good=good, empty=empty: [(tool, good), (tool, empty)],
             _refused, _reports(tool, REPORTING, 'your schema admits ""'))
      for tool, good, empty in (
          ("get_current_time", {"timezone": "UTC"}, {"timezone": ""}),
          ("convert_time", {"source_timezone": "UTC", "time": "12:00",
                            "target_timezone": "UTC"},
           {"source_timezone": "", "time": "12:00", "target_timezone": "UTC"}))),
    *(_open_object_defect(server) for server in OPEN_OBJECT_SHOWN_ON),
)


def reported(defect: Defect, findings: list[Finding]) -> bool:
    """Whether any finding on the defect's server reports it."""
    return any(defect.reported_by(finding) for finding in findings)


def true_fail(server: str, finding: Finding) -> bool:
    """Whether a FAIL on ``server`` reports a defect of the ledger."""
    return any(defect.server == server and defect.reported_by(finding) for defect in DEFECTS)


def score(findings_by_server: dict[str, list[Finding]]) -> dict[str, Any]:
    """Precision of FAIL and recall of FAIL-or-WARN over the servers checked."""
    fails = [(server, f) for server, findings in findings_by_server.items()
             for f in findings if f["verdict"] == "failed"]
    true = [pair for pair in fails if true_fail(*pair)]
    known = [d for d in DEFECTS if d.server in findings_by_server]
    found = [d for d in known if reported(d, findings_by_server[d.server])]
    return {
        "fails": len(fails), "true_fails": len(true),
        "unknown_fails": [f"{server} {f['item']}" for server, f in fails
                          if (server, f) not in true],
        "precision": round(len(true) / len(fails), 2) if fails else None,
        "defects": len(known), "defects_reported": len(found),
        "recall": round(len(found) / len(known), 2) if known else None,
        "missed": [f"{d.server} {d.tool or '(all tools)'}: {d.what}" for d in known
                   if d not in found],
    }
