"""`metaplane standalone` as a test fixture: a real local cluster (broker processes with
their metrics and admin endpoints, the admin server with the dashboard) on free ports, and
what a test needs to break it: each broker's addresses and process id."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from metaplane.cluster._node import registration
from metaplane.testing import port_free

METAPLANE = [sys.executable, "-c", "from metaplane.admin.cli import main; main()"]
SESSION_TTL = 5
"""The brokers' session TTL (`python -m metaplane.cluster`'s default)."""


def free_index_base(brokers: int) -> int:
    """An index base whose brokers' admin and metrics ports are all free."""
    for base in range(100, 1000, brokers + 3):
        ports = []
        for index in range(base, base + brokers):
            addresses = registration(1, index)
            ports += [int(addresses.admin_addr.rsplit(":", 1)[1])]
            ports += [int(str(addresses.prom_exporter).rsplit(":", 1)[1])]
        if all(port_free(port) for port in ports):
            return base
    raise AssertionError("no free ports for the brokers' endpoints")


@dataclass
class Standalone:
    """A running `metaplane standalone` and what it printed."""

    process: subprocess.Popen[str]
    store: str
    dashboard: str
    metrics: dict[int, str] = field(default_factory=dict)
    admin: dict[int, str] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)
    killed: set[int] = field(default_factory=set)

    @property
    def live(self) -> set[int]:
        """The brokers not killed by a test."""
        return set(self.metrics) - self.killed

    def pid(self, broker: int) -> int:
        status = httpx.get(self.admin[broker] + "/admin/v1/status", timeout=10).json()
        found: int = status["pid"]
        return found

    def kill(self, broker: int) -> float:
        """SIGKILL a broker; when it was sent (monotonic seconds)."""
        pid = self.pid(broker)
        at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        self.killed.add(broker)
        return at

    def pause(self, broker: int) -> int:
        pid = self.pid(broker)
        os.kill(pid, signal.SIGSTOP)
        self.stopped.add(pid)
        return pid

    def resume(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)
        self.stopped.discard(pid)

    def stop(self) -> str:
        for pid in list(self.stopped):
            self.resume(pid)
        self.process.send_signal(signal.SIGINT)
        out, _ = self.process.communicate(timeout=90)
        return out


def start_standalone(folder: Path, brokers: int, store: str | None = None) -> Standalone:
    """Start the cluster (on a sqlite file in `folder` unless `store` is given) and read the
    addresses it prints (its stderr goes to a file)."""
    store = store or f"sqlite://{folder / 'cluster.db'}"
    base = free_index_base(brokers)
    command = [
        *METAPLANE, "standalone", "--brokers", str(brokers), "--workload", "--store", store,
        "--create", "--port", "0", "--index-base", str(base), "--folder", str(folder),
    ]  # fmt: skip
    with (folder / "standalone.err").open("w") as err:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
    assert process.stdout is not None
    cluster = Standalone(process, store, "")
    deadline = time.monotonic() + 120
    while not cluster.dashboard:
        line = process.stdout.readline()
        assert line, f"standalone ended: {(folder / 'standalone.err').read_text()}"
        assert time.monotonic() < deadline, "standalone did not start in time"
        if found := re.search(r"broker (\d+): metrics (\S+) admin (\S+)", line.replace(",", "")):
            broker = int(found.group(1))
            cluster.metrics[broker] = found.group(2)
            cluster.admin[broker] = found.group(3)
        elif found := re.search(r"dashboard: (\S+)", line):
            cluster.dashboard = found.group(1)
    assert len(cluster.metrics) == brokers
    return cluster
