"""The regular expressions the pipeline parses keys with, one per key kind, made from the table.

They use only what Python's `re` and Java's regex (Spark's `regexp_extract`) share: positional
groups, non-capturing groups, lookaheads, one back-reference. No two of them match one key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from metaplane.layout._names import (
    MAX_NAME_LENGTH,
    NAME_RULES,
    OFFSET_DIGITS,
    U32_MAX,
    U64_MAX,
    NameRule,
)
from metaplane.layout._table import TEMPLATES, KeyKind, Template

# `$` would also match before a final line terminator (Java counts U+2028 as one, and a store
# key may hold it), so the end of input is "no character follows".
END = r"(?![\s\S])"


@dataclass(frozen=True)
class KeyPattern:
    """The regex of one key kind and the field each of its groups captures, in group order."""

    kind: KeyKind
    regex: str
    groups: tuple[str, ...]


def _digit_range(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def _any_digits(count: int) -> str:
    return {0: "", 1: "[0-9]"}.get(count, f"[0-9]{{{count}}}")


def _at_most(limit: str, first_low: int) -> list[str]:
    """Alternatives for the len(limit)-digit texts ≤ limit whose first digit is ≥ first_low."""
    alternatives = []
    for position, digit in enumerate(limit):
        low = first_low if position == 0 else 0
        if int(digit) > low:
            rest = _any_digits(len(limit) - position - 1)
            alternatives.append(limit[:position] + _digit_range(low, int(digit) - 1) + rest)
    return [*alternatives, limit]


def decimal_regex(low: int, high: int) -> str:
    """Canonical decimals (no leading zeros) from `low` (0 or 1) to `high`."""
    digits = str(high)
    alternatives = ["0"] if low == 0 else []
    if len(digits) > 1:
        alternatives.append("[1-9]" + (f"[0-9]{{0,{len(digits) - 2}}}" if len(digits) > 2 else ""))
    return "(?:" + "|".join(alternatives + _at_most(digits, 1)) + ")"


def padded_offset_regex() -> str:
    """20-digit zero-padded offsets up to the u64 maximum."""
    return "(?:" + "|".join(_at_most(f"{U64_MAX:0{OFFSET_DIGITS}d}", 0)) + ")"


def name_regex(rule: NameRule) -> str:
    """A name of `rule`: its characters, its length, none of its reserved words."""
    body = f"[{rule.chars}]{{1,{MAX_NAME_LENGTH}}}"
    if not rule.reserved:
        return body
    words = "|".join(re.escape(word) for word in rule.reserved)
    return f"(?!(?:{words})(?:/|{END})){body}"


FIELD_REGEXES: Mapping[str, str] = MappingProxyType(
    {
        **{name: name_regex(rule) for name, rule in NAME_RULES.items()},
        "broker_id": decimal_regex(0, U64_MAX),
        "producer_id": decimal_regex(0, U64_MAX),
        "consumer_id": decimal_regex(0, U64_MAX),
        "schema_id": decimal_regex(0, U64_MAX),
        "holder": decimal_regex(0, U64_MAX),
        "version": decimal_regex(1, U32_MAX),
        "offset": padded_offset_regex(),
    }
)


def _pattern(template: Template) -> KeyPattern:
    parts: list[str] = []
    groups: list[str] = []
    for segment in template.segments:
        if isinstance(segment, str):
            parts.append(segment)
        elif segment.name in groups:
            parts.append(f"\\{groups.index(segment.name) + 1}")
        else:
            groups.append(segment.name)
            parts.append(f"({FIELD_REGEXES[segment.name]})")
    return KeyPattern(template.kind, "^/" + "/".join(parts) + END, tuple(groups))


PATTERNS: Mapping[KeyKind, KeyPattern] = MappingProxyType(
    {kind: _pattern(template) for kind, template in TEMPLATES.items()}
)
