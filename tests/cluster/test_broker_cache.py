"""A broker's cache follows what it serves: the cluster-wide keys that do not grow with
topics, and every key of its own topics (with their namespace's policy) from the moment it
loads them until it hands them over — never another broker's topics."""

from __future__ import annotations

import pytest

import metaplane.cluster._broker as broker_module
from metaplane import layout
from metaplane.cluster import UNLOAD
from metaplane.resources import ClusterManager, OwnershipManager, SubscriptionManager, Writer
from metaplane.store import MetadataStore, Unavailable
from tests.cluster.brokers import BROKER, Started, assign, sealed
from tests.cluster.test_cluster import converged, create_topics
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND


async def test_the_cache_holds_its_topics_and_drops_them_at_hand_over(
    store: MetadataStore, start_broker: Started
) -> None:
    mine, other = await create_topics(store, 2)
    broker, _ = await start_broker()
    cache = broker.cache
    assert not cache.covers(layout.cursor(mine, "sub"))
    await assign(store, mine, broker)
    await SubscriptionManager(store).write_cursor(mine, "sub", 7)
    revision = await SubscriptionManager(store).write_cursor(other, "sub", 9)
    await cache.wait_for(revision, timeout=10)
    assert cache.covers(layout.cursor(mine, "sub"))
    assert cache.covers(layout.storage_state(mine))
    assert cache.covers(layout.namespace_policy(mine.namespace))
    assert not cache.covers(layout.cursor(other, "sub"))  # not its topic
    assert not cache.covers(layout.namespace_topic(other))  # grows with topics: not held
    # Its reads of its topic come from memory, the value as the store has it.
    cursor = await broker.subscriptions.cursor(mine, "sub")
    assert cursor.value == 7 and cache.get(cursor.key) is not None
    await OwnershipManager(store).unassign(mine, reason=UNLOAD)
    await sealed(store, mine)

    async def dropped() -> bool:
        return not cache.covers(layout.cursor(mine, "sub"))

    await converged(store, dropped)
    assert not cache.covers(layout.namespace_policy(mine.namespace))
    assert cache.list(layout.registrations_prefix())  # the cluster-wide keys stay
    assert layout.broker_prefix(BROKER) in cache.prefixes


async def test_a_bulk_follow_that_fails_is_retried_in_bulk(
    store: MetadataStore, start_broker: Started, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many topics assigned at once are followed in chunks; a chunk's follow that fails (one
    transient error) is tried again in bulk, never topic by topic. (Loaded one by one after
    a failed bulk follow, 25,000 topics took a round trip each at 1M topics on etcd.)"""
    monkeypatch.setattr(broker_module, "FOLLOW_CHUNK", 10)
    topics = await create_topics(store, 40)
    broker, _ = await start_broker()
    cache = broker.cache
    follow = cache.follow
    followed: list[int] = []  # topics a follow call carried

    async def failing_once(prefixes: list[str]) -> int:
        count = sum(1 for prefix in prefixes if prefix.startswith("/topics/"))  # roots
        followed.append(count)
        if len(followed) == 1:
            raise Unavailable("injected: the first bulk follow fails")
        return await follow(prefixes)

    monkeypatch.setattr(cache, "follow", failing_once)
    ownership = OwnershipManager(store)
    waiting = [(topic, await ownership.unassigned_marker(topic)) for topic in topics]
    state = await ClusterManager(store).state(BROKER)
    await Writer(store).apply(ownership.assign_many_change(BROKER, waiting, state=state))

    async def served() -> bool:
        return len(broker.owned) == len(topics)

    await converged(store, served)
    assert followed[0] == 10, followed  # the first chunk: refused
    assert all(count == 10 for count in followed), followed  # in chunks, never one by one
    assert all(cache.covers(layout.topic_delivery(topic)) for topic in topics)
