"""OwnershipManager on every backend: a topic is always in exactly one of its two places
(waiting, or assigned), each move is one transaction with typed refusals, and the layers
above can fence the moves with conditions of their own."""

from __future__ import annotations

import pytest

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    AlreadyUnassigned,
    BrokerNotActive,
    ChangedSinceRead,
    ClusterManager,
    Condition,
    NamespaceManager,
    NoBroker,
    NoTopicOwnerInfo,
    NoUnassignedMarker,
    OwnershipManager,
    TopicAssigned,
    TopicManager,
    UnassignedMarker,
)
from metaplane.store import ABSENT, Compare, Fenced, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import ACTIVE, BROKER, DRAINING, OTHER_BROKER, TOPIC, registration, snapshot

pytestmark = EVERY_BACKEND


@pytest.fixture
async def ownership(store: MetadataStore) -> OwnershipManager:
    await NamespaceManager(store).create("default")
    await TopicManager(store).create(TOPIC)
    cluster = ClusterManager(store)
    lease = await store.grant(60)
    for broker in (BROKER, OTHER_BROKER):
        await cluster.register(broker, registration(), lease)
    await cluster.set_state(BROKER, ACTIVE, ABSENT)
    await cluster.set_state(OTHER_BROKER, DRAINING, ABSENT)
    return OwnershipManager(store)


async def places(store: MetadataStore, topic: TopicName = TOPIC) -> set[str]:
    """Where the topic is: its marker and assignments that exist."""
    keys = set((await store.list("/cluster", keys_only=True)).keys())
    candidates = {layout.unassigned(topic)} | {
        layout.assignment(broker, topic) for broker in (BROKER, OTHER_BROKER)
    }
    return keys & candidates


async def test_a_new_topic_waits(ownership: OwnershipManager) -> None:
    marker = await ownership.unassigned_marker(TOPIC)
    assert marker.value is None
    assert list(await ownership.unassigned()) == [TOPIC]
    with pytest.raises(NoTopicOwnerInfo) as no_owner:
        await ownership.owner(TOPIC)
    assert no_owner.value.topic == TOPIC


async def test_assign_and_unassign(store: MetadataStore, ownership: OwnershipManager) -> None:
    before = await store.revision()
    revision = await ownership.assign(TOPIC, BROKER)
    assert revision == before + 1
    assert await places(store) == {layout.assignment(BROKER, TOPIC)}
    owner = await ownership.owner(TOPIC)
    assert (owner.value, owner.mod_revision) == (BROKER, revision)
    assert await ownership.assignments(BROKER) == [TOPIC]
    assert await ownership.assignments(OTHER_BROKER) == []
    with pytest.raises(NoUnassignedMarker):
        await ownership.unassigned_marker(TOPIC)

    await ownership.unassign(TOPIC)
    assert await places(store) == {layout.unassigned(TOPIC)}
    marker = (await ownership.unassigned())[TOPIC].value
    assert marker == UnassignedMarker(reason="unload", from_broker=BROKER)
    entry = await store.get(layout.unassigned(TOPIC))
    assert entry is not None
    assert entry.value == b'{"reason":"unload","from_broker":13308604176970018988}'


async def test_assign_refusals(store: MetadataStore, ownership: OwnershipManager) -> None:
    before = await snapshot(store)
    with pytest.raises(BrokerNotActive) as draining:
        await ownership.assign(TOPIC, OTHER_BROKER)
    assert draining.value.mode == "draining"
    with pytest.raises(NoBroker) as unregistered:
        await ownership.assign(TOPIC, 42)
    assert unregistered.value.broker_id == 42
    with pytest.raises(NoUnassignedMarker):
        await ownership.assign(TopicName("default", "unknown"), BROKER)
    await ClusterManager(store).register(43, registration(), await store.grant(60))
    before = await snapshot(store)
    with pytest.raises(NoBroker) as stateless:
        await ownership.assign(TOPIC, 43)
    assert stateless.value.key == layout.broker_state(43)
    assert await snapshot(store) == before
    await ownership.assign(TOPIC, BROKER)
    with pytest.raises(NoUnassignedMarker):
        await ownership.assign(TOPIC, BROKER)


async def test_assign_change_is_refused_when_its_reads_went_stale(
    store: MetadataStore, ownership: OwnershipManager
) -> None:
    marker = await ownership.unassigned_marker(TOPIC)
    state = await ClusterManager(store).state(BROKER)
    change = ownership.assign_change(TOPIC, BROKER, marker=marker, state=state)
    await ClusterManager(store).set_state(BROKER, ACTIVE, state.version)
    with pytest.raises(ChangedSinceRead) as stale:
        await change.apply(store)
    assert stale.value.key == layout.broker_state(BROKER)
    await store.delete(layout.broker_registration(BROKER))
    state = await ClusterManager(store).state(BROKER)
    change = ownership.assign_change(TOPIC, BROKER, marker=marker, state=state)
    with pytest.raises(NoBroker):
        await change.apply(store)
    assert await places(store) == {layout.unassigned(TOPIC)}


async def test_a_fenced_assignment(store: MetadataStore, ownership: OwnershipManager) -> None:
    """The coordination layer adds its fence: a deposed leader's move writes nothing."""
    leader = await store.put(layout.leader(), str(BROKER).encode())
    fence = Condition(
        Compare.create_revision(layout.leader(), "==", leader),
        lambda _: Fenced("this broker is no longer the leader"),
    )
    marker = await ownership.unassigned_marker(TOPIC)
    state = await ClusterManager(store).state(BROKER)
    change = ownership.assign_change(TOPIC, BROKER, marker=marker, state=state)
    await store.delete(layout.leader())
    await store.put(layout.leader(), str(OTHER_BROKER).encode())
    with pytest.raises(Fenced):
        await change.guarded(fence).apply(store)
    assert await places(store) == {layout.unassigned(TOPIC)}
    # The raw pieces, for a caller that builds its own transaction.
    result = await store.txn((*change.compares, fence.compare), change.ops)
    assert not result.succeeded


async def test_the_raw_pieces_run_in_a_callers_transaction(
    store: MetadataStore, ownership: OwnershipManager
) -> None:
    marker = await ownership.unassigned_marker(TOPIC)
    state = await ClusterManager(store).state(BROKER)
    change = ownership.assign_change(TOPIC, BROKER, marker=marker, state=state)
    leader = await store.put(layout.leader(), str(BROKER).encode())
    fence = Compare.create_revision(layout.leader(), "==", leader)
    result = await store.txn((*change.compares, fence), change.ops)
    assert result.succeeded
    assert await places(store) == {layout.assignment(BROKER, TOPIC)}


async def test_unassign_refusals(store: MetadataStore, ownership: OwnershipManager) -> None:
    with pytest.raises(NoTopicOwnerInfo):
        await ownership.unassign(TOPIC)
    await ownership.assign(TOPIC, BROKER)
    owner = await ownership.owner(TOPIC)
    # A marker next to an assignment breaks the invariant: the move refuses to add to it.
    await store.put(layout.unassigned(TOPIC), b"null")
    with pytest.raises(AlreadyUnassigned):
        await ownership.unassign_change(TOPIC, owner, reason="broker_lost").apply(store)
    await store.delete(layout.unassigned(TOPIC))
    await ownership.unassign(TOPIC, reason="broker_lost")
    with pytest.raises(NoTopicOwnerInfo) as gone:
        await ownership.unassign_change(TOPIC, owner).apply(store)
    assert gone.value.broker_id == BROKER
    assert (await ownership.unassigned_marker(TOPIC)).value == UnassignedMarker(
        reason="broker_lost", from_broker=BROKER
    )


async def test_assigned_twice_is_refused(store: MetadataStore, ownership: OwnershipManager) -> None:
    await store.put(layout.assignment(BROKER, TOPIC), b"null")
    with pytest.raises(TopicAssigned) as assigned:
        await ownership.assign(TOPIC, BROKER)
    assert assigned.value.broker_id == BROKER
