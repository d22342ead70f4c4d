"""The check itself: which versions each mode looks at, how versions are numbered, and what
a verdict says.
"""

from __future__ import annotations

import json

import pytest

from metaplane.schema import CompatibilityMode, Schema, check, parse_schema


def version(*types: str) -> Schema:
    """A JSON Schema whose property `code` allows `types`."""
    document = {"type": "object", "properties": {"code": {"type": list(types)}}}
    return parse_schema("JsonSchema", json.dumps(document))


HISTORY = [version("string"), version("integer"), version("integer")]


def test_no_earlier_version_is_compatible() -> None:
    result = check(version("string"), [], CompatibilityMode.FULL_TRANSITIVE)
    assert result.ok
    assert result.checked_versions == ()


def test_mode_none_checks_nothing() -> None:
    result = check(parse_schema("Bytes", ""), HISTORY, "None")
    assert result.ok
    assert result.checked_versions == ()


@pytest.mark.parametrize(
    ("mode", "checked"),
    [
        (CompatibilityMode.BACKWARD, (3,)),
        (CompatibilityMode.FULL, (3,)),
        (CompatibilityMode.BACKWARD_TRANSITIVE, (1, 2, 3)),
        (CompatibilityMode.FORWARD_TRANSITIVE, (1, 2, 3)),
    ],
    ids=lambda value: value.value if isinstance(value, CompatibilityMode) else None,
)
def test_plain_modes_check_the_latest_transitive_ones_every_version(
    mode: CompatibilityMode, checked: tuple[int, ...]
) -> None:
    assert check(version("integer"), HISTORY, mode).checked_versions == checked


def test_versions_given_by_number_keep_their_numbers() -> None:
    result = check(version("integer"), {7: HISTORY[0], 2: HISTORY[1]}, "BackwardTransitive")
    assert result.checked_versions == (2, 7)
    assert [i.version for i in result.incompatibilities] == [7]


def test_a_reason_names_the_direction_version_rule_and_field() -> None:
    result = check(version("integer"), HISTORY, CompatibilityMode.FULL_TRANSITIVE)
    assert not result.ok
    assert result.reasons == [
        "backward: the new schema cannot read data written with version 1: "
        "[type-narrowed] at /properties/code/type: "
        "the writer allows string, the reader only integer",
        "forward: version 1 cannot read data written with the new schema: "
        "[type-narrowed] at /properties/code/type: "
        "the writer allows integer, the reader only string",
    ]


def test_mode_may_be_given_by_name() -> None:
    assert not check(version("integer"), HISTORY[:1], "backward").ok
