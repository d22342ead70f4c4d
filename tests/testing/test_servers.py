"""The harness's servers: the ports they are given, and what is left when one cannot start.

A clean-clone `make test` failed a 3-member etcd cluster because its first member could
not bind its client port ("address already in use": a port of the kernel's ephemeral range,
found free and closed, then taken by some outgoing connection); the two members started
before the failure were left running, and their `Popen` objects, collected during a later
test, failed that one too (`ResourceWarning` is an error here)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from metaplane.testing import (
    EtcdMember,
    ZooKeeperEnsemble,
    ZooKeeperMember,
    etcd_binary,
    free_port,
)
from metaplane.testing._server import _ephemeral_low
from metaplane.testing.etcd import EtcdCluster
from metaplane.testing.zookeeper import zookeeper_classpath


def test_ports_are_distinct_free_and_outside_the_ephemeral_range() -> None:
    low = _ephemeral_low()
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    if low >= 13_024:  # room below the range (Linux's default starts at 32768)
        assert all(1024 <= port < low for port in ports)
    for port in ports[:20]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


@contextmanager
def listening(port: int) -> Iterator[None]:
    """Someone else listens on `port` meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield


def test_a_server_that_cannot_start_is_not_left_running(tmp_path: Path) -> None:
    etcd_binary()
    member = EtcdMember(tmp_path / "etcd")
    with (
        listening(member.client_port),
        pytest.raises(RuntimeError, match="address already in use"),
        member,
    ):
        pass
    assert member.process is None


def test_a_cluster_whose_member_cannot_start_leaves_none_running(tmp_path: Path) -> None:
    etcd_binary()
    cluster = EtcdCluster(tmp_path / "etcd")
    try:
        with (
            listening(cluster.members[0].client_port),
            pytest.raises(RuntimeError, match="address already in use"),
            cluster,
        ):
            pass
        assert [member.process for member in cluster.members] == [None, None, None]
    finally:
        cluster.stop()


def test_an_ensemble_whose_member_cannot_start_leaves_none_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third member's process cannot be started at all (its program is missing): the two
    started before it are stopped, not left running."""
    zookeeper_classpath()
    ensemble = ZooKeeperEnsemble(tmp_path / "zookeeper")
    started: list[subprocess.Popen[bytes]] = []
    real_start = ZooKeeperMember.start

    def start(member: ZooKeeperMember) -> None:
        real_start(member)
        assert member.process is not None
        started.append(member.process)

    monkeypatch.setattr(ZooKeeperMember, "start", start)
    third = ensemble.members[2]
    monkeypatch.setattr(third, "command", lambda: [str(tmp_path / "no-such-java")])
    try:
        with pytest.raises(FileNotFoundError, match="no-such-java"), ensemble:
            pass
        assert [member.process for member in ensemble.members] == [None, None, None]
        assert len(started) == 2
        assert all(process.poll() is not None for process in started)
    finally:
        ensemble.stop()
