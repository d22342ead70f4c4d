"""The schema registry as operations of the CLI and the HTTP API: subjects, versions, by id,
register, check, compatibility (with the subject's metadata version as its ETag), the JSON
Schema draft setting, deprecate, delete, bind and unbind. The documents are those the API
returns and `metaplane schemas … -o json` prints."""

from __future__ import annotations

import json
from typing import Any

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    Avro,
    JsonSchema,
    PrimitiveSchema,
    Protobuf,
    Reader,
    SchemaDefinition,
    SchemaMetadata,
    encode,
)
from metaplane.schema import SchemaRegistry, SchemaType, SubjectNotFound, SubjectVersion
from metaplane.store import Get, MetadataStore

# Documents ----------------------------------------------------------------------------------


def stored_json(value: object) -> Any:
    """A stored value as the JSON the store holds."""
    return json.loads(encode(value))


def type_name(definition: SchemaDefinition) -> str:
    if isinstance(definition, PrimitiveSchema):
        return str(definition.value)
    if isinstance(definition, Avro):
        return SchemaType.AVRO.value
    if isinstance(definition, JsonSchema):
        return SchemaType.JSON_SCHEMA.value
    return SchemaType.PROTOBUF.value


def document_of(definition: SchemaDefinition) -> str:
    if isinstance(definition, Avro | JsonSchema):
        return definition.schema.raw_schema
    if isinstance(definition, Protobuf):
        return definition.schema.raw_proto
    return ""


def subject_summary(metadata: SchemaMetadata) -> dict[str, Any]:
    numbers = [version.version for version in metadata.versions]
    return {
        "subject": metadata.subject,
        "schema_id": metadata.id,
        "compatibility_mode": metadata.compatibility_mode.value,
        "versions": numbers,
        "latest": numbers[-1] if numbers else None,
        "topics_using": metadata.topics_using,
    }


def version_document(found: SubjectVersion) -> dict[str, Any]:
    version = found.version
    return {
        "subject": found.subject,
        "schema_id": found.schema_id,
        "type": type_name(version.schema_def),
        "document": document_of(version.schema_def),
        **stored_json(version),
    }


# Reads --------------------------------------------------------------------------------------


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


async def versions(registry: SchemaRegistry, name: str) -> list[dict[str, Any]]:
    return [stored_json(version) for version in await registry.versions(name)]


async def version(registry: SchemaRegistry, name: str, number: int | None) -> dict[str, Any]:
    """A version of subject `name`, its latest when `number` is None."""
    return version_document(await registry.get(name, number))


async def by_id(registry: SchemaRegistry, schema_id: int, number: int | None) -> dict[str, Any]:
    """A version (the latest by default) of the subject holding global id `schema_id`."""
    return version_document(await registry.get_by_id(schema_id, number))


# Registration and checks --------------------------------------------------------------------


async def register(
    registry: SchemaRegistry,
    name: str,
    schema_type: str,
    document: str,
    *,
    message_name: str | None = None,
    description: str = "",
    tags: list[str] | None = None,
    references: list[str] | None = None,
) -> dict[str, Any]:
    registration = await registry.register(
        name,
        schema_type,
        document,
        message_name=message_name,
        description=description,
        tags=tags or (),
        references=references or (),
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
    references: list[str] | None = None,
) -> dict[str, Any]:
    result = await registry.check(
        name,
        schema_type,
        document,
        mode=mode,
        message_name=message_name,
        references=references or (),
    )
    return {
        "subject": name,
        "compatible": result.ok,
        "mode": result.mode.value,
        "checked_versions": list(result.checked_versions),
        "reasons": result.reasons,
    }


# Settings -----------------------------------------------------------------------------------


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


async def json_schema_draft(registry: SchemaRegistry, name: str | None) -> dict[str, Any]:
    """The draft undeclared JSON Schema documents of subject `name` are read as, or (None)
    those of subjects created from now on."""
    return {"subject": name, "json_schema_draft": await registry.json_schema_draft(name)}


async def set_json_schema_draft(
    registry: SchemaRegistry, name: str | None, draft: str
) -> dict[str, Any]:
    revision = await registry.set_json_schema_draft(draft, name)
    return {**await json_schema_draft(registry, name), "revision": revision}


# Versions and subjects ----------------------------------------------------------------------


async def deprecate(
    registry: SchemaRegistry, name: str, number: int, message: str | None, *, undo: bool = False
) -> dict[str, Any]:
    revision = await registry.deprecate(name, number, message, deprecated=not undo)
    return {"subject": name, "version": number, "deprecated": not undo, "revision": revision}


async def delete(registry: SchemaRegistry, name: str, version: int | None) -> dict[str, Any]:
    if version is None:
        revision = await registry.delete_subject(name)
    else:
        revision = await registry.delete_version(name, version)
    return {"subject": name, "version": version, "revision": revision}


# Topics -------------------------------------------------------------------------------------


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
