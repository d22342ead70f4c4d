"""A real ZooKeeper server for tests and tools: standalone, on a free loopback port, in a folder
of its own; started, killed and restarted on purpose. It runs the ZooKeeper of the OS packages
(Debian: `apt-get install zookeeper`) or of a ZOOKEEPER_HOME.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from metaplane.testing.etcd import free_port

log = logging.getLogger(__name__)

START_TIMEOUT = 30.0
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# Debian's jar names its dependencies in its manifest; a release tarball has them in lib/.
DEBIAN_JAR = "/usr/share/java/zookeeper.jar"


class ZooKeeperNotInstalled(RuntimeError):
    """No ZooKeeper (or no java) to run."""


def zookeeper_classpath() -> str:
    """The classpath of the installed ZooKeeper server."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")))
        jars += sorted(glob.glob(os.path.join(home, "zookeeper-*.jar")))
        if jars:
            return os.pathsep.join(jars)
    if os.path.exists(DEBIAN_JAR):
        return DEBIAN_JAR
    raise ZooKeeperNotInstalled(
        "ZooKeeper is not installed: `make test` installs it (Debian: apt-get install "
        "zookeeper), or set ZOOKEEPER_HOME to an unpacked release"
    )


def java_binary() -> str:
    path = shutil.which("java")
    if path is None:
        raise ZooKeeperNotInstalled("java is not on PATH (Debian: openjdk-17-jre-headless)")
    return path


class ZooKeeperServer:
    """One standalone ZooKeeper. Its data folder survives stop/start, like a real restart."""

    def __init__(self, folder: Path, *, client_port: int | None = None) -> None:
        self.folder = folder
        self.client_port = client_port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file = folder / "zookeeper.log"

    @property
    def hosts(self) -> str:
        """The connection string clients (kazoo) take."""
        return f"127.0.0.1:{self.client_port}"

    def _config(self) -> Path:
        config = self.folder / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    "initLimit=10",
                    "syncLimit=5",
                    f"dataDir={self.folder / 'data'}",
                    f"clientPort={self.client_port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr",
                    "maxClientCnxns=0",
                    "",
                ]
            )
        )
        return config

    def command(self) -> list[str]:
        return [
            java_binary(),
            "-Xmx256m",
            f"-Dzookeeper.log.dir={self.folder}",
            "-cp",
            zookeeper_classpath(),
            MAIN_CLASS,
            str(self._config()),
        ]

    def start(self) -> None:
        """Start the process; return at once (see `wait_ready`)."""
        if self.running:
            return
        (self.folder / "data").mkdir(parents=True, exist_ok=True)
        command = self.command()
        with self._log_file.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Ask `ruok` until the server says `imok`, or fail with its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"zookeeper exited:\n{self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.1)
        raise RuntimeError(f"zookeeper not ready after {timeout}s:\n{self.log_tail()}")

    def healthy(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.client_port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send `sig` to the server and wait for it to end."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)
        self.process = None

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
        self.wait_ready()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
