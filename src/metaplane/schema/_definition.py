"""Between the engine's parsed `Schema` and the `SchemaDefinition` a version stores: building
one from the other, and telling when a new document is identical to a stored one.
"""

from __future__ import annotations

import json
from functools import lru_cache

from metaplane.resources import (
    Avro,
    AvroSchema,
    JsonSchema,
    JsonSchemaDefinition,
    PrimitiveSchema,
    Protobuf,
    ProtobufDefinition,
    SchemaDefinition,
)
from metaplane.schema._model import Schema, SchemaType
from metaplane.schema._parse import parse_schema

# Parsing a stored version (protoc for Protobuf) costs far more than a lookup, and every
# registration reads the subject's versions again.
_PARSED_CACHE_SIZE = 4096

_PRIMITIVES = {
    SchemaType.BYTES: PrimitiveSchema.BYTES,
    SchemaType.STRING: PrimitiveSchema.STRING,
    SchemaType.NUMBER: PrimitiveSchema.NUMBER,
}


def definition_of(schema: Schema) -> SchemaDefinition:
    """The `schema_def` Danube stores for `schema`."""
    if schema.type in _PRIMITIVES:
        return _PRIMITIVES[schema.type]
    if schema.type is SchemaType.AVRO:
        return Avro(AvroSchema(fingerprint=schema.fingerprint, raw_schema=schema.raw))
    if schema.type is SchemaType.JSON_SCHEMA:
        definition = JsonSchemaDefinition(fingerprint=schema.fingerprint, raw_schema=schema.raw)
        return JsonSchema(definition)
    assert schema.message_name is not None  # the Protobuf format always names its message
    return Protobuf(
        ProtobufDefinition(
            fingerprint=schema.fingerprint,
            message_name=schema.message_name,
            raw_proto=schema.raw,
        )
    )


def schema_of(definition: SchemaDefinition) -> Schema:
    """The stored definition parsed again (cached); InvalidSchema if it no longer parses."""
    if isinstance(definition, PrimitiveSchema):
        return _parsed(SchemaType(definition.value), "", None)
    if isinstance(definition, Avro):
        return _parsed(SchemaType.AVRO, definition.schema.raw_schema, None)
    if isinstance(definition, JsonSchema):
        return _parsed(SchemaType.JSON_SCHEMA, definition.schema.raw_schema, None)
    assert isinstance(definition, Protobuf)
    proto = definition.schema
    return _parsed(SchemaType.PROTOBUF, proto.raw_proto, proto.message_name)


@lru_cache(maxsize=_PARSED_CACHE_SIZE)
def _parsed(schema_type: SchemaType, raw: str, message_name: str | None) -> Schema:
    return parse_schema(schema_type, raw, message_name=message_name)


def identical(new: Schema, stored: Schema) -> bool:
    """True when registering `new` would add nothing to `stored`.

    Equal canonical forms are not enough: Avro's Parsing Canonical Form drops `default`,
    `aliases` and `doc`, and a new default is a new version. So the documents themselves are
    compared too, with key order and whitespace normalised away.
    """
    return (
        new == stored
        and new.message_name == stored.message_name
        and _document_form(new) == _document_form(stored)
    )


def _document_form(schema: Schema) -> str:
    if schema.type in (SchemaType.AVRO, SchemaType.JSON_SCHEMA):
        return json.dumps(json.loads(schema.raw), sort_keys=True, separators=(",", ":"))
    # A Protobuf canonical form is the whole descriptor; the scalars have no document.
    return ""
