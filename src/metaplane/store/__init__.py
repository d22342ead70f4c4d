"""The store contract and its backends: versioned keys, transactions, leases and watches.

    async with open_store("sqlite:///var/lib/metaplane/metaplane.db") as store:
        revision = await store.put("/cluster/demo", b"null", expect=ABSENT)

Backends: `memory://`, `sqlite:///path`, `etcd://h1:2379,h2:2379`. See DESIGN.md for the
contract; every backend passes the one conformance suite in tests/store/.
"""

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
from metaplane.store._etcd import EtcdOptions, EtcdStore
from metaplane.store._keys import (
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    check_key,
    check_prefix,
    in_prefix,
)
from metaplane.store._lease import KeepAliveState, LeaseKeeper
from metaplane.store._memory import MemoryStore
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
from metaplane.store._sqlite import SqliteStore
from metaplane.store._url import connect_store, open_store

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
    "check_key",
    "check_prefix",
    "connect_store",
    "in_prefix",
    "open_store",
]
