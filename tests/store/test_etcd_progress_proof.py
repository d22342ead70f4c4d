"""On etcd before 3.4.25 a progress notification is verified against history before it is
passed on (`store/_etcd_watch.py`): a probe watches the whole keyspace from the last revision
the watch passed. These cases pin the two things that keep that proof affordable on a store
that moves while a watch is quiet: the watch keeps up on its own (KEEP_UP), and a probe whose
history comes slowly waits longer next time instead of giving up the same way forever.

At 1M topics neither held: a cache's follow waited on a proof across 3M changes that etcd
could not send within the probe's deadline, attempt after attempt, and never ended."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import metaplane.store._etcd_watch as etcd_watch
from metaplane.store import MetadataStore, Watch, WatchBatch
from metaplane.store._etcd import EtcdStore

pytestmark = pytest.mark.backends("etcd", reason="only old etcd servers need a proof of progress")

Open = Callable[[MetadataStore, int], Any]


def single(store: MetadataStore, start: int) -> Any:
    return store.watch("/quiet/a", start_revision=start)


def of_prefixes(store: MetadataStore, start: int) -> Any:
    return store.watch_prefixes(["/quiet/a"], start_revision=start)


KINDS = pytest.mark.parametrize("open_watch", [single, of_prefixes], ids=["watch", "prefixes"])


class Reader:
    """A task reading a watch into `seen`, as a cache does."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.seen: list[WatchBatch] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for batch in self.watch:
            self.seen.append(batch)

    async def until(self, revision: int, *, ask: bool) -> None:
        """Until a batch at or past `revision` (asking for progress if `ask`)."""
        async with asyncio.timeout(20):
            while not self.seen or self.seen[-1].revision < revision:
                if self.task.done():
                    self.task.result()  # the watch's error, if it raised one
                if ask:
                    self.watch.request_progress()
                await asyncio.sleep(0.01)


def old_server(store: MetadataStore) -> EtcdStore:
    assert isinstance(store, EtcdStore)
    store.progress_in_order = False  # as etcd before 3.4.25 / 3.5.8 (the OS package: 3.4.23)
    return store


@KINDS
async def test_a_quiet_watch_keeps_up_with_the_store_unasked(
    store: MetadataStore, open_watch: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(etcd_watch, "KEEP_UP", 20)
    old_server(store)
    spans: list[int] = []
    async with open_watch(store, await store.revision() + 1) as watch:
        read_history = watch.read_history

        async def measured(member: Any, passed: int, revision: int, stops: Any) -> int:
            spans.append(revision - passed)
            return int(await read_history(member, passed, revision, stops))

        watch.read_history = measured
        reader = Reader(watch)
        first = await store.put("/quiet/a/0", b"")
        await reader.until(first, ask=False)
        for i in range(100):  # the store moves on; nothing changes under the watch
            last = await store.put(f"/noise/{i}", b"")
        # Nobody asks for progress: the watch's own liveness checks keep it within KEEP_UP.
        async with asyncio.timeout(20):
            while watch._passed < last - 20:
                assert not reader.task.done()
                await asyncio.sleep(0.02)  # nothing to await: the watch passes silently
        assert spans, "the watch kept up without a probe"
        assert [batch.revision for batch in reader.seen] == [first]  # and handed out nothing
        # The proof a caller asks for now spans what the store did since, not all of it.
        spans.clear()
        await reader.until(last, ask=True)
        assert reader.seen[-1].events == ()
        assert all(span < 20 for span in spans), spans
        # Still exact: a change under the prefix comes, once.
        change = await store.put("/quiet/a/1", b"x")
        await reader.until(change, ask=False)
        assert [(b.revision, [e.key for e in b.events]) for b in reader.seen if b.events] == [
            (first, ["/quiet/a/0"]),
            (change, ["/quiet/a/1"]),
        ]
        reader.task.cancel()


class SlowHistory:
    """A member's watch service whose probes (watches of the whole keyspace) get each
    response that carries history `delay` seconds late: a store slow to read its history."""

    def __init__(self, inner: Any, delay: float) -> None:
        self.inner = inner
        self.delay = delay

    def Watch(self, *args: Any, **kwargs: Any) -> Any:  # the gRPC stub's name
        return _SlowCall(self.inner.Watch(*args, **kwargs), self.delay)


class _SlowCall:
    def __init__(self, call: Any, delay: float) -> None:
        self.call = call
        self.delay = delay
        self.probe = False

    async def write(self, request: Any) -> None:
        if request.HasField("create_request") and request.create_request.key == b"\0":
            self.probe = True
        await self.call.write(request)

    async def read(self) -> Any:
        response = await self.call.read()
        if self.probe and getattr(response, "events", None):
            await asyncio.sleep(self.delay)  # the injected latency
        return response

    def cancel(self) -> bool:
        return bool(self.call.cancel())


@KINDS
async def test_a_probe_whose_history_comes_slowly_waits_longer_next_time(
    store: MetadataStore, open_watch: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe that read no history in its time: the next waits twice as long. Driven with a
    first wait of 1 ms and history 50 ms late: the first six probes must give up, and the
    watch must still verify."""
    monkeypatch.setattr(etcd_watch, "PROBE_TIMEOUT", 0.001)
    for member in old_server(store)._members:
        monkeypatch.setattr(member, "watch", SlowHistory(member.watch, 0.05))
    async with open_watch(store, await store.revision() + 1) as watch:
        patience: list[float] = []
        read_history = watch.read_history

        async def measured(*args: Any) -> int:
            patience.append(watch._patience)
            return int(await read_history(*args))

        watch.read_history = measured
        reader = Reader(watch)
        first = await store.put("/quiet/a/0", b"")
        await reader.until(first, ask=False)
        for i in range(5):
            last = await store.put(f"/noise/{i}", b"")
        await reader.until(last, ask=True)
        assert reader.seen[-1].events == ()
        assert patience[:7] == [0.001 * 2**i for i in range(7)], patience
        assert watch._patience == 0.001  # back to the first wait once a probe read history
        reader.task.cancel()
