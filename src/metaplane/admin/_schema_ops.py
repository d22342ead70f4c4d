"""The schema registry as operations of the HTTP API: subjects, versions, by id, register,
check, compatibility (with the subject's metadata version as its ETag), delete, bind and
unbind. The documents are those `metaplane schemas … -o json` prints."""

from __future__ import annotations

from typing import Any

from metaplane import layout
from metaplane.admin._schemas import document_of, stored_json, subject_summary, type_name
from metaplane.layout import TopicName
from metaplane.resources import Reader
from metaplane.schema import SchemaRegistry, SubjectNotFound, SubjectVersion
from metaplane.store import Get, MetadataStore


def version_document(found: SubjectVersion) -> dict[str, Any]:
    version = found.version
    return {
        "subject": found.subject,
        "schema_id": found.schema_id,
        "type": type_name(version.schema_def),
        "document": document_of(version.schema_def),
        **stored_json(version),
    }


async def subjects(registry: SchemaRegistry) -> list[dict[str, Any]]:
    return [subject_summary(await registry.describe(name)) for name in await registry.subjects()]


async def subject(registry: SchemaRegistry, store: MetadataStore, name: str) -> dict[str, Any]:
    """A subject's summary with its metadata version (the ETag of its compatibility)."""
    metadata = await registry.describe(name)
    return {**subject_summary(metadata), "version": await metadata_version(store, name)}


async def metadata_version(store: MetadataStore, name: str) -> int:
    key = layout.schema_metadata(name)
    entry = (await Reader(store).read(Get(key))).entry(key)
    if entry is None:
        raise SubjectNotFound(key, name)
    return entry.version


async def register(
    registry: SchemaRegistry,
    name: str,
    schema_type: str,
    document: str,
    *,
    message_name: str | None = None,
    description: str = "",
    tags: list[str] | None = None,
) -> dict[str, Any]:
    registration = await registry.register(
        name,
        schema_type,
        document,
        message_name=message_name,
        description=description,
        tags=tags or (),
    )
    return {
        "subject": registration.subject,
        "schema_id": registration.schema_id,
        "version": registration.version.version,
        "fingerprint": registration.version.fingerprint,
        "created": registration.created,
        "revision": registration.revision,
    }


async def check(
    registry: SchemaRegistry,
    name: str,
    schema_type: str,
    document: str,
    *,
    mode: str | None = None,
    message_name: str | None = None,
) -> dict[str, Any]:
    result = await registry.check(name, schema_type, document, mode=mode, message_name=message_name)
    return {
        "subject": name,
        "compatible": result.ok,
        "mode": result.mode.value,
        "checked_versions": list(result.checked_versions),
        "reasons": result.reasons,
    }


async def compatibility(
    registry: SchemaRegistry, store: MetadataStore, name: str | None
) -> dict[str, Any]:
    """A subject's mode and its metadata version, or the global default (no version)."""
    if name is None:
        return {"subject": None, "compatibility_mode": (await registry.default_mode()).value}
    mode = await registry.mode(name)
    version = await metadata_version(store, name)
    return {"subject": name, "compatibility_mode": mode.value, "version": version}


async def set_compatibility(
    registry: SchemaRegistry,
    store: MetadataStore,
    name: str | None,
    mode: str,
    expect: int | None = None,
) -> dict[str, Any]:
    """Set a subject's mode (or the default); with `expect`, only over that metadata
    version, compared in the write's own transaction (BadVersion otherwise)."""
    if name is None:
        revision = await registry.set_default_mode(mode)
        return {**await compatibility(registry, store, None), "revision": revision}
    revision = await registry.set_mode(name, mode, expect=expect)
    return {**await compatibility(registry, store, name), "revision": revision}


async def delete(registry: SchemaRegistry, name: str, version: int | None) -> dict[str, Any]:
    if version is None:
        revision = await registry.delete_subject(name)
    else:
        revision = await registry.delete_version(name, version)
    return {"subject": name, "version": version, "revision": revision}


async def bind(
    registry: SchemaRegistry, topic: TopicName, name: str, *, replace: bool = False
) -> dict[str, Any]:
    """Bind a topic to a subject. A topic bound to another subject stays there unless
    `replace` (TopicAlreadyBound): a binding is never moved silently. `previous` is the
    subject the topic was bound to when read just before."""
    previous = await registry.topic_subject(topic)
    revision = await registry.bind_topic(topic, name, replace=replace)
    return {"topic": topic.path, "subject": name, "previous": previous, "revision": revision}


async def unbind(registry: SchemaRegistry, topic: TopicName) -> dict[str, Any]:
    revision = await registry.unbind_topic(topic)
    return {"topic": topic.path, "revision": revision}
