"""Conformance: a client's put after other clients changed, deleted, re-created or leased the
key since its own last write carries the key's true version, create_revision and lease
(ZooKeeper's client writes a key it wrote last in one request, from what it remembers of
it: these cases check that it never writes from a memory gone stale)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from metaplane.store import Entry, MetadataStore, connect_store

pytestmark = pytest.mark.backends("sqlite", "etcd", "zk", reason="two clients share the store")

KEY = "/topics/default/t1/state"


@pytest.fixture
async def other(store_url: str) -> AsyncIterator[MetadataStore]:
    async with await connect_store(store_url) as opened:
        yield opened


@pytest.fixture
async def mine(store_url: str) -> AsyncIterator[MetadataStore]:
    async with await connect_store(store_url) as opened:
        yield opened


async def entry(store: MetadataStore, key: str = KEY) -> Entry:
    found = await store.get(key)
    assert found is not None
    return found


async def written_twice(mine: MetadataStore) -> Entry:
    await mine.put(KEY, b"1")
    await mine.put(KEY, b"2")
    return await entry(mine)


async def test_after_another_clients_put(mine: MetadataStore, other: MetadataStore) -> None:
    first = await written_twice(mine)
    await other.put(KEY, b"theirs")
    revision = await mine.put(KEY, b"3")
    assert await entry(other) == Entry(KEY, b"3", 4, first.create_revision, revision, 0)


async def test_after_a_delete_and_create(mine: MetadataStore, other: MetadataStore) -> None:
    await written_twice(mine)
    await other.delete(KEY)
    created = await other.put(KEY, b"theirs")
    revision = await mine.put(KEY, b"3")
    assert await entry(other) == Entry(KEY, b"3", 2, created, revision, 0)


async def test_after_a_delete_and_as_many_writes(mine: MetadataStore, other: MetadataStore) -> None:
    """Deleted and written again as many times as this client had written it: on ZooKeeper
    the znode is back at the data version this client last saw, though it is another key.
    (A ZooKeeper client sees another's writes in their order once it has synced, which
    `revision()` does: the store's documented known limit is a change that came between.)"""
    await written_twice(mine)
    await other.delete(KEY)
    created = await other.put(KEY, b"a")
    await other.put(KEY, b"b")
    await mine.revision()
    revision = await mine.put(KEY, b"3")
    assert await entry(other) == Entry(KEY, b"3", 3, created, revision, 0)


async def test_after_it_became_a_parent(mine: MetadataStore, other: MetadataStore) -> None:
    """Deleted, and a key made under it: it is no key until this client writes it again."""
    await written_twice(mine)
    await other.delete(KEY)
    await other.put(f"{KEY}/child", b"c")
    revision = await mine.put(KEY, b"3")
    assert await entry(other) == Entry(KEY, b"3", 1, revision, revision, 0)
    assert (await entry(other, f"{KEY}/child")).value == b"c"


async def test_after_another_client_leased_it(mine: MetadataStore, other: MetadataStore) -> None:
    first = await written_twice(mine)
    lease = await other.grant(30)
    await other.put(KEY, b"leased", lease=lease)
    assert (await entry(mine)).lease == lease.id
    revision = await mine.put(KEY, b"3")
    assert await entry(other) == Entry(KEY, b"3", 4, first.create_revision, revision, 0)
    await other.revoke(lease)
    assert await entry(mine) == Entry(KEY, b"3", 4, first.create_revision, revision, 0)


async def test_many_writes_each_one_version(mine: MetadataStore, other: MetadataStore) -> None:
    """Both clients write the same keys in turn: every put moves the version by one and the
    revisions only up."""
    keys = [f"/topics/default/t{i}/state" for i in range(20)]
    last = 0
    for turn in range(6):
        writer = mine if turn % 3 else other
        for key in keys:
            revision = await writer.put(key, str(turn).encode())
            assert revision > last
            last = revision
    for key in keys:
        found = await entry(mine, key)
        assert (found.value, found.version, found.mod_revision <= last) == (b"5", 6, True)
