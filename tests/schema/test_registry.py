"""The registry on every backend: registration in one transaction, identical documents, typed
errors that write nothing, modes, deprecation and deletion that keep the metadata equal to the
version keys, and topic bindings written together with `topics_using`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest

from metaplane import layout
from metaplane.layout import InvalidName, TopicName
from metaplane.resources import (
    Avro,
    CompatibilityMode,
    PrimitiveSchema,
    Protobuf,
    SchemaIdIndex,
)
from metaplane.schema import (
    IncompatibleSchema,
    InvalidSchema,
    SchemaIdNotFound,
    SchemaRegistry,
    SchemaVersionNotFound,
    SubjectInUse,
    SubjectNotFound,
    TopicAlreadyBound,
    TopicNotBound,
    TopicNotFound,
    UnknownCompatibilityMode,
    UnknownSchemaType,
    parse_schema,
)
from metaplane.store import AlreadyExists, BadVersion, MetadataError, MetadataStore, NotFound
from tests.on_zookeeper import EVERY_BACKEND, READS_THE_PAST, WITHOUT_ZK
from tests.schema.consistency import assert_consistent

pytestmark = EVERY_BACKEND

NOW = 1768728611
ORDERS = TopicName("default", "orders")
RETURNS = TopicName("default", "returns")


def avro(*fields: dict[str, Any], indent: int | None = None) -> str:
    document = {"type": "record", "name": "Product", "fields": list(fields)}
    return json.dumps(document, indent=indent)


ID = {"name": "id", "type": "string"}
PRICE = {"name": "price", "type": "double"}
TAGS = {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}
RATING = {"name": "rating", "type": "int"}  # no default: new readers cannot read old data
V1 = avro(ID, PRICE)
V2 = avro(ID, PRICE, TAGS)

JSON_V1 = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
PROTO_V1 = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  int64 id = 1;\n}\n'


@pytest.fixture
def registry(store: MetadataStore) -> SchemaRegistry:
    return SchemaRegistry(store, clock=lambda: NOW)


async def writes_nothing(
    store: MetadataStore, call: Awaitable[object], error: type[Exception]
) -> Exception:
    """Await `call`, which must raise `error` and leave the store's revision unchanged."""
    before = await store.revision()
    with pytest.raises(error) as raised:
        await call
    assert await store.revision() == before
    return raised.value


async def bound_topic(store: MetadataStore, topic: TopicName) -> None:
    await store.put(layout.topic_root(topic), b"0")


# Registration -------------------------------------------------------------------------------


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_first_registration_writes_the_four_keys_of_seed_001(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    done = await registry.register("product-catalog", "Avro", V1, description="first")
    assert (done.subject, done.schema_id, done.version.version, done.created) == (
        "product-catalog", 1, 1, True,
    )  # fmt: skip
    assert done.revision == await store.revision()
    await _written_at(  # one transaction: the four keys share its revision
        store,
        done.revision,
        layout.schema_version("product-catalog", 1),
        layout.schema_metadata("product-catalog"),
        layout.schema_by_id(1),
        layout.next_schema_id(),
    )
    keys = await assert_consistent(store)
    assert keys.counter == 2
    assert keys.index == {1: SchemaIdIndex(schema_id=1, subject="product-catalog")}
    metadata = keys.metadata["product-catalog"]
    assert metadata.compatibility_mode is CompatibilityMode.BACKWARD
    assert (metadata.created_at, metadata.updated_at, metadata.created_by) == (
        NOW,
        NOW,
        "metaplane",
    )
    assert (metadata.latest_version, metadata.topics_using) == (1, [])
    version = keys.versions["product-catalog"][1]
    assert version.fingerprint == parse_schema("Avro", V1).fingerprint
    assert isinstance(version.schema_def, Avro) and version.schema_def.schema.raw_schema == V1
    # What Danube's reader requires besides the seed's fields.
    assert (version.description, version.deprecation_message) == ("first", None)


async def test_every_subject_takes_the_next_global_id(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    ids = [(await registry.register(s, "Avro", V1)).schema_id for s in ("a", "b", "c")]
    assert ids == [1, 2, 3]
    assert (await registry.register("a", "Avro", V2)).schema_id == 1  # a version keeps its id
    assert (await assert_consistent(store)).counter == 4


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_a_compatible_schema_is_the_next_version(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    done = await registry.register("p", "Avro", V2, tags=["catalog"], created_by="ci")
    assert (done.version.version, done.created) == (2, True)
    assert (done.version.tags, done.version.created_by) == (["catalog"], "ci")
    await _written_at(
        store, done.revision, layout.schema_version("p", 2), layout.schema_metadata("p")
    )
    keys = await assert_consistent(store)
    assert keys.metadata["p"].latest_version == 2


async def test_an_identical_document_returns_the_existing_version_and_writes_nothing(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    first = await registry.register("p", "Avro", V1)
    await registry.register("p", "Avro", V2)
    before = await store.revision()
    # Another layout, another key order: the same document.
    again = await registry.register("p", "avro", json.dumps(json.loads(V1), indent=4))
    fields = [{"type": "string", "name": "id"}, {"type": "double", "name": "price"}]
    reordered = {"fields": fields, "name": "Product", "type": "record"}
    also = await registry.register("p", "Avro", json.dumps(reordered))
    assert (again.version, again.created, again.schema_id) == (first.version, False, 1)
    assert also.version == first.version
    assert again.revision <= before
    assert await store.revision() == before


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({**TAGS, "default": ["new"]}, id="another-default"),
        pytest.param({**TAGS, "doc": "labels"}, id="a-doc"),
        pytest.param({**TAGS, "aliases": ["labels"]}, id="an-alias"),
    ],
)
async def test_what_the_canonical_form_drops_still_makes_a_new_version(
    registry: SchemaRegistry, store: MetadataStore, changed: dict[str, Any]
) -> None:
    await registry.register("p", "Avro", V2)
    done = await registry.register("p", "Avro", avro(ID, PRICE, changed))
    assert (done.version.version, done.created) == (2, True)
    assert done.version.fingerprint == parse_schema("Avro", V2).fingerprint
    await assert_consistent(store)


@pytest.mark.parametrize(
    ("schema_type", "document", "same"),
    [
        ("JsonSchema", JSON_V1, json.dumps(json.loads(JSON_V1), indent=2)),
        ("Protobuf", PROTO_V1, "// orders\n" + PROTO_V1.replace("  ", "\t")),
        ("String", "", "ignored"),
    ],
)
async def test_identical_documents_of_every_format(
    registry: SchemaRegistry, store: MetadataStore, schema_type: str, document: str, same: str
) -> None:
    first = await registry.register("s", schema_type, document)
    before = await store.revision()
    again = await registry.register("s", schema_type, same)
    assert (again.version, again.created) == (first.version, False)
    assert await store.revision() == before


async def test_protobuf_and_scalar_definitions_are_stored_as_danube_writes_them(
    registry: SchemaRegistry,
) -> None:
    proto = await registry.register("orders", "proto", PROTO_V1)
    assert isinstance(proto.version.schema_def, Protobuf)
    assert proto.version.schema_def.schema.message_name == "shop.Order"
    assert proto.version.schema_def.schema.raw_proto == PROTO_V1
    number = await registry.register("count", "int64", "")
    assert number.version.schema_def is PrimitiveSchema.NUMBER
    found = await registry.get("orders")
    assert found.schema == parse_schema("Protobuf", PROTO_V1)


async def test_an_incompatible_schema_is_refused_with_its_reasons_and_nothing_written(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    error = await writes_nothing(
        store, registry.register("p", "Avro", avro(ID, PRICE, RATING)), IncompatibleSchema
    )
    assert isinstance(error, IncompatibleSchema) and error.subject == "p"
    assert error.mode == "Backward"
    assert len(error.reasons) == 1 and "[missing-field-without-default]" in error.reasons[0]
    assert "rating" in str(error)
    assert [v.version for v in await registry.versions("p")] == [1]


async def test_another_type_is_refused_unless_the_mode_is_none(registry: SchemaRegistry) -> None:
    await registry.register("s", "String", "")
    with pytest.raises(IncompatibleSchema, match="schema-type-changed"):
        await registry.register("s", "Number", "")
    await registry.set_mode("s", "None")
    assert (await registry.register("s", "Number", "")).version.version == 2


@pytest.mark.backends("sqlite", "etcd", reason="their calls suspend, so that tasks interleave")
async def test_writers_sharing_a_registry_queue_instead_of_racing(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    created = await asyncio.gather(*(registry.register(f"s{i}", "Avro", V1) for i in range(16)))
    assert sorted(done.schema_id for done in created) == list(range(1, 17))
    documents = [avro(ID, PRICE, {**TAGS, "name": f"tags_{i}"}) for i in range(16)]
    added = await asyncio.gather(*(registry.register("s1", "Avro", d) for d in documents))
    assert sorted(done.version.version for done in added) == list(range(2, 18))
    assert registry.conflicts == 0
    await assert_consistent(store)


# Bad input: clear errors, nothing written ---------------------------------------------------


@pytest.mark.parametrize(
    ("schema_type", "document", "error", "message"),
    [
        ("Avro", "{not json", InvalidSchema, "invalid Avro schema: not JSON"),
        (
            "Avro",
            '{"type": "record", "name": "P", "fields": [{"name": "x"}]}',
            InvalidSchema,
            "Record field 'x' is missing 'type'",
        ),
        ("Avro", '"no-such-type"', InvalidSchema, "no-such-type"),
        ("JsonSchema", '{"type": 5}', InvalidSchema, "invalid JsonSchema schema"),
        ("Protobuf", "message {", InvalidSchema, "invalid Protobuf schema: line 1"),
        ("yaml", "a: b", UnknownSchemaType, "unknown schema type 'yaml'"),
        ("Avro", b"\xff\xfe", InvalidSchema, "not UTF-8"),
    ],
)
async def test_bad_documents_and_types_are_refused_before_any_write(
    registry: SchemaRegistry,
    store: MetadataStore,
    schema_type: str,
    document: str | bytes,
    error: type[Exception],
    message: str,
) -> None:
    await registry.register("p", "Avro", V1)
    for subject in ("p", "new-subject"):
        raised = await writes_nothing(
            store, registry.register(subject, schema_type, document), error
        )
        assert message in str(raised)
        assert isinstance(raised, MetadataError) and isinstance(raised, ValueError)


async def test_unknown_modes_are_refused_before_any_write(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    for call in (
        registry.set_mode("p", "Sideways"),
        registry.set_default_mode("Sideways"),
        registry.check("p", "Avro", V2, mode="Sideways"),
    ):
        raised = await writes_nothing(store, call, UnknownCompatibilityMode)
        assert "unknown compatibility mode 'Sideways'" in str(raised)


@pytest.mark.parametrize("subject", ["a/b", "_global", "_index", "", "é"])
async def test_subject_names_outside_the_layout_are_refused(
    registry: SchemaRegistry, store: MetadataStore, subject: str
) -> None:
    await writes_nothing(store, registry.register(subject, "Avro", V1), InvalidName)


# Not found, in Hedwig's manner -----------------------------------------------------------------


async def test_every_missing_thing_has_its_own_not_found_and_writes_nothing(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    await bound_topic(store, ORDERS)
    cases: list[tuple[Awaitable[object], type[NotFound], str]] = [
        (registry.get("nope"), SubjectNotFound, "schema subject 'nope' not found"),
        (registry.get("p", 7), SchemaVersionNotFound, "schema subject 'p' has no version 7"),
        (registry.get_by_id(9), SchemaIdNotFound, "schema id 9 not found"),
        (registry.get_by_id(1, 7), SchemaVersionNotFound, "no version 7"),
        (registry.describe("nope"), SubjectNotFound, "'nope'"),
        (registry.versions("nope"), SubjectNotFound, "'nope'"),
        (registry.mode("nope"), SubjectNotFound, "'nope'"),
        (registry.check("nope", "Avro", V1), SubjectNotFound, "'nope'"),
        (registry.set_mode("nope", "Full"), SubjectNotFound, "'nope'"),
        (registry.deprecate("p", 7), SchemaVersionNotFound, "no version 7"),
        (registry.deprecate("nope", 1), SubjectNotFound, "'nope'"),
        (registry.delete_version("p", 7), SchemaVersionNotFound, "no version 7"),
        (registry.delete_version("nope", 1), SubjectNotFound, "'nope'"),
        (registry.delete_subject("nope"), SubjectNotFound, "'nope'"),
        (registry.bind_topic(RETURNS, "p"), TopicNotFound, "topic /default/returns not found"),
        (registry.bind_topic(ORDERS, "nope"), SubjectNotFound, "'nope'"),
        (registry.unbind_topic(ORDERS), TopicNotBound, "/default/orders is bound to no"),
    ]
    for call, error, message in cases:
        raised = await writes_nothing(store, call, error)
        assert message in str(raised)
        assert isinstance(raised, NotFound) and raised.key.startswith("/")


# Modes ----------------------------------------------------------------------------------------


async def test_a_subject_s_mode_governs_its_registrations(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    revision = await registry.set_mode("p", "forward")
    assert revision == await store.revision()
    assert await registry.mode("p") is CompatibilityMode.FORWARD
    assert (await registry.describe("p")).updated_at == NOW
    # Forward: old readers must read the new data; a new field without a default is fine.
    assert (await registry.register("p", "Avro", avro(ID, PRICE, RATING))).version.version == 2
    after = await store.revision()
    assert await registry.set_mode("p", CompatibilityMode.FORWARD) == after  # nothing to do
    assert await store.revision() == after


async def test_a_mode_set_over_a_version_is_one_guarded_transaction(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    """`expect` is the metadata's version (the API's ETag): compared by the transaction that
    writes the mode; another version is BadVersion, even when the mode is already that."""
    await registry.register("p", "Avro", V1)
    key = layout.schema_metadata("p")
    for mode in ("Full", "Backward"):
        raised = await writes_nothing(store, registry.set_mode("p", mode, expect=2), BadVersion)
        assert "expected version 2, found 1" in str(raised)
    revision = await registry.set_mode("p", "Full", expect=1)
    entry = await store.get(key)
    assert entry is not None and (entry.version, entry.mod_revision) == (2, revision)
    assert await registry.mode("p") is CompatibilityMode.FULL
    assert await registry.set_mode("p", "Full", expect=2) == revision  # nothing to do
    await writes_nothing(store, registry.set_mode("nope", "Full", expect=1), SubjectNotFound)


async def test_transitive_modes_check_every_version(registry: SchemaRegistry) -> None:
    await registry.register("p", "Avro", avro({"name": "id", "type": "string"}), created_by="a")
    await registry.set_mode("p", "None")
    await registry.register("p", "Avro", avro({"name": "id", "type": "int"}))
    new = avro({"name": "id", "type": "int"}, TAGS)
    plain = await registry.check("p", "Avro", new, mode="Backward")
    assert plain.ok and plain.checked_versions == (2,)
    transitive = await registry.check("p", "Avro", new, mode="BackwardTransitive")
    assert not transitive.ok and transitive.checked_versions == (1, 2)
    assert "version 1" in transitive.reasons[0]
    assert (await registry.check("p", "Avro", new)).checked_versions == ()  # the subject's: None


async def test_the_global_default_is_the_mode_of_new_subjects(
    store: MetadataStore, registry: SchemaRegistry
) -> None:
    assert await registry.default_mode() is CompatibilityMode.BACKWARD
    assert await SchemaRegistry(store, default_mode=CompatibilityMode.FULL).default_mode() is (
        CompatibilityMode.FULL
    )
    await registry.register("old", "Avro", V1)
    revision = await registry.set_default_mode("FullTransitive")
    assert revision == await store.revision()
    entry = await store.get(layout.default_compatibility_mode())
    assert entry is not None and entry.value == b'"FullTransitive"'
    await registry.register("new", "Avro", V1)
    assert await registry.mode("new") is CompatibilityMode.FULL_TRANSITIVE
    assert await registry.mode("old") is CompatibilityMode.BACKWARD
    assert await registry.default_mode() is CompatibilityMode.FULL_TRANSITIVE


# Reads ---------------------------------------------------------------------------------------


async def test_reads_by_subject_version_latest_and_id(registry: SchemaRegistry) -> None:
    await registry.register("a", "Avro", V1)
    await registry.register("b", "JsonSchema", JSON_V1)
    second = await registry.register("a", "Avro", V2)
    latest = await registry.get("a")
    assert (latest.subject, latest.schema_id, latest.version) == ("a", 1, second.version)
    assert (await registry.get("a", 1)).version.version == 1
    assert (await registry.get_by_id(2)).subject == "b"
    assert (await registry.get_by_id(1, 1)).schema == parse_schema("Avro", V1)
    assert await registry.subjects() == ["a", "b"]
    assert [v.version for v in await registry.versions("a")] == [1, 2]
    assert (await registry.describe("b")).id == 2


# Deprecation and deletion ----------------------------------------------------------------------


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_deprecation_changes_the_version_key_and_the_metadata_together(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    await registry.register("p", "Avro", V2)
    revision = await registry.deprecate("p", 1, "use version 2")
    keys = await assert_consistent(store)
    version = keys.versions["p"][1]
    assert (version.is_deprecated, version.deprecation_message) == (True, "use version 2")
    await _written_at(store, revision, layout.schema_version("p", 1), layout.schema_metadata("p"))
    assert await registry.deprecate("p", 1, "use version 2") == revision  # nothing to do
    # A deprecated version is still the one an identical document finds.
    again = await registry.register("p", "Avro", V1)
    assert (again.version.version, again.created) == (1, False)
    await registry.deprecate("p", 1, deprecated=False)
    restored = (await assert_consistent(store)).versions["p"][1]
    assert (restored.is_deprecated, restored.deprecation_message) == (False, None)


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_deleting_a_version_drops_it_from_the_metadata_and_never_reuses_its_number(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    for document in (V1, V2, avro(ID, PRICE, TAGS, {**RATING, "default": 0})):
        await registry.register("p", "Avro", document)
    revision = await registry.delete_version("p", 3)
    await _written_at(store, revision, layout.schema_version("p", 3), layout.schema_metadata("p"))
    keys = await assert_consistent(store)
    assert sorted(keys.versions["p"]) == [1, 2]
    assert keys.metadata["p"].latest_version == 3
    assert (await registry.get("p")).version.version == 2
    await registry.delete_version("p", 1)
    done = await registry.register("p", "Avro", avro(ID, PRICE, TAGS, {**RATING, "default": 1}))
    assert done.version.version == 4
    assert sorted((await assert_consistent(store)).versions["p"]) == [2, 4]


async def test_deleting_the_last_version_deletes_the_subject_and_its_id(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    await registry.register("q", "Avro", V1)
    await registry.delete_version("p", 1)
    keys = await assert_consistent(store)
    assert set(keys.metadata) == {"q"} and set(keys.index) == {2}
    again = await registry.register("p", "Avro", V1)
    assert (again.schema_id, again.version.version) == (3, 1)


async def test_deleting_a_subject_deletes_its_keys_in_one_transaction(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    await registry.register("p", "Avro", V2)
    await registry.register("p.keep", "Avro", V1)
    revision = await registry.delete_subject("p")
    assert revision == await store.revision()
    keys = await assert_consistent(store)
    assert set(keys.metadata) == {"p.keep"} and set(keys.index) == {2}
    assert await registry.subjects() == ["p.keep"]
    with pytest.raises(SubjectNotFound):
        await registry.get("p")


# Topics ---------------------------------------------------------------------------------------


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_binding_writes_the_topic_key_and_topics_using_in_one_transaction(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("orders-value", "Avro", V1)
    await bound_topic(store, ORDERS)
    await bound_topic(store, RETURNS)
    revision = await registry.bind_topic(ORDERS, "orders-value")
    await _written_at(
        store, revision, layout.topic_schema_subject(ORDERS), layout.schema_metadata("orders-value")
    )
    await registry.bind_topic(RETURNS, "orders-value")
    assert (await registry.describe("orders-value")).topics_using == [
        "/default/orders", "/default/returns",
    ]  # fmt: skip
    assert await registry.topic_subject(ORDERS) == "orders-value"
    assert await registry.bind_topic(RETURNS, "orders-value") == await store.revision()
    entry = await store.get(layout.topic_schema_subject(ORDERS))
    assert entry is not None and entry.value == b'"orders-value"'  # Danube's bare JSON string
    await assert_consistent(store)


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_rebinding_moves_the_topic_between_subjects_at_once(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("old", "Avro", V1)
    await registry.register("new", "Avro", V1)
    await bound_topic(store, ORDERS)
    await registry.bind_topic(ORDERS, "old")
    revision = await registry.bind_topic(ORDERS, "new", replace=True)
    await _written_at(
        store,
        revision,
        layout.topic_schema_subject(ORDERS),
        layout.schema_metadata("old"),
        layout.schema_metadata("new"),
    )
    keys = await assert_consistent(store)
    assert (keys.metadata["old"].topics_using, keys.metadata["new"].topics_using) == (
        [], ["/default/orders"],
    )  # fmt: skip


async def test_a_topic_bound_elsewhere_moves_only_when_the_binding_is_replaced(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("old", "Avro", V1)
    await registry.register("new", "Avro", V1)
    await bound_topic(store, ORDERS)
    await registry.bind_topic(ORDERS, "old")
    raised = await writes_nothing(store, registry.bind_topic(ORDERS, "new"), TopicAlreadyBound)
    assert isinstance(raised, TopicAlreadyBound) and isinstance(raised, AlreadyExists)
    assert (raised.key, raised.topic, raised.subject, raised.wanted) == (
        layout.topic_schema_subject(ORDERS), "/default/orders", "old", "new",
    )  # fmt: skip
    assert "bound to schema subject 'old'" in str(raised)
    assert await registry.bind_topic(ORDERS, "old") == await store.revision()  # already there
    await registry.bind_topic(ORDERS, "new", replace=True)
    assert await registry.topic_subject(ORDERS) == "new"
    await assert_consistent(store)


@pytest.mark.backends(*WITHOUT_ZK, reason=READS_THE_PAST)
async def test_a_bound_subject_cannot_be_deleted_until_its_topics_are_unbound(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("p", "Avro", V1)
    await bound_topic(store, ORDERS)
    await registry.bind_topic(ORDERS, "p")
    raised = await writes_nothing(store, registry.delete_subject("p"), SubjectInUse)
    assert "/default/orders" in str(raised)
    await writes_nothing(store, registry.delete_version("p", 1), SubjectInUse)
    revision = await registry.unbind_topic(ORDERS)
    await _written_at(
        store, revision, layout.topic_schema_subject(ORDERS), layout.schema_metadata("p")
    )
    assert await registry.topic_subject(ORDERS) is None
    assert (await registry.describe("p")).topics_using == []
    await assert_consistent(store)
    await registry.delete_subject("p")


async def _written_at(store: MetadataStore, revision: int, *keys: str) -> None:
    """Assert that the transaction at `revision` wrote (or deleted) every one of `keys`, and
    that the revision before it showed none of that write."""
    assert revision == await store.revision()
    after = {entry.key: entry for entry in await store.list("/")}
    before = {entry.key: entry for entry in await store.list("/", revision=revision - 1)}
    for key in keys:
        if key in after:
            assert after[key].mod_revision == revision, key
        else:
            assert key in before, f"{key} was neither written nor deleted"
