"""The errors of the schema registry and its engine, rooted in the store contract's tree.

    MetadataError
    ├── NotFound
    │   ├── SubjectNotFound            no subject of that name
    │   ├── SchemaVersionNotFound      the subject has no such version
    │   ├── ReferenceNotFound          a reference names a version that does not exist
    │   ├── SchemaIdNotFound           no subject holds that global schema id
    │   ├── TopicNotFound              a binding names a topic that does not exist
    │   └── TopicNotBound              the topic is bound to no subject
    ├── AlreadyExists
    │   └── TopicAlreadyBound          the topic is bound to another subject (no replace)
    ├── BadVersion                     a subject's metadata is not at the version expected
    ├── IncompatibleSchema             the new schema breaks the subject's mode (with reasons)
    ├── SubjectInUse                   topics are still bound to the subject being deleted
    ├── SchemaReferenced               other versions reference the version being deleted
    ├── RegistryConflict               concurrent writers won every attempt; nothing written
    └── InvalidRequest
        ├── InvalidSchema              a document its format's own library rejects
        ├── InvalidReference           a reference that cannot be one (its own subject, …)
        ├── UnknownSchemaType          a type name that is none of the registry's types
        ├── UnknownCompatibilityMode   a mode name that is none of the registry's modes
        ├── UnknownJsonSchemaDraft     a draft name that is none of JSON Schema's drafts
        └── ValueTooLarge
            └── SubjectTooLarge        the subject's history would not fit in one value

Nothing is written when any of them is raised. The engine's errors carry the library's own
message; the library's exception is their __cause__.
"""

from __future__ import annotations

from collections.abc import Sequence

from metaplane.store import (
    AlreadyExists,
    InvalidRequest,
    MetadataError,
    NotFound,
    ValueTooLarge,
)


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


class InvalidReference(InvalidRequest):
    """A reference that cannot be made: to its own subject, of another schema type, a name
    given twice, or a malformed NAME=SUBJECT:VERSION."""

    def __init__(self, reference: object, message: str) -> None:
        super().__init__(f"invalid reference {reference}: {message}")
        self.reference = reference


class SubjectTooLarge(ValueTooLarge):
    """A registration (or another write) that would push the subject's metadata past the
    store's value limit (seed 001 keeps every version inside `/schemas/{subject}/metadata`),
    or the write that carries it past what one request may carry."""

    def __init__(
        self, subject: str, key: str, size: int, limit: int, versions: int, what: str = ""
    ) -> None:
        what = what or f"its metadata ({key}) would hold {versions} version(s) in"
        InvalidRequest.__init__(
            self,
            f"schema subject {subject!r} is full: with this write {what} {size:,} bytes, above "
            f"the limit of {limit:,} bytes. Delete versions no producer or consumer uses "
            f"(metaplane schemas delete {subject} -v N), or register the schema under a new "
            "subject",
        )
        self.key = key
        self.size = size
        self.limit = limit
        self.subject = subject
        self.versions = versions


class UnknownJsonSchemaDraft(InvalidRequest):
    """A JSON Schema draft name that names none of the drafts the registry reads."""

    def __init__(self, name: object, known: list[str]) -> None:
        super().__init__(f"unknown JSON Schema draft {name!r}: expected one of {', '.join(known)}")
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


class ReferenceNotFound(NotFound):
    """A reference names a subject or version that does not exist."""

    def __init__(self, key: str, reference: object) -> None:
        super().__init__(key, f"reference {reference}: no such schema version")
        self.reference = reference


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


class TopicAlreadyBound(AlreadyExists):
    """A topic bound to another subject is never moved off it silently: the binding must be
    replaced explicitly (`bind_topic(…, replace=True)`), or the topic unbound first."""

    def __init__(self, key: str, topic: str, subject: str, wanted: str) -> None:
        super().__init__(
            key,
            f"topic {topic} is bound to schema subject {subject!r}: replace that binding "
            f"explicitly to bind it to {wanted!r}, or unbind it first",
        )
        self.topic = topic
        self.subject = subject
        self.wanted = wanted


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


class SchemaReferenced(MetadataError):
    """A version other versions reference (directly) cannot be deleted; delete them first."""

    def __init__(self, subject: str, version: int, referrers: Sequence[str]) -> None:
        shown = ", ".join(referrers)
        super().__init__(
            f"version {version} of schema subject {subject!r} is referenced by {shown}: "
            "delete those versions first"
        )
        self.subject = subject
        self.version = version
        self.referrers = list(referrers)


class RegistryConflict(MetadataError):
    """Concurrent writers changed the keys a write compared on, attempt after attempt.

    Nothing was written; the write may be retried as it is.
    """

    def __init__(self, what: str, attempts: int) -> None:
        super().__init__(
            f"{what}: still conflicting with concurrent writers after {attempts} attempts"
        )
        self.attempts = attempts
