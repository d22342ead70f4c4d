"""The table of formats, and the one entry point that turns a document into a Schema."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from metaplane.schema._avro import AVRO
from metaplane.schema._errors import InvalidSchema
from metaplane.schema._format import ParseContext, SchemaFormat
from metaplane.schema._jsonschema import JSON_SCHEMA
from metaplane.schema._model import Dependency, Schema, SchemaType
from metaplane.schema._protobuf import PROTOBUF
from metaplane.schema._scalar import scalar_format

_FORMATS: dict[SchemaType, SchemaFormat[Any]] = {
    SchemaType.BYTES: scalar_format("bytes"),
    SchemaType.STRING: scalar_format("string"),
    SchemaType.NUMBER: scalar_format("number"),
    SchemaType.AVRO: AVRO,
    SchemaType.JSON_SCHEMA: JSON_SCHEMA,
    SchemaType.PROTOBUF: PROTOBUF,
}

_SCALARS = (SchemaType.BYTES, SchemaType.STRING, SchemaType.NUMBER)


def format_of(schema_type: SchemaType) -> SchemaFormat[Any]:
    return _FORMATS[schema_type]


def parse_schema(
    schema_type: SchemaType | str,
    document: str | bytes,
    *,
    message_name: str | None = None,
    references: Sequence[Dependency] = (),
    json_schema_draft: str | None = None,
    strict: bool = True,
) -> Schema:
    """Parse and validate `document` as a schema of `schema_type` (a name or a SchemaType).

    `message_name` picks the message a Protobuf file describes (its first one by default);
    other types ignore it, as Bytes, String and Number ignore the document itself.
    `references` are the schemas the document references (Protobuf imports, JSON Schema
    `$ref`s to other documents, Avro named types), each already parsed. `json_schema_draft`
    is the draft a JSON Schema document without `$schema` is read as (default draft-07).
    Raises UnknownSchemaType, or InvalidSchema with the format library's message.
    """
    kind = SchemaType.parse(schema_type)
    text = _text(kind, document)
    dependencies = tuple(references)
    context = ParseContext(
        message_name=message_name,
        documents=_documents(kind, dependencies),
        json_schema_draft=json_schema_draft,
        strict=strict,
    )
    parsed = format_of(kind).parse(text, context)
    canonical = parsed.canonical_form + _references_form(dependencies)
    return Schema(
        type=kind,
        raw=text,
        canonical_form=canonical,
        fingerprint=fingerprint(canonical),
        message_name=parsed.message_name,
        model=parsed.model,
        dependencies=dependencies,
    )


def fingerprint(canonical_form: bytes) -> str:
    """`sha256:<hex>` of a canonical form, as Danube writes it into the store."""
    return f"sha256:{hashlib.sha256(canonical_form).hexdigest()}"


def _references_form(dependencies: tuple[Dependency, ...]) -> bytes:
    """What references add to a canonical form: nothing when there are none, so that the
    fingerprint of a schema without references is what it always was."""
    if not dependencies:
        return b""
    named = sorted(
        [d.reference.name, d.reference.subject, d.reference.version] for d in dependencies
    )
    return b"\nreferences:" + json.dumps(named, separators=(",", ":")).encode()


def _documents(kind: SchemaType, dependencies: tuple[Dependency, ...]) -> dict[str, Schema]:
    """Every schema the references reach, by reference name; one name, one schema."""
    if dependencies and kind in _SCALARS:
        raise InvalidSchema(kind.value, f"a {kind.value} schema has no document to reference")
    found: dict[str, Schema] = {}
    names = [dependency.reference.name for dependency in dependencies]
    if len(names) != len(set(names)):
        raise InvalidSchema(kind.value, f"two references share a name: {sorted(names)}")
    pending = list(dependencies)
    while pending:
        dependency = pending.pop()
        reference, schema = dependency.reference, dependency.schema
        if schema.type is not kind:
            raise InvalidSchema(
                kind.value,
                f"reference {reference} is a {schema.type.value} schema: a {kind.value} "
                f"schema can reference only {kind.value} schemas",
            )
        known = found.get(reference.name)
        if known is not None and known != schema:
            raise InvalidSchema(
                kind.value,
                f"the name {reference.name!r} stands for two different schemas among the "
                "references and theirs",
            )
        if known is None:
            found[reference.name] = schema
            pending += schema.dependencies
    return found


def _text(kind: SchemaType, document: str | bytes) -> str:
    if isinstance(document, str):
        return document
    try:
        return document.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidSchema(kind.value, f"not UTF-8: {error}") from error
