"""The cluster in one process, on every backend: topics assigned by the ranking, a stopped
broker's topics reassigned, moves that resume after the sealed offset, draining, and cursor
batching fenced on ownership."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from metaplane import layout
from metaplane.cluster import (
    CursorBatcher,
    LoadManagerConfig,
    Node,
    NodeSettings,
    QuietTopics,
    Ranking,
    RebalanceConfig,
    imbalance,
    move_topic,
    unload_topic,
)
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    ClusterManager,
    NamespaceManager,
    ObjectDescriptor,
    OwnershipManager,
    SealedState,
    SubscriptionManager,
    SubscriptionMetadata,
    SubscriptionType,
    TopicManager,
    decode,
)
from metaplane.store import Compacted, MetadataStore, Put
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND

FAST = LoadManagerConfig(ranking=Ranking.FAIR, idle_every=0.1, rebalance_every=0.2)


async def converged(
    store: MetadataStore, check: Callable[[], Awaitable[bool]], timeout: float = 20.0
) -> None:
    """Wait until `check()` holds, looking again at each change of the store. A store
    without history (ZooKeeper) refuses a watch from a revision something changed at since:
    then look again, and watch from the new revision."""
    async with asyncio.timeout(timeout):
        while not await check():
            start = await store.revision()
            try:
                async with store.watch("/", start_revision=start + 1) as watch:
                    while not await check():  # a change before the watch began counts too
                        await anext(watch)
                    return
            except Compacted:
                continue


def quiet(node: Node) -> QuietTopics:
    assert isinstance(node.host, QuietTopics)
    return node.host


async def owners(store: MetadataStore, brokers: list[int]) -> dict[int, set[TopicName]]:
    ownership = OwnershipManager(store)
    return {broker: set(await ownership.assignments(broker)) for broker in brokers}


async def create_topics(
    store: MetadataStore,
    count: int,
    namespace: str = "ns",
    subscriptions: tuple[str, ...] = ("sub",),
) -> list[TopicName]:
    """`count` topics, each with `subscriptions` (a cursor is written only for a subscription
    that exists)."""
    await NamespaceManager(store).create(namespace)
    topics = [TopicName(namespace, f"t{i:03d}") for i in range(count)]
    manager = TopicManager(store)
    for topic in topics:
        await manager.create(topic)
        for name in subscriptions:
            await SubscriptionManager(store).create(topic, subscription(name))
    return topics


def subscription(name: str) -> SubscriptionMetadata:
    return SubscriptionMetadata(
        consumer_id=1,
        consumer_name="consumer",
        subscription_name=name,
        subscription_type=SubscriptionType.EXCLUSIVE,
    )


@pytest.fixture
async def cluster(store: MetadataStore) -> AsyncIterator[list[Node]]:
    nodes = [
        Node(store, NodeSettings(broker_id, broker_id, session_ttl=3, load_manager=FAST))
        for broker_id in (1, 2, 3)
    ]
    for node in nodes:
        await node.start()
    yield nodes
    for node in nodes:
        if node.broker.session.alive:
            await node.stop()


async def settled(store: MetadataStore, nodes: list[Node]) -> None:
    """Wait until every running node has acted on every change so far."""
    revision = await store.revision()
    for node in nodes:
        if node.broker.session.alive:
            await node.broker.caught_up(revision, timeout=10)


async def all_assigned(store: MetadataStore, topics: list[TopicName], brokers: list[int]) -> bool:
    found = await owners(store, brokers)
    placed = [topic for owned in found.values() for topic in owned]
    waiting = await OwnershipManager(store).unassigned()
    return sorted(placed) == sorted(topics) and not waiting


async def test_topics_spread_by_the_ranking(store: MetadataStore, cluster: list[Node]) -> None:
    topics = await create_topics(store, 30)
    await converged(store, lambda: all_assigned(store, topics, [1, 2, 3]))
    counts = {broker: len(owned) for broker, owned in (await owners(store, [1, 2, 3])).items()}
    assert counts == {1: 10, 2: 10, 3: 10}
    await settled(store, cluster)
    for node in cluster:
        broker_id = node.settings.broker_id
        assert node.broker.owned == (await owners(store, [broker_id]))[broker_id]


async def test_a_stopped_broker_hands_its_topics_over(
    store: MetadataStore, cluster: list[Node]
) -> None:
    topics = await create_topics(store, 12)
    await converged(store, lambda: all_assigned(store, topics, [1, 2, 3]))
    await settled(store, cluster)
    leaving = sorted((await owners(store, [1]))[1])
    published = {topic: 100 + index for index, topic in enumerate(leaving)}
    quiet(cluster[0]).starts.update(published)  # as if each had published that many
    await cluster[0].stop()  # sealed with their offsets, then the registration goes
    await converged(store, lambda: all_assigned(store, topics, [2, 3]))
    await settled(store, cluster[1:])
    for topic in leaving:
        new_owner = next(n for n in cluster[1:] if topic in n.broker.owned)
        assert quiet(new_owner).starts[topic] == published[topic]  # the next offset, exactly
        assert await store.get(layout.storage_state(topic)) is None  # the seal was consumed


async def test_a_move_resumes_after_the_sealed_offset(
    store: MetadataStore, cluster: list[Node]
) -> None:
    topics = await create_topics(store, 3)
    await converged(store, lambda: all_assigned(store, topics, [1, 2, 3]))
    await settled(store, cluster)
    topic = topics[0]
    source = next(n for n in cluster if topic in n.broker.owned)
    quiet(source).starts[topic] = 500  # as if 500 messages had been published
    target = next(n for n in cluster if n is not source)
    sealed: list[SealedState] = []

    async def sealed_and_moved() -> bool:
        entry = await store.get(layout.storage_state(topic))
        if entry is not None:
            sealed.append(decode(SealedState, entry.value))
        return topic in target.broker.owned

    await move_topic(store, topic, to_broker=target.settings.broker_id)
    await converged(store, sealed_and_moved)
    assert sealed and sealed[0].last_committed_offset == 499
    assert sealed[0].broker_id == source.settings.broker_id
    assert quiet(target).starts[topic] == 500
    assert topic not in source.broker.owned


async def test_unload_goes_elsewhere(store: MetadataStore, cluster: list[Node]) -> None:
    topics = await create_topics(store, 3)
    await converged(store, lambda: all_assigned(store, topics, [1, 2, 3]))
    topic = topics[1]
    before = (await OwnershipManager(store).owner(topic)).value
    await unload_topic(store, topic)
    await converged(store, lambda: all_assigned(store, topics, [1, 2, 3]))
    assert (await OwnershipManager(store).owner(topic)).value != before


async def test_draining_empties_a_broker(store: MetadataStore, cluster: list[Node]) -> None:
    topics = await create_topics(store, 9)
    await converged(store, lambda: all_assigned(store, topics, [1, 2, 3]))
    await cluster[1].broker.drain()

    async def drained() -> bool:
        state = await ClusterManager(store).state(2)
        return state.value.mode is BrokerMode.DRAINED

    await converged(store, drained)
    assert (await owners(store, [2]))[2] == set()
    # Drained as soon as it owns nothing: its last topics may still wait for their next
    # owner, and are placed on the others (never back on it).
    await converged(store, lambda: all_assigned(store, topics, [1, 3]))
    assert (await owners(store, [2]))[2] == set()


async def test_a_thousand_acks_write_at_once(store: MetadataStore) -> None:
    topic = (await create_topics(store, 1))[0]
    await store.put(layout.assignment(9, topic), b"null")
    batcher = CursorBatcher(store, 9, every=1000, interval=3600)
    await batcher.start()
    try:
        start = await store.revision()
        for offset in range(1000):
            batcher.ack(topic, "sub", offset)
        async with (
            asyncio.timeout(5),
            store.watch(layout.cursor(topic, "sub"), start_revision=start) as watch,
        ):
            batch = await anext(watch)
        assert batch.events[0].entry.value == b"999"
    finally:
        await batcher.stop()


async def test_storage_objects_stay_contiguous_across_hand_overs(store: MetadataStore) -> None:
    """With simulated traffic, a topic handed from broker to broker keeps one contiguous run
    of storage objects: no offset is used twice, none is skipped."""
    nodes = [
        Node(store, NodeSettings(b, b, workload=True, session_ttl=3, load_manager=FAST))
        for b in (1, 2)
    ]
    for node in nodes:
        await node.start()
    topics = await create_topics(store, 4)
    await converged(store, lambda: all_assigned(store, topics, [1, 2]))

    async def each_has_objects() -> bool:  # traffic: an object every 50 messages, at 20/s
        for topic in topics:
            if not await store.list(layout.storage_objects_prefix(topic), limit=1):
                return False
        return True

    await converged(store, each_has_objects)
    for topic in topics:
        await move_topic(store, topic)
    await converged(store, lambda: all_assigned(store, topics, [1, 2]))
    for node in nodes:
        await node.stop()
    for topic in topics:
        listing = await store.list(
            layout.storage_objects_prefix(topic), end_before=layout.storage_cur(topic)
        )
        spans = [decode(ObjectDescriptor, e.value) for e in listing]
        assert spans, f"{topic}: no storage object"
        assert spans[0].start_offset == 0
        for before, after in itertools.pairwise(spans):
            assert after.start_offset == before.end_offset + 1, (topic, before, after)


async def test_rebalancing_moves_off_an_overloaded_broker_then_stops(
    store: MetadataStore,
) -> None:
    config = LoadManagerConfig(
        ranking=Ranking.FAIR,
        idle_every=0.1,
        rebalance_every=0.05,
        rebalance=RebalanceConfig(threshold=0.1, sustained_cycles=3, max_moves_per_cycle=40),
    )
    first = Node(store, NodeSettings(1, 1, session_ttl=3, load_manager=config))
    await first.start()
    await first.election.wait_elected(timeout=10)
    topics = await create_topics(store, 300)
    await converged(store, lambda: all_assigned(store, topics, [1]), 60)
    others = [Node(store, NodeSettings(b, b, session_ttl=3, load_manager=config)) for b in (2, 3)]
    for node in others:
        await node.start()

    async def balanced() -> bool:
        counts = [len(owned) for owned in (await owners(store, [1, 2, 3])).values()]
        return sum(counts) == 300 and imbalance(counts) <= 0.1

    await converged(store, balanced, 120)
    settled_owners = await owners(store, [1, 2, 3])
    moved = first.load_manager.moves_started
    assert len(settled_owners[1]) < 150  # the overloaded broker gave most away
    # 20 more rebalancing cycles: nothing moves back and forth.
    await first.load_manager.wait_rebalances(first.load_manager.rebalances + 20, timeout=30)
    assert first.load_manager.moves_started == moved
    assert await owners(store, [1, 2, 3]) == settled_owners
    for node in (first, *others):
        await node.stop()


async def test_a_burst_of_changes_is_a_few_cycles(store: MetadataStore) -> None:
    """Changes only wake the leader's next cycle: 300 of them in a burst are not 300 cycles
    (each of which would re-read the whole cluster without yielding)."""
    config = LoadManagerConfig(idle_every=10.0)  # no idle cycles: only changes wake it
    node = Node(store, NodeSettings(1, 1, session_ttl=3, load_manager=config))
    await node.start()
    await node.election.wait_elected(timeout=10)
    before = node.load_manager.cycles
    for start in range(0, 300, 50):  # six transactions of 50 changes under /cluster
        burst = [Put(f"/cluster/burst-{i}", b"null") for i in range(start, start + 50)]
        last = (await store.txn([], burst)).revision
    await node.load_manager.wait_cycled(last, timeout=10)
    assert node.load_manager.cycles - before <= 7  # at most one per transaction
    assert node.broker.session.alive
    await node.stop()


async def test_load_reports_alone_wake_no_cycle(store: MetadataStore) -> None:
    """Every broker writes a load report every second; each woke a cycle of the leader, a
    walk of every topic (at 1M topics 80 % of its loop). Reports are read by the next cycle
    that something else wakes (or `idle_every`); any other change under /cluster wakes one."""
    config = LoadManagerConfig(idle_every=30.0)  # no idle cycles within the test
    node = Node(store, NodeSettings(1, 1, session_ttl=3, load_manager=config))
    await node.start()
    try:
        await node.election.wait_elected(timeout=10)
        start = await store.revision()
        async with store.watch(layout.load_report(1), start_revision=start + 1) as reports:
            async with asyncio.timeout(10):
                await anext(reports)  # the node's broker reports: its start is written
                settled = await store.put("/cluster/settled", b"null")
                await node.load_manager.wait_cycled(settled)
                before = node.load_manager.cycles
                for _ in range(3):  # three more reports of the node's own broker
                    assert len((await anext(reports)).events) == 1
        assert node.load_manager.cycles == before  # none of them woke a cycle
        woken = await store.put("/cluster/anything-else", b"null")
        await node.load_manager.wait_cycled(woken, timeout=10)
        assert node.load_manager.cycles == before + 1
    finally:
        await node.stop()
