"""Conformance: one watch over a set of prefixes that changes while it runs. Batches come in
strictly increasing revision order, each with every event of its revision under the
prefixes followed then; a prefix added at R delivers exactly what follows a read at R;
a removed prefix delivers nothing once `remove` returns; progress means nothing is
pending under any prefix."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from metaplane.store import (
    Compacted,
    Delete,
    EtcdStore,
    EventType,
    MetadataStore,
    OrderLost,
    PrefixWatch,
    Put,
    WatchBatch,
    in_prefix,
)
from metaplane.store._etcd_prefixes import _WAKE, SYNC_WAIT
from metaplane.store._etcd_watch import _Ended
from tests.store import zk_subsets

Change = tuple[int, str, str]


def changes(batches: list[WatchBatch]) -> list[Change]:
    """(revision, type, key), a revision's events sorted by key: the order across prefixes
    within a revision is the backend's."""
    return [
        (b.revision, e.type.name, e.key)
        for b in batches
        for e in sorted(b.events, key=lambda event: event.key)
    ]


async def until(
    watch: AsyncIterator[WatchBatch], revision: int, timeout: float = 20
) -> list[WatchBatch]:
    """The batches up to `revision`, asking for progress so that a quiet end shows."""
    batches: list[WatchBatch] = []
    async with asyncio.timeout(timeout):
        assert isinstance(watch, PrefixWatch)
        watch.request_progress()
        async for batch in watch:
            batches.append(batch)
            if batch.revision >= revision:
                return batches
            watch.request_progress()
    raise AssertionError("the watch ended")


def in_order(batches: list[WatchBatch]) -> None:
    revisions = [batch.revision for batch in batches]
    assert revisions == sorted(set(revisions)), f"not strictly increasing: {revisions}"


async def reference(
    store: MetadataStore, start: int, end: int, prefixes: list[str]
) -> list[Change]:
    """What a plain watch of everything shows under `prefixes` in [start, end]."""
    async with store.watch("/", start_revision=start) as everything:
        batches: list[WatchBatch] = []
        async with asyncio.timeout(20):
            async for batch in everything:
                batches.append(batch)
                if batch.revision >= end:
                    break
    kept = [
        WatchBatch(
            b.revision, tuple(e for e in b.events if any(in_prefix(e.key, p) for p in prefixes))
        )
        for b in batches
    ]
    return changes([b for b in kept if b.events])


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_batches_in_revision_order_across_prefixes(store: MetadataStore) -> None:
    prefixes = ["/o/a", "/o/b", "/o/c/deep"]
    start = await store.revision() + 1
    rng = random.Random(3)
    async with store.watch_prefixes(prefixes, start_revision=start) as watch:
        for i in range(60):
            key = rng.choice(["/o/a/k", "/o/b/k", "/o/c/deep/k", "/o/c/other", "/o/a1", "/o"])
            last = await store.put(f"{key}{i % 4}", b"v")
        last = await store.put("/o/b/end", b"")
        batches = await until(watch, last)
    in_order(batches)
    assert changes([b for b in batches if b.events]) == await reference(
        store, start, last, prefixes
    )


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.MERGED)
async def test_a_transaction_across_two_prefixes_comes_whole(store: MetadataStore) -> None:
    async with store.watch_prefixes(
        ["/x/a", "/x/b"], start_revision=await store.revision() + 1
    ) as watch:
        revision = (
            await store.txn([], [Put("/x/a/1", b"1"), Put("/x/b/1", b"1"), Put("/x/c/1", b"1")], [])
        ).revision
        both = (await store.txn([], [Delete("/x/a/1"), Put("/x/b/2", b"2")], [])).revision
        batches = await until(watch, both)
    events = [b for b in batches if b.events]
    assert changes(events) == [
        (revision, "PUT", "/x/a/1"),
        (revision, "PUT", "/x/b/1"),
        (both, "DELETE", "/x/a/1"),
        (both, "PUT", "/x/b/2"),
    ]
    assert [b.revision for b in events] == [revision, both]


async def test_prefixes_respect_segments(store: MetadataStore) -> None:
    async with store.watch_prefixes(
        ["/seg/t1"], start_revision=await store.revision() + 1
    ) as watch:
        for key in ["/seg/t10", "/seg/t1-part-0/x", "/seg/t1.x", "/seg/t1", "/seg/t1/a"]:
            last = await store.put(key, b"")
        batches = await until(watch, last)
    assert [e.key for b in batches for e in b.events] == ["/seg/t1", "/seg/t1/a"]


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_add_and_remove_while_writes_run_match_a_read_at_r(store: MetadataStore) -> None:
    """A writer changes keys under 40 topics (puts, deletes, transactions over two topics)
    while prefixes are added and removed. For each prefix added at R, its state read at R
    plus the events the watch delivers after R is, at the end, exactly its state in the
    store: nothing missed, nothing twice; and no event of a removed prefix comes after
    `remove` returned."""
    topics = [f"/t/ns/topic-{i:02d}" for i in range(40)]
    rng = random.Random(7)
    stop = asyncio.Event()

    async def write() -> None:
        i = 0
        while not stop.is_set():
            a, b = rng.sample(topics, 2)
            choice = rng.randrange(3)
            if choice == 0:
                await store.put(f"{a}/k{rng.randrange(3)}", str(i).encode())
            elif choice == 1:
                await store.delete(f"{a}/k{rng.randrange(3)}")
            else:
                await store.txn([], [Put(f"{a}/t", b"%d" % i), Put(f"{b}/t", b"%d" % i)], [])
            i += 1
            await asyncio.sleep(0)

    reads: dict[str, tuple[int, dict[str, bytes]]] = {}
    removed_at: dict[str, int] = {}
    batches: list[WatchBatch] = []
    start = await store.revision() + 1
    async with store.watch_prefixes([], start_revision=start) as watch:
        writer = asyncio.create_task(write())

        async def consume() -> None:
            async for batch in watch:
                batches.append(batch)

        consumer = asyncio.create_task(consume())
        for step in range(8):
            added = topics[step * 5 : step * 5 + 5]
            revision = await watch.add(added)
            for prefix in added:
                read = await store.list(prefix, revision=revision)
                reads[prefix] = (revision, {e.key: e.value for e in read})
            if step % 3 == 2:
                gone = topics[(step - 2) * 5]
                await watch.remove([gone])
                removed_at[gone] = len(batches)
            await asyncio.sleep(0.05)
        stop.set()
        await writer
        last = await store.put("/t/end", b"")
        async with asyncio.timeout(20):
            while not batches or batches[-1].revision < last:
                if consumer.done():
                    consumer.result()  # the watch's error, if it raised one
                watch.request_progress()
                await asyncio.sleep(0.01)
        consumer.cancel()
    in_order(batches)
    for prefix, (revision, state) in reads.items():
        mine = [(b.revision, e) for b in batches for e in b.events if in_prefix(e.key, prefix)]
        assert all(at > revision for at, _ in mine), f"{prefix}: an event at or below R"
        if prefix in removed_at:
            assert not [
                e
                for b in batches[removed_at[prefix] :]
                for e in b.events
                if in_prefix(e.key, prefix)
            ], f"{prefix}: an event after remove returned"
            continue
        for _, event in mine:
            if event.type is EventType.PUT:
                state[event.key] = event.entry.value
            else:
                state.pop(event.key, None)
        assert state == {e.key: e.value for e in await store.list(prefix)}, prefix


async def test_remove_drops_what_is_already_buffered(store: MetadataStore) -> None:
    async with store.watch_prefixes(
        ["/r/a", "/r/b"], start_revision=await store.revision() + 1
    ) as watch:
        for i in range(5):
            await store.put(f"/r/a/{i}", b"")
            await store.put(f"/r/b/{i}", b"")
        await watch.remove(["/r/a"])
        last = await store.put("/r/b/end", b"")
        batches = await until(watch, last)
    assert {e.key for b in batches for e in b.events} == {f"/r/b/{i}" for i in range(5)} | {
        "/r/b/end"
    }


async def test_progress_over_many_prefixes_means_nothing_pending(store: MetadataStore) -> None:
    prefixes = [f"/p/topic-{i:04d}" for i in range(300)]
    async with store.watch_prefixes(prefixes, start_revision=await store.revision() + 1) as watch:
        written = [await store.put(f"{p}/k", b"v") for p in prefixes[::50]]
        moved = await store.put("/elsewhere/p", b"")
        watch.request_progress()
        seen: list[int] = []
        async with asyncio.timeout(20):
            async for batch in watch:
                if not batch.events:
                    assert batch.revision >= max(seen), "progress before a pending batch"
                    assert seen == written, "progress came with changes still pending"
                    break
                seen.append(batch.revision)
    assert batch.revision <= moved


async def test_ten_thousand_prefixes_added_at_once_are_all_followed(store: MetadataStore) -> None:
    prefixes = [f"/many/ns-{i % 10}/topic-{i:05d}" for i in range(10_000)]
    async with store.watch_prefixes([]) as watch:
        revision = await watch.add(prefixes)
        assert watch.prefixes == frozenset(prefixes)
        sample = prefixes[::997]
        written = (await store.txn([], [Put(f"{p}/k", b"v") for p in sample], [])).revision
        other = await store.put("/many/ns-0/not-followed/k", b"")
        assert written > revision
        batches = await until(watch, other)
    events = [b for b in batches if b.events]
    assert [b.revision for b in events] == [written]
    assert sorted(e.key for e in events[0].events) == sorted(f"{p}/k" for p in sample)


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.HISTORY)
async def test_a_past_start_revision_replays_history_in_order(store: MetadataStore) -> None:
    start = await store.revision() + 1
    for i in range(20):
        await store.txn(
            [], [Put(f"/h/a/{i}", b""), Put(f"/h/b/{i}", b""), Put(f"/h/c/{i}", b"")], []
        )
    last = await store.put("/h/b/end", b"")
    async with store.watch_prefixes(["/h/a", "/h/b"], start_revision=start) as watch:
        batches = await until(watch, last)
    in_order(batches)
    assert changes([b for b in batches if b.events]) == await reference(
        store, start, last, ["/h/a", "/h/b"]
    )
    assert all(len(b.events) == 2 for b in batches if b.events and b.revision < last)


@pytest.mark.backends("memory", "sqlite", "etcd", reason=zk_subsets.COMPACTION)
async def test_a_compacted_start_revision_raises_compacted(store: MetadataStore) -> None:
    first = await store.put("/cc/a", b"")
    last = await store.put("/cc/a", b"again")
    await store.compact(last)
    async with store.watch_prefixes(["/cc"], start_revision=first) as watch:
        with pytest.raises(Compacted):
            await asyncio.wait_for(anext(watch), timeout=10)


@pytest.mark.backends("etcd", reason="only etcd can deliver an event after later ones")
async def test_an_event_late_after_its_batch_was_handed_out_raises_order_lost(
    store: MetadataStore,
) -> None:
    """etcd sends a watcher set aside (its channel full) its event late. Simulated: a
    response for a watcher of the stream, at a revision already handed out, is put in the
    watch's queue as the stream would deliver it."""
    assert isinstance(store, EtcdStore)
    async with store.watch_prefixes(
        ["/late/a", "/late/b"], start_revision=await store.revision() + 1
    ) as watch:
        await until(watch, await store.put("/late/a/0", b""))  # the stream is open
        first = await store.put("/late/a/1", b"")
        batches = await until(watch, first)
        assert batches[-1].revision >= first
        stream = watch._stream  # type: ignore[attr-defined]
        watch_id = next(i for i, p in watch._ids.items() if p == "/late/b")  # type: ignore[attr-defined]
        await watch._responses.put((stream, _late_response(watch_id, "/late/b/1", first)))  # type: ignore[attr-defined]
        await store.put("/late/a/2", b"")
        with pytest.raises(OrderLost) as raised:
            async with asyncio.timeout(10):
                await anext(watch)
    assert raised.value.revision == first


@pytest.mark.backends("etcd", reason="only etcd can deliver an event after later ones")
async def test_an_event_late_before_its_batch_was_read_is_placed_in_order(
    store: MetadataStore,
) -> None:
    """A late event whose revision the caller has not read yet: the watch drops what it
    released from there and reads that history again, so the caller still gets the whole
    revision, in order."""
    assert isinstance(store, EtcdStore)
    async with store.watch_prefixes(
        ["/lt/a", "/lt/b"], start_revision=await store.revision() + 1
    ) as watch:
        both = (await store.txn([], [Put("/lt/a/1", b""), Put("/lt/b/1", b"")], [])).revision
        after = await store.put("/lt/a/2", b"")
        # Let the stream release both revisions, unread, then feed one event again, late.
        await watch._open()  # type: ignore[attr-defined]
        async with asyncio.timeout(10):
            while watch._passed is None or watch._passed < both:  # type: ignore[attr-defined]
                stream, item = await watch._responses.get()  # type: ignore[attr-defined]
                if stream is watch._stream and item is not _WAKE and not isinstance(item, _Ended):  # type: ignore[attr-defined]
                    await watch._receive(stream, item)  # type: ignore[attr-defined]
                watch._poke.set()  # type: ignore[attr-defined]
        stream = watch._stream  # type: ignore[attr-defined]
        watch_id = next(i for i, p in watch._ids.items() if p == "/lt/b")  # type: ignore[attr-defined]
        await watch._responses.put((stream, _late_response(watch_id, "/lt/b/1", both)))  # type: ignore[attr-defined]
        batches = await until(watch, after)
    in_order(batches)
    assert changes([b for b in batches if b.events]) == [
        (both, "PUT", "/lt/a/1"),
        (both, "PUT", "/lt/b/1"),
        (after, "PUT", "/lt/a/2"),
    ]


async def _collect(watch: PrefixWatch, batches: list[WatchBatch], through: list[int]) -> None:
    """Read the watch into `batches`, asking for progress, until a batch at or past
    `through[0]` (which the test may lower while this runs)."""
    watch.request_progress()
    async for batch in watch:
        batches.append(batch)
        if batch.revision >= through[0]:
            return
        watch.request_progress()


@pytest.mark.backends("etcd", reason="only etcd acknowledges the watchers of one add one by one")
async def test_an_event_before_the_last_acknowledgement_of_an_add_is_kept(
    store: MetadataStore,
) -> None:
    """etcd acknowledges the watchers of one `add` one by one, and a watcher acknowledged
    may send an event before the next one is acknowledged. Driven: the acknowledgement of
    the add's last watcher is handled only once an event of its first has been received."""
    assert isinstance(store, EtcdStore)
    async with store.watch_prefixes(["/ak/a"], start_revision=await store.revision() + 1) as watch:
        await until(watch, await store.put("/ak/a/0", b""))  # the stream is open
        receive = watch._receive  # type: ignore[attr-defined]
        written: list[int] = []

        async def receive_late(stream: Any, response: Any) -> None:
            if response.created and watch._ids.get(response.watch_id) == "/ak/c":  # type: ignore[attr-defined]
                written.append(await store.put("/ak/b/1", b""))
                shown = False
                while not shown:  # handle what the stream sends until /ak/b's event
                    source, item = await watch._responses.get()  # type: ignore[attr-defined]
                    if source is stream and item is not _WAKE and not isinstance(item, _Ended):
                        await receive(source, item)
                        shown = any(event.kv.key == b"/ak/b/1" for event in item.events)
            await receive(stream, response)

        watch._receive = receive_late  # type: ignore[attr-defined]
        batches: list[WatchBatch] = []
        through = [2**62]
        consumer = asyncio.create_task(_collect(watch, batches, through))
        added_at = await asyncio.wait_for(watch.add(["/ak/b", "/ak/c"]), timeout=10)
        through[0] = await store.put("/ak/a/2", b"")
        await asyncio.wait_for(consumer, timeout=10)
    assert written and added_at < written[0]
    in_order(batches)
    assert [c for c in changes(batches) if c[0] > added_at] == [
        (written[0], "PUT", "/ak/b/1"),
        (through[0], "PUT", "/ak/a/2"),
    ]


@pytest.mark.backends("etcd", reason="only etcd catches a new watcher up after acknowledging it")
async def test_a_watcher_caught_up_after_its_acknowledgement_keeps_the_order(
    store: MetadataStore,
) -> None:
    """etcd registers a watcher asked for "from now" as one to catch up when a write lands
    between its reading of the revision and its registration; its sync loop (every 100 ms)
    sends that watcher's events later, after other watchers' newer ones. A server that does
    not order progress answers a progress request at once, whether or not its watchers are
    synced. Driven on such a server: the new watcher's events of its first SYNC_WAIT after
    its acknowledgement are held back until then, as etcd's loop would (within 100 ms when
    it keeps up; here as late as the watch allows for)."""
    assert isinstance(store, EtcdStore)
    store.progress_in_order = False  # as etcd before 3.4.25 / 3.5.8 (the OS package: 3.4.23)
    loop = asyncio.get_running_loop()
    async with store.watch_prefixes(["/cu/a"], start_revision=await store.revision() + 1) as watch:
        await until(watch, await store.put("/cu/a/0", b""))  # the stream is open
        receive = watch._receive  # type: ignore[attr-defined]
        synced_at: list[float] = []

        async def catch_up_late(stream: Any, response: Any) -> None:
            prefix = watch._ids.get(response.watch_id)  # type: ignore[attr-defined]
            if response.created and prefix == "/cu/b":
                synced_at.append(loop.time() + SYNC_WAIT)
            elif response.events and prefix == "/cu/b" and loop.time() < synced_at[0]:
                item = (stream, response)
                loop.call_at(synced_at[0], watch._responses.put_nowait, item)  # type: ignore[attr-defined]
                return
            await receive(stream, response)

        watch._receive = catch_up_late  # type: ignore[attr-defined]
        batches: list[WatchBatch] = []
        through = [2**62]
        consumer = asyncio.create_task(_collect(watch, batches, through))
        added_at = await asyncio.wait_for(watch.add(["/cu/b"]), timeout=10)
        assert synced_at  # its acknowledgement was seen
        shown = await store.put("/cu/a/1", b"")
        async with asyncio.timeout(10):  # the watch shows a revision past the add's
            while not batches or batches[-1].revision < shown:
                assert not consumer.done()
                watch.request_progress()
                await asyncio.sleep(0.01)
        late = await store.put("/cu/b/1", b"")
        then = await store.put("/cu/a/2", b"")
        through[0] = await store.put("/cu/a/3", b"")  # shows /cu/a/2 whole: it is handed out
        await asyncio.wait_for(consumer, timeout=10)
    in_order(batches)
    assert [c for c in changes(batches) if c[0] > added_at] == [
        (shown, "PUT", "/cu/a/1"),
        (late, "PUT", "/cu/b/1"),
        (then, "PUT", "/cu/a/2"),
        (through[0], "PUT", "/cu/a/3"),
    ]


def _late_response(watch_id: int, key: str, revision: int) -> Any:
    from aetcd import rpc

    kv = rpc.KeyValue(
        key=key.encode(), value=b"", version=1, create_revision=revision, mod_revision=revision
    )
    return rpc.WatchResponse(
        header=rpc.ResponseHeader(revision=revision),
        watch_id=watch_id,
        events=[rpc.Event(type=rpc.Event.PUT, kv=kv)],
    )
