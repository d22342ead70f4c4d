"""TopicManager on every backend: a topic (and a partitioned one) created and deleted whole,
in one transaction where it fits, in guarded chunks above; delivery and producers with their
typed errors."""

from __future__ import annotations

import pytest

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    ClusterManager,
    Delivery,
    NamespaceManager,
    NoNamespace,
    NoProducer,
    NoTopic,
    OwnershipManager,
    ProducerExists,
    StorageManager,
    SubscriptionManager,
    TopicExists,
    TopicManager,
)
from metaplane.store import ABSENT, BadVersion, InvalidValue, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import (
    ACTIVE,
    BROKER,
    PRODUCER,
    SEALED,
    TOPIC,
    RecordingStore,
    producer,
    registration,
    snapshot,
    subscription,
)

pytestmark = EVERY_BACKEND

ORDERS = TopicName("default", "orders")


@pytest.fixture
async def topics(store: MetadataStore) -> TopicManager:
    await NamespaceManager(store).create("default")
    return TopicManager(store)


def topic_keys(topic: TopicName, *, served: bool = True) -> set[str]:
    keys = {
        layout.topic_root(topic),
        layout.topic_delivery(topic),
        layout.namespace_topic(topic),
    }
    return keys | {layout.unassigned(topic)} if served else keys


async def keys_of(store: MetadataStore) -> set[str]:
    return set((await store.list("/", keys_only=True)).keys())


async def test_create_writes_every_key_in_one_revision(
    store: MetadataStore, topics: TopicManager
) -> None:
    before = await store.revision()
    revision = await topics.create(TOPIC, delivery=Delivery.NON_RELIABLE)
    assert revision == before + 1
    written = await store.list("/", keys_only=True)
    assert {e.key for e in written if e.mod_revision == revision} == topic_keys(TOPIC)
    values = {key: (await store.get(key)) for key in topic_keys(TOPIC)}
    assert {key: entry.value for key, entry in values.items() if entry} == {
        layout.topic_root(TOPIC): b"0",
        layout.topic_delivery(TOPIC): b'"NonReliable"',
        layout.namespace_topic(TOPIC): b"null",
        layout.unassigned(TOPIC): b"null",
    }


async def test_read(topics: TopicManager) -> None:
    revision = await topics.create(TOPIC)
    info = await topics.read(TOPIC)
    assert (info.name, info.partition_count, info.partitions) == (TOPIC, 0, ())
    assert info.delivery is not None and info.delivery.value is Delivery.RELIABLE
    assert info.root.mod_revision == info.delivery.mod_revision == revision
    with pytest.raises(NoTopic) as missing:
        await topics.read(ORDERS)
    assert missing.value.topic == ORDERS
    assert "does not exist" in str(missing.value)


async def test_create_refusals_write_nothing(store: MetadataStore, topics: TopicManager) -> None:
    await topics.create(TOPIC)
    before = await snapshot(store)
    with pytest.raises(TopicExists) as exists:
        await topics.create(TOPIC)
    assert exists.value.topic == TOPIC
    with pytest.raises(NoNamespace) as no_namespace:
        await topics.create(TopicName("nowhere", "orders"))
    assert no_namespace.value.namespace == "nowhere"
    assert await snapshot(store) == before


async def test_partitioned_topic_in_one_transaction(
    store: MetadataStore, topics: TopicManager
) -> None:
    revision = await topics.create(ORDERS, partitions=3)
    info = await topics.read(ORDERS)
    assert info.partition_count == 3
    assert info.partitions == ORDERS.partitions(3)
    expected = topic_keys(ORDERS, served=False).union(*map(topic_keys, ORDERS.partitions(3)))
    written = await store.list("/", keys_only=True)
    assert {e.key for e in written if e.mod_revision == revision} == expected
    assert await topics.topics("default") == sorted([ORDERS, *ORDERS.partitions(3)])


async def test_partition_name_taken_refuses_the_whole_create(
    store: MetadataStore, topics: TopicManager
) -> None:
    await topics.create(ORDERS.partition(1))
    before = await snapshot(store)
    with pytest.raises(TopicExists) as taken:
        await topics.create(ORDERS, partitions=3)
    assert taken.value.topic == ORDERS.partition(1)
    assert await snapshot(store) == before


async def test_many_partitions_are_created_and_deleted_in_chunks(
    store: MetadataStore, topics: TopicManager
) -> None:
    assert not topics.create_change(ORDERS, partitions=40).fits
    start = await store.revision()
    revision = await topics.create(ORDERS, partitions=40)
    assert revision == start + 2
    expected = topic_keys(ORDERS, served=False).union(*map(topic_keys, ORDERS.partitions(40)))
    assert await keys_of(store) - {layout.namespace_policy("default")} == expected
    await topics.delete(ORDERS)
    assert await keys_of(store) == {layout.namespace_policy("default")}


async def test_a_failed_chunk_removes_what_the_others_created(
    store: MetadataStore, topics: TopicManager
) -> None:
    taken = ORDERS.partition(38)
    await topics.create(taken)
    before = await keys_of(store)
    with pytest.raises(TopicExists) as refused:
        await topics.create(ORDERS, partitions=40)
    assert refused.value.topic == taken
    assert await keys_of(store) == before


async def test_later_chunks_are_guarded_by_the_parent_root(
    store: MetadataStore, topics: TopicManager
) -> None:
    recording = RecordingStore(store)
    racing = TopicManager(recording)

    async def recreate_the_parent() -> None:
        await TopicManager(store).delete(ORDERS)
        await TopicManager(store).create(ORDERS, partitions=2)

    recording.before_txn.extend([_nothing, recreate_the_parent])
    with pytest.raises(TopicExists):
        await racing.create(ORDERS, partitions=40)
    info = await topics.read(ORDERS)
    assert info.partition_count == 2
    assert await topics.topics("default") == sorted([ORDERS, *ORDERS.partitions(2)])


async def _nothing() -> None:
    return None


async def test_set_delivery_with_a_version(topics: TopicManager) -> None:
    await topics.create(TOPIC)
    read = await topics.read(TOPIC)
    assert read.delivery is not None
    await topics.set_delivery(TOPIC, Delivery.NON_RELIABLE, read.delivery.version)
    changed = await topics.read(TOPIC)
    assert changed.delivery is not None
    assert (changed.delivery.value, changed.delivery.version) == (Delivery.NON_RELIABLE, 2)
    with pytest.raises(BadVersion):
        await topics.set_delivery(TOPIC, Delivery.RELIABLE, read.delivery.version)
    with pytest.raises(NoTopic):
        await topics.set_delivery(ORDERS, Delivery.RELIABLE, 1)


async def test_topics_of_every_namespace(store: MetadataStore, topics: TopicManager) -> None:
    await NamespaceManager(store).create("markets")
    trades = TopicName("markets", "trades")
    for topic in (trades, TOPIC, ORDERS):
        await topics.create(topic)
    assert await topics.topics() == sorted([trades, TOPIC, ORDERS])
    assert await topics.topics("markets") == [trades]
    with pytest.raises(NoNamespace):
        await topics.topics("nowhere")


async def test_delete_removes_the_topic_whole(store: MetadataStore, topics: TopicManager) -> None:
    other = TopicName("default", "reliable_topic2")
    await topics.create(other)
    await topics.create(TOPIC)
    await topics.register_producer(TOPIC, producer())
    await SubscriptionManager(store).create(TOPIC, subscription())
    await SubscriptionManager(store).write_cursor(TOPIC, "subs_reliable", 13)
    await StorageManager(store).seal(TOPIC, SEALED)
    before = await keys_of(store)
    revision = await topics.delete(TOPIC)
    assert revision == await store.revision()
    left = await keys_of(store)
    assert all(not key.startswith(layout.topic_root(TOPIC) + "/") for key in left)
    assert before - left == topic_keys(TOPIC) | {
        layout.producer(TOPIC, PRODUCER),
        layout.subscription(TOPIC, "subs_reliable"),
        layout.cursor(TOPIC, "subs_reliable"),
    }
    assert layout.storage_state(TOPIC) in left, "storage metadata is the storage clean-up's"
    assert (await topics.read(other)).partition_count == 0
    with pytest.raises(NoTopic):
        await topics.delete(TOPIC)


async def test_delete_removes_the_assignment(store: MetadataStore, topics: TopicManager) -> None:
    await topics.create(TOPIC)
    cluster = ClusterManager(store)
    await cluster.register(BROKER, registration(), await store.grant(60))
    await cluster.set_state(BROKER, ACTIVE, ABSENT)
    await OwnershipManager(store).assign(TOPIC, BROKER)
    await topics.delete(TOPIC)
    left = await keys_of(store)
    assert layout.assignment(BROKER, TOPIC) not in left
    assert layout.unassigned(TOPIC) not in left


async def test_delete_reads_again_when_a_move_races_it(
    store: MetadataStore, topics: TopicManager
) -> None:
    await topics.create(TOPIC)
    cluster = ClusterManager(store)
    await cluster.register(BROKER, registration(), await store.grant(60))
    await cluster.set_state(BROKER, ACTIVE, ABSENT)
    recording = RecordingStore(store)

    async def assign() -> None:
        await OwnershipManager(store).assign(TOPIC, BROKER)

    recording.before_txn.append(_nothing)  # the delete's read
    recording.before_txn.append(assign)  # between its read and its transaction
    await TopicManager(recording).delete(TOPIC)
    left = await keys_of(store)
    assert layout.assignment(BROKER, TOPIC) not in left, "no assignment is left behind"
    assert layout.topic_root(TOPIC) not in left


async def test_producers(store: MetadataStore, topics: TopicManager) -> None:
    await topics.create(TOPIC)
    revision = await topics.register_producer(TOPIC, producer())
    found = await topics.producer(TOPIC, PRODUCER)
    assert (found.value, found.version, found.mod_revision) == (producer(), 1, revision)
    assert found.value.producer_id == 13940288943180594845
    with pytest.raises(ProducerExists) as exists:
        await topics.register_producer(TOPIC, producer())
    assert (exists.value.topic, exists.value.producer_id) == (TOPIC, PRODUCER)
    await topics.register_producer(TOPIC, producer(producer_id=7))
    assert [p.value.producer_id for p in await topics.producers(TOPIC)] == [PRODUCER, 7]
    with pytest.raises(BadVersion):
        await topics.delete_producer(TOPIC, PRODUCER, 2)
    await topics.delete_producer(TOPIC, PRODUCER, 1)
    with pytest.raises(NoProducer) as missing:
        await topics.producer(TOPIC, PRODUCER)
    assert missing.value.producer_id == PRODUCER
    with pytest.raises(NoProducer):
        await topics.delete_producer(TOPIC, PRODUCER, 1)


async def test_producer_refusals(topics: TopicManager) -> None:
    with pytest.raises(NoTopic):
        await topics.register_producer(TOPIC, producer())
    with pytest.raises(NoTopic):
        await topics.producers(TOPIC)
    await topics.create(ORDERS)
    with pytest.raises(InvalidValue):
        await topics.register_producer(ORDERS, producer(TOPIC))
