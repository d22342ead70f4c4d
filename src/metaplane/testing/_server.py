"""What every real server of the harness shares: a process of its own session on free loopback
ports, its output in a log file, started, polled until healthy, killed with a signal."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Self

START_TIMEOUT = 30.0


_PORTS = 12_000
"""How many ports below the kernel's ephemeral range `free_port` draws from."""

_handed: set[int] = set()


def free_port() -> int:
    """A loopback port that no one listens on now, for a server about to start.

    Drawn at random below the kernel's ephemeral range (`ip_local_port_range`), and never
    the same twice in this process. A port of that range, found free by binding port 0 and
    closed again, may be given to any outgoing connection on the machine before the server
    binds it: an etcd member then failed to start ("bind: address already in use"), and the
    members started before it were left running. Where the range leaves no room below it,
    the kernel's choice (port 0) is taken as before."""
    low = _ephemeral_low()
    if low - _PORTS >= 1024:
        for _ in range(200):
            port = random.randrange(low - _PORTS, low)
            if port not in _handed and port_free(port):
                _handed.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        _handed.add(chosen)
        return chosen


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (0 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def port_free(port: int) -> bool:
    """Whether a loopback port can be bound now (no one listens on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class ServerProcess(ABC):
    """One server process. Subclasses give its command, its health check and its name; the
    folder they prepare in `_prepare` survives stop/start, like a real restart."""

    poll_interval = 0.1

    def __init__(self, folder: Path, log_file: Path) -> None:
        self.folder = folder
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self._log_file = log_file

    @property
    @abstractmethod
    def label(self) -> str:
        """The server's name in errors ("etcd m1", "zookeeper")."""

    @abstractmethod
    def command(self) -> list[str]: ...

    @abstractmethod
    def healthy(self) -> bool: ...

    def _prepare(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        """Start the process; return at once (see `wait_ready`)."""
        if self.running:
            return
        self._prepare()
        command = self.command()
        with self._log_file.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Poll `healthy` until it holds, or fail with the server's log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited:\n{self.log_tail()}")
            if self.healthy():
                return
            time.sleep(self.poll_interval)
        raise RuntimeError(f"{self.label} not ready after {timeout}s:\n{self.log_tail()}")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send `sig` to the server's process group and wait for it to end."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            if self.paused:  # a stopped process acts on SIGTERM only once continued
                os.killpg(self.process.pid, signal.SIGCONT)
            self.process.wait(timeout=30)
        self.process = None
        self.paused = False

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): its connections stay open and nothing answers, as in
        a long GC pause or a hung disk. `resume()` continues it."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGSTOP)
            self.paused = True
            _until_stopped(self.process.pid)

    def resume(self) -> None:
        """Continue a paused server (SIGCONT)."""
        if self.process is not None and self.process.poll() is None and self.paused:
            os.killpg(self.process.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def restart(self) -> None:
        self.stop()
        self.start()
        self.wait_ready()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self._log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.kill()  # not left running (nor its Popen to warn, later, in another test)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()


def _until_stopped(group: int, timeout: float = 5.0) -> None:
    """Wait until every thread of every process of `group` is stopped. A signal is delivered
    to each thread as it next runs: a JVM's thread busy on the other core answered a request
    sent right after the SIGSTOP (a paused ZooKeeper leader said it led). Polled: the kernel
    tells no one."""
    deadline = time.monotonic() + timeout
    while not _stopped(group):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process group {group} not stopped {timeout:g} s after SIGSTOP")
        time.sleep(0.005)


def _stopped(group: int) -> bool:
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            if int(_stat_fields(process / "stat")[2]) != group:
                continue
            states = [_stat_fields(task / "stat")[0] for task in (process / "task").iterdir()]
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if any(state not in ("T", "t", "Z", "X") for state in states):
            return False
    return True


def _stat_fields(path: Path) -> list[str]:
    """The fields of a /proc stat file after the command's name (state, ppid, pgrp, …)."""
    return path.read_text().rsplit(")", 1)[1].split()
