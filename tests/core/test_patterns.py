"""Contract patterns under RE2: linear-time matching, refusals at registration, ``ttl``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from agtool import ContractError, Gate, check_table
from agtool._jsonschema import (
    STRICTER_THAN_JSON_SCHEMA,
    SchemaError,
    from_json_schema,
    gate_pattern,
    to_json_schema,
)
from agtool._jsonschema.lint import RULES, lint_schema, lint_table
from agtool._patterns import MAX_PATTERN_MEMORY, fullmatcher, pattern_problem
from agtool.harness.strategies._specs import matching_text
from agtool.harness.strategies._tables import _PATTERNS

ROOT = Path(__file__).resolve().parents[2]


def body(**args: Any) -> dict[str, Any]:
    return {}


def one_arg(spec: dict[str, Any], **entry: Any) -> dict[str, Any]:
    """A table of one tool ``t`` whose one argument ``code`` has ``spec``."""
    return {"t": {"fn": body, "args": {"code": spec}, "returns": {}, **entry}}


# --- ReDoS: what backtracks for ever in Python's re is answered by RE2 ----------------------

# Each pattern with an input that a backtracking engine explores in exponential time.
REDOS = [
    pytest.param(r"(a+)+b", "a" * 10_000, id="nested-plus"),
    pytest.param(r"(a|aa)+$", "a" * 9_999 + "!", id="overlapping-alternatives"),
    pytest.param(r"(x+x+)+y", "x" * 10_000, id="adjacent-pluses"),
    pytest.param(r"^(\w+\s?)*$", "a" * 9_999 + "!", id="words-and-spaces"),
]
# A child process can be killed when it overruns; a thread stuck in C code cannot.
_CHECK = """
import json, sys
from agtool import Gate
from agtool._patterns import fullmatcher
pattern, text = json.loads(sys.stdin.read())
table = {"t": {"fn": lambda **a: {}, "args": {"code": {"type": "str", "pattern": pattern}},
               "returns": {}}}
print(json.dumps([fullmatcher(pattern)(text) is None,
                  Gate(table).validate_args("t", {"code": text})]))
"""


@pytest.mark.parametrize(("pattern", "text"), REDOS)
def test_redos_pattern_is_answered_not_hung(pattern: str, text: str) -> None:
    """A catastrophic-backtracking pattern on a 10,000-char input is refused, in well under 20 s."""
    try:
        done = subprocess.run(  # noqa: S603  # runs this module's own script
            [sys.executable, "-c", _CHECK], input=json.dumps([pattern, text]),
            capture_output=True, text=True, timeout=20, check=False, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"matching {pattern!r} did not finish within 20 s")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, "pattern:code"]


# --- Refused at registration -----------------------------------------------------------------

BACKTRACKING_ONLY = [
    pytest.param(r"(a)\1", id="backreference"),
    pytest.param(r"(?P<x>a)(?P=x)", id="named-backreference"),
    pytest.param(r"(?=a)a", id="lookahead"),
    pytest.param(r"a(?!b)", id="negative-lookahead"),
    pytest.param(r"(?<=a)b", id="lookbehind"),
    pytest.param(r"(?<!a)b", id="negative-lookbehind"),
    pytest.param(r"(?>a+)", id="atomic-group"),
    pytest.param(r"a++", id="possessive"),
    pytest.param(r"a\Z", id="python-end-anchor"),
]


@pytest.mark.parametrize("pattern", BACKTRACKING_ONLY)
def test_pattern_re2_cannot_compile_is_refused_naming_tool_and_field(pattern: str) -> None:
    """A pattern only a backtracking engine reads is a ContractError naming tool, field and RE2."""
    with pytest.raises(ContractError) as caught:
        check_table(one_arg({"type": "str", "pattern": pattern}))
    assert (caught.value.tool, caught.value.field) == ("t", "args.code.pattern")
    assert "RE2" in caught.value.problem
    assert "lookarounds" in caught.value.problem


@pytest.mark.parametrize(("spec", "field"), [
    pytest.param({"type": "list", "item": {"type": "str", "pattern": r"(a)\1"}},
                 "args.code.item.pattern", id="list-item"),
    pytest.param({"type": "list", "item": {"k": {"type": "str", "pattern": "(?=a)a"}}},
                 "args.code.item.k.pattern", id="object-item"),
])
def test_nested_pattern_is_refused_at_its_path(spec: dict[str, Any], field: str) -> None:
    """A refused pattern inside items is named by its full dotted path."""
    with pytest.raises(ContractError) as caught:
        check_table(one_arg(spec))
    assert caught.value.field == field


def test_returned_pattern_is_refused_too() -> None:
    """Returned keys' patterns are checked like arguments', under returns.<key>.pattern."""
    table = {"t": {"fn": body, "args": {}, "returns": {"r": {"type": "str", "pattern": "(?=x)"}}}}
    with pytest.raises(ContractError) as caught:
        check_table(table)
    assert caught.value.field == "returns.r.pattern"


@pytest.mark.parametrize(("pattern", "words"), [
    pytest.param("x{,3}", "{0,3}", id="open-low-brace"),
    pytest.param("a{4294967296}", "1000", id="count-beyond-int"),
    pytest.param("a{" + "9" * 5000 + "}", "1000", id="count-beyond-int-parsing"),
    pytest.param("a{1001}", "1001", id="count-beyond-re2"),
    pytest.param(r"\pL{1000}", f"{MAX_PATTERN_MEMORY >> 20} MiB", id="program-too-large"),
    pytest.param("\ud800", "UTF-8", id="lone-surrogate"),
    pytest.param("[a-", "missing ]", id="unclosed-class"),
])
def test_pattern_problem_says_what_is_wrong(pattern: str, words: str) -> None:
    """pattern_problem names the problem, including braces RE2 would read as text."""
    assert words in pattern_problem(pattern)


@pytest.mark.parametrize("pattern", ["", "[a-z]+", r"\Q{,3}\E", r"\{,3}", "[{,3}]", "x{3,}",
                                     "x{1000}", r"\pL+", "[[:alpha:]]"])
def test_pattern_problem_is_empty_for_re2_patterns(pattern: str) -> None:
    """A pattern RE2 reads as its author meant has no problem (quoted braces are text)."""
    assert pattern_problem(pattern) == ""


def test_fullmatcher_refuses_a_bad_pattern_with_value_error() -> None:
    """fullmatcher raises ValueError, with pattern_problem's words, for a pattern RE2 refuses."""
    with pytest.raises(ValueError, match="RE2"):
        fullmatcher(r"(a)\1")


def test_fullmatcher_is_cached() -> None:
    """The same pattern gives the same compiled matcher, so the gate compiles each once."""
    assert fullmatcher("[0-9]{4}") is fullmatcher("[0-9]{4}")


# --- RE2's reading -----------------------------------------------------------------------------

SEMANTICS = [
    pytest.param("ORD-[0-9]{4}", "ORD-1234", True, id="plain"),
    pytest.param("ORD-[0-9]{4}", "xORD-1234", False, id="whole-string-start"),
    pytest.param("ORD-[0-9]{4}", "ORD-12345", False, id="whole-string-end"),
    pytest.param("a|ab", "ab", True, id="alternation-any-branch"),
    pytest.param("a$", "a\n", False, id="dollar-is-end-of-input"),
    pytest.param("a\n", "a\n", True, id="newline-literal"),
    pytest.param(".", "\n", False, id="dot-not-newline"),
    pytest.param("(?s).", "\n", True, id="dot-all-flag"),
    pytest.param(".", "\u00e9", True, id="dot-is-one-char-not-one-byte"),
    pytest.param(r"\d+", "123", True, id="ascii-digits"),
    pytest.param(r"\d", "\u0663", False, id="digit-is-ascii"),
    pytest.param(r"\D", "\u0663", True, id="non-digit-includes-arabic-digit"),
    pytest.param(r"\w+", "\u00e9", False, id="word-is-ascii"),
    pytest.param(r"\s", "\t", True, id="space-tab"),
    pytest.param(r"\s", "\v", False, id="space-excludes-vertical-tab"),
    pytest.param(r"\pL+", "\u00e9a", True, id="unicode-letter-class"),
    pytest.param("[[:alpha:]]+", "abc", True, id="posix-class"),
    pytest.param(r"\Qa.b\E", "a.b", True, id="quoted-literal"),
    pytest.param(r"\Qa.b\E", "axb", False, id="quoted-dot-is-a-dot"),
    pytest.param(r"\x{41}", "A", True, id="hex-escape"),
    pytest.param("(?i)abc", "ABC", True, id="case-insensitive"),
    pytest.param("", "", True, id="empty-matches-empty"),
    pytest.param("", "a", False, id="empty-matches-nothing-else"),
    pytest.param("x*", "x" * 10_000, True, id="long-input"),
    pytest.param("caf\u00e9", "caf\u00e9", True, id="non-ascii-literal"),
]


@pytest.mark.parametrize(("pattern", "text", "matches"), SEMANTICS)
def test_fullmatcher_reads_patterns_as_re2_does(pattern: str, text: str, matches: bool) -> None:
    """fullmatcher agrees with google-re2's own fullmatch, and with the expected answer."""
    assert (fullmatcher(pattern)(text) is not None) is matches
    assert (re2.fullmatch(pattern, text) is not None) is matches


@pytest.mark.parametrize(("pattern", "text", "matches"), SEMANTICS[:12])
def test_gate_refuses_what_re2_does_not_match(pattern: str, text: str, matches: bool) -> None:
    """The gate refuses exactly the strings RE2 does not full-match."""
    gate = Gate(one_arg({"type": "str", "pattern": pattern}))
    assert gate.validate_args("t", {"code": text}) == ("" if matches else "pattern:code")


def test_allowed_values_are_checked_against_the_pattern_with_re2() -> None:
    """An allowed value only Python's re would match (a non-ASCII digit) is refused."""
    with pytest.raises(ContractError) as caught:
        check_table(one_arg({"type": "str", "pattern": r"\d", "allowed": ["\u0663"]}))
    assert caught.value.field == "args.code.allowed"


class Shouty(str):
    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("a subclass's encode is never asked")


@pytest.mark.parametrize("text", [
    pytest.param("\ud800", id="lone-high"),
    pytest.param("a\udfff", id="lone-low-after-char"),
    pytest.param("\udc80b", id="lone-low-before-char"),
    pytest.param("\ud83d\ude00", id="surrogate-pair-as-two-chars"),
])
@pytest.mark.parametrize("pattern", [".*", r"[\s\S]*", r"\C*", "(?s).*"])
def test_lone_surrogates_never_raise_and_never_match(pattern: str, text: str) -> None:
    """A string UTF-8 cannot encode is no match, even for a pattern matching everything."""
    assert fullmatcher(pattern)(text) is None


def test_gate_answers_pattern_for_a_lone_surrogate() -> None:
    """Through the gate a lone surrogate is a refused argument, not an exception."""
    gate = Gate(one_arg({"type": "str", "pattern": ".*"}))
    assert gate.validate_args("t", {"code": "x\ud800"}) == "pattern:code"


def test_str_subclass_is_read_through_str() -> None:
    """A str subclass's own encode is never called, so it cannot raise or lie."""
    assert fullmatcher("ab")(Shouty("ab")) is not None


@settings(max_examples=50, deadline=None)
# Around the surrogate block, so lone surrogates are drawn often; plus any text.
@given(text=st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=6)
       | st.text(max_size=8))
def test_fullmatcher_never_raises(text: str) -> None:
    """For any str, surrogates included, the matcher answers a match or None."""
    assert fullmatcher(r"[\s\S]*")(text) is (None if _has_surrogate(text) else True)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(char) <= 0xDFFF for char in text)


# --- ttl -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "ttl"), [
    pytest.param({}, None, id="absent-is-the-gate-default"),
    pytest.param({"ttl": None}, None, id="none-is-the-gate-default"),
    pytest.param({"ttl": 0}, 0.0, id="zero-never-remembered"),
    pytest.param({"ttl": 1}, 1.0, id="int"),
    pytest.param({"ttl": 2.5}, 2.5, id="float"),
    pytest.param({"ttl": 60, "effect": "read", "risk": "read_sensitive"}, 60.0,
                 id="sensitive-read"),
])
def test_ttl_is_parsed_into_seconds(entry: dict[str, Any], ttl: float | None) -> None:
    """A non-negative finite ttl on a read tool becomes ToolContract.ttl, as a float."""
    contract = check_table(one_arg({"type": "str"}, **entry))["t"]
    assert contract.ttl == ttl
    assert contract.ttl is None or type(contract.ttl) is float


@pytest.mark.parametrize(("entry", "words"), [
    pytest.param({"ttl": -1}, "non-negative", id="negative"),
    pytest.param({"ttl": True}, "non-negative", id="bool"),
    pytest.param({"ttl": "5"}, "non-negative", id="str"),
    pytest.param({"ttl": math.nan}, "finite", id="nan"),
    pytest.param({"ttl": math.inf}, "finite", id="inf"),
    pytest.param({"ttl": 10**400}, "finite", id="int-beyond-float"),
    pytest.param({"ttl": [5]}, "non-negative", id="list"),
    pytest.param({"ttl": 5, "effect": "write"}, "read tools only", id="on-a-write"),
    pytest.param({"ttl": 0, "effect": "write", "risk": "irreversible"}, "never memoized",
                 id="zero-on-a-write"),
])
def test_bad_ttl_is_a_contract_error(entry: dict[str, Any], words: str) -> None:
    """A ttl that is no number of seconds, or on a write tool, is refused at registration."""
    with pytest.raises(ContractError) as caught:
        check_table(one_arg({"type": "str"}, **entry))
    assert (caught.value.tool, caught.value.field) == ("t", "ttl")
    assert words in caught.value.problem


# --- Lint --------------------------------------------------------------------------------------


def schema_with(pattern: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}},
            "required": ["code"]}


@pytest.mark.parametrize("pattern", [
    pytest.param("^(a+)+$", id="nested-plus"),
    pytest.param("^(x+x+)+y$", id="adjacent-pluses"),
    pytest.param(r"^(\w+\s?)*$", id="words-and-spaces"),
    pytest.param("^(a|a)*$", id="same-alternatives"),
    pytest.param("^(a|aa)+$", id="overlapping-alternatives"),
    pytest.param("^(?:[a-z]|[a-z]x){2,}$", id="alike-classes"),
    pytest.param("^(?=a)", id="re2-refuses"),
])
def test_lint_flags_dangerous_patterns_as_r6(pattern: str) -> None:
    """A pattern RE2 refuses, or one prone to catastrophic backtracking, is an R6 finding."""
    findings = [finding for finding in lint_schema(schema_with(pattern), "t")
                if finding.rule == "R6"]
    assert [(finding.tool, finding.location) for finding in findings] == [
        ("t", "/properties/code/pattern")]
    assert repr(pattern) in findings[0].message


@pytest.mark.parametrize("pattern", ["^[a-z]+$", "^(yes|no)+$", "^ORD-[0-9]{4}$",
                                     "^(?:red|green)*$", r"^\(a+\)$", r"^\u0041+$", "^[(a+)+]$"])
def test_lint_leaves_safe_patterns_alone(pattern: str) -> None:
    """Linear patterns, escaped parentheses and ECMA \\u escapes give no R6 finding."""
    assert [f for f in lint_schema(schema_with(pattern)) if f.rule == "R6"] == []


def test_lint_table_reads_patterns_through_the_export() -> None:
    """A contract table's nested quantifier is found in its exported schema."""
    findings = lint_table(one_arg({"type": "str", "pattern": "(a|aa)+"}))
    assert [finding.location for finding in findings if finding.rule == "R6"] == [
        "/properties/code/pattern"]
    assert "R6" in RULES


# --- JSON Schema out and in ----------------------------------------------------------------


def test_export_keeps_the_pattern_text_anchored() -> None:
    """The exported pattern is the contract's text inside ^(?:...)$, read by RE2 on import."""
    table = one_arg({"type": "str", "pattern": r"T-\d+"})
    assert to_json_schema(table, "t")["properties"]["code"]["pattern"] == r"^(?:T-\d+)$"
    assert gate_pattern(r"^(?:T-\d+)$") == r"T-\d+"


def test_ttl_is_not_exported_like_the_other_gate_keys() -> None:
    """ttl, like timeout and effect, configures the gate and is not part of the schema."""
    plain = one_arg({"type": "str"})
    assert to_json_schema(one_arg({"type": "str"}, ttl=30), "t") == to_json_schema(plain, "t")
    assert "ttl" not in from_json_schema(to_json_schema(plain, "t"))


@pytest.mark.parametrize("pattern", ["^(?=a)", r"^(a)\1$", "(?<!x)y", "^a{,3}$"])
def test_import_refuses_a_pattern_re2_cannot_read(pattern: str) -> None:
    """from_json_schema raises SchemaError at the pattern's JSON pointer."""
    with pytest.raises(SchemaError) as caught:
        from_json_schema(schema_with(pattern))
    assert caught.value.field == "/properties/code/pattern"


def test_import_spells_ecma_unicode_escapes_for_re2() -> None:
    """An ECMA 262 \\uXXXX escape is read as the same character, not refused."""
    entry = from_json_schema(schema_with(r"^\u0041+$"))
    gate = Gate({"t": {**entry, "fn": body}})
    assert gate.validate_args("t", {"code": "AA"}) == ""
    assert gate.validate_args("t", {"code": "u0041"}) == "pattern:code"


@pytest.mark.parametrize(("pattern", "value", "accepted"), [
    pytest.param("^a$", "a\n", False, id="end-is-the-end"),
    pytest.param(r"^(?:\d)$", "\u0663", False, id="ascii-digit"),
    pytest.param(r"^(?:\D)$", "\u0663", True, id="negated-class-is-wider"),
    pytest.param("b", "abc", True, id="search"),
])
def test_stricter_pattern_entry_is_the_gates_re2_reading(pattern: str, value: str,
                                                         accepted: bool) -> None:
    """STRICTER_THAN_JSON_SCHEMA['pattern'] reads a schema pattern as the imported gate does."""
    accepts = STRICTER_THAN_JSON_SCHEMA["pattern"].accepts
    assert accepts is not None
    assert accepts(pattern, value) is accepted
    assert "RE2" in STRICTER_THAN_JSON_SCHEMA["pattern"].why


# --- Strategies generate what RE2 matches --------------------------------------------------


@pytest.mark.parametrize(("pattern", "low", "high"), _PATTERNS)
def test_generated_table_patterns_are_re2_patterns(pattern: str, low: int, high: int) -> None:
    """Every pattern contract_tables() may draw compiles in RE2."""
    assert pattern_problem(pattern) == ""


@pytest.mark.parametrize("pattern", [r"\d+", r"\w\s\w", r"T-\d{2}", "(?i)ab", "[a-z]{1,6}"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_matching_text_is_matched_by_re2(pattern: str, data: st.DataObject) -> None:
    """Strings drawn for a pattern are ones the gate's RE2 full match accepts."""
    assert fullmatcher(pattern)(data.draw(matching_text(pattern))) is not None


def test_patterns_module_exports_its_api() -> None:
    """agtool._patterns exports exactly its three names."""
    import agtool._patterns as patterns

    assert sorted(patterns.__all__) == ["MAX_PATTERN_MEMORY", "fullmatcher", "pattern_problem"]
