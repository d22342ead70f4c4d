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

import grpc
import pytest

import metaplane.store._etcd_watch as etcd_watch
from metaplane.store import MetadataStore
from metaplane.store._etcd import EtcdStore
from tests.store.test_etcd_coarse_watch import Consumer

pytestmark = pytest.mark.backends("etcd", reason="only old etcd servers need a proof of progress")

Open = Callable[[MetadataStore, int], Any]


def single(store: MetadataStore, start: int) -> Any:
    return store.watch("/quiet/a", start_revision=start)


def of_prefixes(store: MetadataStore, start: int) -> Any:
    return store.watch_prefixes(["/quiet/a"], start_revision=start)


KINDS = pytest.mark.parametrize("open_watch", [single, of_prefixes], ids=["watch", "prefixes"])


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
        reader = Consumer(watch)
        first, last = await quiet_while_the_store_moves(store, watch, reader)
        assert spans, "the watch kept up without a probe"
        assert [batch.revision for batch in reader.seen] == [first]  # and handed out nothing
        # The proof a caller asks for now spans what the store did since, not all of it.
        spans.clear()
        await reader.until(last, ask=True)
        assert reader.seen[-1].events == ()
        assert all(span < 20 for span in spans), spans
        await still_exact(store, reader, first)
        reader.task.cancel()


async def quiet_while_the_store_moves(
    store: MetadataStore, watch: Any, reader: Consumer
) -> tuple[int, int]:
    """One change under the watch, then 100 elsewhere; returns once the watch, asked for
    nothing, has passed to within KEEP_UP (20, set by the case) of the last: (the change's
    revision, the last revision)."""
    first = await store.put("/quiet/a/0", b"")
    await reader.until(first, ask=False)
    for i in range(100):  # the store moves on; nothing changes under the watch
        last = await store.put(f"/noise/{i}", b"")
    # Nobody asks for progress: the watch's own liveness checks keep it within KEEP_UP.
    async with asyncio.timeout(20):
        while watch._passed < last - 20:
            assert not reader.task.done()
            await asyncio.sleep(0.02)  # nothing to await: the watch passes silently
    return first, last


async def still_exact(store: MetadataStore, reader: Consumer, first: int) -> None:
    """A change under the prefix comes, once, after the first one and nothing else."""
    change = await store.put("/quiet/a/1", b"x")
    await reader.until(change, ask=False)
    assert [(b.revision, [e.key for e in b.events]) for b in reader.seen if b.events] == [
        (first, ["/quiet/a/0"]),
        (change, ["/quiet/a/1"]),
    ]


class FaultyProbes:
    """A member's watch service whose probes (watches of the whole keyspace) get each
    response that carries history `delay` seconds late (a store slow to read its history),
    and, with `fail_first`, whose first probe fails at its creation (one transient error)."""

    def __init__(self, inner: Any, *, delay: float = 0.0, fail_first: bool = False) -> None:
        self.inner = inner
        self.delay = delay
        self.failures = 1 if fail_first else 0
        self.probes = 0

    def Watch(self, *args: Any, **kwargs: Any) -> Any:  # the gRPC stub's name
        return _FaultyCall(self.inner.Watch(*args, **kwargs), self)


class _FaultyCall:
    def __init__(self, call: Any, faults: FaultyProbes) -> None:
        self.call = call
        self.faults = faults
        self.probe = False

    async def write(self, request: Any) -> None:
        if request.HasField("create_request") and request.create_request.key == b"\0":
            self.probe = True
            self.faults.probes += 1
            if self.faults.failures:
                self.faults.failures -= 1
                raise grpc.aio.AioRpcError(
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.aio.Metadata(),
                    grpc.aio.Metadata(),
                    "injected: one transient error",
                )
        await self.call.write(request)

    async def read(self) -> Any:
        response = await self.call.read()
        if self.probe and getattr(response, "events", None):
            await asyncio.sleep(self.faults.delay)  # the injected latency
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
        monkeypatch.setattr(member, "watch", FaultyProbes(member.watch, delay=0.05))
    async with open_watch(store, await store.revision() + 1) as watch:
        patience: list[float] = []
        read_history = watch.read_history

        async def measured(*args: Any) -> int:
            patience.append(watch._patience)
            return int(await read_history(*args))

        watch.read_history = measured
        reader = Consumer(watch)
        first = await store.put("/quiet/a/0", b"")
        await reader.until(first, ask=False)
        for i in range(5):
            last = await store.put(f"/noise/{i}", b"")
        await reader.until(last, ask=True)
        assert reader.seen[-1].events == ()
        assert patience[:7] == [0.001 * 2**i for i in range(7)], patience
        assert watch._patience == 0.001  # back to the first wait once a probe read history
        reader.task.cancel()


@KINDS
async def test_a_keeping_up_probe_that_fails_once_is_made_again(
    store: MetadataStore, open_watch: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transient error at the creation of the first probe that keeps the watch up: it
    proves nothing, passes nothing and loses nothing; the next liveness answer probes again."""
    monkeypatch.setattr(etcd_watch, "KEEP_UP", 20)
    faults: list[FaultyProbes] = []
    for member in old_server(store)._members:
        faults.append(FaultyProbes(member.watch, fail_first=True))
        monkeypatch.setattr(member, "watch", faults[-1])
    async with open_watch(store, await store.revision() + 1) as watch:
        reader = Consumer(watch)
        first, _ = await quiet_while_the_store_moves(store, watch, reader)
        member_faults = next(f for f in faults if f.probes)
        assert member_faults.failures == 0 and member_faults.probes >= 2  # failed, then again
        await still_exact(store, reader, first)
        reader.task.cancel()
