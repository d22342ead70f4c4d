"""Subscriptions as operations: list, read (with its version), create, delete, and the
administrative cursor writes — reset to an offset, skip N messages.

A reset goes through the broker that serves the topic (its registered `admin_addr`), which
writes the cursor fenced on owning the topic and drops its own pending acknowledgement, so
that no batched cursor of that broker overwrites the reset. A topic no broker serves gets a
guarded write instead: refused if the topic was assigned in between.
"""

from __future__ import annotations

from typing import Any, Protocol

from metaplane import layout
from metaplane.admin._errors import PreconditionFailed
from metaplane.admin._topic_ops import describe, read_topic, subscription_document
from metaplane.layout import TopicName
from metaplane.resources import (
    ClusterManager,
    NoCursor,
    NoTopicOwnerInfo,
    SubscriptionManager,
    SubscriptionMetadata,
    SubscriptionType,
    TopicNotOwned,
    unchanged,
)
from metaplane.store import Get, InvalidValue

OWNER_ATTEMPTS = 3
"""How many times a reset follows a topic that moved while it was being reset."""

MAX_OFFSET = 2**64 - 1


class BrokerAdmin(Protocol):
    """How a reset reaches the broker that serves the topic (its admin endpoint)."""

    async def reset_cursor(
        self, broker_id: int, address: str, topic: TopicName, subscription: str, offset: int
    ) -> int:
        """The revision of the broker's write; `TopicNotOwned` if that broker does not serve
        the topic (any more), `NoSubscription`, `BrokerUnreachable`."""
        ...


def subscription_type(text: str | int) -> SubscriptionType:
    """A type from its name (exclusive, shared, failover) or number (0, 1, 2)."""
    for member in SubscriptionType:
        if str(text).strip().lower() in (member.name.lower(), str(member.value)):
            return member
    raise InvalidValue(f"{text!r} is no subscription type: exclusive, shared or failover")


async def subscriptions(manager: SubscriptionManager, topic: TopicName) -> list[dict[str, Any]]:
    """Every subscription of the topic with its cursor and backlog; `NoTopic`."""
    found = await read_topic(manager.reader, topic)
    listed: list[dict[str, Any]] = describe(found)["subscriptions"]
    return listed


async def read(manager: SubscriptionManager, topic: TopicName, name: str) -> dict[str, Any]:
    """One subscription with its version (its ETag) and cursor; `NoSubscription`."""
    metadata = await manager.read(topic, name)
    try:
        cursor: int | None = (await manager.cursor(topic, name)).value
    except NoCursor:
        cursor = None
    return {"topic": topic.path, **subscription_document(metadata, cursor, None)}


async def create(
    manager: SubscriptionManager,
    topic: TopicName,
    name: str,
    kind: SubscriptionType,
    consumer_name: str | None = None,
) -> dict[str, Any]:
    """Create a subscription; `NoTopic`, `SubscriptionExists`."""
    layout.subscription(topic, name)  # a bad name is refused before anything is read
    metadata = SubscriptionMetadata(
        consumer_id=None,
        consumer_name=consumer_name or f"{name}-consumer",
        subscription_name=name,
        subscription_type=kind,
    )
    revision = await manager.create(topic, metadata)
    return {"topic": topic.path, "subscription": name, "version": 1, "revision": revision}


async def delete(
    manager: SubscriptionManager, topic: TopicName, name: str, expect: int | None = None
) -> dict[str, Any]:
    """Delete a subscription and its cursor, over the version read (or `expect`)."""
    version = (await manager.read(topic, name)).version if expect is None else expect
    revision = await manager.delete(topic, name, version)
    return {"topic": topic.path, "subscription": name, "revision": revision}


async def reset(
    manager: SubscriptionManager,
    brokers: BrokerAdmin,
    topic: TopicName,
    name: str,
    offset: int,
    expect: int | None = None,
) -> dict[str, Any]:
    """Set the subscription's cursor to `offset` (the last acknowledged offset), through
    the owning broker, or guarded while no broker serves the topic."""
    if not -1 <= offset <= MAX_OFFSET:
        raise InvalidValue(f"offset {offset} is not from -1 to {MAX_OFFSET}")
    metadata = await manager.read(topic, name)
    if expect is not None and expect != metadata.version:
        raise PreconditionFailed(metadata.key, str(expect), str(metadata.version))
    for _ in range(OWNER_ATTEMPTS):
        found = await read_topic(manager.reader, topic, fresh=True)
        owner = found.owner
        if owner is None:
            marker = found.entry(layout.unassigned(topic))
            revision = await unowned_reset(manager, marker, topic, name, offset)
            return reset_document(topic, name, offset, revision, None)
        address = await admin_address(ClusterManager(manager.store), owner)
        try:
            revision = await brokers.reset_cursor(owner, address, topic, name, offset)
        except TopicNotOwned:
            continue  # it moved: follow it
        return reset_document(topic, name, offset, revision, owner)
    raise NoTopicOwnerInfo(topic)


async def unowned_reset(
    manager: SubscriptionManager, marker: Any, topic: TopicName, name: str, offset: int
) -> int:
    """The cursor written while the topic waits for assignment: refused (`ChangedSinceRead`)
    if the marker changed, that is if a broker took the topic in between."""
    guard = unchanged(layout.unassigned(topic), 0 if marker is None else marker.mod_revision)
    change = manager.cursor_change(topic, name, offset).guarded(guard)
    return await manager.writer.apply(change)


async def admin_address(cluster: ClusterManager, broker_id: int) -> str:
    """Where a live broker takes administrative requests; `NoBroker` if it is not live."""
    registration = await cluster.registration(broker_id)
    return registration.value.admin_addr


def reset_document(
    topic: TopicName, name: str, offset: int, revision: int, broker: int | None
) -> dict[str, Any]:
    return {
        "topic": topic.path,
        "subscription": name,
        "cursor": offset,
        "revision": revision,
        "through_broker": broker,
    }


async def skip(
    manager: SubscriptionManager,
    brokers: BrokerAdmin,
    topic: TopicName,
    name: str,
    count: int,
    expect: int | None = None,
) -> dict[str, Any]:
    """Move the cursor `count` messages on from the stored one (from before the first
    message when none is stored yet)."""
    if count < 1:
        raise InvalidValue(f"skip {count}: the number of messages to skip is at least 1")
    key = layout.cursor(topic, name)
    found = (await manager.reader.read(Get(key), fresh=True)).get(key, int)
    stored = -1 if found is None else found.value
    return await reset(manager, brokers, topic, name, stored + count, expect)
