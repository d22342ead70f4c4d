"""The `cli` fixture: the command line against an empty store of a backend with a URL
(sqlite, etcd, ZooKeeper)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metaplane.testing import EtcdMember
from tests.admin.runner import Cli, emptied
from tests.admin.standalone import Standalone, start_standalone

BACKENDS_WITH_URL = pytest.mark.backends(
    "sqlite", "etcd", "zk", reason="the CLI opens a store by URL; a memory store has none"
)


@pytest.fixture
def cli(store_url: str) -> Cli:
    command_line = Cli(store_url)
    command_line.do(emptied)
    return command_line


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """One real local cluster for the session's slow cases (4 brokers with the workload):
    they break different brokers of it, SIGSTOP among them. On etcd: on a shared sqlite file
    a broker paused while it commits holds the file's write lock and stalls every other
    process (docs/store.md), which is not what these cases are about."""
    folder = tmp_path_factory.mktemp("standalone")
    member = EtcdMember(folder / "etcd")
    member.start()
    try:
        member.wait_ready()
        cluster = start_standalone(folder, brokers=4, store=member.url)
        try:
            yield cluster
        finally:
            out = cluster.stop()
            assert "cluster stopped" in out, out
    finally:
        member.kill()
