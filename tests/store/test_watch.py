"""Conformance: watches deliver every change in revision order, one batch per revision,
resume from any kept revision, and say when history is gone or the store is unreachable."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from metaplane.store import (
    Compacted,
    Delete,
    EtcdStore,
    EventType,
    MetadataError,
    MetadataStore,
    Put,
    Unavailable,
    Watch,
    WatchBatch,
    connect_store,
)
from metaplane.testing import EtcdMember
from tests.store import zk_subsets
from tests.store.watching import (
    changes,
    check_history,
    follow_with_progress,
    oldest_revision,
)


async def collect(watch: Watch, until: int, timeout: float = 10.0) -> list[WatchBatch]:
    """The batches of `watch` up to revision `until`."""
    batches: list[WatchBatch] = []
    async with asyncio.timeout(timeout):
        async for batch in watch:
            batches.append(batch)
            if batch.revision >= until:
                break
    return batches


def summary(batches: list[WatchBatch]) -> list[tuple[int, list[tuple[str, str, bytes]]]]:
    return [(b.revision, [(e.type.name, e.key, e.entry.value) for e in b.events]) for b in batches]


async def write_history(store: MetadataStore) -> tuple[int, int]:
    first = await store.put("/w/a", b"1")
    await store.put("/w/b", b"1")
    await store.put("/w/a", b"2")
    await store.txn([], [Put("/w/c", b"1"), Put("/w/d", b"1"), Delete("/w/b")], [])
    await store.delete("/w/a")
    last = await store.put("/w/a", b"3")
    return first, last


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_order_and_transactions_together(store: MetadataStore) -> None:
    first, last = await write_history(store)
    async with store.watch("/w", start_revision=first) as watch:
        batches = await collect(watch, last)
    assert summary(batches) == [
        (first, [("PUT", "/w/a", b"1")]),
        (first + 1, [("PUT", "/w/b", b"1")]),
        (first + 2, [("PUT", "/w/a", b"2")]),
        (
            first + 3,
            [("PUT", "/w/c", b"1"), ("PUT", "/w/d", b"1"), ("DELETE", "/w/b", b"")],
        ),
        (first + 4, [("DELETE", "/w/a", b"")]),
        (first + 5, [("PUT", "/w/a", b"3")]),
    ]
    recreated = batches[-1].events[0].entry
    assert (recreated.version, recreated.create_revision, recreated.mod_revision) == (
        1,
        last,
        last,
    )


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_resumable_from_every_kept_revision(store: MetadataStore) -> None:
    first, last = await write_history(store)
    async with store.watch("/w", start_revision=first) as watch:
        everything = summary(await collect(watch, last))
    for start in range(first, last + 1):
        async with store.watch("/w", start_revision=start) as watch:
            resumed = summary(await collect(watch, last))
        assert resumed == [batch for batch in everything if batch[0] >= start]


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_watch_respects_segments(store: MetadataStore) -> None:
    start = await store.revision() + 1
    for key in ["/w/t1", "/w/t10", "/w/t1-part-0", "/w/t1/sub", "/w/t1.x"]:
        last = await store.put(key, b"")
    await store.put("/w/t1/end", b"")
    async with store.watch("/w/t1", start_revision=start) as watch:
        batches = await collect(watch, last + 1)
    assert [e.key for b in batches for e in b.events] == ["/w/t1", "/w/t1/sub", "/w/t1/end"]


async def test_live_changes_arrive(store: MetadataStore) -> None:
    start = await store.revision() + 1
    async with store.watch("/live", start_revision=start) as watch:
        received = asyncio.create_task(collect(watch, start + 2))
        await store.put("/live/a", b"1")
        await store.put("/elsewhere", b"1")
        last = await store.put("/live/b", b"1")
        batches = await received
    assert [(b.revision, b.events[0].key) for b in batches] == [
        (start, "/live/a"),
        (last, "/live/b"),
    ]


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.COMPACTION)
async def test_compacted(store: MetadataStore) -> None:
    first, last = await write_history(store)
    await store.compact(last)
    with pytest.raises(Compacted) as raised:
        async with store.watch("/w", start_revision=first) as watch:
            await collect(watch, last)
    assert raised.value.compact_revision == last
    async with store.watch("/w", start_revision=last) as watch:
        batches = await collect(watch, last)
    assert summary(batches) == [(last, [("PUT", "/w/a", b"3")])]


async def test_progress_without_events(store: MetadataStore) -> None:
    start = await store.revision() + 1
    async with store.watch("/quiet", start_revision=start) as watch:
        revision = await store.put("/noise", b"1")
        batch = await asyncio.wait_for(_progress(watch), timeout=10)
    assert batch.events == ()
    assert batch.revision >= revision


async def _progress(watch: Watch) -> WatchBatch:
    watch.request_progress()
    return await anext(watch)


@pytest.mark.backends("sqlite", "etcd", "zk", reason="other clients need a store they can open")
async def test_changes_of_another_client_arrive(store_url: str) -> None:
    async with (
        await connect_store(store_url) as writer,
        await connect_store(store_url) as reader,
    ):
        start = await reader.revision() + 1
        async with reader.watch("/other", start_revision=start) as watch:
            received = asyncio.create_task(collect(watch, start))
            revision = await writer.put("/other/k", b"from the writer")
            batches = await received
    assert summary(batches) == [(revision, [("PUT", "/other/k", b"from the writer")])]


@pytest.mark.backends("etcd", reason="only a networked store can become unreachable")
async def test_etcd_stopped_and_restarted(tmp_path: Path) -> None:
    with EtcdMember(tmp_path) as member:
        async with await connect_store(member.url + "?timeout=2") as store:
            first = await store.put("/r/a", b"1")
            watch = store.watch("/r", start_revision=first)
            assert (await anext(watch)).revision == first
            member.kill()
            with pytest.raises(Unavailable):
                await asyncio.wait_for(anext(watch), timeout=30)
            with pytest.raises(Unavailable):
                await store.put("/r/b", b"2")
            member.start()
            member.wait_ready()
            second = await store.put("/r/b", b"2")
            async with store.watch("/r", start_revision=first + 1) as resumed:
                batches = await collect(resumed, second)
    assert [e.key for b in batches for e in b.events if e.type is EventType.PUT] == ["/r/b"]


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_progress_never_overtakes_events(store: MetadataStore) -> None:
    """A progress batch at P means every event up to P was delivered before it — also right
    after opening a watch from an old revision (etcd issue 15220, verified on old servers)."""
    first = await store.put("/p/0", b"")
    for i in range(1, 50):
        last = await store.put(f"/p/{i}", b"")
    tail = await store.put("/elsewhere", b"")  # the store moves on past the prefix
    async with store.watch("/p", start_revision=first) as watch:
        watch.request_progress()
        delivered: list[int] = []
        async with asyncio.timeout(10):
            async for batch in watch:
                if not batch.events:
                    break
                delivered.append(batch.revision)
    assert delivered == list(range(first, last + 1))
    assert last < batch.revision <= tail


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_progress_waits_for_keys_created_and_deleted_in_between(
    store: MetadataStore,
) -> None:
    """Keys created and deleted under the prefix after R leave its net state as it was at
    R; a progress batch requested at once on a watch from R + 1 still comes only after
    their events (on etcd 3.4.23 the server's own notification overtakes them)."""
    before = await store.revision()
    for i in range(5):
        await store.put(f"/cd/k{i}", b"v")
        await store.delete(f"/cd/k{i}")
    await store.txn([], [Put("/cd/t", b"v"), Put("/cd-sibling", b"v")], [])
    marker = await store.delete("/cd/t")
    tail = await store.put("/elsewhere/x", b"")
    async with store.watch("/cd", start_revision=before + 1) as watch:
        reference = changes(await collect(watch, marker))
    assert len(reference) == 12
    async with store.watch("/cd", start_revision=before + 1) as watch:
        batches = await follow_with_progress(watch, tail)
    check_history(batches, reference)


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_progress_from_the_oldest_revision(store: MetadataStore) -> None:
    """A watch from the oldest revision kept (1 on a fresh store), asked for progress at
    once, delivers the whole history first (etcd 3.4.23 answers with the current revision
    at once, ahead of every event)."""
    oldest = await oldest_revision(store)
    for i in range(10):
        await store.put(f"/old/k{i}", b"v")
        if i % 3 == 0:
            await store.delete(f"/old/k{i}")
    marker = await store.put("/old/end", b"")
    tail = await store.put("/elsewhere/y", b"")
    async with store.watch("/old", start_revision=oldest) as watch:
        reference = changes(await collect(watch, marker))
    async with store.watch("/old", start_revision=oldest) as watch:
        batches = await follow_with_progress(watch, tail)
    check_history(batches, reference)
    assert batches[-1].revision >= tail


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_batches_in_order_while_progress_is_asked_under_writes(
    store: MetadataStore,
) -> None:
    """A writer mixes puts, deletes and transactions under the prefix and beside it while
    the watcher asks for progress after every batch: the history is the plain watch's,
    in strictly increasing revisions, and no progress batch comes early."""
    start = await store.revision() + 1
    rng = random.Random(11)

    async def write() -> int:
        revision = start
        for i in range(120):
            key = f"/load/k{rng.randrange(8)}"
            choice = rng.randrange(4)
            if choice == 0:
                revision = await store.put(key, str(i).encode())
            elif choice == 1:
                revision = await store.delete(key)
            elif choice == 2:
                txn = [Put(f"/load/t{i}", b"v"), Put(f"/load-beside/{i}", b"v")]
                revision = (await store.txn([], txn, [])).revision
            else:
                revision = await store.put(f"/beside/{i}", b"v")
            await asyncio.sleep(0)
        return revision

    async with store.watch("/load", start_revision=start) as watch:
        writer = asyncio.create_task(write())
        marker = await writer
        marker = await store.put("/load/end", b"")
        tail = await store.put("/beside/end", b"")
        batches = await follow_with_progress(watch, tail, timeout=60)
    async with store.watch("/load", start_revision=start) as plain:
        reference = changes(await collect(plain, marker))
    check_history(batches, reference)


async def test_no_progress_batch_at_or_below_one_delivered(store: MetadataStore) -> None:
    """Asked for progress on a store that has not moved since its last batch, a watch says
    nothing; once the store moves, the progress batch comes, above that batch."""
    start = await store.revision() + 1
    async with store.watch("/still", start_revision=start) as watch:
        written = await store.put("/still/k", b"v")
        assert (await anext(watch)).revision == written
        watch.request_progress()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.5):
                await anext(watch)
        moved = await store.put("/elsewhere/z", b"")
        async with asyncio.timeout(10):
            batch = await anext(watch)
    assert (batch.revision, batch.events) == (moved, ())


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.COMPACTION)
async def test_progress_on_a_quiet_prefix_after_compaction(store: MetadataStore) -> None:
    """A quiet watch whose history was compacted under it, asked for progress, never hangs:
    it raises `Compacted` with the compact revision (memory and sqlite, whose watch reads the
    compacted log; etcd before 3.4.25, where the progress cannot be verified any more and
    the caller must resync), or says where the store is (etcd that orders progress)."""
    start = await store.revision() + 1
    async with store.watch("/quiet-then-compacted", start_revision=start) as watch:
        watch.request_progress()
        async with asyncio.timeout(10):
            assert (await anext(watch)).revision == start - 1
        for i in range(3):
            compacted_at = await store.put(f"/elsewhere/c{i}", b"")
        await store.compact(compacted_at)
        watch.request_progress()
        outcome = await _next_or_error(watch, timeout=10)
    if isinstance(store, EtcdStore) and store.progress_in_order:
        assert isinstance(outcome, WatchBatch)
        assert (outcome.revision, outcome.events) == (compacted_at, ())
    else:
        assert isinstance(outcome, Compacted)
        assert outcome.compact_revision == compacted_at


async def _next_or_error(watch: Watch, timeout: float) -> WatchBatch | Exception:
    """The next batch, or the contract error the watch raised instead (never a hang)."""
    try:
        async with asyncio.timeout(timeout):
            return await anext(watch)
    except MetadataError as error:
        return error
