"""NamespaceManager on every backend: each typed error, and a delete refused atomically while
the namespace lists a topic."""

from __future__ import annotations

import pytest

from metaplane import layout
from metaplane.resources import (
    NamespaceExists,
    NamespaceManager,
    NamespaceNotEmpty,
    NamespacePolicy,
    NoNamespace,
    TopicManager,
    decode,
)
from metaplane.store import BadVersion, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import TOPIC, snapshot

pytestmark = EVERY_BACKEND

STRICT = NamespacePolicy(max_producers_per_topic=3)


async def test_create_and_read(store: MetadataStore) -> None:
    namespaces = NamespaceManager(store)
    revision = await namespaces.create("default")
    policy = await namespaces.policy("default")
    assert policy.value == NamespacePolicy()
    assert (policy.version, policy.mod_revision) == (1, revision)
    assert policy.key == layout.namespace_policy("default")
    entry = await store.get(layout.namespace_policy("default"))
    assert entry is not None
    assert decode(NamespacePolicy, entry.value) == NamespacePolicy()


async def test_create_twice_is_refused(store: MetadataStore) -> None:
    namespaces = NamespaceManager(store)
    await namespaces.create("default", STRICT)
    with pytest.raises(NamespaceExists) as refused:
        await namespaces.create("default")
    assert refused.value.namespace == "default"
    assert "already exists" in str(refused.value)
    assert (await namespaces.policy("default")).value == STRICT


async def test_missing_namespace(store: MetadataStore) -> None:
    namespaces = NamespaceManager(store)
    with pytest.raises(NoNamespace) as missing:
        await namespaces.policy("nowhere")
    assert missing.value.namespace == "nowhere"
    with pytest.raises(NoNamespace):
        await namespaces.set_policy("nowhere", STRICT, 1)
    with pytest.raises(NoNamespace):
        await namespaces.topics("nowhere")
    with pytest.raises(NoNamespace):
        await namespaces.delete("nowhere")


async def test_set_policy_with_a_version(store: MetadataStore) -> None:
    namespaces = NamespaceManager(store)
    await namespaces.create("default")
    read = await namespaces.policy("default")
    revision = await namespaces.set_policy("default", STRICT, read.version)
    updated = await namespaces.policy("default")
    assert (updated.value, updated.version, updated.mod_revision) == (STRICT, 2, revision)
    with pytest.raises(BadVersion) as stale:
        await namespaces.set_policy("default", NamespacePolicy(), read.version)
    assert (stale.value.expected, stale.value.actual) == (1, 2)
    assert (await namespaces.policy("default")).value == STRICT


async def test_lists_namespaces_and_their_topics(store: MetadataStore) -> None:
    namespaces, topics = NamespaceManager(store), TopicManager(store)
    assert await namespaces.namespaces() == []
    for name in ("default", "markets", "default-2"):
        await namespaces.create(name)
    await topics.create(TOPIC)
    assert await namespaces.namespaces() == ["default", "default-2", "markets"]
    assert await namespaces.topics("default") == [TOPIC]
    assert await namespaces.topics("default-2") == []


async def test_delete_is_refused_while_a_topic_is_listed(store: MetadataStore) -> None:
    namespaces, topics = NamespaceManager(store), TopicManager(store)
    await namespaces.create("default")
    await topics.create(TOPIC)
    before = await snapshot(store)
    with pytest.raises(NamespaceNotEmpty) as refused:
        await namespaces.delete("default")
    assert refused.value.namespace == "default"
    assert await snapshot(store) == before
    await topics.delete(TOPIC)
    await namespaces.delete("default")
    assert (await store.list(layout.namespace_prefix("default"))).keys() == []
    assert await namespaces.namespaces() == []


async def test_delete_with_a_version(store: MetadataStore) -> None:
    namespaces = NamespaceManager(store)
    await namespaces.create("default")
    await namespaces.set_policy("default", STRICT, 1)
    with pytest.raises(BadVersion):
        await namespaces.delete("default", version=1)
    await namespaces.delete("default", version=2)
    with pytest.raises(NoNamespace):
        await namespaces.policy("default")


async def test_delete_change_is_one_transaction_with_the_emptiness_compare(
    store: MetadataStore,
) -> None:
    change = NamespaceManager(store).delete_change("default", version=3)
    compared = {(compare.key, compare.whole_prefix) for compare in change.compares}
    assert compared == {
        (layout.namespace_policy("default"), False),
        (layout.namespace_topics_prefix("default"), True),
    }
