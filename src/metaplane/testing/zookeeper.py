"""A real ZooKeeper server for tests and tools: standalone, on a free loopback port, in a folder
of its own; started, killed and restarted on purpose. It runs the ZooKeeper of the OS packages
(Debian: `apt-get install zookeeper`) or of a ZOOKEEPER_HOME.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
from pathlib import Path

from metaplane.testing._server import ServerProcess, free_port

log = logging.getLogger(__name__)

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


class ZooKeeperServer(ServerProcess):
    """One standalone ZooKeeper. Its data folder survives stop/start, like a real restart."""

    label = "zookeeper"

    def __init__(self, folder: Path, *, client_port: int | None = None) -> None:
        super().__init__(folder, folder / "zookeeper.log")
        self.client_port = client_port or free_port()

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

    def _prepare(self) -> None:
        (self.folder / "data").mkdir(parents=True, exist_ok=True)

    def healthy(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.client_port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False
