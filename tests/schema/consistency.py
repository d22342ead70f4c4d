"""What the registry's keys must say together, read from the store at one revision: each
subject's metadata equals its version keys, ids and the id index agree, the counter is ahead of
every id, topic bindings agree with the subjects' `topics_using`, every reference names an
existing version that lists it among its referrers (and the other way round), and no key under
/schemas is outside the layout's table."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from metaplane import layout
from metaplane.layout import KeyKind
from metaplane.resources import (
    SchemaConfig,
    SchemaIdIndex,
    SchemaMetadata,
    SchemaReferencedBy,
    SchemaReferences,
    SchemaVersion,
    decode,
)
from metaplane.store import MetadataStore


@dataclass
class RegistryKeys:
    """The registry's keys, decoded."""

    metadata: dict[str, SchemaMetadata] = field(default_factory=dict)
    versions: dict[str, dict[int, SchemaVersion]] = field(default_factory=lambda: defaultdict(dict))
    index: dict[int, SchemaIdIndex] = field(default_factory=dict)
    counter: int | None = None
    bindings: dict[str, str] = field(default_factory=dict)
    references: dict[str, SchemaReferences] = field(default_factory=dict)
    referenced_by: dict[str, SchemaReferencedBy] = field(default_factory=dict)
    configs: dict[str, SchemaConfig] = field(default_factory=dict)  # "" is the global one


async def read_registry(store: MetadataStore) -> RegistryKeys:
    keys = RegistryKeys()
    schemas = await store.list(layout.schemas_prefix())
    topics = await store.list(layout.topics_prefix(), revision=schemas.revision)
    for entry in [*schemas, *topics]:
        parsed = layout.parse(entry.key)  # a stray key, outside the layout: LayoutError
        if parsed.kind is KeyKind.SCHEMA_METADATA and parsed.subject:
            keys.metadata[parsed.subject] = decode(SchemaMetadata, entry.value)
        elif parsed.kind is KeyKind.SCHEMA_VERSION and parsed.subject and parsed.version:
            keys.versions[parsed.subject][parsed.version] = decode(SchemaVersion, entry.value)
        elif parsed.kind is KeyKind.SCHEMA_BY_ID and parsed.schema_id is not None:
            keys.index[parsed.schema_id] = decode(SchemaIdIndex, entry.value)
        elif parsed.kind is KeyKind.NEXT_SCHEMA_ID:
            keys.counter = decode(int, entry.value)
        elif parsed.kind is KeyKind.TOPIC_SCHEMA_SUBJECT and parsed.topic_name:
            keys.bindings[parsed.topic_name.path] = decode(str, entry.value)
        elif parsed.kind is KeyKind.SCHEMA_REFERENCES and parsed.subject:
            keys.references[parsed.subject] = decode(SchemaReferences, entry.value)
        elif parsed.kind is KeyKind.SCHEMA_REFERENCED_BY and parsed.subject:
            keys.referenced_by[parsed.subject] = decode(SchemaReferencedBy, entry.value)
        elif parsed.kind is KeyKind.SCHEMA_CONFIG and parsed.subject:
            keys.configs[parsed.subject] = decode(SchemaConfig, entry.value)
        elif parsed.kind is KeyKind.DEFAULT_SCHEMA_CONFIG:
            keys.configs[""] = decode(SchemaConfig, entry.value)
    return keys


async def assert_consistent(store: MetadataStore) -> RegistryKeys:
    """Assert every invariant of the registry's keys; return them for further checks."""
    keys = await read_registry(store)
    assert set(keys.versions) <= set(keys.metadata), "version keys of a subject without metadata"
    for subject, metadata in keys.metadata.items():
        assert_subject(subject, metadata, keys.versions.get(subject, {}))
    ids = [metadata.id for metadata in keys.metadata.values()]
    assert len(ids) == len(set(ids)), f"duplicate schema ids {sorted(ids)}"
    assert {i: index.subject for i, index in keys.index.items()} == {
        metadata.id: subject for subject, metadata in keys.metadata.items()
    }
    if ids:
        assert keys.counter is not None and keys.counter > max(ids)
    assert_bindings(keys)
    assert_references(keys)
    return keys


def assert_subject(
    subject: str, metadata: SchemaMetadata, versions: dict[int, SchemaVersion]
) -> None:
    assert metadata.subject == subject
    numbers = [version.version for version in metadata.versions]
    assert numbers == sorted(versions), f"{subject}: metadata {numbers}, keys {sorted(versions)}"
    for version in metadata.versions:
        assert versions[version.version] == version, f"{subject} v{version.version} differs"
    assert numbers, f"{subject} has no version"
    assert metadata.latest_version >= numbers[-1]


def assert_references(found: RegistryKeys) -> None:
    """Every reference names an existing version of another subject, which lists it among
    its referrers; every referrer listed holds that reference; no empty map is kept."""
    edges = set()
    for subject, by_version in found.references.items():
        assert subject in found.metadata, f"references of a subject without metadata: {subject}"
        assert by_version, f"{subject}: an empty references key is kept"
        for number, entries in by_version.items():
            assert int(number) in found.versions[subject], f"{subject}: references of v{number}"
            for entry in entries:
                assert entry.subject != subject
                assert entry.version in found.versions.get(entry.subject, {}), entry
                edges.add((subject, int(number), entry.subject, entry.version))
    listed = set()
    for subject, referrers_by_version in found.referenced_by.items():
        assert referrers_by_version, f"{subject}: an empty referenced_by key is kept"
        for number, referrers in referrers_by_version.items():
            for referrer in referrers:
                listed.add((referrer.subject, referrer.version, subject, int(number)))
    assert edges == listed, f"references {sorted(edges)} != referenced_by {sorted(listed)}"


def assert_bindings(keys: RegistryKeys) -> None:
    using = {
        (topic, subject)
        for subject, metadata in keys.metadata.items()
        for topic in metadata.topics_using
    }
    assert using == set(keys.bindings.items())
