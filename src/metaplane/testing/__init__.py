"""Harnesses for tests and benchmarks that run against real servers and break them on
purpose (in the manner of kazoo.testing)."""

from metaplane.testing._server import ServerProcess, free_port, port_free
from metaplane.testing.etcd import (
    EtcdCluster,
    EtcdMember,
    EtcdNotInstalled,
    TlsFiles,
    etcd_binary,
)
from metaplane.testing.faults import Fault, FaultyStore, deletes, writes
from metaplane.testing.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperMember,
    ZooKeeperNotInstalled,
    ZooKeeperServer,
    expire_session,
)

__all__ = [
    "EtcdCluster",
    "EtcdMember",
    "EtcdNotInstalled",
    "Fault",
    "FaultyStore",
    "ServerProcess",
    "TlsFiles",
    "ZooKeeperEnsemble",
    "ZooKeeperMember",
    "ZooKeeperNotInstalled",
    "ZooKeeperServer",
    "deletes",
    "etcd_binary",
    "expire_session",
    "free_port",
    "port_free",
    "writes",
]
