"""A broker's Prometheus metrics: topics owned and handed over, cursor writes and pending
acknowledgements, its session's state, its cache's applied revision, lag, resumes and
resyncs, its leadership, the load manager's cycles, hand-over durations, and the latency of
every store operation by operation and backend (from `TimedStore`, a store that wraps the
broker's own and times each call).

Counters and gauges are read from the node at scrape time; nothing is counted twice."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from metaplane.cache import CacheState, CacheTimeout, LocalCache
from metaplane.coordination import SessionState
from metaplane.layout import TopicName
from metaplane.store import (
    Entry,
    Lease,
    List,
    Listing,
    MetadataError,
    MetadataStore,
    PrefixWatch,
    Put,
    Txn,
    TxnResult,
    Watch,
)

if TYPE_CHECKING:
    from metaplane.cluster._node import Node

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
HAND_OVER_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LAG_INTERVAL = 1.0
"""Seconds between two measures of the cache's lag."""
LAG_TIMEOUT = 10.0
"""A lag measure gives up (and reports this many seconds) after it."""


class TimedStore(MetadataStore):
    """Delegates every operation to `inner`, timing it into `histogram` (labels: operation,
    backend). Errors are timed too: a slow failure is what an operator looks for."""

    def __init__(self, inner: MetadataStore, histogram: Histogram) -> None:
        self.inner = inner
        self.url = inner.url
        self.backend = inner.url.partition("://")[0] or "unknown"
        self._histogram = histogram

    @contextlib.contextmanager
    def _timed(self, operation: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self._histogram.labels(operation, self.backend).observe(elapsed)

    async def _get(self, key: str) -> Entry | None:
        with self._timed("get"):
            return await self.inner._get(key)

    async def _list(self, op: List, revision: int | None) -> Listing:
        with self._timed("list"):
            return await self.inner._list(op, revision)

    async def _put(self, op: Put) -> int:
        with self._timed("put"):
            return await self.inner._put(op)

    async def _txn(self, txn: Txn) -> TxnResult:
        with self._timed("txn"):
            return await self.inner._txn(txn)

    async def _revision(self) -> int:
        with self._timed("revision"):
            return await self.inner._revision()

    async def _compact(self, revision: int) -> None:
        with self._timed("compact"):
            await self.inner._compact(revision)

    async def _grant(self, ttl: int) -> Lease:
        with self._timed("grant"):
            return await self.inner._grant(ttl)

    async def _refresh(self, lease: int, timeout: float | None = None) -> int:
        with self._timed("refresh"):
            return await self.inner._refresh(lease, timeout)

    async def _revoke(self, lease: int) -> None:
        with self._timed("revoke"):
            await self.inner._revoke(lease)

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        return self.inner._watch(prefix, start_revision)

    def _watch_prefixes(self, prefixes: frozenset[str], start_revision: int | None) -> PrefixWatch:
        return self.inner._watch_prefixes(prefixes, start_revision)

    def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        return self.inner._scan(prefixes, revision, page, keys_only)

    async def _close(self) -> None:
        await self.inner.aclose()


def store_latency(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "metaplane_store_operation_seconds",
        "Time a store operation took, by operation and backend.",
        ["operation", "backend"],
        registry=registry,
        buckets=LATENCY_BUCKETS,
    )


class BrokerMetrics:
    """The registry of one broker process: the node's collector, the store latencies, the
    hand-over durations and the session's transitions."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.store_latency = store_latency(self.registry)
        self.hand_over = Histogram(
            "metaplane_hand_over_seconds",
            "Time from a topic's unload to its seal with its cursors, on this broker.",
            registry=self.registry,
            buckets=HAND_OVER_BUCKETS,
        )
        self.session_transitions = Counter(
            "metaplane_session_transitions",
            "Transitions of this broker's session, by the state entered.",
            ["state"],
            registry=self.registry,
        )
        self.lag_revisions = 0
        self.lag_seconds = 0.0
        self._lag_task: asyncio.Task[None] | None = None

    def watch(self, node: Node) -> None:
        """Collect `node`'s figures from now on."""
        self.registry.register(BrokerCollector(node, self))
        node.broker.on_hand_over = self.handed_over
        node.broker.session.listen(self.session_changed)
        for state in SessionState:
            self.session_transitions.labels(state.value)  # every state shows, at 0 first

    def handed_over(self, topic: TopicName, seconds: float) -> None:
        self.hand_over.observe(seconds)

    def session_changed(self, state: SessionState) -> None:
        self.session_transitions.labels(state.value).inc()

    def start(self, store: MetadataStore, cache: LocalCache) -> None:
        self._lag_task = asyncio.get_running_loop().create_task(self._measure_lag(store, cache))

    async def stop(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lag_task

    async def _measure_lag(self, store: MetadataStore, cache: LocalCache) -> None:
        """Every LAG_INTERVAL: how far behind the store's revision the cache is, and how long
        it takes to pass that revision (the cache asks the store for progress when nothing
        under its prefixes changed). A store that does not answer leaves the last figures."""
        while True:
            with contextlib.suppress(MetadataError):
                revision = await store.revision()
                self.lag_revisions = max(revision - cache.applied_revision, 0)
                started = time.perf_counter()
                with contextlib.suppress(CacheTimeout):
                    await cache.wait_for(revision, timeout=LAG_TIMEOUT)
                self.lag_seconds = time.perf_counter() - started
            await asyncio.sleep(LAG_INTERVAL)


class BrokerCollector(Collector):
    def __init__(self, node: Node, metrics: BrokerMetrics) -> None:
        self.node = node
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        broker = self.node.broker
        yield gauge(
            "metaplane_broker_topics_owned", "Topics this broker serves.", len(broker.owned)
        )
        yield counter("metaplane_broker_topics_loaded", "Topics loaded since start.", broker.loaded)
        yield counter(
            "metaplane_broker_topics_handed_over",
            "Topics unloaded and sealed with their cursors.",
            broker.handed_over,
        )
        yield counter(
            "metaplane_broker_topics_abandoned",
            "Topics unloaded without a seal (deleted, or taken without a marker).",
            broker.abandoned,
        )
        yield counter(
            "metaplane_broker_step_failures", "Reconciliation steps retried.", broker.step_failures
        )
        yield counter(
            "metaplane_cursor_writes", "Cursors written (batched acks).", broker.cursors.written
        )
        yield counter(
            "metaplane_cursor_writes_dropped",
            "Pending cursors dropped (the topic or the subscription went away).",
            broker.cursors.dropped,
        )
        yield gauge(
            "metaplane_cursor_pending_acks",
            "Subscriptions with an acknowledged cursor not yet written.",
            broker.cursors.pending_count,
        )
        yield states(
            "metaplane_session_state",
            "This broker's session state (1 for the current one).",
            [state.value for state in SessionState],
            broker.session.state.value,
        )
        yield from self.cache_metrics()
        yield from self.leadership()

    def cache_metrics(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        cache = self.node.broker.cache
        if cache is None:
            return
        applied = cache.applied_revision
        yield gauge(
            "metaplane_cache_applied_revision", "The last revision the cache applied.", applied
        )
        yield gauge(
            "metaplane_cache_lag_revisions",
            "Revisions the store was ahead of the cache when last sampled (every second).",
            self.metrics.lag_revisions,
        )
        yield gauge(
            "metaplane_cache_lag_seconds",
            "Time the cache last took to pass the store's current revision.",
            self.metrics.lag_seconds,
        )
        yield gauge("metaplane_cache_keys", "Keys the cache holds.", len(cache))
        yield gauge(
            "metaplane_cache_prefixes",
            "Prefixes the cache follows (two a topic served, and the cluster-wide ones).",
            cache.prefix_count,
        )
        yield counter("metaplane_cache_watch_resumes", "Broken watches resumed.", cache.resumes)
        yield counter("metaplane_cache_resyncs", "Full resyncs (history compacted).", cache.resyncs)
        yield states(
            "metaplane_cache_state",
            "The cache's state (1 for the current one).",
            [state.value for state in CacheState],
            cache.state.value,
        )

    def leadership(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        token = self.node.election.token
        yield gauge("metaplane_leader", "1 while this broker leads.", 0 if token is None else 1)
        if token is not None:
            yield gauge("metaplane_leader_epoch", "The epoch this broker leads in.", token.epoch)
        manager = self.node.load_manager
        yield counter("metaplane_load_manager_cycles", "Load manager cycles run.", manager.cycles)
        yield counter(
            "metaplane_load_manager_moves_started", "Moves the load manager started.",
            manager.moves_started,
        )  # fmt: skip


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))


def counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=float(value))


def states(name: str, documentation: str, every: list[str], current: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["state"])
    for state in every:
        family.add_metric([state], 1.0 if state == current else 0.0)
    return family
