"""What the etcd backend's store and watch share on the wire: keys as bytes, a prefix as etcd
ranges, entries from etcd's key-values, and the one place where gRPC errors become the
contract's."""

from __future__ import annotations

from typing import Any

import grpc

from metaplane.store._errors import (
    Compacted,
    InvalidRequest,
    InvalidTxn,
    LeaseNotFound,
    MetadataError,
    PermissionDenied,
    TxnTooLarge,
    Unavailable,
)
from metaplane.store._keys import ROOT, children_prefix, prefix_end
from metaplane.store._model import Entry

_AUTH_FAILURES = (
    "authentication failed",
    "permission denied",
    "user name is empty",
    "invalid auth token",
)


def not_applied(error: grpc.aio.AioRpcError) -> bool:
    """True when the member refused the request before applying it: safe to send again."""
    details = (error.details() or "").lower()
    return error.code() == grpc.StatusCode.UNAVAILABLE and (
        "failed to connect" in details
        or "connection refused" in details
        or "etcdserver: no leader" in details
        or "not capable" in details
    )


def is_transport(error: grpc.aio.AioRpcError) -> bool:
    """True when the member could not be reached or answer: another member may."""
    return error.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
    ) or "leader changed" in (error.details() or "")


def convert(error: grpc.aio.AioRpcError, lease: int = 0) -> MetadataError:
    """The one place where etcd's gRPC errors become the contract's.

    A compacted read becomes `Compacted(0)`: etcd's error does not say the compact revision,
    and the store looks it up (`EtcdStore._compaction`) before the error leaves it."""
    code, details = error.code(), error.details() or ""
    if is_transport(error):
        return Unavailable(f"etcd: {details or code.name}")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED) or any(
        reason in details for reason in _AUTH_FAILURES
    ):
        return PermissionDenied(f"etcd: {details}")
    if code == grpc.StatusCode.NOT_FOUND and "lease not found" in details:
        return LeaseNotFound(lease)
    if "required revision has been compacted" in details:
        return Compacted(0, f"etcd: {details}")
    if "future revision" in details:
        return InvalidRequest(f"etcd: {details}")
    if "too many operations" in details:
        return TxnTooLarge(f"etcd: {details}")
    if "duplicate key" in details:
        return InvalidTxn(f"etcd: {details}")
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return InvalidRequest(f"etcd: {details}")
    return MetadataError(f"etcd: {code.name}: {details}")


def entry_of(kv: Any) -> Entry:
    key = kv.key.decode("utf-8", "surrogateescape")
    return Entry(key, kv.value, kv.version, kv.create_revision, kv.mod_revision, kv.lease)


def key_of(kv: Any) -> str:
    return str(kv.key.decode("utf-8", "surrogateescape"))


def to_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def key_ranges(prefix: str) -> list[tuple[bytes, bytes]]:
    """The etcd ranges that make a prefix: the key itself and the keys under it.

    The single range [p, p + '0') would also hold siblings such as `p-part-1`."""
    if prefix == ROOT:
        return [(b"/", b"0")]
    return [
        (to_bytes(prefix), b""),
        (to_bytes(children_prefix(prefix)), to_bytes(prefix_end(prefix))),
    ]
