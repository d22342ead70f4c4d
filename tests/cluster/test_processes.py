"""The cluster with real broker processes, on sqlite and etcd: a broker killed with SIGKILL
loses its topics to the others, and at quiescence every topic is assigned to exactly one live
broker with no marker left."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from metaplane.layout import TopicName
from metaplane.resources import ClusterManager, OwnershipManager
from metaplane.store import MetadataStore, connect_store
from tests.cluster.test_cluster import converged, create_topics, owners
from tests.store.processes import Child

pytestmark = pytest.mark.backends("sqlite", "etcd", reason="broker processes share the store")

WORKER = Path(__file__).with_name("worker.py")


async def placed_once_on(store: MetadataStore, topics: list[TopicName], brokers: list[int]) -> bool:
    found = await owners(store, brokers)
    placed = sorted(topic for owned in found.values() for topic in owned)
    return placed == sorted(topics) and not await OwnershipManager(store).unassigned()


@pytest.mark.timeout(120)
async def test_a_killed_broker_loses_its_topics(store_url: str) -> None:
    children: dict[int, Child] = {}
    async with await connect_store(store_url) as store:
        try:
            for broker in (1, 2, 3):
                children[broker] = await Child.start(
                    "node", store_url, str(broker), "workload", worker=WORKER
                )
                await children[broker].expect("ready")
            topics = await create_topics(store, 24)
            await converged(store, lambda: placed_once_on(store, topics, [1, 2, 3]), 30)
            # The leader itself: its topics and the leadership are lost at once.
            victim = (await ClusterManager(store).leadership()).broker_id
            lost = (await owners(store, [victim]))[victim]
            assert lost
            await children[victim].kill(signal.SIGKILL)
            survivors = [b for b in (1, 2, 3) if b != victim]
            await converged(store, lambda: placed_once_on(store, topics, survivors), 30)
            after = await owners(store, survivors)
            assert lost <= after[survivors[0]] | after[survivors[1]]
        finally:
            for child in children.values():
                await child.kill(signal.SIGTERM)
