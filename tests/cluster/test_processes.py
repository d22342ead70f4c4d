"""The cluster with real broker processes, on sqlite and etcd: a broker killed with SIGKILL
loses its topics to the others, and at quiescence every topic is assigned to exactly one live
broker with no marker left."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import ClusterManager, OwnershipManager
from metaplane.store import Compacted, MetadataStore, connect_store
from tests.cluster.test_cluster import converged, create_topics, owners
from tests.store.processes import Child

pytestmark = pytest.mark.backends("sqlite", "etcd", "zk", reason="broker processes share the store")

WORKER = Path(__file__).with_name("worker.py")


async def placed_once_on(store: MetadataStore, topics: list[TopicName], brokers: list[int]) -> bool:
    found = await owners(store, brokers)
    placed = sorted(topic for owned in found.values() for topic in owned)
    return placed == sorted(topics) and not await OwnershipManager(store).unassigned()


async def only_survivors(store: MetadataStore, topics: list[TopicName], victim: int) -> bool:
    """Every topic on exactly one survivor, no marker, nothing left of the victim: not an
    assignment, not its load report."""
    survivors = [b for b in (1, 2, 3) if b != victim]
    return (
        await placed_once_on(store, topics, survivors)
        and not (await owners(store, [victim]))[victim]
        and await store.get(layout.load_report(victim)) is None
    )


async def reports_again(store: MetadataStore, brokers: list[int]) -> None:
    """Wait until each of `brokers` has written a load report after now: the cluster has
    gone on working for a while (a load report every 0.5 s, a LoadManager cycle every
    0.1 s)."""
    waiting = {layout.load_report(broker) for broker in brokers}
    async with asyncio.timeout(30):
        while waiting:
            start = await store.revision()
            try:
                async with store.watch(
                    layout.load_reports_prefix(), start_revision=start + 1
                ) as watch:
                    async for batch in watch:
                        waiting -= {event.entry.key for event in batch.events}
                        if not waiting:
                            return
            except Compacted:  # no history (ZooKeeper): a report came first; watch from now
                continue


async def three_brokers_with_topics(
    store: MetadataStore, store_url: str, children: dict[int, Child]
) -> list[TopicName]:
    """Brokers 1, 2 and 3 as processes of their own (into `children`, which the caller
    stops), and 24 topics placed once on them."""
    for broker in (1, 2, 3):
        children[broker] = await Child.start(
            "node", store_url, str(broker), "workload", worker=WORKER
        )
        await children[broker].expect("ready")
    topics = await create_topics(store, 24)
    await converged(store, lambda: placed_once_on(store, topics, [1, 2, 3]), 30)
    return topics


@pytest.mark.timeout(120)
async def test_a_killed_broker_loses_its_topics(store_url: str) -> None:
    children: dict[int, Child] = {}
    async with await connect_store(store_url) as store:
        try:
            topics = await three_brokers_with_topics(store, store_url, children)
            # The leader itself: its topics and the leadership are lost at once.
            victim = (await ClusterManager(store).leadership()).broker_id
            lost = (await owners(store, [victim]))[victim]
            assert lost
            await children[victim].kill(signal.SIGKILL)
            survivors = [b for b in (1, 2, 3) if b != victim]
            await converged(store, lambda: only_survivors(store, topics, victim), 30)
            after = await owners(store, survivors)
            assert lost <= after[survivors[0]] | after[survivors[1]]
            # Quiescence: the survivors go on reporting and leading; nothing changes.
            await reports_again(store, survivors)
            await reports_again(store, survivors)
            assert await only_survivors(store, topics, victim)
            assert await owners(store, survivors) == after
        finally:
            for child in children.values():
                await child.kill(signal.SIGTERM)


@pytest.mark.timeout(120)
async def test_a_broker_paused_past_its_session_loses_its_topics_then_rejoins(
    store_url: str,
) -> None:
    """The leader hangs (SIGSTOP) past its session's TTL: its registration, its leadership
    and its topics go to the others, each topic on one of them. Continued (SIGCONT), it finds
    its lease gone, registers again under a new one, and every topic is still placed once."""
    children: dict[int, Child] = {}
    async with await connect_store(store_url) as store:
        try:
            topics = await three_brokers_with_topics(store, store_url, children)
            victim = (await ClusterManager(store).leadership()).broker_id
            registration = await store.get(layout.broker_registration(victim))
            assert registration is not None
            paused = children[victim].process
            paused.send_signal(signal.SIGSTOP)
            try:
                await converged(store, lambda: only_survivors(store, topics, victim), 30)
            finally:
                paused.send_signal(signal.SIGCONT)

            async def registered_again() -> bool:
                entry = await store.get(layout.broker_registration(victim))
                return entry is not None and entry.lease != registration.lease

            await converged(store, registered_again, 30)
            await converged(store, lambda: placed_once_on(store, topics, [1, 2, 3]), 30)
        finally:
            for child in children.values():
                await child.kill(signal.SIGTERM)
