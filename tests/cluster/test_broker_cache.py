"""A broker's cache follows what it serves: the cluster-wide keys that do not grow with
topics, and every key of its own topics (with their namespace's policy) from the moment it
loads them until it hands them over — never another broker's topics."""

from __future__ import annotations

from metaplane import layout
from metaplane.cluster import UNLOAD
from metaplane.resources import OwnershipManager, SubscriptionManager
from metaplane.store import MetadataStore
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
