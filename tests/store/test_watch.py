"""Conformance: watches deliver every change in revision order, one batch per revision,
resume from any kept revision, and say when history is gone or the store is unreachable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from metaplane.store import (
    Compacted,
    Delete,
    EventType,
    MetadataStore,
    Put,
    Unavailable,
    Watch,
    WatchBatch,
    connect_store,
)
from metaplane.testing import EtcdMember


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


async def test_resumable_from_every_kept_revision(store: MetadataStore) -> None:
    first, last = await write_history(store)
    async with store.watch("/w", start_revision=first) as watch:
        everything = summary(await collect(watch, last))
    for start in range(first, last + 1):
        async with store.watch("/w", start_revision=start) as watch:
            resumed = summary(await collect(watch, last))
        assert resumed == [batch for batch in everything if batch[0] >= start]


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


@pytest.mark.backends("sqlite", "etcd", reason="other clients need a store they can open")
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


async def test_progress_never_overtakes_events(store: MetadataStore) -> None:
    """A progress batch at P means every event up to P was delivered before it — also right
    after opening a watch from an old revision (etcd issue 15220, verified on old servers)."""
    first = await store.put("/p/0", b"")
    for i in range(1, 50):
        last = await store.put(f"/p/{i}", b"")
    async with store.watch("/p", start_revision=first) as watch:
        watch.request_progress()
        delivered: list[int] = []
        async with asyncio.timeout(10):
            async for batch in watch:
                if not batch.events:
                    break
                delivered.append(batch.revision)
    assert batch.revision >= last
    assert delivered == list(range(first, last + 1))
