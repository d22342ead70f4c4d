"""Fixtures shared by every test folder: a real etcd and a real ZooKeeper for the session,
and a store of each backend for a test, each starting empty."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from metaplane.store import MemoryStore, MetadataStore, SqliteStore, connect_store
from metaplane.testing import EtcdMember, etcd_binary
from metaplane.testing.zookeeper import ZooKeeperServer, zookeeper_classpath

BACKENDS = ("memory", "sqlite", "etcd", "zk")
"""Every backend of the contract."""

STORE_FOLDERS = ("tests/store/",)
"""The folders whose `backend` cases run on every backend; elsewhere a case runs on the
backends of OTHER_FOLDERS_BACKENDS unless it names its own subset (ZooKeeper adds its
conformance suite here; the layers above the store are backend-agnostic, see docs/store.md)."""

OTHER_FOLDERS_BACKENDS = ("memory", "sqlite", "etcd")
OTHER_FOLDERS_REASON = (
    "the layers above the store run on ZooKeeper through the contract its conformance suite "
    "checks (tests/store); their own ZooKeeper cases name it"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names, reason): run a store case only on these backends (a named subset)",
    )


SLOW_FIXTURES = {"spark"}
"""Fixtures whose users run Spark: slow, whatever else they do."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every case on Spark is slow (`make check` leaves them out; `make test` runs them)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise `backend` over every backend, or over the subset a case names."""
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("backends")
    everywhere = BACKENDS if _in_store_suite(metafunc) else OTHER_FOLDERS_BACKENDS
    names = everywhere if marker is None else marker.args
    unknown = set(names) - set(BACKENDS)
    if unknown:
        raise pytest.UsageError(f"unknown backends {unknown} on {metafunc.definition.name}")
    if marker is not None and "reason" not in marker.kwargs:
        raise pytest.UsageError(f"{metafunc.definition.name}: a backend subset needs a reason")
    # Every backend appears; the ones outside the subset are skipped with its reason, so
    # that `-ra` shows what a case does not cover and why.
    reason = marker.kwargs["reason"] if marker is not None else OTHER_FOLDERS_REASON
    metafunc.parametrize(
        "backend",
        [
            name
            if name in names
            else pytest.param(name, marks=pytest.mark.skip(reason=f"not on {name}: {reason}"))
            for name in BACKENDS
        ],
    )


def _in_store_suite(metafunc: pytest.Metafunc) -> bool:
    path = Path(str(metafunc.definition.path)).as_posix()
    return any(f"/{folder}" in path for folder in STORE_FOLDERS)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole session. Missing ZooKeeper fails; it never
    skips."""
    zookeeper_classpath()
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdMember]:
    """One real etcd server for the whole session. Missing etcd fails; it never skips."""
    etcd_binary()
    with EtcdMember(tmp_path_factory.mktemp("etcd")) as member:
        yield member


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL of an empty store of `backend` that several clients (and processes) can open.
    Memory has none: a memory store lives in one object."""
    if backend == "sqlite":
        return f"sqlite://{tmp_path / 'store.db'}"
    if backend == "etcd":
        member: EtcdMember = request.getfixturevalue("etcd")
        member.etcdctl("del", "/", "--prefix")  # the session's etcd: empty it for each test
        return member.url
    if backend == "zk":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper")
        return f"zk://{server.hosts}/metaplane-test-{uuid.uuid4().hex[:12]}"  # a fresh chroot
    raise pytest.UsageError("a memory store has no URL another client could open")


@pytest.fixture
async def store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[MetadataStore]:
    """An empty store of `backend`."""
    opened: MetadataStore
    if backend == "memory":
        opened = MemoryStore()
    elif backend == "sqlite":
        opened = await SqliteStore.open(tmp_path / "store.db")
    else:
        opened = await connect_store(request.getfixturevalue("store_url"))
    try:
        yield opened
    finally:
        await opened.aclose()
