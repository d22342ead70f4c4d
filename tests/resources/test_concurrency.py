"""Concurrent conflicting writes on every backend: of 8 updates of one resource over the same
version exactly one wins and the others get `BadVersion`; of 8 creates of one resource
exactly one wins and the others get its typed "exists" error."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerRegistered,
    BrokerState,
    ClusterManager,
    Delivery,
    NamespaceExists,
    NamespaceManager,
    NamespacePolicy,
    ObjectExists,
    ProducerExists,
    SealedStateExists,
    StorageManager,
    SubscriptionExists,
    SubscriptionManager,
    TopicExists,
    TopicManager,
)
from metaplane.store import ABSENT, BadVersion, MetadataError, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND, REVISIONS_COUNT_WRITES, WITHOUT_ZK

from .samples import (
    BROKER,
    SEALED,
    TOPIC,
    descriptor,
    load_report,
    producer,
    registration,
    subscription,
)

pytestmark = EVERY_BACKEND

N = 8
Write = Callable[[int], Awaitable[int]]
"""The i-th of the N conflicting writes."""


async def with_topic(store: MetadataStore) -> None:
    await NamespaceManager(store).create("default")
    await TopicManager(store).create(TOPIC)
    await SubscriptionManager(store).create(TOPIC, subscription())
    await SubscriptionManager(store).write_cursor(TOPIC, "subs_reliable", 0)


async def updates(store: MetadataStore, resource: str) -> Write:
    """Prepare `resource` at version 1 and return its update over version 1."""
    await with_topic(store)
    subscriptions, topics = SubscriptionManager(store), TopicManager(store)
    cluster, storage = ClusterManager(store), StorageManager(store)
    if resource == "namespace policy":
        policy = NamespacePolicy
        return lambda i: NamespaceManager(store).set_policy(
            "default", policy(max_producers_per_topic=i), 1
        )
    if resource == "delivery":
        modes = (Delivery.NON_RELIABLE, Delivery.RELIABLE)
        return lambda i: topics.set_delivery(TOPIC, modes[i % 2], 1)
    if resource == "subscription":
        return lambda i: subscriptions.replace(TOPIC, subscription(consumer=i), 1)
    if resource == "subscription fields":
        return lambda i: subscriptions.update(TOPIC, "subs_reliable", 1, consumer_id=i)
    if resource == "cursor":
        return lambda i: subscriptions.write_cursor(TOPIC, "subs_reliable", i, 1)
    if resource == "broker state":
        await cluster.set_state(BROKER, BrokerState(mode=BrokerMode.ACTIVE, reason="boot"), ABSENT)
        drain = BrokerMode.DRAINING
        return lambda i: cluster.set_state(BROKER, BrokerState(mode=drain, reason=f"r{i}"), 1)
    if resource == "load report":
        await cluster.write_load_report(BROKER, load_report(0), ABSENT)
        return lambda i: cluster.write_load_report(BROKER, load_report(i), 1)
    assert resource == "storage object"
    await storage.add_object(TOPIC, descriptor(0, 9, completed=False))
    return lambda i: storage.replace_object(TOPIC, descriptor(0, 10 + i), 1)


@pytest.mark.parametrize(
    "resource",
    [
        "namespace policy",
        "delivery",
        "subscription",
        "subscription fields",
        "cursor",
        "broker state",
        "load report",
        "storage object",
    ],
)
async def test_one_update_of_n_wins(store: MetadataStore, resource: str) -> None:
    write = await updates(store, resource)
    outcomes = await asyncio.gather(*(write(i) for i in range(N)), return_exceptions=True)
    won = [outcome for outcome in outcomes if isinstance(outcome, int)]
    lost = [outcome for outcome in outcomes if not isinstance(outcome, int)]
    assert len(won) == 1, outcomes
    assert all(type(error) is BadVersion for error in lost), lost
    versions = {(e.expected, e.actual) for e in lost if isinstance(e, BadVersion)}
    assert versions == {(1, 2)}


async def creates(store: MetadataStore, resource: str) -> tuple[Write, type[MetadataError]]:
    """The i-th create of `resource`, and the error of those that lose."""
    if resource == "namespace":
        return lambda i: NamespaceManager(store).create("default"), NamespaceExists
    await NamespaceManager(store).create("default")
    topics = TopicManager(store)
    if resource == "topic":
        return lambda i: topics.create(TOPIC, partitions=i % 2 * 3), TopicExists
    if resource == "partitioned topic, in chunks":
        return lambda i: topics.create(TopicName("default", "big"), partitions=40), TopicExists
    if resource == "broker registration":
        lease = await store.grant(60)
        cluster = ClusterManager(store)
        return lambda i: cluster.register(BROKER, registration(6000 + i), lease), BrokerRegistered
    await topics.create(TOPIC)
    if resource == "producer":
        return lambda i: topics.register_producer(TOPIC, producer()), ProducerExists
    if resource == "subscription":
        subscriptions = SubscriptionManager(store)
        return lambda i: subscriptions.create(TOPIC, subscription(consumer=i)), SubscriptionExists
    storage = StorageManager(store)
    if resource == "storage object":
        return lambda i: storage.add_object(TOPIC, descriptor(0, 10 + i)), ObjectExists
    assert resource == "sealed state"
    return lambda i: storage.seal(TOPIC, SEALED), SealedStateExists


@pytest.mark.parametrize(
    "resource",
    [
        "namespace",
        "topic",
        "partitioned topic, in chunks",
        "broker registration",
        "producer",
        "subscription",
        "storage object",
        "sealed state",
    ],
)
@pytest.mark.backends(*WITHOUT_ZK, reason=REVISIONS_COUNT_WRITES)
async def test_one_create_of_n_wins(store: MetadataStore, resource: str) -> None:
    write, exists = await creates(store, resource)
    before = await store.revision()
    outcomes = await asyncio.gather(*(write(i) for i in range(N)), return_exceptions=True)
    won = [outcome for outcome in outcomes if isinstance(outcome, int)]
    lost = [outcome for outcome in outcomes if not isinstance(outcome, int)]
    assert len(won) == 1, outcomes
    assert all(type(error) is exists for error in lost), lost
    chunks = 2 if resource.endswith("in chunks") else 1
    assert await store.revision() == before + chunks, "the losers wrote nothing"
