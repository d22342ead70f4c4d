"""The errors of the operator's surface, rooted in the store's tree like every other, and the
one table that turns any error into an HTTP status (the API) or an exit code (the CLI).

MetadataError (metaplane.store)
├── NotFound
│   └── MissingStore           a sqlite store's file does not exist (and --create was not given)
├── PreconditionFailed         an If-Match (ETag) that no longer holds
├── Unavailable
│   └── BrokerUnreachable      the owning broker's admin endpoint does not answer
├── SubscriptionsExist         a topic delete refused while subscriptions exist (no --force)
├── NotDraining                an undrain of a broker that is not draining or drained
└── InvalidRequest
    └── TooManyPartitions      more partitions than a topic may have
"""

from __future__ import annotations

from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerNotActive,
    NamespaceNotEmpty,
)
from metaplane.schema import (
    IncompatibleSchema,
    RegistryConflict,
    SchemaReferenced,
    SubjectInUse,
)
from metaplane.store import (
    AlreadyExists,
    BadVersion,
    Compacted,
    Fenced,
    InvalidRequest,
    MetadataError,
    NotFound,
    PermissionDenied,
    Unavailable,
)

MAX_PARTITIONS = 4096
"""The most partitions a topic created here may have: each is a topic of its own."""


class MissingStore(NotFound):
    def __init__(self, path: str) -> None:
        super().__init__(
            path, f"no store at {path} (give --create to make one, or another --store)"
        )


class PreconditionFailed(MetadataError):
    """What the client last saw (its ETag) is no longer what the store holds."""

    def __init__(self, what: str, expected: str, actual: str) -> None:
        super().__init__(f"{what} changed: If-Match {expected}, now {actual}; read it again")
        self.what = what
        self.expected = expected
        self.actual = actual


class BrokerUnreachable(Unavailable):
    def __init__(self, broker_id: int, address: str, reason: str) -> None:
        super().__init__(f"broker {broker_id} does not answer at {address}: {reason}")
        self.broker_id = broker_id


class SubscriptionsExist(MetadataError):
    def __init__(self, topic: TopicName, names: list[str]) -> None:
        listed = ", ".join(sorted(names))
        super().__init__(
            f"topic {topic} still has subscriptions ({listed}); delete them first, or force it"
        )
        self.topic = topic
        self.subscriptions = names


class NotDraining(MetadataError):
    def __init__(self, broker_id: int, mode: str) -> None:
        super().__init__(
            f"broker {broker_id} is {mode}: only a draining or drained broker undrains"
        )
        self.broker_id = broker_id


class TooManyPartitions(InvalidRequest):
    def __init__(self, count: int) -> None:
        super().__init__(f"{count} partitions: a topic has at most {MAX_PARTITIONS}")


def http_status(error: BaseException) -> int:
    """The HTTP status an error stands for (problem details carry it)."""
    if isinstance(error, PreconditionFailed | BadVersion):
        return 412
    if isinstance(error, MissingStore):
        return 503
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, InvalidRequest):
        return 400
    if isinstance(error, Compacted):
        return 410
    if isinstance(error, Unavailable):
        return 503
    if isinstance(error, PermissionDenied):
        return 502
    if isinstance(
        error,
        AlreadyExists
        | Fenced
        | SubscriptionsExist
        | NotDraining
        | NamespaceNotEmpty
        | BrokerNotActive
        | IncompatibleSchema
        | SubjectInUse
        | SchemaReferenced
        | RegistryConflict,
    ):
        return 409
    if isinstance(error, MetadataError):
        return 409
    return 500
