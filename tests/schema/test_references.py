"""Schema references on every backend: Protobuf imports, JSON Schema `$ref`s to other
documents and Avro named types resolved through other subjects' versions; the keys beside
seed 001's written in the registration's one transaction; a referenced version kept from
deletion; fingerprints with references and, unchanged, without."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable
from typing import Any

import pytest

from metaplane import layout
from metaplane.resources import SchemaReferenceEntry
from metaplane.schema import (
    IncompatibleSchema,
    InvalidReference,
    InvalidSchema,
    ReferenceNotFound,
    SchemaReference,
    SchemaReferenced,
    SchemaRegistry,
    parse_reference,
    parse_schema,
)
from metaplane.store import MetadataStore
from tests.on_zookeeper import EVERY_BACKEND
from tests.schema.consistency import assert_consistent

pytestmark = EVERY_BACKEND

MONEY = (
    'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; string currency = 2; }\n'
)
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
    "message Order { string id = 1; common.Money total = 2; }\n"
)
MONEY_REF = "common/money.proto=money:1"

ADDRESS = {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}
CUSTOMER: dict[str, Any] = {
    "$id": "https://schemas.example/customer.json",
    "type": "object",
    "properties": {
        "home": {"$ref": "address.json"},
        "zip": {"$ref": "address.json#/properties/zip"},
    },
}


@pytest.fixture
def registry(store: MetadataStore) -> SchemaRegistry:
    return SchemaRegistry(store, clock=lambda: 1768728611)


async def writes_nothing(
    store: MetadataStore, call: Awaitable[object], error: type[Exception]
) -> Exception:
    before = await store.revision()
    with pytest.raises(error) as raised:
        await call
    assert await store.revision() == before
    return raised.value


async def written_at(store: MetadataStore, revision: int, *keys: str) -> None:
    """Every one of `keys` was written by the transaction at `revision`."""
    for key in keys:
        entry = await store.get(key)
        assert entry is not None and entry.mod_revision == revision, key


# Registration ------------------------------------------------------------------------------


async def test_a_protobuf_import_resolves_through_a_reference_in_one_transaction(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("money", "Protobuf", MONEY)
    done = await registry.register("orders", "Protobuf", ORDER, references=[MONEY_REF])
    assert done.references == (SchemaReference("common/money.proto", "money", 1),)
    await written_at(
        store,
        done.revision,
        layout.schema_version("orders", 1),
        layout.schema_metadata("orders"),
        layout.schema_references("orders"),
        layout.schema_referenced_by("money"),
    )
    keys = await assert_consistent(store)
    assert keys.references["orders"] == {
        "1": [SchemaReferenceEntry(name="common/money.proto", subject="money", version=1)]
    }
    assert await registry.referenced_by("money", 1) == [("orders", 1)]
    found = await registry.get("orders")
    assert found.references == done.references and found.schema.message_name == "shop.Order"
    entry = await store.get(layout.schema_references("orders"))
    assert entry is not None and json.loads(entry.value) == {
        "1": [{"name": "common/money.proto", "subject": "money", "version": 1}]
    }


async def test_without_its_reference_an_import_is_an_invalid_schema(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("money", "Protobuf", MONEY)
    raised = await writes_nothing(store, registry.register("orders", "proto", ORDER), InvalidSchema)
    assert "common/money.proto" in str(raised)


async def test_json_schema_refs_to_other_documents_resolve_by_name_and_pointer(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("address", "JsonSchema", json.dumps(ADDRESS))
    raised = await writes_nothing(
        store, registry.register("customer", "json", json.dumps(CUSTOMER)), InvalidSchema
    )
    assert "'address.json'" in str(raised) and "pass it as a reference" in str(raised)
    done = await registry.register(
        "customer", "json", json.dumps(CUSTOMER), references=["address.json=address:1"]
    )
    assert done.version.version == 1
    # The referenced document's constraints count: requiring its zip narrows nothing here,
    # and a customer whose home lacks a zip is what the referenced schema already refuses.
    narrowed = {**CUSTOMER, "properties": {**CUSTOMER["properties"], "zip": {"type": "integer"}}}
    with pytest.raises(IncompatibleSchema, match="zip"):
        await registry.register(
            "customer", "json", json.dumps(narrowed), references=["address.json=address:1"]
        )
    await assert_consistent(store)


async def test_a_changed_referenced_version_is_checked_like_the_schema_itself(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("address", "JsonSchema", json.dumps(ADDRESS))
    await registry.register(
        "customer", "json", json.dumps(CUSTOMER), references=["address.json=address:1"]
    )
    await registry.set_mode("address", "None")
    tighter = {**ADDRESS, "properties": {"zip": {"type": "string", "maxLength": 5}}}
    await registry.register("address", "JsonSchema", json.dumps(tighter))
    # The same text referencing the tighter version: another schema, refused in Backward.
    raised = await writes_nothing(
        store,
        registry.register(
            "customer", "json", json.dumps(CUSTOMER), references=["address.json=address:2"]
        ),
        IncompatibleSchema,
    )
    assert "[bound-narrowed]" in str(raised)
    verdict = await registry.check(
        "customer",
        "json",
        json.dumps(CUSTOMER),
        mode="Forward",
        references=["address.json=address:2"],
    )
    assert verdict.ok


async def test_avro_named_types_come_from_a_reference(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    money = {"type": "record", "name": "Money", "namespace": "common",
             "fields": [{"name": "units", "type": "long"}]}  # fmt: skip
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "total", "type": "common.Money"}]}  # fmt: skip
    await registry.register("money", "Avro", json.dumps(money))
    done = await registry.register(
        "orders", "Avro", json.dumps(order), references=["common.Money=money:1"]
    )
    schema = (await registry.get("orders")).schema
    # The canonical form writes the referenced type out where it is first used.
    assert b'"name":"common.Money"' in schema.canonical_form
    assert done.version.fingerprint == schema.fingerprint
    await assert_consistent(store)


async def test_references_of_references_resolve_to_any_depth(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    currency = (
        'syntax = "proto3";\npackage common;\nenum Currency { EUR = 0; USD = 1; }\n'
        "message Rate { Currency from = 1; Currency to = 2; double rate = 3; }\n"
    )
    money = (
        'syntax = "proto3";\npackage common;\nimport "common/currency.proto";\n'
        "message Money { int64 units = 1; Currency currency = 2; }\n"
    )
    await registry.register("currency", "proto", currency)
    await registry.register(
        "money", "proto", money, references=["common/currency.proto=currency:1"]
    )
    await registry.register("orders", "proto", ORDER, references=[MONEY_REF])
    added = ORDER.replace("}\n", "string note = 3; }\n")
    assert (await registry.register("orders", "proto", added, references=[MONEY_REF])).created
    with pytest.raises(SchemaReferenced, match="money version 1"):
        await registry.delete_subject("currency")
    await assert_consistent(store)


# Identity and fingerprints --------------------------------------------------------------------


async def test_the_same_document_and_references_is_the_same_version(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("money", "Protobuf", MONEY)
    await registry.register("money", "Protobuf", MONEY.replace("}\n", "string note = 3; }\n"))
    first = await registry.register("orders", "Protobuf", ORDER, references=[MONEY_REF])
    before = await store.revision()
    again = await registry.register(
        "orders", "Protobuf", "// again\n" + ORDER, references=[MONEY_REF]
    )
    assert (again.version, again.created) == (first.version, False)
    assert await store.revision() == before
    other = await registry.register(
        "orders", "Protobuf", ORDER, references=["common/money.proto=money:2"]
    )
    assert (other.version.version, other.created) == (2, True)
    assert other.version.fingerprint != first.version.fingerprint
    await assert_consistent(store)


def test_a_fingerprint_covers_the_references_of_a_schema_that_has_them() -> None:
    money = parse_schema("Protobuf", MONEY)
    money2 = parse_schema("Protobuf", MONEY.replace("}\n", "string note = 3; }\n"))
    reference = SchemaReference("common/money.proto", "money", 1)
    from metaplane.schema import Dependency

    one = parse_schema("Protobuf", ORDER, references=[Dependency(reference, money)])
    two = parse_schema(
        "Protobuf",
        ORDER,
        references=[Dependency(SchemaReference("common/money.proto", "money", 2), money2)],
    )
    assert one.fingerprint != two.fingerprint and one != two
    suffix = b'\nreferences:[["common/money.proto","money",1]]'
    assert one.canonical_form.endswith(suffix)
    assert one.fingerprint == "sha256:" + hashlib.sha256(one.canonical_form).hexdigest()


INT_A = {"name": "a", "type": "int"}


@pytest.mark.parametrize(
    ("schema_type", "document", "before"),
    [
        ("Avro", json.dumps({"type": "record", "name": "P", "fields": [INT_A]}),
         "sha256:bb7248f233f73b173b2d8260d5fa170f7bbfc26c85d90fbd3d2005b25db14e3b"),
        ("JsonSchema", json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}),
         "sha256:ad54b15d985194414a97105a9e9a864197dcdec689e6cc7f38c5bd682f4c2e60"),
        ("Protobuf", MONEY,
         "sha256:ffbddb89be948c76a2d4c1f01332540ce61a6e7c4785e0fbcbada5e86bae8df9"),
    ],
)  # fmt: skip
async def test_the_fingerprint_of_a_schema_without_references_does_not_change(
    registry: SchemaRegistry, schema_type: str, document: str, before: str
) -> None:
    """What it was before references existed (the literals: as the registry computed them
    then): sha256 over the format's own canonical form alone."""
    schema = parse_schema(schema_type, document)
    assert schema.fingerprint == before
    assert b"references:" not in schema.canonical_form
    if schema_type == "JsonSchema":
        canonical = json.dumps(json.loads(document), sort_keys=True, separators=(",", ":"))
        assert schema.canonical_form == canonical.encode()
    done = await registry.register("s", schema_type, document)
    assert done.version.fingerprint == schema.fingerprint


# Deletion ---------------------------------------------------------------------------------------


async def test_a_referenced_version_cannot_be_deleted_until_its_referrers_are(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("money", "Protobuf", MONEY)
    await registry.register("money", "Protobuf", MONEY.replace("}\n", "string note = 3; }\n"))
    await registry.register("orders", "Protobuf", ORDER, references=[MONEY_REF])
    for call in (registry.delete_version("money", 1), registry.delete_subject("money")):
        raised = await writes_nothing(store, call, SchemaReferenced)
        assert "orders version 1" in str(raised) and "delete those versions first" in str(raised)
    await registry.delete_version("money", 2)  # nothing references it
    await registry.delete_subject("orders")
    keys = await assert_consistent(store)
    assert keys.referenced_by == {} and keys.references == {}
    await registry.delete_version("money", 1)
    assert (await assert_consistent(store)).metadata == {}


async def test_deleting_a_referrer_version_releases_only_its_own_references(
    registry: SchemaRegistry, store: MetadataStore
) -> None:
    await registry.register("money", "Protobuf", MONEY)
    await registry.register("orders", "Protobuf", ORDER, references=[MONEY_REF])
    added = ORDER.replace("}\n", "string note = 3; }\n")
    await registry.register("orders", "Protobuf", added, references=[MONEY_REF])
    revision = await registry.delete_version("orders", 1)
    await written_at(
        store, revision, layout.schema_references("orders"), layout.schema_referenced_by("money")
    )
    assert await registry.referenced_by("money", 1) == [("orders", 2)]
    keys = await assert_consistent(store)
    assert set(keys.references["orders"]) == {"2"}


# Bad references ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("references", "error", "message"),
    [
        (["common/money.proto=money:7"], ReferenceNotFound, "no such schema version"),
        (["common/money.proto=nobody:1"], ReferenceNotFound, "no such schema version"),
        (["common/money.proto=orders:1"], InvalidReference, "its own subject"),
        (["a=money:1", "a=money:1"], InvalidReference, "share this name"),
        (["money:1"], InvalidReference, "NAME=SUBJECT:VERSION"),
        (["../money.proto=money:1"], InvalidSchema, "not an import path"),
        (["common/money.proto=json-thing:1"], InvalidSchema, "only Protobuf schemas"),
        ([("x", "money", "1")], InvalidReference, "a version is a number"),
    ],
)
async def test_bad_references_are_refused_and_nothing_is_written(
    registry: SchemaRegistry, store: MetadataStore, references: list[Any], error: type[Exception],
    message: str,
) -> None:  # fmt: skip
    await registry.register("money", "Protobuf", MONEY)
    await registry.register("json-thing", "JsonSchema", json.dumps(ADDRESS))
    raised = await writes_nothing(
        store, registry.register("orders", "Protobuf", ORDER, references=references), error
    )
    assert message in str(raised)


def test_the_command_line_spelling_of_a_reference() -> None:
    assert parse_reference(" common/money.proto=money:12 ") == SchemaReference(
        "common/money.proto", "money", 12
    )
    assert str(SchemaReference("a.json", "address", 1)) == "a.json=address:1"
    for text in ("a=b", "a=b:c", "=b:1", "a=b:1:2"):
        with pytest.raises(InvalidReference):
            parse_reference(text)
