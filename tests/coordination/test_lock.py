"""FencedLock: waiters in order, one holder at a time, each waiter watching only its
predecessor, and a holder whose lease is gone fenced out."""

from __future__ import annotations

import asyncio

import pytest

from metaplane import layout
from metaplane.coordination import FencedLock, Session
from metaplane.store import Compacted, Fenced, MetadataStore, Put, Watch
from metaplane.testing import FaultyStore
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND


class WatchRecorder(FaultyStore):
    """A store that remembers the prefix of every watch opened."""

    def __init__(self, inner: MetadataStore) -> None:
        super().__init__(inner)
        self.watched: list[str] = []

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        self.watched.append(prefix)
        return super()._watch(prefix, start_revision)


async def until_queued(store: MetadataStore, name: str, count: int) -> None:
    """Wait (on a watch) until `count` waiters have keys under the lock. A store without
    history (ZooKeeper) refuses a watch from a revision something changed at since: then
    look again, and watch from the new revision."""
    prefix = layout.lock_prefix(name)

    async def queued() -> bool:
        return len(await store.list(prefix, keys_only=True)) >= count

    async with asyncio.timeout(10):
        while not await queued():
            start = await store.revision()
            try:
                async with store.watch(prefix, start_revision=start + 1) as watch:
                    while not await queued():
                        await anext(watch)
                    return
            except Compacted:
                continue


async def test_one_holder_at_a_time_in_order_without_a_herd(store: MetadataStore) -> None:
    recorder = WatchRecorder(store)
    sessions = [await Session(recorder, ttl=10).start() for _ in range(5)]
    locks = [FencedLock(session, "rebalance", holder_id=n) for n, session in enumerate(sessions)]
    inside = 0
    order: list[int] = []

    async def work(n: int) -> None:
        nonlocal inside
        async with locks[n]:
            inside += 1
            assert inside == 1
            order.append(n)
            result = await store.txn([locks[n].fence()], [Put("/lock/work", b"%d" % n)], [])
            assert result.succeeded
            inside -= 1

    first = await locks[0].acquire()  # the first in the queue holds; the rest queue behind
    waiters = [asyncio.create_task(work(n)) for n in range(1, 5)]
    await until_queued(store, "rebalance", 5)
    assert not any(task.done() for task in waiters)
    queue = sorted(
        await store.list(layout.lock_prefix("rebalance")), key=lambda e: e.create_revision
    )
    await locks[0].release()
    await asyncio.wait_for(asyncio.gather(*waiters), timeout=20)
    assert sorted(order) == [1, 2, 3, 4]
    # No herd: a key is watched by one waiter at most (the one queued right after it), and
    # the last in the queue by nobody. (A waiter whose predecessor has already let go when
    # it looks need not watch at all.)
    keys = [entry.key for entry in queue]
    assert keys[0] == first.key
    assert len(recorder.watched) == len(set(recorder.watched))
    assert set(recorder.watched) <= set(keys[:-1])
    for session in sessions:
        await session.close()


async def test_a_holder_that_lost_its_lease_is_fenced(store: MetadataStore) -> None:
    async with Session(store, ttl=10) as one, Session(store, ttl=10) as two:
        old, new = FencedLock(one, "l", holder_id=1), FencedLock(two, "l", holder_id=2)
        await old.acquire()
        stale_fence = old.fence()
        taking = asyncio.create_task(new.acquire())
        await store.revoke(one.lease)  # the holder's lease is gone: its key with it
        await asyncio.wait_for(taking, timeout=10)
        stale = await store.txn([stale_fence], [Put("/lock/stale", b"")], [])
        assert not stale.succeeded
        assert await store.get("/lock/stale") is None
        fresh = await store.txn([new.fence()], [Put("/lock/fresh", b"")], [])
        assert fresh.succeeded
        await new.release()


async def test_timeout_leaves_the_queue(store: MetadataStore) -> None:
    async with Session(store, ttl=10) as one, Session(store, ttl=10) as two:
        holder, waiter = FencedLock(one, "l"), FencedLock(two, "l")
        await holder.acquire()
        with pytest.raises(TimeoutError):
            await waiter.acquire(timeout=0.3)
        assert holder.token is not None
        assert (await store.list(layout.lock_prefix("l"))).keys() == [holder.token.key]
        with pytest.raises(Fenced):
            waiter.fence()
        await holder.release()
