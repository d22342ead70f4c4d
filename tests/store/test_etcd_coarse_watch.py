"""On etcd, many prefixes with one parent are watched through the parent's one watcher
(`store/_etcd_prefixes.py`, WATCHERS_PER_PARENT): the watch's contract holds as with a
watcher a prefix — the conformance cases run again with a parent watched from its second
child on — and etcd holds one watcher for the parent, by its own gauge."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from typing import Any

import pytest

import metaplane.store._etcd_prefixes as etcd_prefixes
from metaplane.store import MetadataStore, PrefixWatch, Put, Unavailable, Watch, WatchBatch
from metaplane.testing import EtcdMember
from tests.store import test_prefix_watch as conformance

pytestmark = pytest.mark.backends("etcd", reason="only etcd creates a watcher per prefix")


@pytest.fixture
def few(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parent is watched as a whole from its second child followed on."""
    monkeypatch.setattr(etcd_prefixes, "WATCHERS_PER_PARENT", 1)


def watchers(member: EtcdMember) -> int:
    """etcd's own count of its watchers (every stream's)."""
    with urllib.request.urlopen(f"{member.client_url}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = re.search(r"^etcd_debugging_mvcc_watcher_total (\S+)$", text, re.MULTILINE)
    assert found, "etcd reports no watcher count"
    return int(float(found.group(1)))


async def until_watchers(member: EtcdMember, count: int) -> None:
    """Until etcd counts `count` watchers (a cancellation lands after `remove` returns)."""
    seen = None
    try:
        async with asyncio.timeout(10):
            while True:
                seen = watchers(member)
                if seen == count:
                    return
                await asyncio.sleep(0.02)  # etcd's gauge is polled: nothing to await
    except TimeoutError:
        raise AssertionError(f"etcd counts {seen} watchers, not {count}") from None


def hold_history(watch: PrefixWatch) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the watch's history reads (a stream's opening reads its history): `reading` is
    set once one has begun, and it goes on once `gate` is set — a slow store, on demand."""
    assert isinstance(watch, etcd_prefixes.EtcdPrefixWatch)
    reading, gate = asyncio.Event(), asyncio.Event()
    read_history = watch.read_history

    async def held(*args: Any) -> int:
        reading.set()
        await gate.wait()
        return await read_history(*args)

    watch.read_history = held  # type: ignore[method-assign]
    return reading, gate


class Consumer:
    """A task reading a watch into `seen`, as a cache does (an add's acknowledgements are
    read as the watch is)."""

    def __init__(self, watch: PrefixWatch | Watch) -> None:
        self.watch = watch
        self.seen: list[WatchBatch] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for batch in self.watch:
            self.seen.append(batch)

    async def until(self, revision: int, *, ask: bool = True) -> None:
        """Until the watch has handed out `revision` (asking for progress meanwhile, unless
        not to `ask`)."""
        async with asyncio.timeout(20):
            while not self.seen or self.seen[-1].revision < revision:
                if self.task.done():
                    self.task.result()  # the watch's error, if it raised one
                if ask:
                    self.watch.request_progress()
                await asyncio.sleep(0.01)

    def changes(self) -> list[tuple[int, list[str]]]:
        return [(b.revision, sorted(e.key for e in b.events)) for b in self.seen if b.events]


@pytest.mark.usefixtures("few")
async def test_add_and_remove_while_writes_run_under_a_parent_watched(
    store: MetadataStore,
) -> None:
    await conformance.test_add_and_remove_while_writes_run_match_a_read_at_r(store)


@pytest.mark.usefixtures("few")
async def test_batches_in_revision_order_under_a_parent_watched(store: MetadataStore) -> None:
    await conformance.test_batches_in_revision_order_across_prefixes(store)


@pytest.mark.usefixtures("few")
async def test_a_transaction_comes_whole_under_a_parent_watched(store: MetadataStore) -> None:
    await conformance.test_a_transaction_across_two_prefixes_comes_whole(store)


@pytest.mark.usefixtures("few")
async def test_remove_drops_what_is_buffered_under_a_parent_watched(
    store: MetadataStore,
) -> None:
    await conformance.test_remove_drops_what_is_already_buffered(store)


@pytest.mark.usefixtures("few")
async def test_progress_means_nothing_pending_under_a_parent_watched(
    store: MetadataStore,
) -> None:
    await conformance.test_progress_over_many_prefixes_means_nothing_pending(store)


@pytest.mark.usefixtures("few")
async def test_a_past_start_revision_replays_history_under_a_parent_watched(
    store: MetadataStore,
) -> None:
    await conformance.test_a_past_start_revision_replays_history_in_order(store)


@pytest.mark.usefixtures("few")
async def test_segments_are_respected_under_a_parent_watched(store: MetadataStore) -> None:
    async with store.watch_prefixes(
        ["/seg/t1", "/seg/t2"], start_revision=await store.revision() + 1
    ) as watch:
        keys = ["/seg/t10", "/seg/t1-part-0/x", "/seg/t1.x", "/seg/t1", "/seg/t1/a", "/seg/t2/b"]
        for key in [*keys, "/seg"]:
            last = await store.put(key, b"")
        batches = await conformance.until(watch, last)
    assert [e.key for b in batches for e in b.events] == ["/seg/t1", "/seg/t1/a", "/seg/t2/b"]


async def test_a_thousand_prefixes_of_one_parent_are_one_etcd_watcher(
    store: MetadataStore, etcd: EtcdMember
) -> None:
    """1,000 topics of one namespace followed in two adds: one watcher in etcd (the second
    add creates none); the changes under the prefixes come, those of the parent's other
    keys (a sibling, a name that extends a followed one) do not, nor a removed prefix's;
    removing them all cancels the parent's watcher."""
    base = watchers(etcd)
    prefixes = [f"/w/ns/topic-{i:04d}" for i in range(1000)]
    async with store.watch_prefixes([]) as watch:
        first = await watch.add(prefixes[:500])
        opened = await store.put(f"{prefixes[0]}/open", b"")
        await conformance.until(watch, opened)  # the stream is open, its watchers created
        await until_watchers(etcd, base + 1)
        second, third = await asyncio.gather(
            watch.add(prefixes[500:900]), watch.add(prefixes[900:])
        )
        assert min(second, third) >= opened >= first
        sample = prefixes[::100]
        written = (await store.txn([], [Put(f"{p}/k", b"v") for p in sample], [])).revision
        await store.put("/w/ns/other/k", b"")
        await store.put("/w/ns/topic-0001x/k", b"")
        await store.put("/w/ns", b"")
        await watch.remove(prefixes[:1])
        await store.put(f"{prefixes[0]}/k2", b"")
        last = await store.put(f"{prefixes[999]}/end", b"")
        batches = await conformance.until(watch, last)
        await until_watchers(etcd, base + 1)
        events = [b for b in batches if b.events]
        assert [b.revision for b in events] == [written, last]
        # prefixes[0] was removed before the batch was read: none of its events comes
        assert sorted(e.key for e in events[0].events) == sorted(f"{p}/k" for p in sample[1:])
        assert [e.key for e in events[1].events] == [f"{prefixes[999]}/end"]
        # A parent made watched by one add while another add under it waits for its
        # watcher (acknowledgements are read as the watch is: a consumer runs meanwhile).
        others = [f"/w/other/topic-{i:03d}" for i in range(200)]
        consumer = Consumer(watch)
        await asyncio.gather(watch.add(others[:100]), watch.add(others[100:]))
        await until_watchers(etcd, base + 2)
        ops = [Put(f"{others[0]}/k", b""), Put(f"{others[150]}/k", b"")]
        both = (await store.txn([], ops, [])).revision
        await consumer.until(both)
        consumer.task.cancel()
        assert consumer.changes() == [(both, [f"{others[0]}/k", f"{others[150]}/k"])]
        await watch.remove(prefixes[1:] + others)
        assert watch.prefixes == frozenset()
        await until_watchers(etcd, base)


@pytest.mark.usefixtures("few")
async def test_a_covered_add_that_fails_leaves_nothing_behind(store: MetadataStore) -> None:
    """An add under a parent already watched that fails (the store's revision unreadable)
    leaves the prefix unfollowed; added again, its changes come. (Left half-added, its
    events were dropped for good and the second add took it as followed.)"""
    start = await store.revision() + 1
    async with store.watch_prefixes(["/p/a", "/p/b"], start_revision=start) as watch:
        opened = await store.put("/p/a/x", b"")
        await conformance.until(watch, opened)  # the stream is open, the parent watched

        async def unreadable() -> int:
            raise Unavailable("etcd: injected")

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "_revision", unreadable)
            with pytest.raises(Unavailable, match="injected"):
                await watch.add(["/p/c"])
        assert watch.prefixes == {"/p/a", "/p/b"}
        revision = await watch.add(["/p/c"])
        written = await store.put("/p/c/k", b"v")
        assert written > revision
        batches = await conformance.until(watch, written)
    assert [(b.revision, [e.key for e in b.events]) for b in batches if b.events] == [
        (written, ["/p/c/k"])
    ]


@pytest.mark.usefixtures("few")
async def test_a_covered_add_cancelled_while_the_stream_opens_stops_nothing(
    store: MetadataStore,
) -> None:
    """An add under the parent that a stream's opening watches waits until the opening has
    read its history; cancelled meanwhile (a caller's deadline), it leaves the prefix
    unfollowed and the watch going. (Cancelling it once cancelled the opening itself: its
    hold stayed and nothing was released again.)"""
    start = await store.revision() + 1
    early = await store.put("/p/a/early", b"")
    async with store.watch_prefixes(["/p/a", "/p/b"], start_revision=start) as watch:
        reading, gate = hold_history(watch)
        consumer = Consumer(watch)
        await asyncio.wait_for(reading.wait(), timeout=10)  # the opening reads its history
        adding = asyncio.create_task(watch.add(["/p/c"]))
        done, _ = await asyncio.wait({adding}, timeout=0.3)
        assert not done, "the add did not wait for the opening"
        adding.cancel()
        with pytest.raises(asyncio.CancelledError):
            await adding
        assert watch.prefixes == {"/p/a", "/p/b"}
        gate.set()
        written = await store.put("/p/b/k", b"")
        await consumer.until(written)
        revision = await watch.add(["/p/c"])
        later = await store.put("/p/c/k", b"")
        assert later > revision
        await consumer.until(later)
        consumer.task.cancel()
    assert consumer.changes() == [
        (early, ["/p/a/early"]),
        (written, ["/p/b/k"]),
        (later, ["/p/c/k"]),
    ]


@pytest.mark.usefixtures("few")
async def test_a_covered_add_slowed_at_its_revision_read_loses_and_repeats_nothing(
    store: MetadataStore,
) -> None:
    """A store slow to answer a covered add's revision read: writes land meanwhile under a
    prefix followed and under the one being added. The followed one's change comes once, in
    order; the added one's comes only above the revision the add returns (below it, the
    caller's read at that revision has it)."""
    start = await store.revision() + 1
    async with store.watch_prefixes(["/p/a", "/p/b"], start_revision=start) as watch:
        consumer = Consumer(watch)
        opened = await store.put("/p/a/x", b"")
        await consumer.until(opened)  # the stream is open, the parent watched
        reading, gate = asyncio.Event(), asyncio.Event()
        read_revision = store._revision  # type: ignore[attr-defined]

        async def slow() -> int:
            reading.set()
            await gate.wait()  # answered once the writes below are in
            revision: int = await read_revision()
            return revision

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "_revision", slow)
            adding = asyncio.create_task(watch.add(["/p/c"]))
            await asyncio.wait_for(reading.wait(), timeout=10)
            followed = await store.put("/p/a/during", b"")
            added = await store.put("/p/c/during", b"")
            assert not adding.done()
            gate.set()
            revision = await adding
        assert revision >= added
        assert watch.prefixes == {"/p/a", "/p/b", "/p/c"}
        later = await store.put("/p/c/after", b"")
        await consumer.until(later)
        consumer.task.cancel()
    assert consumer.changes() == [
        (opened, ["/p/a/x"]),
        (followed, ["/p/a/during"]),
        (later, ["/p/c/after"]),
    ]


@pytest.mark.usefixtures("few")
async def test_a_covered_add_waiting_on_a_slow_opening_follows_from_its_revision(
    store: MetadataStore,
) -> None:
    """A stream's opening slow to read its history (a slow store): an add under the parent
    it watches waits until the history is read, then follows from its own revision; what
    the opening replays comes once, and the added prefix's changes only above that
    revision."""
    start = await store.revision() + 1
    early = await store.put("/p/a/early", b"")
    async with store.watch_prefixes(["/p/a", "/p/b"], start_revision=start) as watch:
        reading, gate = hold_history(watch)
        consumer = Consumer(watch)
        await asyncio.wait_for(reading.wait(), timeout=10)  # the opening reads its history
        adding = asyncio.create_task(watch.add(["/p/c"]))
        during = await store.put("/p/b/during", b"")
        before = await store.put("/p/c/before", b"")
        done, _ = await asyncio.wait({adding}, timeout=0.3)
        assert not done, "the add did not wait for the opening"
        gate.set()
        revision = await adding
        assert revision >= before
        later = await store.put("/p/c/after", b"")
        await consumer.until(later)
        consumer.task.cancel()
    assert consumer.changes() == [
        (early, ["/p/a/early"]),
        (during, ["/p/b/during"]),
        (later, ["/p/c/after"]),
    ]
