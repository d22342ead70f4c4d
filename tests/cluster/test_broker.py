"""One BrokerNode on every backend: its registration (the four addresses of seed 001, under
its session's lease, again after the lease is lost), its state, its load reports (the host's
and the process's CPU and memory, its topics), and its cursors: written by the production
timer within 5 s of the last ack, flushed when it stops, never once the topic is gone."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest

import metaplane.cluster._broker as broker_module
from metaplane import layout
from metaplane.cluster import BrokerConfig, BrokerNode, CursorBatcher, QuietTopics
from metaplane.cluster._cursors import DEFAULT_INTERVAL
from metaplane.cluster._node import registration
from metaplane.coordination import SessionState
from metaplane.resources import (
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    LoadReport,
    OwnershipManager,
    decode,
)
from metaplane.store import EventType, MetadataStore
from tests.cluster.test_cluster import converged, create_topics
from tests.on_zookeeper import EVERY_BACKEND

pytestmark = EVERY_BACKEND

BROKER = 7


@pytest.fixture
async def broker(store: MetadataStore) -> AsyncIterator[BrokerNode]:
    config = BrokerConfig(
        broker_id=BROKER, registration=registration(BROKER, 0), load_report_interval=0.2
    )
    node = BrokerNode(store, config, QuietTopics())
    await node.start()
    yield node
    if node.session.alive:
        await node.stop()


async def test_registers_under_its_lease_with_the_four_addresses(
    store: MetadataStore, broker: BrokerNode
) -> None:
    entry = await store.get(layout.broker_registration(BROKER))
    assert entry is not None and entry.lease == broker.session.lease.id != 0
    assert decode(BrokerRegistration, entry.value) == registration(BROKER, 0)
    addresses = json.loads(entry.value)
    assert set(addresses) == {"admin_addr", "advertised_addr", "broker_addr", "prom_exporter"}
    assert all(addresses.values())
    state = await store.get(layout.broker_state(BROKER))
    assert state is not None
    assert decode(BrokerState, state.value).mode is BrokerMode.ACTIVE


async def test_registers_again_when_its_lease_is_lost(
    store: MetadataStore, broker: BrokerNode
) -> None:
    first = broker.session.lease
    key = layout.broker_registration(BROKER)
    start = await store.revision()
    async with asyncio.timeout(20), store.watch(key, start_revision=start + 1) as watch:
        await store.revoke(first)  # as if it had expired on the store's side
        async for batch in watch:
            if any(event.type is EventType.PUT for event in batch.events):
                break
    entry = await store.get(key)
    assert entry is not None
    assert entry.lease == broker.session.lease.id != first.id
    assert broker.session.state in (SessionState.REESTABLISHED, SessionState.CONNECTED)


async def reported(store: MetadataStore, holds: Callable[[LoadReport], bool]) -> LoadReport:
    """The broker's load report, once one it writes holds `holds` (waited for by change)."""
    reports: list[LoadReport] = []

    async def written() -> bool:
        entry = await store.get(layout.load_report(BROKER))
        if entry is None:
            return False
        reports.append(decode(LoadReport, entry.value))
        return holds(reports[-1])

    await converged(store, written)
    return reports[-1]


async def test_load_reports_carry_host_and_process_usage_and_the_topics(
    store: MetadataStore, broker: BrokerNode
) -> None:
    topics = await create_topics(store, 3)
    for topic in topics[:2]:
        await OwnershipManager(store).assign(topic, BROKER)
    owned = sorted(topic.path for topic in topics[:2])
    report = await reported(store, lambda report: report.topic_list == owned)
    assert report.topics_len == 2
    usage = {item.resource: item.usage for item in report.resources_usage}
    assert set(usage) == {"CPU", "Memory", "ProcessCPU", "ProcessMemory"}
    assert all(0 <= value <= 100 for value in usage.values())
    assert usage["Memory"] > 0  # a real reading of this host, not a placeholder


async def test_a_cursor_is_written_within_5_s_with_no_further_acks(store: MetadataStore) -> None:
    """The production settings (1000 acks or the timer): two acks, then nothing."""
    topic = (await create_topics(store, 1))[0]
    await store.put(layout.assignment(9, topic), b"null")
    batcher = CursorBatcher(store, 9)
    await batcher.start()
    try:
        start = await store.revision()
        async with store.watch(layout.cursor(topic, "sub"), start_revision=start + 1) as watch:
            acked = time.monotonic()
            batcher.ack(topic, "sub", 41)
            batcher.ack(topic, "sub", 42)
            async with asyncio.timeout(10):
                batch = await anext(watch)
            waited = time.monotonic() - acked
        assert batch.events[0].entry.value == b"42"
        assert waited <= 5.0, waited
        assert waited >= DEFAULT_INTERVAL * 0.8  # by the timer, not at once
    finally:
        await batcher.stop()


async def test_a_former_owner_never_writes_a_cursor(store: MetadataStore) -> None:
    """Owner, then not: the cursor it wrote as owner stays; what it acks afterwards is never
    written, by a flush or by the timer."""
    topic = (await create_topics(store, 1))[0]
    await store.put(layout.assignment(9, topic), b"null")
    batcher = CursorBatcher(store, 9, every=1000, interval=0.2)
    await batcher.start()
    try:
        start = await store.revision()
        async with store.watch(layout.cursor(topic, "sub"), start_revision=start + 1) as watch:
            batcher.ack(topic, "sub", 10)
            async with asyncio.timeout(10):
                await anext(watch)
        await store.delete(layout.assignment(9, topic))  # moved away
        batcher.ack(topic, "sub", 20)
        assert await batcher.flush(topic) is None  # refused: broker 9 no longer owns it
        batcher.ack(topic, "sub", 30)
        # The timer fires every 0.2 s: give it many chances, then look.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            entry = await store.get(layout.cursor(topic, "sub"))
            assert entry is not None and entry.value == b"10"
            await asyncio.sleep(0.1)
    finally:
        await batcher.stop()


async def test_cursors_are_flushed_when_the_broker_stops(
    store: MetadataStore, broker: BrokerNode
) -> None:
    topic = (await create_topics(store, 1))[0]
    await OwnershipManager(store).assign(topic, BROKER)
    await broker.caught_up(await store.revision(), timeout=10)
    assert topic in broker.owned
    broker.ack(topic, "sub", 123)  # far below 1000 acks and long before the timer
    await broker.stop()
    entry = await store.get(layout.cursor(topic, "sub"))
    assert entry is not None and entry.value == b"123"
    assert await store.get(layout.broker_registration(BROKER)) is None


async def test_a_load_report_lists_its_first_topics_and_counts_them_all(
    store: MetadataStore, broker: BrokerNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past LOAD_REPORT_TOPICS topics a report lists the first (by path) and counts all: a
    broker of 100,000 topics wrote 1.3 MB a second, refused above 1 MiB."""
    monkeypatch.setattr(broker_module, "LOAD_REPORT_TOPICS", 2)
    topics = await create_topics(store, 3)
    for topic in topics:
        await OwnershipManager(store).assign(topic, BROKER)
    first = sorted(topic.path for topic in topics)[:2]
    report = await reported(store, lambda report: report.topics_len == 3)
    assert report.topic_list == first
