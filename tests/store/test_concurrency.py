"""Conformance: compare-and-set increments from many tasks and processes lose no update."""

from __future__ import annotations

import asyncio

import pytest

from metaplane.store import MetadataStore, connect_store
from tests.store.processes import Child
from tests.store.worker import cas_increment

TIMES = 200


async def increments(store: MetadataStore, tasks: int) -> None:
    async def task() -> None:
        for _ in range(TIMES):
            await cas_increment(store, "/counter")

    await asyncio.gather(*(task() for _ in range(tasks)))


@pytest.mark.backends("memory", reason="one process; the other backends run the case below")
async def test_tasks_lose_no_update(store: MetadataStore) -> None:
    await increments(store, 16)
    entry = await store.get("/counter")
    assert entry is not None and int(entry.value) == 16 * TIMES
    assert entry.version == 16 * TIMES


@pytest.mark.backends("sqlite", "etcd", "zk", reason="several processes share the store")
@pytest.mark.timeout(300)
async def test_tasks_and_processes_lose_no_update(store_url: str) -> None:
    async with await connect_store(store_url) as store:
        await store.delete_prefix("/counter")
        children = [
            await Child.start("increment", store_url, "/counter", str(TIMES)) for _ in range(4)
        ]
        try:
            for child in children:
                await child.expect("ready")
            for child in children:
                child.say("go")
            await increments(store, 16)
            for child in children:
                await child.expect("done", timeout=240)
        finally:
            for child in children:
                await child.kill()
        entry = await store.get("/counter")
    assert entry is not None and int(entry.value) == 20 * TIMES
    assert entry.version == 20 * TIMES
