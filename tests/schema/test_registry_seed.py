"""Seed 001's schema registry (section 4), through the registry: the seed's own JSON read back
byte for byte, and its product-catalog subject (complete, as the tour writes it) extended by
registrations that keep its ids and versions."""

from __future__ import annotations

import json

from metaplane import layout
from metaplane.admin._tour import PRODUCT_V1, PRODUCT_V2, schema_examples
from metaplane.layout import KeyKind
from metaplane.resources import CompatibilityMode, encode
from metaplane.schema import SchemaRegistry
from metaplane.store import MetadataStore, Put
from tests.resources.test_values import SEED_VALUES, compact
from tests.schema.consistency import assert_consistent

SUBJECT = "product-catalog"


def seed_section(section: str) -> bytes:
    return next(compact(text) for name, _, text in SEED_VALUES if name == section)


async def test_the_seed_s_documents_read_back_byte_for_byte(store: MetadataStore) -> None:
    await store.txn(
        [],
        [
            Put(layout.next_schema_id(), seed_section("4.1 next schema id")),
            Put(layout.schema_metadata(SUBJECT), seed_section("4.2 schema metadata")),
            Put(layout.schema_version(SUBJECT, 1), seed_section("4.3 schema version")),
            Put(layout.schema_by_id(1), seed_section("4.4 schema id index")),
        ],
    )
    registry = SchemaRegistry(store)
    assert encode(await registry.describe(SUBJECT)) == seed_section("4.2 schema metadata")
    version = await registry.get(SUBJECT, 1)
    assert encode(version.version) == seed_section("4.3 schema version")
    assert (version.subject, version.schema_id) == (SUBJECT, 1)
    latest = await registry.get_by_id(1)
    assert (latest.subject, latest.version.version) == (SUBJECT, 2)
    assert latest.version.fingerprint == "sha256:d6c3da89..."
    assert await registry.subjects() == [SUBJECT]
    assert [v.version for v in await registry.versions(SUBJECT)] == [1, 2]
    assert await registry.mode(SUBJECT) is CompatibilityMode.BACKWARD


async def test_the_seed_s_subject_grows_as_danube_s_would(store: MetadataStore) -> None:
    examples = schema_examples()
    assert {layout.parse(key).kind for key, _ in examples} == {
        KeyKind.NEXT_SCHEMA_ID, KeyKind.SCHEMA_METADATA, KeyKind.SCHEMA_VERSION,
        KeyKind.SCHEMA_BY_ID,
    }  # fmt: skip
    await store.txn([], [Put(key, value) for key, value in examples])
    await assert_consistent(store)
    registry = SchemaRegistry(store)
    before = await store.revision()
    for number, document in ((1, PRODUCT_V1), (2, PRODUCT_V2)):
        again = await registry.register(SUBJECT, "Avro", json.dumps(document, indent=4))
        assert (again.version.version, again.created, again.schema_id) == (number, False, 1)
    assert await store.revision() == before
    rating = {"name": "rating", "type": ["null", "int"], "default": None}
    v3 = {**PRODUCT_V2, "fields": [*PRODUCT_V2["fields"], rating]}
    grown = await registry.register(SUBJECT, "Avro", json.dumps(v3))
    assert (grown.version.version, grown.schema_id) == (3, 1)
    other = await registry.register("orders", "Avro", json.dumps(PRODUCT_V1))
    assert other.schema_id == 2  # the seed's counter said 2
    keys = await assert_consistent(store)
    assert keys.counter == 3
    assert [v.version for v in keys.metadata[SUBJECT].versions] == [1, 2, 3]
