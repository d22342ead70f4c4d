"""Big subjects: seed 001 keeps every version inside `/schemas/{subject}/metadata`, one value
of at most 1 MiB. A write that would push it past the limit is refused with an error that
names the subject, the limit and what to do, and writes nothing."""

from __future__ import annotations

import json

import pytest

from metaplane import layout
from metaplane.resources import encode
from metaplane.schema import SchemaRegistry, SubjectTooLarge
from metaplane.store import MAX_VALUE_BYTES, InvalidRequest, MetadataStore, ValueTooLarge
from tests.schema.consistency import assert_consistent


def big_avro(fields: int, version: int) -> str:
    """A record of about 145 KiB for 2,500 fields (the issue's case), one more each version."""
    names = [{"name": f"field_{i:05d}", "type": "string", "default": ""} for i in range(fields)]
    names += [{"name": f"added_{v}", "type": "string", "default": ""} for v in range(version)]
    return json.dumps({"type": "record", "name": "Wide", "namespace": "big", "fields": names})


async def test_a_subject_that_outgrows_one_value_is_refused_by_name(store: MetadataStore) -> None:
    registry = SchemaRegistry(store)
    assert 140 * 1024 < len(big_avro(2500, 0)) < 150 * 1024
    registered = 0

    async def fill() -> None:
        nonlocal registered
        for version in range(20):
            await registry.register("wide", "Avro", big_avro(2500, version))
            registered += 1

    with pytest.raises(SubjectTooLarge) as raised:
        await fill()
    error = raised.value
    message = str(error)
    assert "schema subject 'wide' is full" in message
    assert "1,048,576 bytes" in message and f"{registered + 1} version(s)" in message
    assert "metaplane schemas delete wide -v N" in message and "new subject" in message
    assert isinstance(error, ValueTooLarge) and isinstance(error, InvalidRequest)
    assert (error.subject, error.key, error.limit) == (
        "wide", layout.schema_metadata("wide"), MAX_VALUE_BYTES,
    )  # fmt: skip
    assert error.size > MAX_VALUE_BYTES
    # The ceiling docs/schemas.md gives: what the versions' own encodings add up to.
    metadata = await registry.describe("wide")
    assert len(encode(metadata)) <= MAX_VALUE_BYTES < error.size
    # What fits: each version's encoding (its document escaped as a JSON string, 21 % more
    # for this one) and ~300 bytes; five of these, not six.
    assert registered == 5
    keys = await assert_consistent(store)
    assert sorted(keys.versions["wide"]) == list(range(1, registered + 1))
    # Deleting an old version makes room, as the message says.
    await registry.delete_version("wide", 1)
    assert (await registry.register("wide", "Avro", big_avro(2500, registered))).created


async def test_other_writes_that_would_outgrow_it_are_refused_too(store: MetadataStore) -> None:
    registry = SchemaRegistry(store)
    for version in range(4):
        await registry.register("wide", "Avro", big_avro(2500, version))
    before = await store.revision()
    with pytest.raises(SubjectTooLarge, match="'wide' is full"):
        await registry.deprecate("wide", 1, "x" * 400_000)
    assert await store.revision() == before


async def test_a_version_too_large_to_write_twice_is_refused_by_name(
    store: MetadataStore,
) -> None:
    """A version is written in its key and in the metadata: 770 KB each fit in a value, not
    in one request of etcd's (1.5 MiB by default)."""
    registry = SchemaRegistry(store)
    before = await store.revision()
    with pytest.raises(SubjectTooLarge, match="'huge' is full: with this write its new version"):
        await registry.register("huge", "Avro", big_avro(11_000, 0))
    with pytest.raises(SubjectTooLarge, match="'huge' is full: with this write its metadata"):
        await registry.register("huge", "Avro", big_avro(15_000, 0))
    assert await store.revision() == before
