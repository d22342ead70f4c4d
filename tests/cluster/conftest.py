"""Fixtures of the cluster tests: a faulty view of the store for the broker under test, and
a way to start brokers on it that stops them afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from metaplane.cluster import BrokerNode
from metaplane.store import MetadataStore
from metaplane.testing import FaultyStore
from tests.cluster.brokers import BROKER, Started, Topics, config


@pytest.fixture
async def faulty(store: MetadataStore) -> FaultyStore:
    """The broker's view of the store; the test writes through the store itself."""
    return FaultyStore(store)


@pytest.fixture
async def start_broker(faulty: FaultyStore) -> AsyncIterator[Started]:
    started: list[BrokerNode] = []

    async def start(broker_id: int = BROKER, **settings: float) -> tuple[BrokerNode, Topics]:
        host = Topics()
        node = BrokerNode(faulty, config(broker_id, **settings), host)
        await node.start()
        started.append(node)
        return node, host

    yield start
    faulty.clear()
    for node in started:
        if node.session.alive:
            await node.stop()
