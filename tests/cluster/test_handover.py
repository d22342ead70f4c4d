"""The broker converges under the faults that broke it: a slow store, one transient error at
each step (before the store applies it, and after — its outcome unknown to the broker), a
subscription deleted under a pending cursor, a topic moved away and back. Each race window is
opened on purpose with `FaultyStore` latency or a single injected error, so that every run
hits it.

The broker is driven by hand: topics are assigned and taken away with the ownership
manager's own changes (no LoadManager), and its host is a double whose offsets the test
advances."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from metaplane import layout
from metaplane.cache import CacheState
from metaplane.cluster import BrokerNode
from metaplane.layout import TopicName
from metaplane.resources import (
    Change,
    ObjectDescriptor,
    OwnershipManager,
    SealedState,
    StorageManager,
    SubscriptionManager,
    TopicNotOwned,
    encode,
    owned,
)
from metaplane.store import MetadataStore, Put
from metaplane.testing import Fault, FaultyStore, deletes, writes
from tests.cluster.brokers import (
    BROKER,
    OTHER,
    Started,
    Topics,
    assign,
    config,
    cursor,
    move_away,
    sealed,
)
from tests.cluster.test_cluster import converged, create_topics
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND

# -- cursors are never lost -----------------------------------------------------------------


async def test_a_cursor_whose_flush_is_refused_mid_move_goes_with_the_hand_over(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """The flush of 41 is in flight (the store answers 0.5 s late) when the topic is moved
    away: the flush is refused (no longer owned), and 41 — still pending — is written with
    the seal. (It used to be taken out before the flush committed, and lost.)"""
    topic = (await create_topics(store, 1))[0]
    broker, host = await start_broker()
    await assign(store, topic, broker)
    host.publish(topic, 50)
    broker.ack(topic, "sub", 41)
    faulty.delay("txn", layout.cursor(topic, "sub"), seconds=0.5, times=1)
    flush = asyncio.create_task(broker.cursors.flush(topic))
    await asyncio.sleep(0)  # the flush is on its way, held up in the slow store
    await move_away(store, topic)
    assert await flush is None  # refused: the assignment it was fenced on is gone
    state = await sealed(store, topic)
    assert state.last_committed_offset == 49
    assert await cursor(store, topic) == 41
    assert topic not in broker.owned


async def test_an_ack_during_a_flush_stays_pending_after_it(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    topic = (await create_topics(store, 1))[0]
    broker, _ = await start_broker()
    await assign(store, topic, broker)
    broker.ack(topic, "sub", 10)
    faulty.delay("txn", layout.cursor(topic, "sub"), seconds=0.3, times=1)
    flush = asyncio.create_task(broker.cursors.flush(topic))
    await asyncio.sleep(0)
    broker.ack(topic, "sub", 11)  # after the flush took its snapshot
    assert await flush is not None
    assert await cursor(store, topic) == 10
    assert broker.cursors.pending(topic) == {"sub": 11}
    await broker.cursors.flush(topic)
    assert await cursor(store, topic) == 11
    assert broker.cursors.pending(topic) == {}


async def test_stop_during_a_flush_in_flight_loses_no_cursor(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """The timer's flush is held up in a slow store when the broker stops: it is cancelled
    mid-flight, and the cursor goes with the seal."""
    topic = (await create_topics(store, 1))[0]
    broker, host = await start_broker(cursor_interval=0.05)
    await assign(store, topic, broker)
    host.publish(topic, 10)
    slow = faulty.delay("txn", layout.cursor(topic, "sub"), seconds=2.0, times=1)
    broker.ack(topic, "sub", 7)
    await slow.wait_struck()  # the timer's flush is on its way
    await broker.stop()
    assert await cursor(store, topic) == 7
    assert (await sealed(store, topic)).last_committed_offset == 9
    assert await store.get(layout.broker_registration(BROKER)) is None


STOP_RACES = [
    "moved as the stop hands it over",
    "moved and back",
    "moved after the stop read its assignment",
    "moved, the read of its assignment failing once",
    "moved, the seal failing once before it applies",
    "moved, the seal failing once after it applies",
]


@pytest.mark.parametrize("race", STOP_RACES)
async def test_a_topic_moved_while_the_broker_stops_is_sealed_with_its_cursor(
    store: MetadataStore,
    faulty: FaultyStore,
    start_broker: Started,
    monkeypatch: pytest.MonkeyPatch,
    race: str,
) -> None:
    """The leader's move lands after the broker's reconciliation loop ended, as its stop
    hands the topic over — the window made exact by writing the move from the stop's own
    step: before the stop reads the assignment, or between that read and the seal's write
    (whose fence then fails), or with one transient error at the read or at the seal. The
    topic is sealed, with its cursor, under the marker that took it (under the new
    assignment, moved back): never abandoned with its acks."""
    topic = (await create_topics(store, 1))[0]
    broker, host = await start_broker()
    await assign(store, topic, broker)
    host.publish(topic, 30)
    broker.ack(topic, "sub", 20)
    moved: list[int] = []

    async def move() -> None:
        if not moved:
            moved.append(await move_away(store, topic))
            if race == "moved and back":
                await OwnershipManager(store).assign(topic, BROKER)

    if race == "moved after the stop read its assignment":
        hand_over = broker._hand_over

        async def moved_first(*args: Any, **kwargs: Any) -> None:
            await move()
            await hand_over(*args, **kwargs)

        monkeypatch.setattr(broker, "_hand_over", moved_first)
    else:
        stop_step = broker._hand_over_at_stop

        async def moved_then(which: TopicName) -> None:
            await move()
            await stop_step(which)

        monkeypatch.setattr(broker, "_hand_over_at_stop", moved_then)
    fault: Fault | None = None
    if race.endswith("the read of its assignment failing once"):
        fault = faulty.fail("get", layout.assignment(BROKER, topic))
    elif "the seal failing once" in race:
        state = layout.storage_state(topic)
        fault = faulty.fail("txn", state, after="after" in race, when=writes(state))
    await broker.stop()
    assert moved
    assert fault is None or fault.hits == 1
    assert broker.abandoned == 0
    assert await cursor(store, topic) == 20
    assert (await sealed(store, topic)).last_committed_offset == 29
    took = layout.assignment(BROKER, topic) if race == "moved and back" else None
    entry = await store.get(took or layout.unassigned(topic))
    seal = await store.get(layout.storage_state(topic))
    assert entry is not None and seal is not None
    assert seal.mod_revision > entry.mod_revision  # sealed under what took it


async def test_a_thousand_acks_during_a_flush_are_written_by_the_next_one_at_once(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """The 1000-ack trigger is reached again while a flush is in flight: the next flush goes
    as soon as that one ends, not when the timer fires (an hour here)."""
    topic = (await create_topics(store, 1))[0]
    broker, host = await start_broker(cursor_interval=3600.0)
    await assign(store, topic, broker)
    host.publish(topic, 3000)
    slow = faulty.delay("txn", layout.cursor(topic, "sub"), seconds=0.3, times=1)
    for offset in range(1000):
        broker.ack(topic, "sub", offset)
    await slow.wait_struck()
    for offset in range(1000, 2000):
        broker.ack(topic, "sub", offset)

    async def written() -> bool:
        return await cursor(store, topic) == 1999

    await asyncio.wait_for(converged(store, written), timeout=3.0)


async def test_a_deleted_subscription_gets_no_cursor_back(
    store: MetadataStore, start_broker: Started
) -> None:
    """An ack, then the subscription is deleted before the flush: the flush writes the other
    subscription's cursor and drops this one — never an orphan cursor."""
    topic = (await create_topics(store, 1, subscriptions=("sub", "kept")))[0]
    broker, _ = await start_broker()
    await assign(store, topic, broker)
    broker.ack(topic, "sub", 5)
    broker.ack(topic, "kept", 6)
    subscriptions = SubscriptionManager(store)
    await subscriptions.delete(topic, "sub", (await subscriptions.read(topic, "sub")).version)
    assert await broker.cursors.flush(topic) is not None
    assert await store.get(layout.cursor(topic, "sub")) is None
    assert await store.get(layout.subscription(topic, "sub")) is None
    assert await cursor(store, topic, "kept") == 6
    assert broker.cursors.dropped == 1


async def test_a_deleted_subscription_gets_no_cursor_from_the_hand_over(
    store: MetadataStore, start_broker: Started
) -> None:
    topic = (await create_topics(store, 1, subscriptions=("sub", "kept")))[0]
    broker, host = await start_broker()
    await assign(store, topic, broker)
    host.publish(topic, 10)
    broker.ack(topic, "sub", 5)
    broker.ack(topic, "kept", 6)
    subscriptions = SubscriptionManager(store)
    await subscriptions.delete(topic, "sub", (await subscriptions.read(topic, "sub")).version)
    await move_away(store, topic)
    assert (await sealed(store, topic)).last_committed_offset == 9
    assert await store.get(layout.cursor(topic, "sub")) is None
    assert await cursor(store, topic, "kept") == 6


# -- offsets are never reused ---------------------------------------------------------------


async def test_a_new_owner_starts_after_the_highest_of_seal_objects_and_cursors(
    store: MetadataStore, start_broker: Started
) -> None:
    topic = (await create_topics(store, 1))[0]
    broker, _ = await start_broker()
    seal = SealedState(sealed=True, last_committed_offset=10, broker_id=OTHER, timestamp=1)
    await store.put(layout.storage_state(topic), encode(seal))
    assert (await broker.recover_start(topic))[0] == 11
    await StorageManager(store).add_object(topic, descriptor(11, 20))
    assert (await broker.recover_start(topic))[0] == 21  # a stale seal never wins
    await SubscriptionManager(store).write_cursor(topic, "sub", 25)
    assert (await broker.recover_start(topic))[0] == 26  # an acknowledged offset was published


async def test_a_seal_whose_removal_failed_once_is_removed_and_no_offset_is_used_twice(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """A seals at 10; B loads at 11 and its delete of the seal meets one Unavailable; the
    delete is retried. B publishes 11..20 (in an object) and dies; C starts at 21."""
    topic = (await create_topics(store, 1))[0]
    first, first_host = await start_broker(BROKER)
    await assign(store, topic, first)
    first_host.publish(topic, 11)
    await move_away(store, topic)
    assert (await sealed(store, topic)).last_committed_offset == 10
    second, second_host = await start_broker(OTHER)
    faulty.fail("txn", layout.storage_state(topic), when=deletes(layout.storage_state(topic)))
    await assign(store, topic, second)
    assert second_host.loads == [(topic, 11)]

    async def seal_gone() -> bool:
        return await store.get(layout.storage_state(topic)) is None

    await converged(store, seal_gone)
    last = second_host.publish(topic, 10)
    change = StorageManager(store).add_object_change(topic, descriptor(11, last), None)
    await change.guarded(second_host.fences[topic]).apply(store)
    # B dies: its assignment becomes a marker of a lost broker, as the leader would write.
    owner = await OwnershipManager(store).owner(topic)
    await OwnershipManager(store).unassign_change(topic, owner, reason="broker_lost").apply(store)
    third, third_host = await start_broker(9)
    await assign(store, topic, third)
    assert third_host.loads == [(topic, 21)]


# -- a transient error at each step ---------------------------------------------------------


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
async def test_a_transient_error_while_loading_is_retried(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started, after: bool
) -> None:
    """The read of the start offset fails once, then the host fails once, then the seal's
    removal fails once (before the store applies it, or after): the topic is served in the
    end, from the right offset, with its seal gone."""
    topic = (await create_topics(store, 1))[0]
    seal = SealedState(sealed=True, last_committed_offset=4, broker_id=OTHER, timestamp=1)
    await store.put(layout.storage_state(topic), encode(seal))
    broker, host = await start_broker()
    state = layout.storage_state(topic)
    faulty.fail("txn", state, when=lambda txn: not txn.writes)  # the read of the offsets
    host.fail_loads = 1
    faulty.fail("txn", state, after=after, when=deletes(state))  # the seal's removal
    revision = await OwnershipManager(store).assign(topic, BROKER)
    await broker.caught_up(revision, timeout=20)
    assert topic in broker.owned
    assert host.loads == [(topic, 5)]
    assert await store.get(layout.storage_state(topic)) is None
    assert broker.step_failures >= 2


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
async def test_a_transient_error_while_handing_over_is_retried(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started, after: bool
) -> None:
    """The hand-over's write (cursors and seal) fails once: before the store applies it, or
    after (the broker cannot tell). The topic is sealed once, with its cursor, and the broker
    stopped serving it at once."""
    topic = (await create_topics(store, 1))[0]
    broker, host = await start_broker()
    await assign(store, topic, broker)
    host.publish(topic, 30)
    broker.ack(topic, "sub", 20)
    faulty.fail(
        "txn", layout.storage_state(topic), after=after, when=writes(layout.storage_state(topic))
    )
    await move_away(store, topic)
    state = await sealed(store, topic)
    assert state.last_committed_offset == 29
    assert await cursor(store, topic) == 20
    assert topic not in broker.owned
    assert host.unloads == [(topic, 29)]  # unloaded once, whatever the retries
    assert broker.abandoned == 0
    entry = await store.get(layout.storage_state(topic))
    assert entry is not None and entry.version == 1  # written once


async def test_a_topic_taken_before_it_was_loaded_is_sealed_for_the_leader(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """Assigned, then moved away before the broker heard of it (its watch held up): the
    leader waits for a seal, so the broker seals it at what the store shows published."""
    topic = (await create_topics(store, 1))[0]
    await SubscriptionManager(store).write_cursor(topic, "sub", 3)
    broker, host = await start_broker()
    faulty.delay("watch", seconds=0.5, times=1)  # the next batch reaches it late
    await OwnershipManager(store).assign(topic, BROKER)
    await move_away(store, topic)
    state = await sealed(store, topic)
    assert state.last_committed_offset == 3
    assert state.broker_id == BROKER
    assert topic not in broker.owned
    assert host.loads in ([], [(topic, 4)])  # heard of both at once, or loaded it first


async def test_a_topic_taken_while_the_broker_heard_nothing_is_sealed_under_its_marker(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """The broker's watch shows nothing (held back) while the topic is assigned to it and
    moved away — as when both changes fall between two read-backs of a ZooKeeper watch.
    Its look at the unassigned markers finds the one naming it: it seals the topic under it
    (once, however often it looks again), and the new owner resumes after the seal."""
    topic, broker, host, held = await deaf_broker(store, faulty, start_broker, 0.05)
    assigned = await OwnershipManager(store).assign(topic, BROKER)
    await move_away(store, topic)
    state = await sealed(store, topic)
    assert (state.last_committed_offset, state.broker_id) == (3, BROKER)
    assert broker.cache.applied_revision < assigned  # the seal came from the marker
    assert host.loads == []
    assert await broker.look_at_markers() == []  # sealed under this marker already
    assert await broker.look_at_markers() == []
    entry = await store.get(layout.storage_state(topic))
    assert entry is not None and entry.version == 1
    # The new owner (on a store whose watches work) resumes after the seal and clears it.
    other_host = Topics()
    other = BrokerNode(store, config(OTHER), other_host)
    await other.start()
    try:
        await assign(store, topic, other)
        assert other_host.loads == [(topic, 4)]
        assert await store.get(layout.storage_state(topic)) is None
        faulty.remove(held)  # the broker hears of it all, late: it writes no seal
        await broker.caught_up(await store.revision(), timeout=20)
        assert await store.get(layout.storage_state(topic)) is None
        assert topic not in broker.owned and topic in other.owned
        assert host.loads in ([], [(topic, 4)])  # a late look at a stale assignment
    finally:
        await other.stop()


async def test_a_topic_taken_before_a_resync_is_sealed_under_its_marker(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """The broker's watch is broken while the topic is assigned to it and moved away, and
    the history is compacted (ZooKeeper has none): its cache resyncs and shows no
    difference. The broker looks at the markers after the resync (it looks periodically
    only once an hour here), seals the topic, and the new owner resumes after the seal."""
    topic = (await create_topics(store, 1))[0]
    await SubscriptionManager(store).write_cursor(topic, "sub", 3)
    broker, host = await start_broker(marker_interval=3600)
    await watching(store, broker)
    resyncs = broker.cache.resyncs
    broken = faulty.fail("watch", times=None)
    await broker.cache.wait_state(CacheState.DISCONNECTED, timeout=10)
    await OwnershipManager(store).assign(topic, BROKER)
    await move_away(store, topic)
    await store.compact(await store.revision())
    faulty.remove(broken)
    state = await sealed(store, topic)
    assert (state.last_committed_offset, state.broker_id) == (3, BROKER)
    assert broker.cache.resyncs > resyncs
    assert host.loads == []
    other, other_host = await start_broker(OTHER)
    await assign(store, topic, other)
    assert other_host.loads == [(topic, 4)]
    assert await store.get(layout.storage_state(topic)) is None
    assert await broker.look_at_markers() == []


async def test_a_seal_held_up_until_the_new_owner_loaded_is_refused(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """The broker's seal of a topic taken before it heard of it is held up in a slow store
    until the leader gave up waiting and the new owner loaded the topic and acknowledged
    more: the seal, under a marker that is gone, is refused — it neither appears nor sends
    a later owner back."""
    topic, broker, host, held = await deaf_broker(store, faulty, start_broker, 3600)
    await OwnershipManager(store).assign(topic, BROKER)
    await move_away(store, topic)
    state_key = layout.storage_state(topic)
    stuck = faulty.add(Fault("txn", state_key, times=None, kind="hang", when=writes(state_key)))
    await broker.look_at_markers()  # (or a look of its own found it already)
    await stuck.wait_struck()  # the seal is on its way
    faulty.remove(held)
    other, other_host = await start_broker(OTHER)
    revision = await OwnershipManager(store).assign(topic, OTHER)  # no seal: the leader gave up
    await other.caught_up(revision, timeout=20)
    assert other_host.loads == [(topic, 4)]
    other_host.publish(topic, 10)
    other.ack(topic, "sub", 13)
    assert await other.cursors.flush(topic) is not None
    await broker.cache.wait_for(revision)
    faulty.remove(stuck)
    await broker.caught_up(await store.revision(), timeout=20)
    assert await store.get(state_key) is None
    assert host.loads == []
    assert topic in other.owned
    await move_away(store, topic)
    assert (await sealed(store, topic)).last_committed_offset == 13


async def deaf_broker(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started, marker_interval: float
) -> tuple[TopicName, BrokerNode, Topics, Fault]:
    """A topic with a cursor at 3, a broker that looks at the markers every
    `marker_interval` seconds, and its watch held (hung) from now on."""
    topic = (await create_topics(store, 1))[0]
    await SubscriptionManager(store).write_cursor(topic, "sub", 3)
    broker, host = await start_broker(marker_interval=marker_interval)
    await watching(store, broker)
    held = faulty.hang("watch")
    await held.wait_struck()
    return topic, broker, host, held


async def watching(store: MetadataStore, broker: BrokerNode) -> None:
    """Return once the broker's watch is up: its cache has passed a write made now, and
    not by a resync (on ZooKeeper a watch set up after a change under its prefixes resyncs,
    and the next watch is set up after that)."""
    while True:
        resyncs = broker.cache.resyncs
        revision = await store.put("/x/probe", b"")
        await broker.caught_up(revision, timeout=20)
        if broker.cache.resyncs == resyncs:
            return


# -- fenced on owning the topic -------------------------------------------------------------


async def test_a_topic_moved_away_and_back_fences_the_old_ownership(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """Moved away and straight back to the same broker (before it noticed): a write fenced
    on its first assignment fails; the broker hands the topic over to itself and serves it
    again, after what it had published."""
    topic = (await create_topics(store, 1))[0]
    broker, host = await start_broker()
    await assign(store, topic, broker)
    old = host.fences[topic]
    host.publish(topic, 12)
    faulty.delay("watch", seconds=0.3, times=2)  # the broker hears of it late
    await move_away(store, topic)
    revision = await OwnershipManager(store).assign(topic, BROKER)
    with pytest.raises(TopicNotOwned):
        await Change((), (Put(layout.cursor(topic, "sub"), b"1"),)).guarded(old).apply(store)
    await broker.caught_up(revision, timeout=20)
    assert host.loads == [(topic, 0), (topic, 12)]
    assert topic in broker.owned
    assert await store.get(layout.cursor(topic, "sub")) is None


async def test_an_owned_fence_holds_only_for_the_assignment_it_names(store: MetadataStore) -> None:
    topic = (await create_topics(store, 1))[0]
    first = await store.put(layout.assignment(BROKER, topic), b"null")
    fence = owned(BROKER, topic, first)
    await Change((), (Put("/x/one", b""),)).guarded(fence).apply(store)
    await store.delete(layout.assignment(BROKER, topic))
    await store.put(layout.assignment(BROKER, topic), b"null")
    with pytest.raises(TopicNotOwned):
        await Change((), (Put("/x/two", b""),)).guarded(fence).apply(store)
    assert await store.get("/x/two") is None


def descriptor(start: int, end: int) -> ObjectDescriptor:
    return ObjectDescriptor(
        completed=True,
        created_at=1,
        end_offset=end,
        etag=None,
        object_id=f"data-{start}-{end}.dnb1",
        offset_index=[(start, 0)],
        size=(end - start + 1) * 100,
        start_offset=start,
    )


async def test_a_broker_starts_through_one_transient_error_at_each_step(
    store: MetadataStore, faulty: FaultyStore, start_broker: Started
) -> None:
    """Its lease, its registration, its state and its cache's first read each meet one
    Unavailable: the broker waits each out and joins (it used to exit)."""
    faulty.fail("grant")
    faulty.fail("txn", layout.broker_registration(BROKER))
    faulty.fail("put", layout.broker_state(BROKER))
    faulty.fail("txn", layout.broker_state(BROKER))
    faulty.fail("list", layout.broker_prefix(BROKER))
    broker, _ = await start_broker()
    assert broker.session.alive
    assert await store.get(layout.broker_registration(BROKER)) is not None
    assert sum(fault.hits for fault in faulty.faults) >= 4
