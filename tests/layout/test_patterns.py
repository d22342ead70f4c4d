"""The pipeline's patterns: in the regex subset Python and Java share, disjoint, and in
agreement with `parse` on every key, valid or damaged (checked in Java too when it is here)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaplane.layout import PATTERNS, U32_MAX, U64_MAX, KeyKind, LayoutError, parse
from metaplane.layout._patterns import decimal_regex, padded_offset_regex

from .strategies import TRICKY_SEGMENTS, damaged_keys, keys

COMPILED = {kind: re.compile(pattern.regex) for kind, pattern in PATTERNS.items()}


def matches(key: str) -> dict[KeyKind, dict[str, str]]:
    """The kinds whose pattern finds `key` (as Spark's regexp_extract does) and their groups."""
    found = {}
    for kind, regex in COMPILED.items():
        match = regex.search(key)
        if match is not None:
            found[kind] = dict(zip(PATTERNS[kind].groups, match.groups(), strict=True))
    return found


def assert_agree(key: str) -> None:
    found = matches(key)
    try:
        parsed = parse(key)
    except LayoutError:
        assert found == {}, f"{key!r} is refused by parse but matched by {list(found)}"
        return
    assert list(found) == [parsed.kind]
    expected = {name: str(value) for name, value in parsed.fields().items()}
    groups = found[parsed.kind]
    if "offset" in groups:
        groups["offset"] = str(int(groups["offset"]))
    assert groups == expected


def test_one_pattern_per_kind() -> None:
    assert set(PATTERNS) == set(KeyKind)
    for kind, pattern in PATTERNS.items():
        assert pattern.kind is kind
        assert re.compile(pattern.regex).groups == len(pattern.groups)


def test_group_names_are_the_parsed_key_fields() -> None:
    fields = {"cluster_name", "broker_id", "namespace", "topic", "subscription", "producer_id"}
    fields |= {"consumer_id", "subject", "version", "schema_id", "offset", "lock_name"}
    fields |= {"holder"}
    assert set().union(*(pattern.groups for pattern in PATTERNS.values())) == fields


# Only these constructs: literals of the layout, character classes of ASCII ranges, counted
# repetition, (?:…), (?!…), positional groups, \1, [\s\S]. No named groups, no \d or \w
# (Unicode in Python, ASCII in Java), no $ (Java's also matches before U+2028).
_TOKEN = re.compile(
    r"\^|\(\?:|\(\?!|\(|\)|\||\[\\s\\S\]|\[[A-Za-z0-9._-]+\]|\{\d+(,\d+)?\}|\\[1-9]|\\[-.]"
    r"|[A-Za-z0-9_/.-]"
)


@pytest.mark.parametrize("kind", list(KeyKind))
def test_patterns_use_only_the_shared_subset(kind: KeyKind) -> None:
    regex = PATTERNS[kind].regex
    assert regex.startswith("^/")
    assert regex.endswith(r"(?![\s\S])")
    position = 0
    while position < len(regex):
        token = _TOKEN.match(regex, position)
        assert token is not None, f"unexpected construct at {regex[position : position + 20]!r}"
        position = token.end()
    assert "(?P" not in regex and "(?<" not in regex and "$" not in regex


def _outside_groups(regex: str) -> str:
    depth, kept = 0, []
    for char in regex.replace("\\1", ""):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char != ")":
            kept.append(char)
    return "".join(kept)


def test_literal_segments_need_no_escaping() -> None:
    for pattern in PATTERNS.values():
        literals = _outside_groups(pattern.regex)
        assert re.fullmatch(r"\^/[a-z_/-]*", literals), literals


@given(keys())
def test_patterns_agree_with_parse_on_valid_keys(
    case: tuple[KeyKind, dict[str, object], str],
) -> None:
    assert_agree(case[2])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(damaged_keys())
def test_patterns_agree_with_parse_on_damaged_keys(key: str) -> None:
    assert_agree(key)


@given(st.text(max_size=60).map(lambda text: "/" + text))
def test_patterns_agree_with_parse_on_any_text(key: str) -> None:
    assert_agree(key)


@pytest.mark.parametrize("segment", TRICKY_SEGMENTS)
def test_patterns_agree_on_tricky_segments_everywhere(segment: str) -> None:
    for template in ("/cluster/{}", "/cluster/brokers/{}/state", "/cluster/brokers/1/{}/t"):
        assert_agree(template.format(segment))
    for template in ("/schemas/{}/metadata", "/schemas/s/versions/{}", "/subscriptions/s/{}"):
        assert_agree(template.format(segment))
    assert_agree(f"/danube-data/storage/topics/ns/t/objects/{segment}")
    assert_agree(f"/namespaces/{segment}/topics/{segment}/t")


def test_a_line_terminator_after_a_key_is_no_match() -> None:
    for key in ("/cluster/leader\n", "/cluster/leader\u2028", "/cluster/register/1\r\n"):
        assert_agree(key)
        assert matches(key) == {}


# The number regexes, against int arithmetic --------------------------------------------------

_U64 = re.compile(decimal_regex(0, U64_MAX))
_VERSION = re.compile(decimal_regex(1, U32_MAX))
_PADDED = re.compile(padded_offset_regex())


@given(st.integers(0, 2**66))
def test_decimal_regex_is_the_u64_range(number: int) -> None:
    assert (_U64.fullmatch(str(number)) is not None) == (number <= U64_MAX)
    assert (_VERSION.fullmatch(str(number)) is not None) == (1 <= number <= U32_MAX)
    padded = f"{number:020d}"
    assert (_PADDED.fullmatch(padded) is not None) == (number <= U64_MAX)


@pytest.mark.parametrize("number", [U64_MAX, U64_MAX + 1, U32_MAX, U32_MAX + 1, 10**19, 0, 1])
def test_decimal_regexes_at_the_edges(number: int) -> None:
    assert (_U64.fullmatch(str(number)) is not None) == (number <= U64_MAX)
    assert (_VERSION.fullmatch(str(number)) is not None) == (1 <= number <= U32_MAX)


@pytest.mark.parametrize("text", ["00", "01", "-1", "+1", "1 ", "", "1e3"])
def test_decimal_regexes_refuse_non_canonical_text(text: str) -> None:
    assert _U64.fullmatch(text) is None
    assert _VERSION.fullmatch(text) is None


# The same patterns in Java, as Spark runs them -----------------------------------------------

_JAVA_MATCHER = """
import java.nio.file.*;
import java.util.*;
import java.util.regex.*;

public class KeyMatcher {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]));
        int count = Integer.parseInt(lines.get(0));
        List<Pattern> patterns = new ArrayList<>();
        for (int i = 1; i <= count; i++) patterns.add(Pattern.compile(unescape(lines.get(i))));
        StringBuilder out = new StringBuilder();
        for (int k = count + 1; k < lines.size(); k++) {
            String key = unescape(lines.get(k));
            List<String> row = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                Matcher m = patterns.get(i).matcher(key);
                if (m.find()) {
                    StringBuilder groups = new StringBuilder(String.valueOf(i));
                    for (int g = 1; g <= m.groupCount(); g++) groups.append(",").append(m.group(g));
                    row.add(groups.toString());
                }
            }
            out.append(String.join(";", row)).append("\\n");
        }
        System.out.print(out);
    }

    static String unescape(String hex) {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < hex.length(); i += 4)
            text.append((char) Integer.parseInt(hex.substring(i, i + 4), 16));
        return text.toString();
    }
}
"""


def _utf16_hex(text: str) -> str:
    units = text.encode("utf-16-be")
    return units.hex()


def _python_rows(keys_: list[str], kinds: list[KeyKind]) -> list[str]:
    rows = []
    for key in keys_:
        found = matches(key)
        row = [",".join([str(kinds.index(kind)), *found[kind].values()]) for kind in found]
        rows.append(";".join(row))
    return rows


_SOME_KEYS = st.lists(st.one_of(keys().map(lambda case: case[2]), damaged_keys()), min_size=200)


@pytest.mark.slow
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_SOME_KEYS)
def test_java_regex_agrees_with_python(some_keys: list[str]) -> None:
    java = shutil.which("java")
    if java is None:
        pytest.fail("no java on PATH: `make test` installs it (Spark needs it too)")
    keys_ = [*some_keys, "/cluster/leader\u2028", "/cluster/register/1\u2029"]
    keys_ += [f"/schemas/s/versions/{segment}" for segment in TRICKY_SEGMENTS]
    kinds = list(PATTERNS)
    lines = [str(len(kinds)), *(_utf16_hex(PATTERNS[kind].regex) for kind in kinds)]
    lines += [_utf16_hex(key) for key in keys_]
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "input.txt").write_text("\n".join(lines) + "\n")
        (Path(directory) / "KeyMatcher.java").write_text(_JAVA_MATCHER)
        result = subprocess.run(
            [java, f"{directory}/KeyMatcher.java", f"{directory}/input.txt"],
            capture_output=True,
            check=True,
            timeout=60,
        )
    java_rows = result.stdout.decode().split("\n")[:-1]
    assert java_rows == _python_rows(keys_, kinds)
    assert any(java_rows)
    assert not all(java_rows)
