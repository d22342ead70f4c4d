"""Conformance: keys put with a lease vanish when it expires or is revoked, with DELETE
events; a keep-alive loop keeps it; a holder killed with SIGKILL loses its keys."""

from __future__ import annotations

import asyncio

import pytest

from metaplane.store import (
    EventType,
    KeepAliveState,
    LeaseNotFound,
    MetadataStore,
    Watch,
    WatchBatch,
    connect_store,
)
from tests.store.processes import Child


async def next_deletes(watch: Watch, timeout: float) -> WatchBatch:
    """The next batch of DELETE events on `watch`."""
    async with asyncio.timeout(timeout):
        async for batch in watch:
            if batch.events and all(e.type is EventType.DELETE for e in batch.events):
                return batch
    raise AssertionError("the watch ended")


async def test_keys_vanish_on_expiry_in_one_revision(store: MetadataStore) -> None:
    lease = await store.grant(1)
    await store.put("/l/a", b"1", lease=lease)
    last = await store.put("/l/b", b"1", lease=lease)
    entry = await store.get("/l/a")
    assert entry is not None and entry.lease == lease.id
    async with store.watch("/l", start_revision=last + 1) as watch:
        batch = await next_deletes(watch, timeout=10)
    assert sorted(e.key for e in batch.events) == ["/l/a", "/l/b"]
    assert (await store.list("/l")).keys() == []
    with pytest.raises(LeaseNotFound):
        await store.put("/l/c", b"1", lease=lease)


async def test_keys_vanish_on_revoke(store: MetadataStore) -> None:
    lease = await store.grant(60)
    await store.put("/l/a", b"1", lease=lease)
    await store.put("/l/b", b"1", lease=lease)
    last = await store.put("/l/kept", b"1")
    async with store.watch("/l", start_revision=last + 1) as watch:
        await store.revoke(lease)
        batch = await next_deletes(watch, timeout=10)
    assert sorted(e.key for e in batch.events) == ["/l/a", "/l/b"]
    assert (await store.list("/l")).keys() == ["/l/kept"]
    for attempt in (store.revoke(lease), store.refresh(lease), store.put("/l/c", b"", lease=lease)):
        with pytest.raises(LeaseNotFound):
            await attempt


async def test_put_without_lease_detaches(store: MetadataStore) -> None:
    lease = await store.grant(60)
    await store.put("/l/a", b"1", lease=lease)
    await store.put("/l/a", b"2")
    await store.revoke(lease)
    entry = await store.get("/l/a")
    assert entry is not None and entry.lease == 0


async def test_keep_alive_keeps_keys_past_the_ttl(store: MetadataStore) -> None:
    lease = await store.grant(1)
    last = await store.put("/l/a", b"1", lease=lease)
    async with store.watch("/l", start_revision=last + 1) as watch:
        async with store.keep_alive(lease) as keeper:
            # Three TTLs pass with no DELETE: the loop refreshed the lease.
            with pytest.raises(TimeoutError):
                await next_deletes(watch, timeout=3)
            assert keeper.state is KeepAliveState.ALIVE
        batch = await next_deletes(watch, timeout=10)
    assert [e.key for e in batch.events] == ["/l/a"]


async def test_keeper_reports_a_revoked_lease(store: MetadataStore) -> None:
    lease = await store.grant(3)
    states: list[KeepAliveState] = []
    async with store.keep_alive(lease, on_state=states.append) as keeper:
        await store.revoke(lease)
        await asyncio.wait_for(keeper.wait_expired(), timeout=10)
    assert states == [KeepAliveState.EXPIRED]


async def test_refresh_returns_the_ttl(store: MetadataStore) -> None:
    lease = await store.grant(5)
    assert lease.ttl >= 5
    assert await store.refresh(lease) == lease.ttl
    with pytest.raises(LeaseNotFound):
        await store.refresh(987654321)


@pytest.mark.backends("sqlite", "etcd", reason="a lease held by another process")
async def test_holder_killed_loses_its_keys(store_url: str) -> None:
    async with await connect_store(store_url) as store:
        start = await store.revision() + 1
        child = await Child.start("hold-lease", store_url, "/l/held", "1")
        try:
            await child.expect("ready")
            entry = await store.get("/l/held")
            assert entry is not None and entry.lease != 0
            async with store.watch("/l", start_revision=start) as watch:
                # Alive, its keep-alive holds the key well past the TTL (1 s): no DELETE.
                with pytest.raises(TimeoutError):
                    await next_deletes(watch, timeout=2.5)
            async with store.watch("/l", start_revision=start) as watch:
                await child.kill()
                batch = await next_deletes(watch, timeout=10)
        finally:
            await child.kill()
        assert [e.key for e in batch.events] == ["/l/held"]
        assert await store.get("/l/held") is None
