"""The errors of the schema registry and its engine, rooted in the store contract's tree.

    MetadataError
    ├── NotFound
    │   ├── SubjectNotFound            no subject of that name
    │   ├── SchemaVersionNotFound      the subject has no such version
    │   ├── SchemaIdNotFound           no subject holds that global schema id
    │   ├── TopicNotFound              a binding names a topic that does not exist
    │   └── TopicNotBound              the topic is bound to no subject
    ├── IncompatibleSchema             the new schema breaks the subject's mode (with reasons)
    ├── SubjectInUse                   topics are still bound to the subject being deleted
    ├── RegistryConflict               concurrent writers won every attempt; nothing written
    └── InvalidRequest
        ├── InvalidSchema              a document its format's own library rejects
        ├── UnknownSchemaType          a type name that is none of the registry's types
        └── UnknownCompatibilityMode   a mode name that is none of the registry's modes

Nothing is written when any of them is raised. The engine's errors carry the library's own
message; the library's exception is their __cause__.
"""

from __future__ import annotations

from collections.abc import Sequence

from metaplane.store import InvalidRequest, MetadataError, NotFound


class InvalidSchema(InvalidRequest):
    """A schema document that its format's library refuses to parse or validate."""

    def __init__(self, schema_type: str, message: str) -> None:
        super().__init__(f"invalid {schema_type} schema: {message}")
        self.schema_type = schema_type
        self.reason = message


class UnknownSchemaType(InvalidRequest):
    """A schema type name that names none of the registry's types."""

    def __init__(self, name: object, known: list[str]) -> None:
        super().__init__(f"unknown schema type {name!r}: expected one of {', '.join(known)}")
        self.name = name


class UnknownCompatibilityMode(InvalidRequest):
    """A compatibility mode name that names none of the registry's modes."""

    def __init__(self, name: object, known: list[str]) -> None:
        super().__init__(f"unknown compatibility mode {name!r}: expected one of {', '.join(known)}")
        self.name = name


class SubjectNotFound(NotFound):
    """No subject of that name: its metadata key does not exist."""

    def __init__(self, key: str, subject: str) -> None:
        super().__init__(key, f"schema subject {subject!r} not found")
        self.subject = subject


class SchemaVersionNotFound(NotFound):
    """The subject exists but has no such version (never registered, or deleted)."""

    def __init__(self, key: str, subject: str, version: int) -> None:
        super().__init__(key, f"schema subject {subject!r} has no version {version}")
        self.subject = subject
        self.version = version


class SchemaIdNotFound(NotFound):
    """No subject holds that global schema id."""

    def __init__(self, key: str, schema_id: int) -> None:
        super().__init__(key, f"schema id {schema_id} not found")
        self.schema_id = schema_id


class TopicNotFound(NotFound):
    """A topic to bind does not exist: its root key is missing."""

    def __init__(self, key: str, topic: str) -> None:
        super().__init__(key, f"topic {topic} not found")
        self.topic = topic


class TopicNotBound(NotFound):
    """The topic is bound to no schema subject."""

    def __init__(self, key: str, topic: str) -> None:
        super().__init__(key, f"topic {topic} is bound to no schema subject")
        self.topic = topic


class IncompatibleSchema(MetadataError):
    """A registration refused because the new schema breaks the subject's compatibility mode;
    `reasons` says why, one rule broken against one version each."""

    def __init__(self, subject: str, mode: str, reasons: Sequence[str]) -> None:
        shown = "; ".join(reasons)
        super().__init__(f"schema is not {mode}-compatible with subject {subject!r}: {shown}")
        self.subject = subject
        self.mode = mode
        self.reasons = list(reasons)


class SubjectInUse(MetadataError):
    """A subject that topics are still bound to cannot be deleted; unbind them first."""

    def __init__(self, subject: str, topics: Sequence[str]) -> None:
        super().__init__(
            f"schema subject {subject!r} is bound to {len(topics)} topic(s) "
            f"({', '.join(topics)}): unbind them first"
        )
        self.subject = subject
        self.topics = list(topics)


class RegistryConflict(MetadataError):
    """Concurrent writers changed the keys a write compared on, attempt after attempt.

    Nothing was written; the write may be retried as it is.
    """

    def __init__(self, what: str, attempts: int) -> None:
        super().__init__(
            f"{what}: still conflicting with concurrent writers after {attempts} attempts"
        )
        self.attempts = attempts
