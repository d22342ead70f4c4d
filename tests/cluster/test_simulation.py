"""The simulated traffic of a standalone cluster: what an unload says was published is what
storage holds, whatever publishing and uploading were doing when it came."""

from __future__ import annotations

import asyncio
import time

from metaplane import layout
from metaplane.cluster import SimulatedTopics
from metaplane.layout import TopicName
from metaplane.resources import StorageManager, owned
from metaplane.store import MemoryStore
from metaplane.testing import FaultyStore

TOPIC = TopicName("orders", "shipped")


async def test_an_unload_returns_what_storage_holds_while_publishing_goes_on() -> None:
    """The unload's upload answers late (0.2 s) while the publishing loop ticks every
    10 ms. Publishing stops at the unload: the last offset it returns is the end of the
    last object, which starts at the load's offset (it returned what was published by the
    time its upload came back: the broker sealed the topic there, and the next owner
    started past a gap)."""
    store = FaultyStore(MemoryStore())
    token = await store.put(layout.assignment(1, TOPIC), b"null")  # (as the leader writes it)
    fence = owned(1, TOPIC, token)
    host = SimulatedTopics(store, 1, rate=200.0, object_size=1_000_000, tick=0.01)
    try:
        await host.load(TOPIC, 201, fence)
        deadline = time.monotonic() + 10
        while host.logs[TOPIC].next_offset < 221:  # publishing runs
            assert time.monotonic() < deadline, "nothing was published"
            await asyncio.sleep(0.01)
        store.delay("txn", seconds=0.2)
        last = await host.unload(TOPIC, fence)
        store.clear()
    finally:
        await host.stop()
    objects = [o.value for o in await StorageManager(store).objects(TOPIC)]
    assert [(o.start_offset, o.end_offset) for o in objects] == [(201, last)]
    assert last >= 220


async def test_what_a_refused_unload_could_not_store_was_not_published() -> None:
    """The topic is taken away (its assignment deleted) before the unload: its upload is
    refused by the fence, nothing is written, and the unload says nothing past what storage
    holds was published (the broker would otherwise start past a gap should the topic come
    back to it)."""
    store = MemoryStore()
    assignment = layout.assignment(1, TOPIC)
    token = await store.put(assignment, b"null")
    fence = owned(1, TOPIC, token)
    host = SimulatedTopics(store, 1, rate=200.0, object_size=1_000_000, tick=0.01)
    try:
        await host.load(TOPIC, 201, fence)
        deadline = time.monotonic() + 10
        while host.logs[TOPIC].next_offset < 211:
            assert time.monotonic() < deadline, "nothing was published"
            await asyncio.sleep(0.01)
        await store.delete(assignment)
        before = await store.revision()
        assert await host.unload(TOPIC, fence) == 200
    finally:
        await host.stop()
    assert await store.revision() == before
    assert await StorageManager(store).objects(TOPIC) == []
