"""Real etcd servers for tests and benchmarks: one member or a cluster, on free loopback
ports, in a folder of their own; started, killed and restarted on purpose.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from metaplane.testing._server import ServerProcess, free_port

log = logging.getLogger(__name__)


class EtcdNotInstalled(RuntimeError):
    """The etcd binary is not on PATH."""


def etcd_binary() -> str:
    path = shutil.which("etcd")
    if path is None:
        raise EtcdNotInstalled(
            "etcd is not on PATH: `make test` installs it (Debian: apt-get install etcd-server)"
        )
    return path


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for a TLS client port: the CA clients trust, the server's cert and key."""

    ca: Path
    cert: Path
    key: Path
    client_cert_auth: bool = False


class EtcdMember(ServerProcess):
    """One etcd process. Its data directory survives stop/start, like a real restart."""

    poll_interval = 0.05

    def __init__(
        self,
        folder: Path,
        name: str = "m1",
        *,
        client_port: int | None = None,
        peer_port: int | None = None,
        tls: TlsFiles | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(folder, folder / f"{name}.log")
        self.extra_args = list(extra_args)
        self.name = name
        self.client_port = client_port or free_port()
        self.peer_port = peer_port or free_port()
        self.tls = tls
        self.initial_cluster = f"{name}=http://127.0.0.1:{self.peer_port}"

    @property
    def label(self) -> str:
        return f"etcd {self.name}"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def client_url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.endpoint}"

    @property
    def url(self) -> str:
        """The metaplane store URL of this member alone."""
        return f"etcd://{self.endpoint}"

    def command(self) -> list[str]:
        args = [
            etcd_binary(),
            f"--name={self.name}",
            f"--data-dir={self.folder / self.name}",
            f"--listen-client-urls={self.client_url}",
            f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls=http://127.0.0.1:{self.peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer_port}",
            f"--initial-cluster={self.initial_cluster}",
            "--initial-cluster-state=new",
            "--initial-cluster-token=metaplane-test",
            # Fast elections make 1-second leases possible and fail-over quick.
            "--heartbeat-interval=50",
            "--election-timeout=500",
            "--log-level=warn",
            "--logger=zap",
        ]
        if self.tls:
            args += [f"--cert-file={self.tls.cert}", f"--key-file={self.tls.key}"]
            if self.tls.client_cert_auth:
                args += ["--client-cert-auth", f"--trusted-ca-file={self.tls.ca}"]
        return args + self.extra_args

    def etcdctl(self, *args: str, input: str | None = None) -> str:
        """Run etcdctl against this member (credentials are the caller's to pass)."""
        command = [shutil.which("etcdctl") or "etcdctl", f"--endpoints={self.client_url}"]
        if self.tls:
            command += [f"--cacert={self.tls.ca}"]
            if self.tls.client_cert_auth:
                command += [f"--cert={self.tls.cert}", f"--key={self.tls.key}"]
        result = subprocess.run(
            [*command, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "ETCDCTL_API": "3"},
        )
        if result.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def healthy(self) -> bool:
        context = None
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.tls.ca))
            if self.tls.client_cert_auth:
                context.load_cert_chain(self.tls.cert, self.tls.key)
        try:
            with urllib.request.urlopen(
                f"{self.client_url}/health", timeout=1, context=context
            ) as response:
                return bool(json.load(response).get("health") == "true")
        except (urllib.error.URLError, OSError, ValueError):
            return False


class EtcdCluster:
    """Several members on loopback forming one cluster."""

    def __init__(self, folder: Path, size: int = 3) -> None:
        self.members = [EtcdMember(folder, f"m{i + 1}") for i in range(size)]
        initial = ",".join(member.initial_cluster for member in self.members)
        for member in self.members:
            member.initial_cluster = initial

    @property
    def endpoints(self) -> Sequence[str]:
        return [member.endpoint for member in self.members]

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(self.endpoints)

    def member(self, endpoint: str) -> EtcdMember:
        """The member serving `endpoint` (a client's `active_endpoint`, say)."""
        for member in self.members:
            if member.endpoint == endpoint:
                return member
        raise KeyError(endpoint)

    def pause(self, member: EtcdMember) -> None:
        """Freeze one member (SIGSTOP): its clients' requests go unanswered, its peers see
        it silent — a hung member, not a dead one."""
        member.pause()

    def resume(self, member: EtcdMember) -> None:
        member.resume()

    def start(self) -> None:
        for member in self.members:
            member.start()
        for member in self.members:
            member.wait_ready()

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
