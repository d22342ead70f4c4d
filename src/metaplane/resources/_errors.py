"""The errors of the resources layer, rooted in the store's tree; each names its resource.

MetadataError (metaplane.store)
├── NotFound
│   ├── NoNamespace           namespace
│   ├── NoTopic               topic
│   ├── NoProducer            topic, producer_id
│   ├── NoSubscription        topic, subscription
│   ├── NoCursor              topic, subscription
│   ├── NoObject              topic, offset (a storage object descriptor)
│   ├── NoSealedState         topic
│   ├── NoCluster             cluster_name
│   ├── NoBroker              broker_id (no registration, or no state)
│   ├── NoLoadReport          broker_id
│   ├── NoLeader
│   ├── NoTopicOwnerInfo      topic (assigned to no broker)
│   └── NoUnassignedMarker    topic (not waiting for assignment)
├── AlreadyExists
│   ├── NamespaceExists       namespace
│   ├── TopicExists           topic
│   ├── ProducerExists        topic, producer_id
│   ├── SubscriptionExists    topic, subscription
│   ├── ObjectExists          topic, offset
│   ├── SealedStateExists     topic
│   ├── ClusterExists         cluster_name
│   ├── BrokerRegistered      broker_id
│   ├── TopicAssigned         topic, broker_id
│   └── AlreadyUnassigned     topic
├── BadVersion                a key at another version than the one given (the store's)
│   └── ChangedSinceRead      a key written since it was read (by mod_revision)
├── Fenced                    a fenced write by a writer whose token is stale (the store's)
│   └── TopicNotOwned         topic, broker_id: the broker no longer owns the topic
├── NamespaceNotEmpty         namespace
├── BrokerNotActive           broker_id, mode
└── InvalidRequest
    └── InvalidValue
        └── MalformedValue    a value without its kind's format

Every error of a failed change means the change wrote nothing.
"""

from __future__ import annotations

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.store import (
    AlreadyExists,
    BadVersion,
    Fenced,
    InvalidValue,
    MetadataError,
    NotFound,
)


class MalformedValue(InvalidValue):
    """A value that does not have the format of its kind; never a raw msgspec exception."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"malformed {what} value: {reason}")
        self.what = what
        self.reason = reason


class ChangedSinceRead(BadVersion):
    """A key was written (or deleted, or created) after it was read for this change.

    `expected` and `actual` are mod_revisions here (0: the key did not exist): a key deleted
    and created again has the same version, never the same mod_revision.
    """

    def __init__(self, key: str, expected: int, actual: int) -> None:
        MetadataError.__init__(
            self, f"{key}: changed since it was read (mod_revision {expected}, now {actual})"
        )
        self.key = key
        self.expected = expected
        self.actual = actual


class TopicNotOwned(Fenced):
    """A broker's write about a topic it no longer owns (under the assignment it served):
    refused, so that a paused or deposed owner never writes over its successor."""

    def __init__(self, topic: TopicName, broker_id: int) -> None:
        super().__init__(f"broker {broker_id} no longer owns topic {topic}")
        self.topic = topic
        self.broker_id = broker_id


class NamespaceNotEmpty(MetadataError):
    """A namespace cannot be deleted while topics are listed in it."""

    def __init__(self, namespace: str) -> None:
        super().__init__(f"namespace {namespace!r} still has topics; delete them first")
        self.namespace = namespace


class BrokerNotActive(MetadataError):
    """A topic can be assigned only to a broker whose state is active."""

    def __init__(self, broker_id: int, mode: str) -> None:
        super().__init__(f"broker {broker_id} is {mode}, not active")
        self.broker_id = broker_id
        self.mode = mode


# Not found ----------------------------------------------------------------------------------


class NoNamespace(NotFound):
    def __init__(self, namespace: str) -> None:
        super().__init__(
            layout.namespace_policy(namespace), f"namespace {namespace!r} does not exist"
        )
        self.namespace = namespace


class NoTopic(NotFound):
    def __init__(self, topic: TopicName) -> None:
        super().__init__(layout.topic_root(topic), f"topic {topic} does not exist")
        self.topic = topic


class NoProducer(NotFound):
    def __init__(self, topic: TopicName, producer_id: int) -> None:
        super().__init__(
            layout.producer(topic, producer_id),
            f"topic {topic} has no producer {producer_id}",
        )
        self.topic = topic
        self.producer_id = producer_id


class NoSubscription(NotFound):
    def __init__(self, topic: TopicName, subscription: str) -> None:
        super().__init__(
            layout.subscription(topic, subscription),
            f"topic {topic} has no subscription {subscription!r}",
        )
        self.topic = topic
        self.subscription = subscription


class NoCursor(NotFound):
    def __init__(self, topic: TopicName, subscription: str) -> None:
        super().__init__(
            layout.cursor(topic, subscription),
            f"subscription {subscription!r} of topic {topic} has no cursor yet",
        )
        self.topic = topic
        self.subscription = subscription


class NoObject(NotFound):
    """No storage object descriptor starts at `offset` (or, from `find_object`, holds it;
    `offset` is None when the topic has no current object)."""

    def __init__(self, topic: TopicName, offset: int | None, message: str | None = None) -> None:
        key = layout.storage_cur(topic) if offset is None else layout.storage_object(topic, offset)
        where = "no current object" if offset is None else f"no object at offset {offset}"
        super().__init__(key, message or f"topic {topic} has {where} in storage")
        self.topic = topic
        self.offset = offset


class NoSealedState(NotFound):
    def __init__(self, topic: TopicName) -> None:
        super().__init__(layout.storage_state(topic), f"topic {topic} has no sealed state")
        self.topic = topic


class NoCluster(NotFound):
    def __init__(self, cluster_name: str) -> None:
        super().__init__(
            layout.cluster_name(cluster_name), f"cluster {cluster_name!r} does not exist"
        )
        self.cluster_name = cluster_name


class NoBroker(NotFound):
    """The broker is unknown: not registered, or without a state (`key` says which)."""

    def __init__(self, broker_id: int, key: str | None = None) -> None:
        key = key or layout.broker_registration(broker_id)
        super().__init__(key, f"broker {broker_id} is unknown ({key} does not exist)")
        self.broker_id = broker_id


class NoLoadReport(NotFound):
    def __init__(self, broker_id: int) -> None:
        super().__init__(layout.load_report(broker_id), f"broker {broker_id} has no load report")
        self.broker_id = broker_id


class NoLeader(NotFound):
    def __init__(self) -> None:
        super().__init__(layout.leader(), "the cluster has no leader now")


class NoTopicOwnerInfo(NotFound):
    """The topic is assigned to no broker (it may be waiting for assignment)."""

    def __init__(self, topic: TopicName, broker_id: int | None = None) -> None:
        key = layout.unassigned(topic) if broker_id is None else layout.assignment(broker_id, topic)
        owner = "no broker" if broker_id is None else f"not to broker {broker_id}"
        super().__init__(key, f"topic {topic} is assigned to {owner}")
        self.topic = topic
        self.broker_id = broker_id


class NoUnassignedMarker(NotFound):
    def __init__(self, topic: TopicName) -> None:
        super().__init__(layout.unassigned(topic), f"topic {topic} is not waiting for assignment")
        self.topic = topic


# Already exists -----------------------------------------------------------------------------


class NamespaceExists(AlreadyExists):
    def __init__(self, namespace: str) -> None:
        super().__init__(
            layout.namespace_policy(namespace), f"namespace {namespace!r} already exists"
        )
        self.namespace = namespace


class TopicExists(AlreadyExists):
    def __init__(self, topic: TopicName) -> None:
        super().__init__(layout.topic_root(topic), f"topic {topic} already exists")
        self.topic = topic


class ProducerExists(AlreadyExists):
    def __init__(self, topic: TopicName, producer_id: int) -> None:
        super().__init__(
            layout.producer(topic, producer_id),
            f"producer {producer_id} is already registered on topic {topic}",
        )
        self.topic = topic
        self.producer_id = producer_id


class SubscriptionExists(AlreadyExists):
    """Hedwig's SubscriptionStateExistsException."""

    def __init__(self, topic: TopicName, subscription: str) -> None:
        super().__init__(
            layout.subscription(topic, subscription),
            f"topic {topic} already has a subscription {subscription!r}",
        )
        self.topic = topic
        self.subscription = subscription


class ObjectExists(AlreadyExists):
    def __init__(self, topic: TopicName, offset: int) -> None:
        super().__init__(
            layout.storage_object(topic, offset),
            f"topic {topic} already has a storage object at offset {offset}",
        )
        self.topic = topic
        self.offset = offset


class SealedStateExists(AlreadyExists):
    def __init__(self, topic: TopicName) -> None:
        super().__init__(layout.storage_state(topic), f"topic {topic} is already sealed")
        self.topic = topic


class ClusterExists(AlreadyExists):
    def __init__(self, cluster_name: str) -> None:
        super().__init__(
            layout.cluster_name(cluster_name), f"cluster {cluster_name!r} already exists"
        )
        self.cluster_name = cluster_name


class BrokerRegistered(AlreadyExists):
    def __init__(self, broker_id: int) -> None:
        super().__init__(
            layout.broker_registration(broker_id), f"broker {broker_id} is already registered"
        )
        self.broker_id = broker_id


class TopicAssigned(AlreadyExists):
    def __init__(self, topic: TopicName, broker_id: int) -> None:
        super().__init__(
            layout.assignment(broker_id, topic),
            f"topic {topic} is already assigned to broker {broker_id}",
        )
        self.topic = topic
        self.broker_id = broker_id


class AlreadyUnassigned(AlreadyExists):
    def __init__(self, topic: TopicName) -> None:
        super().__init__(
            layout.unassigned(topic), f"topic {topic} is already waiting for assignment"
        )
        self.topic = topic
