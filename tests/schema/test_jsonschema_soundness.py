"""The JSON Schema check against jsonschema itself: whenever the check says a reader accepts
everything a writer allows, no document the writer validates may be rejected by the reader.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped, unused-ignore]

from metaplane.schema import CompatibilityMode, check, parse_schema

NAMES = ["a", "b", "c"]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.5]),
    st.sampled_from(NAMES),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    ),
    max_leaves=6,
)

leaf_schemas = st.one_of(
    st.booleans(),
    st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(TYPES), min_size=1, max_size=3,
                                                unique=True)),
    st.builds(lambda vs: {"enum": vs}, st.lists(scalars, min_size=1, max_size=3)),
    st.builds(lambda n: {"type": "number", "minimum": n}, st.integers(-2, 2)),
    st.builds(lambda n: {"type": "integer", "exclusiveMaximum": n}, st.integers(-2, 2)),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 2)),
)  # fmt: skip


def _object(properties: dict[str, Any], required: list[str], extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


schemas = st.recursive(
    leaf_schemas,
    lambda inner: st.one_of(
        st.builds(
            _object,
            st.dictionaries(st.sampled_from(NAMES), inner, max_size=2),
            st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
            st.one_of(st.none(), st.booleans(), inner),
        ),
        st.builds(lambda items, n: {"type": "array", "items": items, "minItems": n},
                  inner, st.integers(0, 1)),
        st.builds(lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda parts: {"allOf": parts}, st.lists(inner, min_size=1, max_size=2)),
    ),
    max_leaves=4,
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=schemas, new=schemas, samples=st.lists(documents, min_size=1, max_size=8))
def test_backward_verdict_never_admits_a_rejected_document(
    old: Any, new: Any, samples: list[Any]
) -> None:
    verdict = check(
        parse_schema("JsonSchema", json.dumps(new)),
        [parse_schema("JsonSchema", json.dumps(old))],
        CompatibilityMode.BACKWARD,
    )
    if not verdict.ok:
        return
    old_validator, new_validator = Draft202012Validator(old), Draft202012Validator(new)
    for document in samples:
        if old_validator.is_valid(document):
            assert new_validator.is_valid(document), (old, new, document)


@settings(max_examples=50, deadline=None)
@given(schema=schemas)
def test_every_schema_is_compatible_with_itself(schema: Any) -> None:
    parsed = parse_schema("JsonSchema", json.dumps(schema))
    assert check(parsed, [parsed], CompatibilityMode.FULL).ok
