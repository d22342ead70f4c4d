"""Which draft a JSON Schema document without `$schema` is read as: draft-07 by default (as
Confluent reads it), or the draft its subject, or the registry for new subjects, is set to."""

from __future__ import annotations

import json
from collections.abc import Awaitable

import pytest

from metaplane import layout
from metaplane.schema import (
    CompatibilityMode,
    IncompatibleSchema,
    InvalidSchema,
    Schema,
    SchemaRegistry,
    UnknownJsonSchemaDraft,
    check,
    parse_schema,
)
from metaplane.schema._jsonschema import JsonSchemaModel
from metaplane.store import MetadataStore
from tests.schema.consistency import assert_consistent

# A tuple in draft-07's spelling: valid there, refused by 2020-12's metaschema.
TUPLE = json.dumps({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]})
# 2020-12's spelling: in draft-07 `prefixItems` is no keyword, so it constrains nothing.
PREFIXED = json.dumps({"type": "array", "prefixItems": [{"type": "string"}]})
PREFIXED_OTHER = json.dumps({"type": "array", "prefixItems": [{"type": "integer"}]})


def compatible(new: str, old: str, draft: str | None = None) -> bool:
    def parsed(document: str) -> Schema:
        return parse_schema("JsonSchema", document, json_schema_draft=draft)

    return check(parsed(new), [parsed(old)], CompatibilityMode.FULL).ok


def draft_of(schema: Schema) -> str:
    """The draft a parsed JSON Schema document was read as."""
    model = schema.model
    assert isinstance(model, JsonSchemaModel)
    return model.draft.label


def test_a_document_without_schema_is_read_as_draft_07() -> None:
    parsed = parse_schema("JsonSchema", TUPLE)
    assert draft_of(parsed) == "draft-07"
    assert compatible(PREFIXED_OTHER, PREFIXED)  # prefixItems means nothing in draft-07
    assert not compatible(PREFIXED_OTHER, PREFIXED, "2020-12")


def test_the_draft_a_document_declares_wins() -> None:
    declared = json.dumps(
        {"$schema": "https://json-schema.org/draft/2020-12/schema", **json.loads(PREFIXED)}
    )
    assert draft_of(parse_schema("JsonSchema", declared, json_schema_draft="draft-04")) == "2020-12"


def test_read_as_2020_12_a_draft_07_tuple_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match="items"):
        parse_schema("JsonSchema", TUPLE, json_schema_draft="2020-12")


@pytest.mark.parametrize(
    "name", ["draft-07", "7", "draft7", "http://json-schema.org/draft-07/schema#"]
)
def test_draft_names(name: str) -> None:
    assert draft_of(parse_schema("JsonSchema", TUPLE, json_schema_draft=name)) == "draft-07"


def test_an_unknown_draft_is_refused() -> None:
    with pytest.raises(UnknownJsonSchemaDraft, match="expected one of draft-04, draft-06"):
        parse_schema("JsonSchema", TUPLE, json_schema_draft="draft-99")


@pytest.fixture
def registry(store: MetadataStore) -> SchemaRegistry:
    return SchemaRegistry(store)


async def writes_nothing(
    store: MetadataStore, call: Awaitable[object], error: type[Exception]
) -> Exception:
    before = await store.revision()
    with pytest.raises(error) as raised:
        await call
    assert await store.revision() == before
    return raised.value


async def test_the_registry_reads_undeclared_documents_as_draft_07(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    assert await registry.json_schema_draft() == "draft-07"
    await registry.register("tuples", "json", TUPLE)
    assert await registry.json_schema_draft("tuples") == "draft-07"
    await registry.register("prefixed", "json", PREFIXED)
    # In draft-07 the new prefixItems constrains nothing: compatible.
    assert (await registry.register("prefixed", "json", PREFIXED_OTHER)).version.version == 2
    keys = await assert_consistent(store)
    assert keys.configs == {}  # nothing is written for the default


async def test_a_subject_set_to_2020_12_reads_its_documents_so(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    # Set before the subject's first version: kept, and used from the first registration.
    revision = await registry.set_json_schema_draft("2020-12", subject="prefixed")
    entry = await store.get(layout.schema_config("prefixed"))
    assert entry is not None and entry.mod_revision == revision
    assert json.loads(entry.value) == {"json_schema_draft": "2020-12"}
    await registry.register("prefixed", "json", PREFIXED)
    # 2020-12 reads prefixItems: a string first item is not an integer one.
    await writes_nothing(
        store, registry.register("prefixed", "json", PREFIXED_OTHER), IncompatibleSchema
    )
    await writes_nothing(store, registry.register("prefixed", "json", TUPLE), InvalidSchema)
    assert await registry.json_schema_draft("prefixed") == "2020-12"
    assert await registry.set_json_schema_draft("2020-12", subject="prefixed") == revision


async def test_a_setting_its_versions_cannot_be_read_under_is_refused(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("tuples", "json", TUPLE)
    raised = await writes_nothing(
        store, registry.set_json_schema_draft("2020-12", subject="tuples"), InvalidSchema
    )
    assert "version 1 of 'tuples' as stored" in str(raised)
    await writes_nothing(
        store, registry.set_json_schema_draft("draft-99", subject="tuples"), UnknownJsonSchemaDraft
    )


async def test_the_global_setting_is_for_subjects_created_from_now_on(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("old", "json", TUPLE)
    await registry.set_json_schema_draft("2020-12")
    assert await registry.json_schema_draft() == "2020-12"
    assert await registry.json_schema_draft("old") == "draft-07"  # existing: unchanged
    assert await registry.json_schema_draft("not-yet") == "2020-12"
    await registry.register("new", "json", PREFIXED)
    # The new subject keeps the draft it was created under, whatever the global one becomes.
    await registry.set_json_schema_draft("draft-07")
    assert await registry.json_schema_draft("new") == "2020-12"
    keys = await assert_consistent(store)
    assert keys.configs["new"].json_schema_draft == "2020-12"
    assert "old" not in keys.configs
    assert (await registry.register("old", "json", TUPLE)).created is False
