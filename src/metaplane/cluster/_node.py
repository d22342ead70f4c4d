"""One broker node as a process: a BrokerNode, its leader election and LoadManager, and a
TopicHost (simulated traffic, or none). SIGTERM or SIGINT stops it cleanly: the leader
resigns, topics are sealed with their cursors, the session is revoked."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from metaplane.cluster._broker import BrokerConfig, BrokerNode
from metaplane.cluster._endpoints import AdminApp, Endpoint, MetricsApp
from metaplane.cluster._journal import NO_JOURNAL, Journal
from metaplane.cluster._load_manager import LoadManager, LoadManagerConfig
from metaplane.cluster._metrics import BrokerMetrics, TimedStore
from metaplane.cluster._simulation import SimulatedTopics
from metaplane.coordination import LeaderElection
from metaplane.layout import TopicName
from metaplane.resources import BrokerRegistration, Condition
from metaplane.store import MetadataStore, open_store

log = logging.getLogger(__name__)


class QuietTopics:
    """A TopicHost without traffic: a topic's offsets stay where they were."""

    def __init__(self) -> None:
        self.starts: dict[TopicName, int] = {}

    async def load(self, topic: TopicName, start_offset: int, owned: Condition) -> None:
        self.starts[topic] = start_offset

    async def unload(self, topic: TopicName, fence: Condition) -> int:
        return self.starts.pop(topic, 0) - 1

    async def stop(self) -> None:
        pass


def registration(broker_id: int, index: int) -> BrokerRegistration:
    """Addresses in the manner of seed 001, distinct per node of a local cluster."""
    return BrokerRegistration(
        admin_addr=f"http://127.0.0.1:{50051 + index}",
        advertised_addr=f"127.0.0.1:{6650 + index}",
        broker_addr=f"http://127.0.0.1:{6650 + index}",
        prom_exporter=f"127.0.0.1:{9040 + index}",
    )


@dataclass(frozen=True)
class NodeSettings:
    broker_id: int
    index: int = 0
    workload: bool = False
    session_ttl: int = 5
    load_report_interval: float = 2.0
    load_manager: LoadManagerConfig = field(default_factory=LoadManagerConfig)
    rate: float = 20.0
    """Messages a second each topic publishes (with `workload`)."""
    endpoints: bool = False
    """Serve metrics at the registered `prom_exporter` and the admin endpoint at `admin_addr`
    (a broker process does; nodes embedded in a test need not)."""


class Node:
    """A BrokerNode with its election and LoadManager, started and stopped together."""

    def __init__(
        self, store: MetadataStore, settings: NodeSettings, journal: Journal = NO_JOURNAL
    ) -> None:
        self.settings = settings
        self.metrics: BrokerMetrics | None = None
        if settings.endpoints:
            self.metrics = BrokerMetrics()
            store = TimedStore(store, self.metrics.store_latency)
        host: SimulatedTopics | QuietTopics = QuietTopics()
        if settings.workload:
            host = SimulatedTopics(store, settings.broker_id, rate=settings.rate, journal=journal)
        self.host = host
        self.broker = BrokerNode(
            store,
            BrokerConfig(
                settings.broker_id,
                registration(settings.broker_id, settings.index),
                session_ttl=settings.session_ttl,
                load_report_interval=settings.load_report_interval,
            ),
            host,
            journal=journal,
        )
        if isinstance(host, SimulatedTopics):
            host.acknowledger = self.broker
            host.read_through(self.broker.storage, self.broker.subscriptions)
        self.election = LeaderElection(self.broker.session, settings.broker_id)
        self.load_manager = LoadManager(self.election, settings.load_manager)
        self.endpoints: list[Endpoint] = []
        if self.metrics is not None:
            self.metrics.watch(self)
            addresses = self.broker.config.registration
            self.endpoints = [
                Endpoint("admin", addresses.admin_addr, AdminApp(self)),
                Endpoint("metrics", str(addresses.prom_exporter), MetricsApp(self.metrics)),
            ]

    async def start(self) -> None:
        await self.broker.start()
        await self.load_manager.start()
        await self.election.start()
        if self.metrics is not None and self.broker._cache is not None:
            self.metrics.start(self.broker.store, self.broker._cache)
        for endpoint in self.endpoints:
            await endpoint.start()

    async def stop(self) -> None:
        for endpoint in self.endpoints:
            await endpoint.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        await self.load_manager.stop()
        await self.election.stop(resign=True)
        await self.host.stop()
        await self.broker.stop()


async def run_node(
    url: str,
    settings: NodeSettings,
    on_ready: Callable[[], None] | None = None,
    *,
    journal: Journal = NO_JOURNAL,
    wrap: Callable[[MetadataStore], MetadataStore] | None = None,
) -> None:
    """Run one node until SIGTERM or SIGINT; `on_ready` is called once it has joined.
    `wrap` puts something between the node and its store (a fault injector, in tests)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with open_store(url) as opened:
        store = opened if wrap is None else wrap(opened)
        node = Node(store, settings, journal)
        await node.start()
        log.info("node %d running", settings.broker_id)
        if on_ready is not None:
            on_ready()
        await stop.wait()
        log.info("node %d stopping", settings.broker_id)
        await node.stop()
