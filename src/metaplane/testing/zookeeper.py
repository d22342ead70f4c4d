"""A real ZooKeeper server for tests and tools: standalone, on a free loopback port, in a folder
of its own; started, killed and restarted on purpose. It runs the ZooKeeper of the OS packages
(Debian: `apt-get install zookeeper`) or of a ZOOKEEPER_HOME.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import os
import shutil
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from metaplane.testing._server import START_TIMEOUT, ServerProcess, free_port

log = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# Debian's jar names its dependencies in its manifest; a release tarball has them in lib/.
DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
JUTE_MAXBUFFER = 4 * 1024 * 1024
"""The largest request the server takes: ZooKeeper's default (1 MiB less a byte) is below
the store contract's 1 MiB values."""


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
            # A key's value may be 1 MiB (the contract's limit) plus the znode's header.
            f"-Djute.maxbuffer={JUTE_MAXBUFFER}",
            f"-Dzookeeper.log.dir={self.folder}",
            "-cp",
            zookeeper_classpath(),
            MAIN_CLASS,
            str(self._config()),
        ]

    def _prepare(self) -> None:
        (self.folder / "data").mkdir(parents=True, exist_ok=True)

    def healthy(self) -> bool:
        """Serving sessions: `ruok` answers `imok` as soon as the server listens, while it
        still closes every session's connection for a moment (clients then retry, and a
        test counting connections counts those)."""
        return "Mode: standalone" in four_letter_word(self.client_port, "srvr")


QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SERVING_MODES = ("leader", "follower")


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """A ZooKeeper four-letter word's answer (`srvr`, `mntr`, `cons`), or "" when the server
    does not answer: dead, paused, or not listening yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperMember(ZooKeeperServer):
    """One server of an ensemble (`ZooKeeperEnsemble` builds them). Healthy means serving:
    in a quorum, as its leader or a follower; `ruok` answers even without a quorum."""

    def __init__(self, folder: Path, server_id: int) -> None:
        super().__init__(folder)
        self.server_id = server_id
        self.label = f"zookeeper {server_id}"
        self.quorum_port = free_port()
        self.election_port = free_port()
        self.servers: list[str] = []
        """The `server.N=` lines of the whole ensemble, set by the ensemble."""

    @property
    def server_line(self) -> str:
        return f"server.{self.server_id}=127.0.0.1:{self.quorum_port}:{self.election_port}"

    def _config(self) -> Path:
        config = super()._config()
        with config.open("a") as out:
            out.write("\n".join([*self.servers, "4lw.commands.whitelist=*", ""]))
        return config

    def command(self) -> list[str]:
        return [QUORUM_MAIN_CLASS if arg == MAIN_CLASS else arg for arg in super().command()]

    def _prepare(self) -> None:
        super()._prepare()
        (self.folder / "data" / "myid").write_text(f"{self.server_id}\n")

    def mode(self) -> str:
        """ "leader", "follower", or "" when not serving (no quorum, paused, dead)."""
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.removeprefix("Mode:").strip()
        return ""

    def healthy(self) -> bool:
        return self.mode() in SERVING_MODES

    def session_ids(self) -> set[int]:
        """The ids of the sessions whose clients are connected to this server now."""
        ids = set()
        for line in four_letter_word(self.client_port, "cons").splitlines():
            for field in line.replace("(", ",").replace(")", ",").split(","):
                if field.startswith("sid=0x"):
                    ids.add(int(field.removeprefix("sid="), 16))
        return ids


class ZooKeeperEnsemble:
    """Several ZooKeeper servers on loopback forming one ensemble (a quorum of a majority);
    any one member killed, restarted, paused or resumed on purpose."""

    def __init__(self, folder: Path, size: int = 3) -> None:
        self.members = [ZooKeeperMember(folder / f"zk{i + 1}", i + 1) for i in range(size)]
        lines = [member.server_line for member in self.members]
        for member in self.members:
            member.servers = lines

    @property
    def hosts(self) -> str:
        """The connection string clients (kazoo) take: every member."""
        return ",".join(member.hosts for member in self.members)

    @property
    def url(self) -> str:
        """The metaplane store URL of the whole ensemble."""
        return f"zk://{self.hosts}"

    def member(self, host: str) -> ZooKeeperMember:
        """The member serving `host` ("127.0.0.1:port")."""
        for member in self.members:
            if member.hosts == host:
                return member
        raise KeyError(host)

    def member_of_session(self, session_id: int) -> ZooKeeperMember:
        """The member the client of session `session_id` is connected to now."""
        for member in self.members:
            if session_id in member.session_ids():
                return member
        raise LookupError(f"no member has session {session_id:#x} connected")

    def sessions(self) -> dict[int, ZooKeeperMember]:
        """Every session connected to a member now, and its member."""
        return {sid: member for member in self.members for sid in member.session_ids()}

    def leader(self) -> ZooKeeperMember:
        for member in self.members:
            if member.mode() == "leader":
                return member
        raise LookupError("the ensemble has no leader")

    def kill(self, member: ZooKeeperMember) -> None:
        """SIGKILL one member: its connections close at once."""
        member.kill()

    def restart(self, member: ZooKeeperMember) -> None:
        """Start a killed member again (its data survives) and wait until it serves."""
        member.start()
        member.wait_ready()

    def pause(self, member: ZooKeeperMember) -> None:
        """Freeze one member (SIGSTOP): its clients' requests go unanswered and its peers see
        it silent — a hung member, not a dead one."""
        member.pause()

    def resume(self, member: ZooKeeperMember) -> None:
        member.resume()

    def wait_serving(self, timeout: float = START_TIMEOUT) -> ZooKeeperMember:
        """Wait until a quorum serves with one leader, and every member that runs and is not
        paused serves too; return the leader."""
        deadline = time.monotonic() + timeout
        while True:
            modes = {member.server_id: member.mode() for member in self._live()}
            serving = [mode for mode in modes.values() if mode in SERVING_MODES]
            quorum = len(self.members) // 2 + 1
            if len(serving) == len(modes) >= quorum and serving.count("leader") == 1:
                return self.leader()
            if time.monotonic() > deadline:
                tails = "\n".join(m.log_tail(10) for m in self.members)
                raise RuntimeError(f"ensemble not serving after {timeout}s: {modes}\n{tails}")
            time.sleep(0.1)

    def _live(self) -> list[ZooKeeperMember]:
        return [member for member in self.members if member.running and not member.paused]

    def start(self) -> None:
        for member in self.members:
            member.start()
        self.wait_serving()

    def stop(self) -> None:
        for member in self.members:
            member.kill()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()  # the members that did start are not left running
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def expire_session(client: Any) -> None:
    """Expire a kazoo client's session as kazoo's own test harness does: a second client
    joins the session with its id and password and closes it (the server ends it, and the
    first client learns it has expired when it next hears from the server)."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]

    session_id, password = client.client_id
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    thief = KazooClient(hosts=hosts, client_id=(session_id, password))
    await asyncio.to_thread(thief.start)
    await asyncio.to_thread(thief.stop)
    thief.close()
