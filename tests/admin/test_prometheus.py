"""A real Prometheus (Debian's `prometheus`) scrapes a standalone cluster — every broker at
its registered `prom_exporter`, the admin server for the cluster's figures — and answers
queries through its HTTP API for values that must change: cursor writes after acks, the
session state of a broker after SIGSTOP, the unassigned count after a broker is killed."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from metaplane import layout
from metaplane.testing import free_port
from tests.admin.standalone import METAPLANE, SESSION_TTL, Standalone

pytestmark = pytest.mark.slow


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise AssertionError("prometheus is not installed: run .ci/system-deps prometheus")
    return found


class Prometheus:
    """A Prometheus server scraping `targets` every second, and its query API."""

    def __init__(self, folder: Path, brokers: list[str], admin: str) -> None:
        self.port = free_port()
        config = folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, scrape_timeout: 900ms}\n"
            "scrape_configs:\n"
            "  - job_name: brokers\n"
            f"    static_configs: [{{targets: [{', '.join(repr(b) for b in brokers)}]}}]\n"
            "  - job_name: cluster\n"
            f"    static_configs: [{{targets: ['{admin}']}}]\n"
        )
        self.log = (folder / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def query(self, expression: str) -> list[tuple[dict[str, str], float]]:
        """The instant vector of `expression`, through the HTTP API."""
        answer = httpx.get(self.url + "/api/v1/query", params={"query": expression}, timeout=10)
        document = answer.json()
        assert document["status"] == "success", document
        return [(r["metric"], float(r["value"][1])) for r in document["data"]["result"]]

    def value(self, expression: str) -> float | None:
        found = self.query(expression)
        return found[0][1] if found else None

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def until(check: Callable[[], bool], what: str, timeout: float) -> float:
    """Poll `check` (Prometheus has nothing to await) until it holds; the seconds it took."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"gave up waiting for {what}"
        time.sleep(0.25)
    return time.monotonic() - started


def address(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


@pytest.fixture(scope="module")
def prometheus(
    standalone: Standalone, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    brokers = [address(url) for _, url in sorted(standalone.metrics.items())]
    server = Prometheus(
        tmp_path_factory.mktemp("prometheus"), brokers, address(standalone.dashboard)
    )
    try:
        until(server.ready, "prometheus to be ready", 60)
        up = len(standalone.live) + 1
        until(lambda: server.value("count(up == 1)") == up, "every live target up", 60)
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(240)
def test_prometheus_sees_the_cluster_change(prometheus: Prometheus, standalone: Standalone) -> None:
    # The brokers' figures and the cluster's, scraped where the registrations say.
    live = len(standalone.live)
    owned = 'sum(metaplane_broker_topics_owned{job="brokers"} and on(instance) up == 1)'
    topics = len(httpx.get(standalone.dashboard + "admin/v2/topics", timeout=10).json())
    until(lambda: prometheus.value(owned) == topics, "every topic served", 30)
    assert prometheus.value("metaplane_brokers_live") == live
    assert prometheus.value('count(metaplane_store_operation_seconds_count{backend="etcd"})')

    # Cursor writes after acks: the workload acknowledges, the brokers write in batches.
    written = prometheus.value("sum(metaplane_cursor_writes_total)") or 0.0
    until(lambda: (prometheus.value("sum(metaplane_cursor_writes_total)") or 0) > written,
          "more cursor writes", 30)  # fmt: skip

    # A broker paused past its session's TTL: scraped as down while paused, then its session
    # is found lost and reestablished once it runs again.
    victim = "broker 2"
    instance = address(standalone.metrics[2])
    pid = standalone.pause(2)
    until(lambda: prometheus.value(f'up{{instance="{instance}"}}') == 0, f"{victim} down", 30)
    # Paused until its lease has expired at the store (its registration gone).
    gone = live - 1
    until(
        lambda: prometheus.value("metaplane_brokers_live") == gone,
        "its lease gone",
        3 * SESSION_TTL,
    )
    standalone.resume(pid)
    reestablished = (
        f'metaplane_session_transitions_total{{instance="{instance}",state="reestablished"}}'
    )
    until(lambda: (prometheus.value(reestablished) or 0) >= 1, f"{victim} reestablished", 60)
    lost = f'metaplane_session_transitions_total{{instance="{instance}",state="lost"}}'
    assert (prometheus.value(lost) or 0) >= 1
    until(lambda: prometheus.value("metaplane_brokers_live") == live, f"{victim} back", 30)
    # Its lease gone, the paused broker's topics were put back to wait and are placed again:
    # Prometheus shows that a scrape or two later, not at once (it once showed 2 still here).
    until(
        lambda: prometheus.value("metaplane_unassigned_topics") == 0,
        f"{victim}'s topics placed again",
        60,
    )

    # The unassigned count after a broker is killed: every broker is put in maintenance (a
    # custom state: they keep their topics and take none), so its topics stay waiting. The
    # victim is a broker that serves topics (eight topics over four brokers may leave one
    # with none), chosen once the cluster is quiet: for 2 s the same topics wait (a move
    # begun before the last broker's maintenance may wait for good) and Prometheus shows
    # the victim's count as the store assigns it and the waiting count as the store has it.
    for broker in sorted(standalone.live):
        set_mode(standalone, broker, "maintenance")
    seen: list[tuple[tuple[int, int, int], float]] = []

    def quiet() -> bool:
        status = httpx.get(standalone.dashboard + "admin/v2/status", timeout=10).json()
        waiting = len(status["unassigned"])
        if prometheus.value("metaplane_unassigned_topics") != waiting:
            return False
        serving = sorted(
            ((b["topics_owned"], b["broker_id"]) for b in status["brokers"]
             if b["live"] and b["broker_id"] in standalone.live and b["topics_owned"] > 0),
            reverse=True,
        )  # fmt: skip
        for count, broker in serving:
            scraped = address(standalone.metrics[broker])
            if prometheus.value(f'metaplane_broker_topics_owned{{instance="{scraped}"}}') == count:
                now = (broker, count, waiting)
                if seen and seen[0][0] == now:
                    return time.monotonic() - seen[0][1] >= 2
                seen[:] = [(now, time.monotonic())]
                return False
        return False

    until(quiet, "a quiet cluster with a broker serving topics", 60)
    [((doomed, stranded, waiting), _)] = seen
    standalone.kill(doomed)
    until(
        lambda: prometheus.value("metaplane_unassigned_topics") == waiting + stranded,
        f"unassigned: {waiting} waiting and broker {doomed}'s {stranded}",
        60,
    )
    until(lambda: prometheus.value("metaplane_brokers_live") == live - 1, "one broker less", 30)
    for broker in sorted(standalone.live):
        set_mode(standalone, broker, "active")
    until(
        lambda: prometheus.value("metaplane_unassigned_topics") == 0, "the topics placed again", 60
    )


def set_mode(standalone: Standalone, broker: int, mode: str) -> None:
    """A broker's state written as an operator would, with `metaplane kv put`."""
    value = f'{{"mode":"{mode}","reason":"test"}}'
    key = layout.broker_state(broker)
    result = subprocess.run(
        [*METAPLANE, "kv", "put", key, value, "--store", standalone.store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
