"""The LocalCache on every backend: a gap-free start, convergence through broken watches and
a real compaction, read-your-writes, listeners that cannot stall it, typed reads decoded
once."""

from __future__ import annotations

import asyncio
import random

import pytest

from metaplane.cache import CacheLagged, CacheState, LocalCache
from metaplane.store import (
    Delete,
    Entry,
    EventType,
    InvalidRequest,
    MetadataStore,
    Put,
    WatchBatch,
    ZooKeeperStore,
    connect_store,
)
from metaplane.testing import FaultyStore, expire_session
from tests.on_zookeeper import EVERY_BACKEND, MERGED_BATCHES, WITHOUT_ZK

pytestmark = EVERY_BACKEND


async def store_view(store: MetadataStore, prefixes: tuple[str, ...]) -> dict[str, Entry]:
    view: dict[str, Entry] = {}
    for prefix in prefixes:
        view.update({entry.key: entry for entry in await store.list(prefix)})
    return view


def cache_view(cache: LocalCache) -> dict[str, Entry]:
    view: dict[str, Entry] = {}
    for prefix in cache.prefixes:
        view.update({entry.key: entry for entry in cache.list(prefix)})
    return view


async def random_writes(
    store: MetadataStore, count: int, seed: int, *, yielding: bool = False
) -> int:
    """Puts, deletes and transactions on a few keys; returns the last revision. `yielding`
    gives the event loop a turn after each write (a memory store's writes never wait)."""
    rng = random.Random(seed)
    keys = [f"/c/{group}/{i}" for group in ("a", "b", "x") for i in range(6)]
    revision = await store.revision()
    for _ in range(count):
        roll = rng.random()
        key = rng.choice(keys)
        if roll < 0.55:
            revision = await store.put(key, str(rng.random()).encode())
        elif roll < 0.8:
            revision = await store.delete(key)
        else:
            other = rng.choice([k for k in keys if k != key])
            ops = [Put(key, b"txn"), Delete(other)]
            revision = (await store.txn([], ops, [])).revision
        if yielding:
            await asyncio.sleep(0)
    return revision


PREFIXES = ("/c/a", "/c/b")


async def test_start_reads_and_serves(store: MetadataStore) -> None:
    await store.put("/c/a/1", b"one")
    await store.put("/c/a/1/sub", b"sub")
    await store.put("/c/a-sibling", b"not mine")
    await store.put("/c/b/2", b"two")
    async with LocalCache(store, PREFIXES) as cache:
        assert cache.state is CacheState.SYNCED
        entry = cache.get("/c/a/1")
        assert entry is not None and entry.value == b"one"
        assert cache.get("/c/a/missing") is None
        assert [e.key for e in cache.list("/c/a")] == ["/c/a/1", "/c/a/1/sub"]
        assert cache.children("/c/a") == ["1"]
        assert len(cache) == 3
        with pytest.raises(InvalidRequest):
            cache.get("/c/a-sibling")
        with pytest.raises(InvalidRequest):
            cache.list("/c")


async def test_gap_free_start(store: MetadataStore) -> None:
    """A writer keeps writing while the cache starts: nothing between the read and the watch
    is lost."""
    before = await random_writes(store, 30, seed=1)
    async with store.watch("/c", start_revision=before + 1) as watch:
        writer = asyncio.create_task(random_writes(store, 300, seed=2, yielding=True))
        async with asyncio.timeout(10):
            await anext(watch)  # the writer has begun
    cache = LocalCache(store, PREFIXES)
    try:
        started_at = await cache.start()
        last = await writer
        assert before < started_at < last  # the cache really started mid-stream
        await cache.wait_for(last, timeout=20)
        assert cache_view(cache) == await store_view(store, PREFIXES)
        assert cache.applied_revision >= last
    finally:
        await cache.aclose()


class Writers:
    """Two writers that put, delete and transact under the prefixes without a pause until
    stopped; `past(R)` returns once one of them wrote past R."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._stop = asyncio.Event()
        self._wrote = asyncio.Condition()
        self.latest = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Writers:
        self.latest = await self._store.revision()
        self._tasks = [asyncio.create_task(self._write(seed)) for seed in (2, 3)]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _write(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self._stop.is_set():
            revision = await random_writes(self._store, 1, rng.randrange(1 << 30), yielding=True)
            async with self._wrote:
                self.latest = max(self.latest, revision)
                self._wrote.notify_all()

    async def past(self, revision: int) -> None:
        async with asyncio.timeout(20), self._wrote:
            await self._wrote.wait_for(lambda: self.latest > revision)

    async def stop(self) -> int:
        """Stop writing (a writer's error raised); the last revision written."""
        self._stop.set()
        await asyncio.gather(*self._tasks)
        return self.latest


async def test_a_cache_starts_while_a_writer_never_pauses(store: MetadataStore) -> None:
    """Writers put, delete and transact under the prefixes without a pause while the cache
    starts over 2,000 keys: the start does not wait for a pause (ZooKeeper reads no past
    revision, and a walk of 2,000 znodes never finds one: there the cache follows, then
    reads, and lays the changes it followed over what it read), and once it has caught up
    with the last write it holds exactly what the store holds."""
    for start in range(0, 2000, 100):
        bulk = [Put(f"/c/b/bulk/{i:04d}", b"v") for i in range(start, start + 100)]
        await store.txn([], bulk, [])
    await random_writes(store, 30, seed=1)
    async with Writers(store) as writers:
        await writers.past(writers.latest + 10)  # the writers have begun
        first = writers.latest
        cache = LocalCache(store, PREFIXES)
        try:
            started_at = await asyncio.wait_for(cache.start(), timeout=60)
            await writers.past(started_at + 10)  # and go on past the start
            last = await writers.stop()
            assert first <= started_at < last  # writing before, during and after the start
            await cache.wait_for(last, timeout=20)
            assert cache_view(cache) == await store_view(store, PREFIXES)
            assert len(cache_view(cache)) > 2000
        finally:
            await cache.aclose()


@pytest.mark.backends("zk", reason="only ZooKeeper keeps no history to resume a watch from")
async def test_a_cache_resyncs_after_its_session_is_lost_while_writes_go_on(
    store: MetadataStore, store_url: str
) -> None:
    """The cache's ZooKeeper session expires while another client keeps writing under its
    prefixes: its watch cannot resume (no history), so it resyncs through a new watch —
    follow, then read and diff — without waiting for the writes to pause, and converges."""
    assert isinstance(store, ZooKeeperStore)
    await random_writes(store, 30, seed=1)
    async with (
        await connect_store(store_url) as other,
        Writers(other) as writers,
        LocalCache(store, PREFIXES) as cache,
    ):
        await writers.past(writers.latest + 10)
        await expire_session(store._client)
        async with asyncio.timeout(30):
            while cache.resyncs == 0 or cache.state is not CacheState.SYNCED:
                await cache.wait_state(CacheState.SYNCED, CacheState.RESYNCING, timeout=30)
                await asyncio.sleep(0.01)
        await writers.past(writers.latest + 10)  # writing on after the resync
        last = await writers.stop()
        await cache.wait_for(last, timeout=20)
        assert cache_view(cache) == await store_view(store, PREFIXES)


async def test_read_your_writes(store: MetadataStore) -> None:
    async with LocalCache(store, PREFIXES) as cache:
        revision = await store.put("/c/a/k", b"v")
        await cache.wait_for(revision, timeout=10)
        entry = cache.get("/c/a/k")
        assert entry is not None and entry.mod_revision == revision
        # A write outside the cache's prefixes: wait_for still returns (a progress request).
        elsewhere = await store.put("/zzz/outside", b"v")
        await cache.wait_for(elsewhere, timeout=10)
        assert cache.applied_revision >= elsewhere


async def test_recreated_key_applied_by_revision(store: MetadataStore) -> None:
    async with LocalCache(store, PREFIXES) as cache:
        await store.put("/c/a/k", b"1")
        await store.put("/c/a/k", b"2")
        await store.delete("/c/a/k")
        revision = await store.put("/c/a/k", b"3")
        await cache.wait_for(revision, timeout=10)
        entry = cache.get("/c/a/k")
        assert entry is not None
        assert (entry.value, entry.version, entry.mod_revision) == (b"3", 1, revision)


@pytest.mark.backends(*WITHOUT_ZK, reason=MERGED_BATCHES)
async def test_converges_through_broken_watches_and_compaction(store: MetadataStore) -> None:
    faulty = FaultyStore(store)
    faulty.break_watches_after(3, 0, 5, 1, 7)
    async with LocalCache(faulty, PREFIXES) as cache:
        resumed = await random_writes(store, 60, seed=3, yielding=True)
        # Five broken streams, each resumed from the next revision (no compaction yet, so
        # no resync can hide a lost event): the cache equals the store.
        await cache.wait_for(resumed, timeout=30)
        assert not faulty._watch_breaks  # every planned break happened
        assert cache_view(cache) == await store_view(store, PREFIXES)
        # Hold the watch off, write on, and compact the history the cache would need.
        fault = faulty.fail("watch", times=None)
        await cache.wait_state(CacheState.DISCONNECTED, timeout=10)
        behind = cache.applied_revision
        latest = await random_writes(store, 60, seed=4)
        await store.compact(latest)
        assert behind < latest
        faulty.faults.remove(fault)
        last = await random_writes(store, 60, seed=5)
        await cache.wait_for(last, timeout=30)
        assert cache_view(cache) == await store_view(store, PREFIXES)
        assert await cache.wait_state(CacheState.SYNCED, timeout=10) is CacheState.SYNCED


async def test_resync_tells_subscribers_the_differences(store: MetadataStore) -> None:
    await store.put("/c/a/stays", b"1")
    await store.put("/c/a/goes", b"1")
    await store.put("/c/a/again", b"1")
    await store.put("/c/a/again", b"2")  # version 2
    faulty = FaultyStore(store)
    async with LocalCache(faulty, PREFIXES) as cache:
        subscription = cache.subscribe("/c/a")
        fault = faulty.fail("watch", times=None)
        await store.put("/c/x/nudge", b"")  # something for the broken watch to notice
        await cache.wait_state(CacheState.DISCONNECTED, timeout=10)
        await store.delete("/c/a/goes")
        await store.put("/c/a/new", b"1")
        # Deleted and created again while the cache looked away: version 1 again, a lower
        # version than the cache holds, but a later revision. Revisions decide.
        await store.delete("/c/a/again")
        await store.put("/c/a/again", b"3")
        latest = await store.put("/c/a/stays", b"2")
        await store.compact(latest)
        faulty.faults.remove(fault)
        await cache.wait_for(latest, timeout=30)
        batch = await asyncio.wait_for(anext(subscription), timeout=10)
        again = cache.get("/c/a/again")
        assert again is not None and (again.value, again.version) == (b"3", 1)
    assert sorted((e.type.value, e.key) for e in batch.events) == [
        (EventType.DELETE.value, "/c/a/goes"),
        (EventType.PUT.value, "/c/a/again"),
        (EventType.PUT.value, "/c/a/new"),
        (EventType.PUT.value, "/c/a/stays"),
    ]


@pytest.mark.backends(*WITHOUT_ZK, reason=MERGED_BATCHES)
async def test_subscribers_get_whole_transactions_in_order(store: MetadataStore) -> None:
    async with LocalCache(store, PREFIXES) as cache:
        subscription = cache.subscribe("/c/a")
        first = await store.put("/c/a/1", b"")
        both = await store.txn([], [Put("/c/a/2", b""), Put("/c/a/3", b""), Put("/c/b/9", b"")])
        await store.put("/c/b/only", b"")
        batches = [await asyncio.wait_for(anext(subscription), timeout=10) for _ in range(2)]
    assert [b.revision for b in batches] == [first, both.revision]
    assert [e.key for e in batches[1].events] == ["/c/a/2", "/c/a/3"]


@pytest.mark.backends(*WITHOUT_ZK, reason=MERGED_BATCHES)
async def test_a_slow_subscriber_never_stalls_the_cache(store: MetadataStore) -> None:
    async with LocalCache(store, PREFIXES) as cache:
        stalled = cache.subscribe("/c/a", buffer=5)  # never read until the end
        received: list[WatchBatch] = []
        all_received = asyncio.Event()

        def listener(batch: WatchBatch) -> None:
            received.append(batch)
            if len(received) == 40:
                all_received.set()

        cache.listen("/c/a", listener)
        for i in range(40):
            last = await store.put(f"/c/a/{i}", b"")
        await cache.wait_for(last, timeout=10)
        assert len(cache.list("/c/a")) == 40
        with pytest.raises(CacheLagged):
            await anext(stalled)
        await asyncio.wait_for(all_received.wait(), timeout=10)


async def test_typed_reads_decode_once(store: MetadataStore) -> None:
    calls: list[str] = []

    def decoder(key: str, value: bytes) -> object:
        calls.append(key)
        return int(value)

    await store.put("/c/a/n", b"41")
    async with LocalCache(store, PREFIXES, decoder=decoder) as cache:
        assert cache.value("/c/a/n") == 41
        assert cache.value("/c/a/n") == 41
        assert calls == ["/c/a/n"]
        revision = await store.put("/c/a/n", b"42")
        await cache.wait_for(revision, timeout=10)
        assert cache.value("/c/a/n") == 42
        assert calls == ["/c/a/n", "/c/a/n"]
        assert cache.value("/c/a/missing") is None
