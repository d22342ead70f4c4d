"""The store contract and its backends: versioned keys, transactions, leases and watches.

    async with open_store("sqlite:///var/lib/metaplane/metaplane.db") as store:
        revision = await store.put("/cluster/demo", b"null", expect=ABSENT)

Backends: `memory://`, `sqlite:///path`, `etcd://h1:2379,h2:2379`, `zk://h1:2181/chroot`.
See DESIGN.md for the contract; every backend passes the one conformance suite in tests/store/.
Importing this package loads the contract only: a backend's module (and grpc, aetcd, kazoo)
loads when `open_store` is asked for its scheme, or when its class is first named here.
"""

import importlib as _importlib
import typing as _typing

from metaplane.store._base import SCAN_PAGE, MetadataStore, PrefixWatch, Scan, Watch
from metaplane.store._errors import (
    AlreadyExists,
    BadVersion,
    Compacted,
    Fenced,
    InvalidKey,
    InvalidRequest,
    InvalidStoreURL,
    InvalidTxn,
    InvalidValue,
    LeaseNotFound,
    MetadataError,
    NotFound,
    OrderLost,
    PermissionDenied,
    TxnTooLarge,
    Unavailable,
    ValueTooLarge,
)
from metaplane.store._keys import (
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    check_key,
    check_prefix,
    in_prefix,
)
from metaplane.store._lease import KeepAliveState, LeaseKeeper
from metaplane.store._model import (
    ABSENT,
    ANY,
    MAX_TXN_OPS,
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    EventType,
    Expect,
    Get,
    Lease,
    List,
    Listing,
    Operation,
    Put,
    Target,
    Txn,
    TxnResult,
    WatchBatch,
    WatchEvent,
)
from metaplane.store._url import connect_store, open_store

if _typing.TYPE_CHECKING:
    from metaplane.store._etcd import EtcdOptions, EtcdStore
    from metaplane.store._memory import MemoryStore
    from metaplane.store._sqlite import SqliteStore
    from metaplane.store._zookeeper import ZooKeeperOptions, ZooKeeperStore

_BACKENDS = {
    "EtcdOptions": "metaplane.store._etcd",
    "EtcdStore": "metaplane.store._etcd",
    "MemoryStore": "metaplane.store._memory",
    "SqliteStore": "metaplane.store._sqlite",
    "ZooKeeperOptions": "metaplane.store._zookeeper",
    "ZooKeeperStore": "metaplane.store._zookeeper",
}
"""The backends' classes, each loaded with its module when first named."""


def __getattr__(name: str) -> _typing.Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_BACKENDS))


__all__ = [
    "ABSENT",
    "ANY",
    "MAX_KEY_BYTES",
    "MAX_TXN_OPS",
    "MAX_VALUE_BYTES",
    "SCAN_PAGE",
    "AlreadyExists",
    "BadVersion",
    "Compacted",
    "Compare",
    "Delete",
    "DeletePrefix",
    "Entry",
    "EtcdOptions",
    "EtcdStore",
    "EventType",
    "Expect",
    "Fenced",
    "Get",
    "InvalidKey",
    "InvalidRequest",
    "InvalidStoreURL",
    "InvalidTxn",
    "InvalidValue",
    "KeepAliveState",
    "Lease",
    "LeaseKeeper",
    "LeaseNotFound",
    "List",
    "Listing",
    "MemoryStore",
    "MetadataError",
    "MetadataStore",
    "NotFound",
    "Operation",
    "OrderLost",
    "PermissionDenied",
    "PrefixWatch",
    "Put",
    "Scan",
    "SqliteStore",
    "Target",
    "Txn",
    "TxnResult",
    "TxnTooLarge",
    "Unavailable",
    "ValueTooLarge",
    "Watch",
    "WatchBatch",
    "WatchEvent",
    "ZooKeeperOptions",
    "ZooKeeperStore",
    "check_key",
    "check_prefix",
    "connect_store",
    "in_prefix",
    "open_store",
]
