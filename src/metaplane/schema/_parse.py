"""The table of formats, and the one entry point that turns a document into a Schema."""

from __future__ import annotations

import hashlib
from typing import Any

from metaplane.schema._avro import AVRO
from metaplane.schema._errors import InvalidSchema
from metaplane.schema._format import SchemaFormat
from metaplane.schema._jsonschema import JSON_SCHEMA
from metaplane.schema._model import Schema, SchemaType
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


def format_of(schema_type: SchemaType) -> SchemaFormat[Any]:
    return _FORMATS[schema_type]


def parse_schema(
    schema_type: SchemaType | str,
    document: str | bytes,
    *,
    message_name: str | None = None,
) -> Schema:
    """Parse and validate `document` as a schema of `schema_type` (a name or a SchemaType).

    `message_name` picks the message a Protobuf file describes (its first one by default);
    other types ignore it, as Bytes, String and Number ignore the document itself.
    Raises UnknownSchemaType, or InvalidSchema with the format library's message.
    """
    kind = SchemaType.parse(schema_type)
    text = _text(kind, document)
    parsed = format_of(kind).parse(text, message_name)
    return Schema(
        type=kind,
        raw=text,
        canonical_form=parsed.canonical_form,
        fingerprint=fingerprint(parsed.canonical_form),
        message_name=parsed.message_name,
        model=parsed.model,
    )


def fingerprint(canonical_form: bytes) -> str:
    """`sha256:<hex>` of a canonical form, as Danube writes it into the store."""
    return f"sha256:{hashlib.sha256(canonical_form).hexdigest()}"


def _text(kind: SchemaType, document: str | bytes) -> str:
    if isinstance(document, str):
        return document
    try:
        return document.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidSchema(kind.value, f"not UTF-8: {error}") from error
