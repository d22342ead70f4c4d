"""Schema references in the store: reading what a version references (its own references'
included, to any depth) from a snapshot, and naming the keys a snapshot still lacks, so that a
write reads them and decides again; and the bookkeeping of `referenced_by`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from metaplane import layout
from metaplane.resources import (
    SchemaConfig,
    SchemaReferencedBy,
    SchemaReferenceEntry,
    SchemaReferences,
    SchemaReferrer,
    SchemaVersion,
)
from metaplane.schema._definition import schema_of
from metaplane.schema._errors import InvalidReference, InvalidSchema, ReferenceNotFound
from metaplane.schema._model import Dependency, Schema, SchemaReference
from metaplane.schema._transact import Snapshot

MAX_DEPTH = 32
"""References of references of … at most this deep (a store that loops is refused)."""

_SPELLING = re.compile(r"(?P<name>[^=]+)=(?P<subject>[^=:]+):(?P<version>[0-9]+)")


def parse_reference(text: str) -> SchemaReference:
    """`NAME=SUBJECT:VERSION`, as the command line takes a reference."""
    found = _SPELLING.fullmatch(text.strip())
    if found is None:
        raise InvalidReference(
            repr(text), "expected NAME=SUBJECT:VERSION, e.g. common.proto=common:1"
        )
    return SchemaReference(found["name"], found["subject"], int(found["version"]))


def checked_references(subject: str, given: Iterable[object]) -> tuple[SchemaReference, ...]:
    """References as given (SchemaReference, (name, subject, version), or NAME=SUBJECT:VERSION),
    checked before any I/O: names unique, subjects and versions valid, not the subject itself."""
    found: list[SchemaReference] = []
    for item in given:
        if isinstance(item, SchemaReference):
            reference = item
        elif isinstance(item, str):
            reference = parse_reference(item)
        elif isinstance(item, tuple) and len(item) == 3:
            reference = SchemaReference(str(item[0]), str(item[1]), _version(item[2], item))
        else:
            raise InvalidReference(repr(item), "expected a SchemaReference or NAME=SUBJECT:VERSION")
        _check(subject, reference)
        found.append(reference)
    names = [reference.name for reference in found]
    for name in {name for name in names if names.count(name) > 1}:
        raise InvalidReference(repr(name), "two references share this name")
    return tuple(found)


def _version(value: object, item: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidReference(repr(item), "a version is a number")
    return value


def _check(subject: str, reference: SchemaReference) -> None:
    if not reference.name.strip():
        raise InvalidReference(str(reference), "the name is empty")
    if reference.subject == subject:
        raise InvalidReference(str(reference), "a schema cannot reference its own subject")
    layout.schema_version(reference.subject, reference.version)  # the names' own rules


def version_field(version: int) -> str:
    """A version as the key of a map value (`references`, `referenced_by`): its canonical
    decimal, checked by the layout (InvalidNumber outside 1 … 2^32 - 1)."""
    layout.schema_version("_", version)
    return str(version)


def entries(references: Sequence[SchemaReference]) -> list[SchemaReferenceEntry]:
    return [
        SchemaReferenceEntry(name=r.name, subject=r.subject, version=r.version) for r in references
    ]


@dataclass
class Dependencies:
    """Resolves references against one snapshot; `missing` collects the keys it lacks."""

    snapshot: Snapshot
    missing: set[str] = field(default_factory=set)

    def draft_of(self, subject: str) -> str | None:
        """The JSON Schema draft the subject's undeclared documents are read as (None: the
        registry's default)."""
        key = layout.schema_config(subject)
        if not self.snapshot.has_read(key):
            self.missing.add(key)
            return None
        config = self.snapshot.value(key, SchemaConfig)
        return None if config is None else config.json_schema_draft

    def references_map(self, subject: str) -> SchemaReferences | None:
        key = layout.schema_references(subject)
        if not self.snapshot.has_read(key):
            self.missing.add(key)
            return None
        return self.snapshot.value(key, SchemaReferences) or {}

    def references_of(self, subject: str, version: int) -> tuple[SchemaReference, ...] | None:
        """The references version `version` of `subject` was registered with."""
        found = self.references_map(subject)
        if found is None:
            return None
        listed = found.get(str(version), [])
        return tuple(SchemaReference(e.name, e.subject, e.version) for e in listed)

    def resolve(
        self, references: Sequence[SchemaReference], depth: int = 0
    ) -> tuple[Dependency, ...] | None:
        """Each reference with its parsed schema; None while keys are missing."""
        resolved = [self._one(reference, depth) for reference in references]
        if any(dependency is None for dependency in resolved):
            return None
        return tuple(dependency for dependency in resolved if dependency is not None)

    def _one(self, reference: SchemaReference, depth: int) -> Dependency | None:
        if depth >= MAX_DEPTH:
            raise InvalidReference(str(reference), f"references nest more than {MAX_DEPTH} deep")
        version_key = layout.schema_version(reference.subject, reference.version)
        draft = self.draft_of(reference.subject)
        inner = self.references_of(reference.subject, reference.version)
        if not self.snapshot.has_read(version_key):
            self.missing.add(version_key)
            return None
        stored = self.snapshot.value(version_key, SchemaVersion)
        if stored is None:
            raise ReferenceNotFound(version_key, reference)
        if inner is None:
            return None
        dependencies = self.resolve(inner, depth + 1)
        if dependencies is None or self.missing:
            return None
        schema = stored_schema(reference.subject, stored, dependencies, draft)
        return Dependency(reference, schema)


def stored_schema(
    subject: str,
    version: SchemaVersion,
    dependencies: tuple[Dependency, ...] = (),
    draft: str | None = None,
) -> Schema:
    """A stored version parsed again (cached); InvalidSchema names it if it no longer parses."""
    try:
        return schema_of(version.schema_def, dependencies, draft)
    except InvalidSchema as error:
        stored = f"version {version.version} of {subject!r} as stored: {error.reason}"
        raise InvalidSchema(error.schema_type, stored) from error


def with_referrer(
    found: SchemaReferencedBy | None, version: int, referrer: SchemaReferrer
) -> SchemaReferencedBy:
    updated = {number: list(referrers) for number, referrers in (found or {}).items()}
    listed = updated.setdefault(version_field(version), [])
    if referrer not in listed:
        listed.append(referrer)
    return updated


def without_referrers(
    found: SchemaReferencedBy | None, subject: str, version: int | None
) -> SchemaReferencedBy:
    """`found` without the entries of `subject` (of one version of it, or of all)."""
    updated: SchemaReferencedBy = {}
    for number, referrers in (found or {}).items():
        kept = [
            r
            for r in referrers
            if r.subject != subject or (version is not None and r.version != version)
        ]
        if kept:
            updated[number] = kept
    return updated


def describe(referrers: Iterable[SchemaReferrer]) -> list[str]:
    return [f"{referrer.subject} version {referrer.version}" for referrer in referrers]
