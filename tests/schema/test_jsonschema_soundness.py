"""The JSON Schema check against jsonschema itself: whenever the check says a reader accepts
everything a writer allows, no document the writer validates may be rejected by the reader.

Schemas are drawn from every keyword of draft-07 and 2020-12 (applicators, conditionals,
references, tuples, contains, dependencies, unevaluated*), and the new schema is often the old
one changed a little (a keyword added, removed or swapped, a branch added), so that many
verdicts are "compatible" and get tested. Documents are drawn at random and built from the
schemas' own names and values.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for  # type: ignore[import-untyped, unused-ignore]

from metaplane.schema import CompatibilityMode, CompatibilityResult, check, parse_schema

# A few seconds in the suite; METAPLANE_SOUNDNESS_EXAMPLES=2000 (and --timeout 0) searches longer.
EXAMPLES = int(os.environ.get("METAPLANE_SOUNDNESS_EXAMPLES", "80"))

NAMES = ["a", "b", "x-a", "x-b"]
PATTERNS = ["^x-", "b$"]
STRINGS = ["", "a", "b", "x-a", "ab", "abcd"]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]
DRAFTS = {
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft-07": "http://json-schema.org/draft-07/schema#",
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.5, 2.0, -1.0]),
    st.sampled_from(STRINGS),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    ),
    max_leaves=8,
)


def optional(**strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=strategies)


def leaves(draft: str) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.booleans(),
        st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
        st.builds(
            lambda ts: {"type": ts},
            st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        ),
        st.builds(lambda vs: {"enum": vs}, st.lists(scalars, min_size=1, max_size=3)),
        st.builds(lambda v: {"const": v}, scalars),
        optional(
            type=st.sampled_from(["number", "integer"]),
            minimum=st.integers(-2, 2),
            exclusiveMaximum=st.integers(-2, 3),
            multipleOf=st.sampled_from([1, 2, 0.5]),
        ),
        optional(
            type=st.just("string"),
            minLength=st.integers(0, 2),
            maxLength=st.integers(0, 3),
            pattern=st.sampled_from(["^a", "b$", "^x-"]),
            format=st.just("email"),
        ),
        st.just({"$ref": "#/$defs/shared"}),
    )


def objects(inner: st.SearchStrategy[Any], draft: str) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(NAMES)
    dependents = st.dictionaries(
        names, st.lists(names, min_size=1, max_size=2, unique=True), max_size=1
    )
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": st.just("object"),
        "properties": st.dictionaries(names, inner, max_size=2),
        "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), inner, max_size=1),
        "additionalProperties": st.one_of(st.booleans(), inner),
        "required": st.lists(names, max_size=2, unique=True),
        "minProperties": st.integers(0, 2),
        "maxProperties": st.integers(0, 3),
        "propertyNames": st.one_of(
            st.just({"maxLength": 1}), st.just({"pattern": "^x-"}), st.just({"enum": ["a", "b"]})
        ),
    }
    if draft == "2020-12":
        keywords["dependentRequired"] = dependents
        keywords["dependentSchemas"] = st.dictionaries(names, inner, max_size=1)
        keywords["unevaluatedProperties"] = st.one_of(st.booleans(), inner)
    else:
        keywords["dependencies"] = st.one_of(dependents, st.dictionaries(names, inner, max_size=1))
    return optional(**keywords)


def arrays(inner: st.SearchStrategy[Any], draft: str) -> st.SearchStrategy[dict[str, Any]]:
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": st.just("array"),
        "minItems": st.integers(0, 2),
        "maxItems": st.integers(0, 3),
        "uniqueItems": st.booleans(),
        "contains": inner,
    }
    if draft == "2020-12":
        keywords["prefixItems"] = st.lists(inner, min_size=1, max_size=2)
        keywords["items"] = inner
        keywords["minContains"] = st.integers(0, 2)
        keywords["maxContains"] = st.integers(0, 2)
        keywords["unevaluatedItems"] = st.one_of(st.booleans(), inner)
    else:
        # additionalItems only after a tuple (jsonschema fails on it beside a boolean `items`).
        tuples = optional(items=st.lists(inner, min_size=1, max_size=2), additionalItems=inner)
        return st.builds(lambda a, b: {**a, **b}, optional(**keywords, items=inner), tuples)
    return optional(**keywords)


def applicators(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    branches = st.lists(inner, min_size=1, max_size=2)
    return st.one_of(
        st.builds(lambda b: {"anyOf": b}, branches),
        st.builds(lambda b: {"oneOf": b}, branches),
        st.builds(lambda b: {"allOf": b}, branches),
        st.builds(lambda n: {"not": n}, inner),
        optional(**{"if": inner, "then": inner, "else": inner}),
    )


def schemas(draft: str) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves(draft),
        lambda inner: st.one_of(objects(inner, draft), arrays(inner, draft), applicators(inner)),
        max_leaves=5,
    )


def document(draft: str, body: Any, shared: Any) -> dict[str, Any]:
    root = {"$schema": DRAFTS[draft], "$defs": {"shared": shared}}
    if isinstance(body, bool):
        return {**root, "allOf": [body]}
    return {**root, **body}


@st.composite
def pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """An old schema and a new one: unrelated, or the old one changed a little."""
    draft = draw(st.sampled_from(sorted(DRAFTS)))
    strategy = schemas(draft)
    shared = draw(leaves(draft).filter(lambda s: s != {"$ref": "#/$defs/shared"}))
    old = draw(strategy)
    body = old if isinstance(old, dict) else {"allOf": [old]}
    change = draw(st.sampled_from(["unrelated", "add", "drop", "any-of", "all-of", "same"]))
    if change == "unrelated":
        new: Any = draw(strategy)
    elif change == "add":
        new = {**body, **draw(st.one_of(objects(strategy, draft), arrays(strategy, draft)))}
    elif change == "drop" and body:
        dropped = draw(st.sampled_from(sorted(body)))
        new = {key: value for key, value in body.items() if key != dropped}
    elif change == "any-of":
        new = {"anyOf": [body, draw(strategy)]}
    elif change == "all-of":
        new = {"allOf": [body, draw(strategy)]}
    else:
        new = {**body, "title": "same"}
    new_shared = draw(st.one_of(st.just(shared), leaves(draft)))
    if new_shared == {"$ref": "#/$defs/shared"}:
        new_shared = shared
    return document(draft, body, shared), document(draft, new, new_shared)


BASICS = [None, True, 0, 1, 2, 1.5, -1, "", "a", "b", "x-a", "ab"]


def leaf_values(schema: Any) -> list[Any]:
    """The values a schema names anywhere: consts, enums, bounds and just past them."""
    found: list[Any] = []
    if isinstance(schema, dict):
        found += list(schema.get("enum", []))
        if "const" in schema:
            found.append(schema["const"])
        for key in ("minimum", "exclusiveMaximum"):
            if isinstance(schema.get(key), int | float):
                found += [schema[key], schema[key] - 1, schema[key] + 0.5]
        for value in schema.values():
            found += leaf_values(value)
    elif isinstance(schema, list):
        for item in schema:
            found += leaf_values(item)
    return found


def property_names(schema: Any) -> list[str]:
    if isinstance(schema, list):
        return [name for item in schema for name in property_names(item)]
    if not isinstance(schema, dict):
        return []
    names = list(schema.get("properties", {})) + list(schema.get("required", []))
    return names + [name for value in schema.values() for name in property_names(value)]


def candidates(schema: Any) -> list[Any]:
    """Documents made from a schema's own names and values (valid or not: jsonschema says)."""
    values = list(dict.fromkeys(map(json.dumps, leaf_values(schema) + BASICS)))
    scalars = [json.loads(value) for value in values][:10]
    names = list(dict.fromkeys(property_names(schema) + NAMES))[:5]
    found: list[Any] = [*scalars, [], {}]
    found += [[value] * count for value in scalars[:6] for count in (1, 2, 3)]
    found += [list(pair) for pair in itertools.pairwise(scalars)][:6]
    found += [{name: value} for name in names for value in scalars[:4]]
    found += [dict.fromkeys(names[:count], value) for count in (2, 3) for value in scalars[:4]]
    return found


def assert_sound(old: dict[str, Any], new: dict[str, Any], samples: list[Any]) -> bool:
    """If the check lets `new` read `old`'s data, every sample `old` validates `new` must too.
    Returns whether some sample put the verdict to the test."""
    verdict = check(
        parse_schema("JsonSchema", json.dumps(new)),
        [parse_schema("JsonSchema", json.dumps(old))],
        CompatibilityMode.BACKWARD,
    )
    if not verdict.ok:
        return False
    writer, reader = validator_for(old)(old), validator_for(new)(new)
    tested = False
    for sample in [*samples, *candidates(old), *candidates(new)]:
        if writer.is_valid(sample):
            tested = True
            assert reader.is_valid(sample), (old, new, sample)
    return tested


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(pair=pairs(), samples=st.lists(documents, min_size=1, max_size=10))
def test_a_compatible_verdict_never_admits_a_rejected_document(
    pair: tuple[dict[str, Any], dict[str, Any]], samples: list[Any]
) -> None:
    old, new = pair
    assert_sound(old, new, samples)
    assert_sound(new, old, samples)


@settings(max_examples=max(EXAMPLES // 6, 20), deadline=None)
@given(draft=st.sampled_from(sorted(DRAFTS)), data=st.data())
def test_every_schema_is_compatible_with_itself(draft: str, data: st.DataObject) -> None:
    body, shared = data.draw(schemas(draft)), data.draw(leaves(draft))
    if shared == {"$ref": "#/$defs/shared"}:
        shared = True
    parsed = parse_schema("JsonSchema", json.dumps(document(draft, body, shared)))
    assert check(parsed, [parsed], CompatibilityMode.FULL).ok


# The oracle can fail: unsound verdicts are caught, and sound ones are put to the test.

UNSOUND = [
    ({"type": "number"}, {"type": "integer"}, [1.5]),
    ({"type": "object"}, {"type": "object", "required": ["a"]}, [{}]),
    ({"prefixItems": [{"type": "string"}]}, {"prefixItems": [{"type": "integer"}]}, [["a"]]),
]


@pytest.mark.parametrize(("old", "new", "samples"), UNSOUND)
def test_the_oracle_catches_an_unsound_verdict(
    old: dict[str, Any], new: dict[str, Any], samples: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def always_compatible(*args: Any, **kwargs: Any) -> CompatibilityResult:
        return CompatibilityResult(CompatibilityMode.BACKWARD, (1,))

    monkeypatch.setattr(f"{__name__}.check", always_compatible)
    with pytest.raises(AssertionError):
        assert_sound(document("2020-12", old, True), document("2020-12", new, True), samples)


SOUND = [
    ({"type": "integer"}, {"type": "number"}),
    ({"not": {"type": "number"}}, {"not": {"type": "integer"}}),
    ({"type": "object", "properties": {"a": {"const": 1}}, "unevaluatedProperties": False},
     {"type": "object", "properties": {"a": {"const": 1}, "b": {}},
      "unevaluatedProperties": False}),
    ({"type": "array", "contains": {"const": 1}, "minContains": 2},
     {"type": "array", "contains": {"const": 1}, "minContains": 1}),
    ({"type": "array", "prefixItems": [{"type": "string"}], "items": False},
     {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new"), SOUND)
def test_sound_verdicts_are_put_to_the_test(old: dict[str, Any], new: dict[str, Any]) -> None:
    tested = assert_sound(document("2020-12", old, True), document("2020-12", new, True), [])
    assert tested, "no sample the writer allows: the verdict went untested"
