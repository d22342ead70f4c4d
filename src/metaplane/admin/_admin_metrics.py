"""The cluster's metrics, served by `metaplane serve` at /metrics: the leader's epoch, the
brokers live, the topics waiting for assignment — read from the server's LocalCache at each
scrape — the audit findings of the last analysis, and the API's own requests."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.layout import KeyKind, LayoutError


class ClusterCollector(Collector):
    """Gauges of the cluster, from the cache at scrape time (no store read)."""

    def __init__(self, cache: LocalCache, analysis: Path | None) -> None:
        self.cache = cache
        self.analysis = analysis

    def collect(self) -> Iterator[GaugeMetricFamily]:
        epoch = GaugeMetricFamily(
            "metaplane_leader_epoch", "Elections so far (the leader's epoch); 0 before the first."
        )
        value = self.cache.value(layout.leader_epoch()) if self.cache.covers("/") else None
        epoch.add_metric([], float(value) if isinstance(value, int) else 0.0)
        yield epoch
        live = GaugeMetricFamily("metaplane_brokers_live", "Brokers whose registration lives.")
        live.add_metric([], float(len(self.cache.list(layout.registrations_prefix()))))
        yield live
        waiting = GaugeMetricFamily(
            "metaplane_unassigned_topics", "Topics waiting for the leader to assign them."
        )
        waiting.add_metric([], float(self.unassigned()))
        yield waiting
        revision = GaugeMetricFamily(
            "metaplane_admin_cache_applied_revision", "The admin server's cache's revision."
        )
        revision.add_metric([], float(self.cache.applied_revision))
        yield revision
        yield from self.findings()

    def unassigned(self) -> int:
        count = 0
        for entry in self.cache.list(layout.unassigned_prefix()):
            try:
                count += layout.parse(entry.key).kind is KeyKind.UNASSIGNED
            except LayoutError:
                continue
        return count

    def findings(self) -> Iterator[GaugeMetricFamily]:
        summary = read_summary(self.analysis)
        if summary is None:
            return
        family = GaugeMetricFamily(
            "metaplane_audit_findings",
            "Findings of the last analysis's audit, by severity.",
            labels=["severity"],
        )
        for severity, count in sorted(summary["audit"]["severities"].items()):
            family.add_metric([severity], float(count))
        yield family
        taken = GaugeMetricFamily(
            "metaplane_analysis_revision", "The store revision the last analysis read."
        )
        taken.add_metric([], float(summary["snapshot"]["revision"]))
        yield taken


def read_summary(folder: Path | None) -> dict[str, Any] | None:
    """The last analysis's summary.json (None without one, or while it is being written)."""
    if folder is None:
        return None
    try:
        found: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return found


class RequestMetrics:
    """An ASGI middleware counting the API's requests by method and status, with their
    durations."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "metaplane_api_requests",
            "HTTP requests answered.",
            ["method", "status"],
            registry=registry,
        )
        self.seconds = Histogram(
            "metaplane_api_request_seconds",
            "Time to answer an HTTP request (to its first byte for a stream).",
            ["method"],
            registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
        )

    def __call__(self, app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if str(scope["type"]) != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            method = scope.get("method", "GET")

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    self.requests.labels(method, str(message["status"])).inc()
                    self.seconds.labels(method).observe(time.perf_counter() - started)
                await send(message)

            await app(scope, receive, sending)

        return middleware
