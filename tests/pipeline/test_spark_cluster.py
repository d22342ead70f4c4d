"""`metaplane analyze --spark-master spark://…` on a real Spark standalone cluster: a master and
two workers started from the installed pyspark's own `spark-class` on loopback, each worker
with one core. The analysis writes the same outputs as in local mode, and the master's JSON
status shows both workers running executors for the job while it runs (each worker's own
status lists them after). A master that cannot start fails the test: it never skips.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq
import pyspark
import pytest

from metaplane.pipeline import (
    AUDIT,
    BACKLOG,
    REBALANCE_PLAN,
    REPORT,
    RETENTION_PLAN,
    STORAGE,
    SUMMARY,
    TABLES,
)
from metaplane.testing import free_port
from tests.pipeline.conftest import FaultsAnalysis

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
LOOPBACK = "127.0.0.1"
WORKERS = 2
START_TIMEOUT = 90.0


def status(url: str) -> Any:
    """A Spark web UI's JSON status (`/json`)."""
    with urllib.request.urlopen(f"{url}/json/", timeout=5) as answer:
        return json.load(answer)


@dataclass
class Standalone:
    """A running standalone cluster: the master's URL and web UI, its processes and logs."""

    folder: Path
    master_url: str = ""
    web_url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def start(self, name: str, *args: str) -> None:
        log = self.folder / f"{name}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.processes.append(_spawn([str(SPARK_CLASS), *args], out, self.env))

    def wait(self, what: str, ready: Any) -> Any:
        """Poll the master's status until `ready(status)` holds; fail with the logs if not."""
        deadline = time.monotonic() + START_TIMEOUT
        last: object = None
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes):
                break
            try:
                last = status(self.web_url)
                if ready(last):
                    return last
            except OSError as error:
                last = error
            time.sleep(0.5)
        pytest.fail(f"the Spark standalone {what} did not come up: {last}\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in self.logs)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _spawn(command: list[str], out: IO[bytes], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # A process group of its own: spark-class execs a JVM, which is what must be stopped.
    return subprocess.Popen(
        command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    folder = tmp_path_factory.mktemp("spark-standalone")
    cluster = Standalone(folder)
    cluster.env = {
        **os.environ,
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOG_DIR": str(folder / "logs"),
        "SPARK_WORKER_DIR": str(folder / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    port, web = free_port(), free_port()
    cluster.master_url, cluster.web_url = f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{web}"
    try:
        cluster.start(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", LOOPBACK, "--port", str(port), "--webui-port", str(web),
        )  # fmt: skip
        cluster.wait("master", lambda state: state.get("status") == "ALIVE")
        for number in range(WORKERS):
            cluster.start(
                f"worker-{number}", "org.apache.spark.deploy.worker.Worker", cluster.master_url,
                "--host", LOOPBACK, "--port", str(free_port()),
                "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                "--work-dir", str(folder / f"worker-{number}"),
            )  # fmt: skip
        cluster.wait("workers", lambda state: state.get("aliveworkers") == WORKERS)
        yield cluster
    finally:
        cluster.stop()


class ExecutorWatch:
    """Polls the master's status while a job runs: the cores each worker gives to apps
    named `app` (the executors it runs for them)."""

    def __init__(self, web_url: str, app: str) -> None:
        self.web_url = web_url
        self.app = app
        self.app_ids: set[str] = set()
        self.cores: dict[str, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ExecutorWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._done.wait(0.3):
            try:
                state = status(self.web_url)
            except OSError:
                continue
            running = [app for app in state.get("activeapps", []) if app["name"] == self.app]
            if not running:
                continue
            self.app_ids.update(app["id"] for app in running)
            for worker in state.get("workers", []):
                address = worker["webuiaddress"]
                self.cores[address] = max(self.cores.get(address, 0), worker["coresused"])


def _rows(folder: Path) -> list[dict[str, Any]]:
    rows = pq.read_table(folder).to_pylist()
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _table_counts(out: Path) -> dict[str, int]:
    return {path.name: pq.read_table(path).num_rows for path in sorted((out / TABLES).iterdir())}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_analyze_on_a_standalone_cluster_writes_what_local_mode_writes(
    standalone: Standalone, faults_analysis: FaultsAnalysis, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    command = "from metaplane.admin.cli import main; main()"
    with ExecutorWatch(standalone.web_url, "metaplane") as watch:
        done = subprocess.run(
            [sys.executable, "-c", command, "analyze", "--snapshot",
             str(faults_analysis.snapshot), "--out", str(out),
             "--spark-master", standalone.master_url, "-o", "json"],
            capture_output=True, text=True, env=standalone.env, timeout=800, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + standalone.tail()

    local = faults_analysis.out
    for name in (SUMMARY, AUDIT, REBALANCE_PLAN, RETENTION_PLAN):
        assert json.loads((out / name).read_text()) == faults_analysis.json(name), name
    assert json.loads(done.stdout) == faults_analysis.json(SUMMARY)
    for name in (BACKLOG, STORAGE):
        assert _rows(out / name) == _rows(local / name), name
    assert _table_counts(out) == _table_counts(local)
    assert (out / REPORT).read_text() == (local / REPORT).read_text()

    # Both workers gave a core to the job, as the master saw while it ran.
    assert len(watch.app_ids) == 1, watch.app_ids
    assert len(watch.cores) == WORKERS and all(watch.cores.values()), watch.cores
    (app_id,) = watch.app_ids
    finished = status(standalone.web_url)
    assert app_id in {app["id"] for app in finished["completedapps"]}
    for worker in finished["workers"]:
        executors = status(worker["webuiaddress"])["finishedexecutors"]
        assert app_id in {executor["appid"] for executor in executors}, worker["id"]
