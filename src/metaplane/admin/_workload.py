"""The metadata of a simulated workload: namespaces, topics with subscriptions and producers,
and a schema bound to some of them — with the brokers' simulated traffic, every kind of key of
the layout is exercised. Creating it again changes nothing."""

from __future__ import annotations

import contextlib
import json
import random

from metaplane.layout import TopicName
from metaplane.resources import (
    ClusterExists,
    ClusterManager,
    NamespaceExists,
    NamespaceManager,
    ProducerAccessMode,
    ProducerExists,
    ProducerRegistration,
    SubscriptionExists,
    SubscriptionManager,
    SubscriptionMetadata,
    SubscriptionType,
    TopicExists,
    TopicManager,
)
from metaplane.schema import SchemaRegistry, SchemaType
from metaplane.store import MetadataStore

CLUSTER = "standalone"
TOPICS = {
    "orders": ["created", "paid", "shipped", "returned"],
    "telemetry": ["cpu", "memory", "disk", "network"],
}
SUBSCRIPTIONS = {
    "billing": SubscriptionType.EXCLUSIVE,
    "audit": SubscriptionType.SHARED,
    "dashboard": SubscriptionType.FAILOVER,
}
ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string", "default": "EUR"},
    ],
}


async def create_workload(store: MetadataStore) -> list[TopicName]:
    """Create what is missing of the workload; return its topics."""
    with contextlib.suppress(ClusterExists):
        await ClusterManager(store).create_cluster(CLUSTER)
    topics: list[TopicName] = []
    for namespace, names in TOPICS.items():
        await _namespace(store, namespace)
        for name in names:
            topic = TopicName(namespace, name)
            await _topic(store, topic)
            topics.append(topic)
    await _order_schema(store, [t for t in topics if t.namespace == "orders"])
    return topics


async def _namespace(store: MetadataStore, namespace: str) -> None:
    with contextlib.suppress(NamespaceExists):
        await NamespaceManager(store).create(namespace)


async def _topic(store: MetadataStore, topic: TopicName) -> None:
    manager = TopicManager(store)
    with contextlib.suppress(TopicExists):
        await manager.create(topic)
    rng = random.Random(topic.path)  # the same producer id each time: idempotent
    producer = ProducerRegistration(
        access_mode=ProducerAccessMode.SHARED,
        producer_id=rng.getrandbits(64) | 1 << 63,  # ids above 2^63, as Danube's often are
        producer_name=f"{topic.topic}-producer",
        status=True,
        topic_name=topic.path,
    )
    with contextlib.suppress(ProducerExists):
        await manager.register_producer(topic, producer)
    for name, kind in SUBSCRIPTIONS.items():
        metadata = SubscriptionMetadata(
            consumer_id=None,
            consumer_name=f"{name}-consumer",
            subscription_name=name,
            subscription_type=kind,
        )
        with contextlib.suppress(SubscriptionExists):
            await SubscriptionManager(store).create(topic, metadata)


async def _order_schema(store: MetadataStore, topics: list[TopicName]) -> None:
    registry = SchemaRegistry(store, created_by="metaplane-workload")
    await registry.register("orders-value", SchemaType.AVRO, json.dumps(ORDER_SCHEMA, indent=2))
    for topic in topics:
        if await registry.topic_subject(topic) != "orders-value":
            await registry.bind_topic(topic, "orders-value")
