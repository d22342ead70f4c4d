"""The errors of the store contract, the only exceptions a store raises.

Backends convert their own exceptions (gRPC, sqlite3, kazoo) at the boundary, in one place
each; nothing else leaks through the contract. The tree:

    MetadataError
    ├── NotFound                 a version was expected of a key that does not exist
    │   └── LeaseNotFound        the lease expired, was revoked, or never existed
    ├── AlreadyExists            ABSENT was expected of a key that exists
    ├── BadVersion               the key exists at another version than expected
    ├── Fenced                   a leader-only write by a node that no longer leads
    ├── Compacted                the history asked for is gone (carries compact_revision)
    │   └── OrderLost            a watch cannot place what the store sent in order: resync
    ├── Unavailable              the store cannot be reached now; retryable
    ├── PermissionDenied         authentication failed, or the user may not do this
    └── InvalidRequest           bad input, refused before it reaches a backend (ValueError)
        ├── InvalidKey
        ├── InvalidValue
        ├── ValueTooLarge
        ├── TxnTooLarge
        ├── InvalidTxn
        └── InvalidStoreURL

A failed expectation writes nothing.
"""

from __future__ import annotations


class MetadataError(Exception):
    """The base of every error the store raises."""


class NotFound(MetadataError):
    """A key that had to exist does not."""

    def __init__(self, key: str, message: str | None = None) -> None:
        super().__init__(message or f"{key}: not found")
        self.key = key


class LeaseNotFound(NotFound):
    """The lease expired, was revoked, or never existed."""

    def __init__(self, lease: int) -> None:
        super().__init__(f"lease:{lease}", f"lease {lease} not found (expired or revoked)")
        self.lease = lease


class AlreadyExists(MetadataError):
    """A key that had to be absent exists."""

    def __init__(self, key: str, message: str | None = None) -> None:
        super().__init__(message or f"{key}: already exists")
        self.key = key


class BadVersion(MetadataError):
    """The key exists, at another version than the one expected."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        super().__init__(f"{key}: expected version {expected}, found {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual


class Fenced(MetadataError):
    """A leader-only write was refused: the writer's leadership token is no longer current."""


class Compacted(MetadataError):
    """The revisions asked for were compacted; resync from a newer revision."""

    def __init__(self, compact_revision: int, message: str | None = None) -> None:
        super().__init__(
            message or f"history compacted: revisions before {compact_revision} are gone"
        )
        self.compact_revision = compact_revision


class OrderLost(Compacted):
    """A watch of several prefixes got an event it can no longer deliver in revision order
    (etcd set one of its watchers aside and sent the event late). As for `Compacted`, the
    caller resyncs: it reads its prefixes again at a new revision and diffs. `revision` is
    the revision of the late event; `compact_revision` the first revision the caller can
    no longer trust (the batch at or above it may have lacked the event)."""

    def __init__(self, revision: int, message: str | None = None) -> None:
        super().__init__(
            revision,
            message or f"watch order lost: an event of revision {revision} came after later ones",
        )
        self.revision = revision


class Unavailable(MetadataError):
    """The store cannot be reached now. Retryable; a write that raised it may have applied."""


class PermissionDenied(MetadataError):
    """Authentication failed, or the authenticated user may not do this."""


class InvalidRequest(MetadataError, ValueError):
    """A request the contract refuses, before it reaches a backend."""


class InvalidKey(InvalidRequest):
    """A key that is not an absolute path of valid segments within the size limit."""

    def __init__(self, key: object, reason: str) -> None:
        super().__init__(f"invalid key {key!r}: {reason}")
        self.key = key
        self.reason = reason


class InvalidValue(InvalidRequest):
    """A value that is not bytes."""


class ValueTooLarge(InvalidRequest):
    """A value above the contract's size limit."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        super().__init__(f"{key}: value of {size} bytes is above the limit of {limit} bytes")
        self.key = key
        self.size = size
        self.limit = limit


class TxnTooLarge(InvalidRequest):
    """A transaction with more operations than the contract allows."""


class InvalidTxn(InvalidRequest):
    """A transaction the contract refuses, such as one that writes a key twice."""


class InvalidStoreURL(InvalidRequest):
    """A store URL that names no backend or is malformed."""
