"""SubscriptionManager on every backend: Hedwig's create / read / update / replace / delete
with their typed errors, cursors, and every subscription of a topic in one range read."""

from __future__ import annotations

import pytest

from metaplane import layout
from metaplane.resources import (
    NamespaceManager,
    NoCursor,
    NoSubscription,
    NoTopic,
    SubscriptionExists,
    SubscriptionManager,
    TopicManager,
)
from metaplane.store import ABSENT, AlreadyExists, BadVersion, InvalidValue, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import TOPIC, RecordingStore, snapshot, subscription

pytestmark = EVERY_BACKEND

NAME = "subs_reliable"


@pytest.fixture
async def subscriptions(store: MetadataStore) -> SubscriptionManager:
    await NamespaceManager(store).create("default")
    await TopicManager(store).create(TOPIC)
    return SubscriptionManager(store)


async def test_create_and_read(subscriptions: SubscriptionManager) -> None:
    revision = await subscriptions.create(TOPIC, subscription())
    found = await subscriptions.read(TOPIC, NAME)
    assert (found.value, found.version, found.mod_revision) == (subscription(), 1, revision)
    assert found.key == layout.subscription(TOPIC, NAME)


async def test_create_refusals(store: MetadataStore, subscriptions: SubscriptionManager) -> None:
    await subscriptions.create(TOPIC, subscription())
    before = await snapshot(store)
    with pytest.raises(SubscriptionExists) as exists:
        await subscriptions.create(TOPIC, subscription(consumer=5))
    assert (exists.value.topic, exists.value.subscription) == (TOPIC, NAME)
    other = layout.TopicName("default", "other")
    with pytest.raises(NoTopic) as no_topic:
        await subscriptions.create(other, subscription())
    assert no_topic.value.topic == other
    assert await snapshot(store) == before


async def test_read_missing(subscriptions: SubscriptionManager) -> None:
    with pytest.raises(NoSubscription) as missing:
        await subscriptions.read(TOPIC, NAME)
    assert (missing.value.topic, missing.value.subscription) == (TOPIC, NAME)
    assert NAME in str(missing.value)


async def test_replace_with_a_version(subscriptions: SubscriptionManager) -> None:
    await subscriptions.create(TOPIC, subscription())
    await subscriptions.replace(TOPIC, subscription(consumer=2**64 - 1), 1)
    found = await subscriptions.read(TOPIC, NAME)
    assert (found.value.consumer_id, found.version) == (2**64 - 1, 2)
    with pytest.raises(BadVersion) as stale:
        await subscriptions.replace(TOPIC, subscription(), 1)
    assert (stale.value.expected, stale.value.actual) == (1, 2)
    with pytest.raises(NoSubscription):
        await subscriptions.replace(TOPIC, subscription("other"), 1)


async def test_update_some_fields(subscriptions: SubscriptionManager) -> None:
    await subscriptions.create(TOPIC, subscription())
    await subscriptions.update(TOPIC, NAME, 1, consumer_id=42, consumer_name="c2")
    found = await subscriptions.read(TOPIC, NAME)
    assert (found.value.consumer_id, found.value.consumer_name) == (42, "c2")
    assert found.value.subscription_type == subscription().subscription_type
    with pytest.raises(BadVersion):
        await subscriptions.update(TOPIC, NAME, 1, consumer_id=None)
    with pytest.raises(InvalidValue):
        await subscriptions.update(TOPIC, NAME, 2, subscription_name="renamed")
    with pytest.raises(NoSubscription):
        await subscriptions.update(TOPIC, "other", 1, consumer_id=None)


async def test_delete_takes_the_cursor_in_the_same_transaction(
    store: MetadataStore, subscriptions: SubscriptionManager
) -> None:
    await subscriptions.create(TOPIC, subscription())
    await subscriptions.write_cursor(TOPIC, NAME, 13)
    with pytest.raises(BadVersion):
        await subscriptions.delete(TOPIC, NAME, 2)
    revision = await subscriptions.delete(TOPIC, NAME, 1)
    assert revision == await store.revision()
    for key in (layout.subscription(TOPIC, NAME), layout.cursor(TOPIC, NAME)):
        assert await store.get(key) is None
    with pytest.raises(NoSubscription):
        await subscriptions.delete(TOPIC, NAME, 1)


async def test_read_subscriptions(subscriptions: SubscriptionManager) -> None:
    assert await subscriptions.read_subscriptions(TOPIC) == {}
    assert await subscriptions.read_subscriptions(layout.TopicName("default", "none")) == {}
    for name in ("a", "b", "c"):
        await subscriptions.create(TOPIC, subscription(name))
    await subscriptions.write_cursor(TOPIC, "a", 7)
    await subscriptions.write_cursor(TOPIC, "c", 9)
    await subscriptions.write_cursor(TOPIC, "c", 10, 1)
    found = await subscriptions.read_subscriptions(TOPIC)
    assert sorted(found) == ["a", "b", "c"]
    assert found["b"].cursor is None
    assert found["a"].cursor is not None and found["a"].cursor.value == 7
    assert found["c"].cursor is not None
    assert (found["c"].cursor.value, found["c"].cursor.version) == (10, 2)
    assert found["c"].metadata.value == subscription("c")
    assert found["c"].name == "c"


async def test_read_subscriptions_is_one_range_read(
    store: MetadataStore, subscriptions: SubscriptionManager
) -> None:
    for name in ("a", "b"):
        await subscriptions.create(TOPIC, subscription(name))
        await subscriptions.write_cursor(TOPIC, name, 1)
    recording = RecordingStore(store)
    found = await SubscriptionManager(recording).read_subscriptions(TOPIC)
    assert len(found) == 2
    assert recording.calls == [("list", layout.subscriptions_prefix(TOPIC))]


async def test_cursor(subscriptions: SubscriptionManager) -> None:
    await subscriptions.create(TOPIC, subscription())
    with pytest.raises(NoCursor) as missing:
        await subscriptions.cursor(TOPIC, NAME)
    assert missing.value.subscription == NAME
    with pytest.raises(NoCursor):
        await subscriptions.write_cursor(TOPIC, NAME, 5, 1)
    revision = await subscriptions.write_cursor(TOPIC, NAME, 5, ABSENT)
    with pytest.raises(AlreadyExists):
        await subscriptions.write_cursor(TOPIC, NAME, 6, ABSENT)
    found = await subscriptions.cursor(TOPIC, NAME)
    assert (found.value, found.version, found.mod_revision) == (5, 1, revision)
    await subscriptions.write_cursor(TOPIC, NAME, 2**64 - 1)
    assert (await subscriptions.cursor(TOPIC, NAME)).value == 2**64 - 1
    with pytest.raises(BadVersion):
        await subscriptions.write_cursor(TOPIC, NAME, 8, 1)


async def test_cursor_of_a_missing_subscription(
    store: MetadataStore, subscriptions: SubscriptionManager
) -> None:
    before = await snapshot(store)
    with pytest.raises(NoSubscription):
        await subscriptions.write_cursor(TOPIC, NAME, 5)
    assert await snapshot(store) == before
