"""Managers reading through a LocalCache on every backend: after `wait_for(revision)` of a
write, reads show it without touching the store, with values decoded once; reads the cache
does not cover go to the store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.resources import (
    MalformedValue,
    NamespaceManager,
    NamespacePolicy,
    NoObject,
    OwnershipManager,
    Reader,
    StorageManager,
    SubscriptionManager,
    TopicManager,
    decode_value,
)
from metaplane.store import Get, InvalidRequest, List, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import FIND_CASES, TOPIC, RecordingStore, descriptor, subscription

pytestmark = EVERY_BACKEND

PREFIXES = ("/topics", "/namespaces", "/cluster", "/danube-data")


class CountingDecoder:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, key: str, data: bytes) -> object:
        self.keys.append(key)
        return decode_value(key, data)


@pytest.fixture
def decoder() -> CountingDecoder:
    return CountingDecoder()


@pytest.fixture
async def cache(store: MetadataStore, decoder: CountingDecoder) -> AsyncIterator[LocalCache]:
    await NamespaceManager(store).create("default")
    await TopicManager(store).create(TOPIC)
    async with LocalCache(store, PREFIXES, decoder=decoder) as started:
        yield started


@pytest.fixture
def recording(store: MetadataStore) -> RecordingStore:
    return RecordingStore(store)


async def test_a_write_then_wait_for_then_read_from_the_cache(
    cache: LocalCache, recording: RecordingStore, decoder: CountingDecoder
) -> None:
    subscriptions = SubscriptionManager(recording, cache)
    await subscriptions.create(TOPIC, subscription())
    revision = await subscriptions.write_cursor(TOPIC, "subs_reliable", 13)
    await cache.wait_for(revision, timeout=10)
    recording.calls.clear()
    first = await subscriptions.read(TOPIC, "subs_reliable")
    cursor = await subscriptions.cursor(TOPIC, "subs_reliable")
    again = await subscriptions.read(TOPIC, "subs_reliable")
    everything = await subscriptions.read_subscriptions(TOPIC)
    assert recording.calls == [], "served by the cache alone"
    assert (first.value, cursor.value, cursor.mod_revision) == (subscription(), 13, revision)
    assert again.value is first.value, "decoded once, then kept"
    assert everything["subs_reliable"].metadata.value is first.value
    assert decoder.keys.count(layout.subscription(TOPIC, "subs_reliable")) == 1


async def test_a_new_write_is_decoded_once_more(
    cache: LocalCache, recording: RecordingStore, decoder: CountingDecoder
) -> None:
    namespaces = NamespaceManager(recording, cache)
    first = await namespaces.policy("default")
    strict = NamespacePolicy(max_producers_per_topic=1)
    await cache.wait_for(await namespaces.set_policy("default", strict, first.version), 10)
    recording.calls.clear()
    updated = await namespaces.policy("default")
    assert (updated.value, updated.version) == (strict, 2)
    assert await namespaces.policy("default") is updated  # the typed form is kept whole
    assert (await namespaces.policy("default")).value is updated.value
    assert recording.calls == []
    assert decoder.keys.count(layout.namespace_policy("default")) == 2


async def test_multi_key_reads_from_the_cache(cache: LocalCache, recording: RecordingStore) -> None:
    topics, storage = TopicManager(recording, cache), StorageManager(recording, cache)
    for start, end in ((10, 29), (30, 59), (100, 149)):
        revision = await storage.add_object(TOPIC, descriptor(start, end))
    await cache.wait_for(revision, timeout=10)
    recording.calls.clear()
    assert (await topics.read(TOPIC)).partition_count == 0
    assert await topics.topics("default") == [TOPIC]
    assert list(await OwnershipManager(recording, cache).unassigned()) == [TOPIC]
    assert [o.value.start_offset for o in await storage.objects(TOPIC)] == [10, 30, 100]
    assert (await storage.current(TOPIC)).value.start_offset == 100
    for offset, start in FIND_CASES:
        if start is None:
            with pytest.raises(NoObject):
                await storage.find_object(TOPIC, offset)
        else:
            assert (await storage.find_object(TOPIC, offset)).value.start_offset == start
    assert recording.calls == []


async def test_reads_the_cache_does_not_cover_go_to_the_store(
    store: MetadataStore, recording: RecordingStore
) -> None:
    await NamespaceManager(store).create("default")
    async with LocalCache(store, ["/topics"], decoder=decode_value) as cache:
        namespaces = NamespaceManager(recording, cache)
        assert (await namespaces.policy("default")).version == 1
        assert recording.calls == [("txn", layout.namespace_policy("default"))]


async def test_a_cache_not_started_is_not_read(
    store: MetadataStore, recording: RecordingStore
) -> None:
    await NamespaceManager(store).create("default")
    cache = LocalCache(store, ["/namespaces"], decoder=decode_value)
    assert (await NamespaceManager(recording, cache).policy("default")).version == 1
    assert recording.calls != []


async def test_cached_and_stored_reads_agree(cache: LocalCache, store: MetadataStore) -> None:
    await StorageManager(store).add_object(TOPIC, descriptor(0, 9))
    await cache.wait_for(await StorageManager(store).add_object(TOPIC, descriptor(10, 19)), 10)
    prefix = layout.storage_objects_prefix(TOPIC)
    reads = [
        List(prefix),
        List(prefix, end_before=layout.storage_object(TOPIC, 10), reverse=True, limit=1),
        List(prefix, start_after=layout.storage_object(TOPIC, 0), keys_only=True),
        List(prefix, reverse=True, limit=2),
    ]
    cached, stored = Reader(store, cache), Reader(store)
    for read in reads:
        from_cache = (await cached.read(read)).entries(read)
        from_store = (await stored.read(read)).entries(read)
        assert [e.key for e in from_cache] == [e.key for e in from_store], read
    root = Get(layout.topic_root(TOPIC))
    assert (await cached.read(root)).entry(root.key) == (await stored.read(root)).entry(root.key)
    assert await cached.children("/topics") == await stored.children("/topics") == ["default"]


async def test_a_malformed_value_is_a_typed_error(store: MetadataStore) -> None:
    await store.put(layout.namespace_policy("default"), b'{"max_message_size": -1}')
    with pytest.raises(MalformedValue):
        await NamespaceManager(store).policy("default")


async def test_a_cache_decoding_otherwise_is_refused(store: MetadataStore) -> None:
    await NamespaceManager(store).create("default")
    async with LocalCache(store, ["/namespaces"], decoder=lambda key, data: data) as raw:
        with pytest.raises(MalformedValue):
            await NamespaceManager(store, raw).policy("default")
    async with LocalCache(store, ["/namespaces"]) as undecoded:
        with pytest.raises(InvalidRequest):
            await NamespaceManager(store, undecoded).policy("default")
