"""StorageManager on every backend: descriptors and the `cur` pointer moved in one transaction,
`find_object` at and around object boundaries, the sealed state with its typed errors."""

from __future__ import annotations

import msgspec
import pytest

from metaplane import layout
from metaplane.layout import U64_MAX, InvalidNumber
from metaplane.resources import (
    CurrentObject,
    NoObject,
    NoSealedState,
    ObjectExists,
    SealedStateExists,
    StorageManager,
    decode,
)
from metaplane.store import BadVersion, InvalidValue, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import FIND_CASES, SEALED, TOPIC, descriptor, snapshot

pytestmark = EVERY_BACKEND


async def cur_of(store: MetadataStore) -> int | None:
    entry = await store.get(layout.storage_cur(TOPIC))
    return None if entry is None else decode(CurrentObject, entry.value).offset


async def test_add_moves_cur_to_the_newest(store: MetadataStore) -> None:
    storage = StorageManager(store)
    revision = await storage.add_object(TOPIC, descriptor(0, 29))
    cur = await store.get(layout.storage_cur(TOPIC))
    assert cur is not None and cur.value == b'{"start":"00000000000000000000"}'
    assert cur.mod_revision == revision
    await storage.add_object(TOPIC, descriptor(30, 59))
    assert await cur_of(store) == 30
    # an older object (a late upload) is added without moving `cur` back
    await storage.add_object(TOPIC, descriptor(10, 19))
    assert await cur_of(store) == 30
    assert (await storage.current(TOPIC)).value == descriptor(30, 59)


async def test_add_refusals(store: MetadataStore) -> None:
    storage = StorageManager(store)
    await storage.add_object(TOPIC, descriptor(0, 29))
    before = await snapshot(store)
    with pytest.raises(ObjectExists) as exists:
        await storage.add_object(TOPIC, descriptor(0, 40))
    assert (exists.value.topic, exists.value.offset) == (TOPIC, 0)
    with pytest.raises(InvalidValue):
        await storage.add_object(TOPIC, descriptor(50, 49))
    assert await snapshot(store) == before


async def test_add_change_is_refused_when_cur_moved_since_it_was_read(
    store: MetadataStore,
) -> None:
    storage = StorageManager(store)
    change = storage.add_object_change(TOPIC, descriptor(30, 59), current=None)
    await storage.add_object(TOPIC, descriptor(0, 29))
    with pytest.raises(BadVersion):  # ChangedSinceRead is a BadVersion
        await change.apply(store)
    await storage.add_object(TOPIC, descriptor(30, 59))
    assert await cur_of(store) == 30


async def test_complete_an_upload_with_a_version(store: MetadataStore) -> None:
    storage = StorageManager(store)
    await storage.add_object(TOPIC, descriptor(0, 29, completed=False))
    read = await storage.object(TOPIC, 0)
    assert not read.value.completed
    done = msgspec.structs.replace(read.value, completed=True, etag="abc")
    await storage.replace_object(TOPIC, done, read.version)
    assert (await storage.object(TOPIC, 0)).value == done
    with pytest.raises(BadVersion):
        await storage.replace_object(TOPIC, done, read.version)
    with pytest.raises(NoObject) as missing:
        await storage.replace_object(TOPIC, descriptor(100, 120), 1)
    assert missing.value.offset == 100
    with pytest.raises(NoObject):
        await storage.object(TOPIC, 100)


async def test_objects_and_current(store: MetadataStore) -> None:
    storage = StorageManager(store)
    assert await storage.objects(TOPIC) == []
    with pytest.raises(NoObject) as none:
        await storage.current(TOPIC)
    assert none.value.offset is None
    for start, end in ((0, 29), (30, 59), (100, 149)):
        await storage.add_object(TOPIC, descriptor(start, end))
    objects = await storage.objects(TOPIC)
    assert [o.value.start_offset for o in objects] == [0, 30, 100]
    assert objects[0].key == layout.storage_object(TOPIC, 0)
    assert (await storage.current(TOPIC)).value.start_offset == 100
    await store.delete(layout.storage_object(TOPIC, 100))
    with pytest.raises(NoObject) as dangling:
        await storage.current(TOPIC)
    assert dangling.value.offset == 100


async def test_find_object_at_and_around_boundaries(store: MetadataStore) -> None:
    storage = StorageManager(store)
    for start, end in ((10, 29), (30, 59), (100, 149)):
        await storage.add_object(TOPIC, descriptor(start, end))
    assert await cur_of(store) == 100
    for offset, start in FIND_CASES:
        if start is None:
            with pytest.raises(NoObject) as missing:
                await storage.find_object(TOPIC, offset)
            assert missing.value.offset == offset
        else:
            found = await storage.find_object(TOPIC, offset)
            assert found.value.start_offset == start, offset


async def test_find_object_at_the_end_of_the_offsets(store: MetadataStore) -> None:
    storage = StorageManager(store)
    with pytest.raises(NoObject):
        await storage.find_object(TOPIC, 0)
    await storage.add_object(TOPIC, descriptor(U64_MAX - 10, U64_MAX))
    assert (await storage.find_object(TOPIC, U64_MAX)).value.start_offset == U64_MAX - 10
    with pytest.raises(InvalidNumber):
        await storage.find_object(TOPIC, U64_MAX + 1)
    with pytest.raises(InvalidNumber):
        await storage.find_object(TOPIC, -1)


async def test_sealed_state(store: MetadataStore) -> None:
    storage = StorageManager(store)
    with pytest.raises(NoSealedState) as missing:
        await storage.sealed_state(TOPIC)
    assert missing.value.topic == TOPIC
    revision = await storage.seal(TOPIC, SEALED)
    with pytest.raises(SealedStateExists):
        await storage.seal(TOPIC, SEALED)
    found = await storage.sealed_state(TOPIC)
    assert (found.value, found.version, found.mod_revision) == (SEALED, 1, revision)
    assert found.value.broker_id == 10285063371164059634
    with pytest.raises(BadVersion):
        await storage.delete_sealed_state(TOPIC, 2)
    await storage.delete_sealed_state(TOPIC, 1)
    with pytest.raises(NoSealedState):
        await storage.delete_sealed_state(TOPIC, 1)
