"""A LocalCache that follows more prefixes, and fewer, while it runs (what a broker does as
topics are assigned to it and taken away), on every backend: gap-free against a read at the
revision the watch starts them from, nothing of a dropped prefix kept or applied, and many
prefixes at once."""

from __future__ import annotations

import asyncio

import pytest

from metaplane.cache import CacheTimeout, LocalCache
from metaplane.store import MetadataStore, Put
from metaplane.testing import FaultyStore
from tests.cache.test_cache import random_writes, store_view
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND


async def test_a_prefix_followed_while_writes_run_is_exact(store: MetadataStore) -> None:
    await random_writes(store, 40, seed=1)
    async with LocalCache(store, ["/c/a"]) as cache:
        assert not cache.covers("/c/b/0")
        writer = asyncio.create_task(random_writes(store, 80, seed=2, yielding=True))
        await asyncio.sleep(0)
        followed = await cache.follow(["/c/b"])
        last = await writer
        await cache.wait_for(max(last, followed), timeout=30)
        assert cache.covers("/c/b/0") and "/c/b" in cache.prefixes
        view = {entry.key: entry for p in cache.prefixes for entry in cache.list(p)}
        assert view == await store_view(store, ("/c/a", "/c/b"))


async def test_a_followed_prefix_is_served_only_once_the_cache_passed_its_read(
    store: MetadataStore,
) -> None:
    async with LocalCache(store, ["/c/a"]) as cache:
        await store.put("/c/b/0", b"1")
        followed = await cache.follow(["/c/b"])
        await cache.wait_for(followed, timeout=10)
        entry = cache.get("/c/b/0")
        assert entry is not None and entry.value == b"1"
        revision = await store.put("/c/b/0", b"2")
        await cache.wait_for(revision, timeout=10)
        entry = cache.get("/c/b/0")
        assert entry is not None and entry.value == b"2"


async def test_an_unfollowed_prefix_leaves_the_cache_and_is_no_longer_applied(
    store: MetadataStore,
) -> None:
    await store.put("/c/a/0", b"1")
    await store.put("/c/b/0", b"1")
    async with LocalCache(store, ["/c/a", "/c/b"]) as cache:
        await cache.unfollow(["/c/b"])
        assert cache.get("/c/a/0") is not None
        assert not cache.covers("/c/b/0")
        assert cache.prefixes == ("/c/a",)
        await store.put("/c/b/1", b"x")
        revision = await store.put("/c/a/1", b"y")
        await cache.wait_for(revision, timeout=10)
        assert "/c/b/1" not in {entry.key for entry in cache.list("/c/a")}
        assert len(cache) == 2  # /c/a/0 and /c/a/1 only


async def test_a_change_delivered_while_a_followed_prefix_is_read_is_kept(
    store: MetadataStore,
) -> None:
    """The watch may deliver a change under a prefix being followed before the prefix's own
    read is in (its read slow): the cache keeps it and serves it over the read, not the
    read's older value. Driven: the read is held until the change has been applied."""
    faulty = FaultyStore(store)
    await store.put("/c/b/0", b"1")
    await store.put("/c/b/1", b"1")
    async with LocalCache(faulty, ["/c/a"]) as cache:
        held = faulty.hang("list", "/c/b")
        following = asyncio.create_task(cache.follow(["/c/b"], timeout=30))
        await asyncio.wait_for(held.wait_struck(), timeout=10)  # the read is done, not in
        await store.put("/c/b/0", b"2")
        await store.delete("/c/b/1")
        marker = await store.put("/c/a/0", b"")
        await cache.wait_for(marker, timeout=10)  # the watch delivered both changes
        faulty.remove(held)
        revision = await asyncio.wait_for(following, timeout=10)
        await cache.wait_for(revision, timeout=10)
        assert {entry.key: entry.value for entry in cache.list("/c/b")} == {"/c/b/0": b"2"}
        assert {entry.key: entry for entry in cache.list("/c/b")} == {
            entry.key: entry for entry in await store.list("/c/b")
        }


async def test_a_follow_waits_out_a_broken_watch(store: MetadataStore) -> None:
    faulty = FaultyStore(store)
    async with LocalCache(faulty, ["/c/a"]) as cache:
        fault = faulty.fail("watch", times=None)
        await store.put("/c/b/0", b"1")
        following = asyncio.create_task(cache.follow(["/c/b"], timeout=30))
        await asyncio.sleep(0.2)  # the watch is broken meanwhile (nothing to await here)
        faulty.remove(fault)
        revision = await following
        await cache.wait_for(revision, timeout=30)
        assert cache.get("/c/b/0") is not None


async def test_thousands_of_prefixes_at_once(store: MetadataStore) -> None:
    topics = [f"/t/{i:05d}" for i in range(2000)]
    for start in range(0, len(topics), 100):
        await store.txn([], [Put(f"{t}/k", b"v") for t in topics[start : start + 100]], [])
    async with LocalCache(store, ["/cluster"]) as cache:
        revision = await cache.follow(topics)
        await cache.wait_for(revision, timeout=60)
        assert len(cache) == len(topics)
        last = await store.put(f"{topics[-1]}/k", b"w")
        await cache.wait_for(last, timeout=10)
        entry = cache.get(f"{topics[-1]}/k")
        assert entry is not None and entry.value == b"w"
        await cache.unfollow(topics[:1000])
        assert len(cache) == 1000


async def test_a_follow_the_store_does_not_answer_in_time_is_a_cache_timeout(
    store: MetadataStore,
) -> None:
    """The read of a prefix being followed hangs: past its timeout `follow` raises
    `CacheTimeout`, a `MetadataError` (a broker retries the step, and says so in one line)
    and a `TimeoutError`; the cache goes on serving what it held, without the prefix."""
    faulty = FaultyStore(store)
    await store.put("/c/a/0", b"1")
    await store.put("/c/b/0", b"1")
    async with LocalCache(faulty, ["/c/a"]) as cache:
        held = faulty.hang("list", "/c/b")
        with pytest.raises(CacheTimeout, match=r"/c/b not followed within 0\.5 s"):
            await cache.follow(["/c/b"], timeout=0.5)
        assert cache.prefixes == ("/c/a",)
        faulty.remove(held)
        changed = await store.put("/c/a/0", b"2")
        await cache.wait_for(changed, timeout=10)
        found = cache.get("/c/a/0")
        assert found is not None and found.value == b"2"
        revision = await cache.follow(["/c/b"], timeout=30)  # and again, answered
        await cache.wait_for(revision, timeout=10)
        assert [entry.key for entry in cache.list("/c/b")] == ["/c/b/0"]
