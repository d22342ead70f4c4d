"""The key builders and the prefixes components watch and list, one function per path.

Every argument is checked against its naming rule; a prefix is a key kind's template cut short,
so it can never drift from the keys it covers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec

from metaplane.layout._names import TopicName
from metaplane.layout._table import KeyKind, render, render_prefix

P = ParamSpec("P")

_REMEMBERED = 1 << 17
"""Keys each builder remembers: the hot paths (a cursor, a seal) build the same keys again
and again, and checking and rendering them costs far more than a look-up."""


def _remembered(build: Callable[P, str]) -> Callable[P, str]:
    """`build`, with the keys it made kept by its positional arguments (a topic, names, ids).
    A bool is never looked up — `True == 1` would find the key of id 1 — so the builder
    refuses it as it refuses any bad argument."""
    made: dict[object, str] = {}

    def remembered(*args: P.args, **kwargs: P.kwargs) -> str:
        if bool in map(type, args):
            return build(*args, **kwargs)
        try:
            return made[args[0] if len(args) == 1 else args]
        except (KeyError, TypeError, IndexError):  # new, unhashable, or given by keyword
            pass
        key = build(*args, **kwargs)
        if args and not kwargs:
            if len(made) >= _REMEMBERED:
                made.clear()
            made[args[0] if len(args) == 1 else args] = key
        return key

    remembered.__doc__ = build.__doc__
    remembered.__name__ = build.__name__
    return remembered


def _topic(topic: TopicName) -> dict[str, object]:
    if not isinstance(topic, TopicName):
        raise TypeError(f"a topic is a TopicName, not {type(topic).__name__}")
    return {"namespace": topic.namespace, "topic": topic.topic}


# Cluster ------------------------------------------------------------------------------------


def cluster_name(name: str) -> str:
    """`/cluster/{name}`: the marker that the cluster exists."""
    return render(KeyKind.CLUSTER_NAME, cluster_name=name)


def broker_registration(broker_id: int) -> str:
    """`/cluster/register/{broker_id}`: a broker's endpoints, under its session lease."""
    return render(KeyKind.BROKER_REGISTRATION, broker_id=broker_id)


def broker_state(broker_id: int) -> str:
    """`/cluster/brokers/{broker_id}/state`: active, draining or drained."""
    return render(KeyKind.BROKER_STATE, broker_id=broker_id)


@_remembered
def assignment(broker_id: int, topic: TopicName) -> str:
    """`/cluster/brokers/{broker_id}/{ns}/{topic}`: the topic is served by that broker."""
    return render(KeyKind.ASSIGNMENT, broker_id=broker_id, **_topic(topic))


@_remembered
def unassigned(topic: TopicName) -> str:
    """`/cluster/unassigned/{ns}/{topic}`: the topic waits for the leader to assign it."""
    return render(KeyKind.UNASSIGNED, **_topic(topic))


def load_report(broker_id: int) -> str:
    """`/cluster/load/{broker_id}`: the broker's latest load report."""
    return render(KeyKind.LOAD_REPORT, broker_id=broker_id)


def leader() -> str:
    """`/cluster/leader`: the leader's broker id, under its session lease."""
    return render(KeyKind.LEADER)


def leader_epoch() -> str:
    """`/cluster/leader_epoch`: bumped with every election, for fencing."""
    return render(KeyKind.LEADER_EPOCH)


def lock(name: str, holder: int) -> str:
    """`/cluster/locks/{name}/{holder}`: a waiter of a fenced lock (the holder: its lease)."""
    return render(KeyKind.LOCK, lock_name=name, holder=holder)


def lock_prefix(name: str) -> str:
    """`/cluster/locks/{name}`: every waiter of one lock, the owner first by creation."""
    return render_prefix(KeyKind.LOCK, 1, lock_name=name)


def cluster_prefix() -> str:
    """`/cluster`: every cluster-wide key."""
    return render_prefix(KeyKind.LEADER, 1)


def registrations_prefix() -> str:
    """`/cluster/register`: every broker registration."""
    return render_prefix(KeyKind.BROKER_REGISTRATION, 1)


def brokers_prefix() -> str:
    """`/cluster/brokers`: every broker's state and assignments."""
    return render_prefix(KeyKind.BROKER_STATE, 2)


def broker_prefix(broker_id: int) -> str:
    """`/cluster/brokers/{broker_id}`: the broker's assignments and its state key.

    What a broker watches for the topics it must load; `parse` tells the state apart.
    """
    return render_prefix(KeyKind.BROKER_STATE, 1, broker_id=broker_id)


def unassigned_prefix() -> str:
    """`/cluster/unassigned`: every topic waiting for assignment (the leader watches it)."""
    return render_prefix(KeyKind.UNASSIGNED, 2)


def load_reports_prefix() -> str:
    """`/cluster/load`: every broker's load report."""
    return render_prefix(KeyKind.LOAD_REPORT, 1)


# Namespaces ---------------------------------------------------------------------------------


def namespace_policy(namespace: str) -> str:
    """`/namespaces/{ns}/policy`: the namespace's limits."""
    return render(KeyKind.NAMESPACE_POLICY, namespace=namespace)


@_remembered
def namespace_topic(topic: TopicName) -> str:
    """`/namespaces/{ns}/topics/{ns}/{topic}`: the topic is listed in its namespace."""
    return render(KeyKind.NAMESPACE_TOPIC, **_topic(topic))


def namespaces_prefix() -> str:
    """`/namespaces`: every namespace's keys."""
    return render_prefix(KeyKind.NAMESPACE_POLICY, 2)


def namespace_prefix(namespace: str) -> str:
    """`/namespaces/{ns}`: the namespace's policy and topic list."""
    return render_prefix(KeyKind.NAMESPACE_POLICY, 1, namespace=namespace)


def namespace_topics_prefix(namespace: str) -> str:
    """`/namespaces/{ns}/topics`: the namespace's topic list."""
    return render_prefix(KeyKind.NAMESPACE_TOPIC, 2, namespace=namespace)


# Topics -------------------------------------------------------------------------------------


@_remembered
def topic_root(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}`: the topic's partition count, and the prefix of all its keys."""
    return render(KeyKind.TOPIC_ROOT, **_topic(topic))


@_remembered
def topic_delivery(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}/delivery`: "Reliable" or "NonReliable"."""
    return render(KeyKind.TOPIC_DELIVERY, **_topic(topic))


def producer(topic: TopicName, producer_id: int) -> str:
    """`/topics/{ns}/{topic}/producers/{producer_id}`."""
    return render(KeyKind.PRODUCER, producer_id=producer_id, **_topic(topic))


@_remembered
def subscription(topic: TopicName, subscription: str) -> str:
    """`/topics/{ns}/{topic}/subscriptions/{sub}`."""
    return render(KeyKind.SUBSCRIPTION, subscription=subscription, **_topic(topic))


@_remembered
def cursor(topic: TopicName, subscription: str) -> str:
    """`/topics/{ns}/{topic}/subscriptions/{sub}/cursor`: the last acknowledged offset."""
    return render(KeyKind.CURSOR, subscription=subscription, **_topic(topic))


@_remembered
def topic_schema_subject(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}/schema_subject`: the schema subject the topic is bound to
    (Danube's key, not in seed 001)."""
    return render(KeyKind.TOPIC_SCHEMA_SUBJECT, **_topic(topic))


def topics_prefix(namespace: str | None = None) -> str:
    """`/topics`: every topic's keys; `/topics/{ns}` with a namespace: those of its topics."""
    if namespace is None:
        return render_prefix(KeyKind.TOPIC_ROOT, 2)
    return render_prefix(KeyKind.TOPIC_ROOT, 1, namespace=namespace)


@_remembered
def producers_prefix(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}/producers`: the topic's producers."""
    return render_prefix(KeyKind.PRODUCER, 1, **_topic(topic))


@_remembered
def subscriptions_prefix(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}/subscriptions`: the topic's subscriptions and their cursors."""
    return render_prefix(KeyKind.SUBSCRIPTION, 1, **_topic(topic))


# Schemas ------------------------------------------------------------------------------------


def next_schema_id() -> str:
    """`/schemas/_global/next_schema_id`: the next global schema id."""
    return render(KeyKind.NEXT_SCHEMA_ID)


def default_compatibility_mode() -> str:
    """`/schemas/_global/compatibility_mode`: the mode a new subject starts with (ours)."""
    return render(KeyKind.DEFAULT_COMPATIBILITY_MODE)


def schema_metadata(subject: str) -> str:
    """`/schemas/{subject}/metadata`: the subject and all its versions."""
    return render(KeyKind.SCHEMA_METADATA, subject=subject)


def schema_version(subject: str, version: int) -> str:
    """`/schemas/{subject}/versions/{version}`: one immutable version (from 1)."""
    return render(KeyKind.SCHEMA_VERSION, subject=subject, version=version)


def schema_by_id(schema_id: int) -> str:
    """`/schemas/_index/by_id/{schema_id}`: which subject a global schema id belongs to."""
    return render(KeyKind.SCHEMA_BY_ID, schema_id=schema_id)


@_remembered
def schema_references(subject: str) -> str:
    """`/schemas/{subject}/references`: the references of each of the subject's versions
    that has some (ours)."""
    return render(KeyKind.SCHEMA_REFERENCES, subject=subject)


@_remembered
def schema_referenced_by(subject: str) -> str:
    """`/schemas/{subject}/referenced_by`: the versions of other subjects that reference each
    of the subject's versions (ours)."""
    return render(KeyKind.SCHEMA_REFERENCED_BY, subject=subject)


@_remembered
def schema_config(subject: str) -> str:
    """`/schemas/{subject}/config`: the subject's settings (its JSON Schema draft; ours)."""
    return render(KeyKind.SCHEMA_CONFIG, subject=subject)


def default_schema_config() -> str:
    """`/schemas/_global/config`: the settings a new subject starts with (ours)."""
    return render(KeyKind.DEFAULT_SCHEMA_CONFIG)


def schemas_prefix() -> str:
    """`/schemas`: the whole registry (subjects, counter, index)."""
    return render_prefix(KeyKind.SCHEMA_METADATA, 2)


def subject_prefix(subject: str) -> str:
    """`/schemas/{subject}`: the subject's metadata, versions, references and settings."""
    return render_prefix(KeyKind.SCHEMA_METADATA, 1, subject=subject)


def schema_versions_prefix(subject: str) -> str:
    """`/schemas/{subject}/versions`: the subject's versions."""
    return render_prefix(KeyKind.SCHEMA_VERSION, 1, subject=subject)


def schema_index_prefix() -> str:
    """`/schemas/_index/by_id`: the id index."""
    return render_prefix(KeyKind.SCHEMA_BY_ID, 1)


# Tiered storage -----------------------------------------------------------------------------


def storage_object(topic: TopicName, start_offset: int) -> str:
    """`…/objects/{start_offset:020d}`: the descriptor of the object starting there."""
    return render(KeyKind.STORAGE_OBJECT, offset=start_offset, **_topic(topic))


@_remembered
def storage_cur(topic: TopicName) -> str:
    """`…/objects/cur`: the start of the topic's current object."""
    return render(KeyKind.STORAGE_CUR, **_topic(topic))


@_remembered
def storage_state(topic: TopicName) -> str:
    """`/danube-data/storage/topics/{ns}/{topic}/state`: the sealed state of a topic move."""
    return render(KeyKind.STORAGE_STATE, **_topic(topic))


def storage_prefix() -> str:
    """`/danube-data/storage/topics`: the storage metadata of every topic."""
    return render_prefix(KeyKind.STORAGE_STATE, 3)


@_remembered
def storage_topic_prefix(topic: TopicName) -> str:
    """`/danube-data/storage/topics/{ns}/{topic}`: the topic's objects, cursor and state."""
    return render_prefix(KeyKind.STORAGE_STATE, 1, **_topic(topic))


@_remembered
def storage_objects_prefix(topic: TopicName) -> str:
    """`…/objects`: the topic's object descriptors and its `cur` pointer."""
    return render_prefix(KeyKind.STORAGE_OBJECT, 1, **_topic(topic))


# Danube's legacy keys (seeds 000/003): built for reading and migrating, never written --------


def legacy_cluster_name() -> str:
    """`/cluster/cluster-name`: the cluster's name as a JSON string."""
    return render(KeyKind.LEGACY_CLUSTER_NAME)


def legacy_load_balance() -> str:
    """`/cluster/load_balance`: the old load manager's decision."""
    return render(KeyKind.LEGACY_LOAD_BALANCE)


def legacy_topic_policy(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}/policy`: a per-topic policy."""
    return render(KeyKind.LEGACY_TOPIC_POLICY, **_topic(topic))


def legacy_topic_schema(topic: TopicName) -> str:
    """`/topics/{ns}/{topic}/schema`: the pre-registry topic schema."""
    return render(KeyKind.LEGACY_TOPIC_SCHEMA, **_topic(topic))


def legacy_consumer(subscription: str, consumer_id: int) -> str:
    """`/subscriptions/{sub}/{consumer_id}`: a consumer's metadata."""
    return render(KeyKind.LEGACY_CONSUMER, subscription=subscription, consumer_id=consumer_id)


def legacy_subscriptions_prefix() -> str:
    """`/subscriptions`: every legacy consumer key."""
    return render_prefix(KeyKind.LEGACY_CONSUMER, 2)


def legacy_subscription_prefix(subscription: str) -> str:
    """`/subscriptions/{sub}`: the legacy consumers of one subscription."""
    return render_prefix(KeyKind.LEGACY_CONSUMER, 1, subscription=subscription)
