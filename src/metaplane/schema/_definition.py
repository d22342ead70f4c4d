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
from metaplane.schema._model import Dependency, Schema, SchemaType
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


def schema_of(
    definition: SchemaDefinition,
    dependencies: tuple[Dependency, ...] = (),
    json_schema_draft: str | None = None,
) -> Schema:
    """The stored definition parsed again (cached), with the schemas its references resolved
    to and the draft its subject reads undeclared JSON Schema documents as; InvalidSchema if
    it no longer parses. A stored document is read leniently: a `$ref` that resolves to
    nothing is left to the compatibility check, which refuses to vouch for it."""
    if isinstance(definition, PrimitiveSchema):
        return _parsed(SchemaType(definition.value), "", None, (), None)
    if isinstance(definition, Avro):
        raw = definition.schema.raw_schema
        return _parsed(SchemaType.AVRO, raw, None, dependencies, None)
    if isinstance(definition, JsonSchema):
        raw = definition.schema.raw_schema
        return _parsed(SchemaType.JSON_SCHEMA, raw, None, dependencies, json_schema_draft)
    assert isinstance(definition, Protobuf)
    proto = definition.schema
    return _parsed(SchemaType.PROTOBUF, proto.raw_proto, proto.message_name, dependencies, None)


@lru_cache(maxsize=_PARSED_CACHE_SIZE)
def _parsed(
    schema_type: SchemaType,
    raw: str,
    message_name: str | None,
    dependencies: tuple[Dependency, ...],
    json_schema_draft: str | None,
) -> Schema:
    return parse_schema(
        schema_type,
        raw,
        message_name=message_name,
        references=dependencies,
        json_schema_draft=json_schema_draft,
        strict=False,
    )


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


def identical_by_fingerprint(new: Schema, stored: SchemaDefinition, fingerprint: str) -> bool:
    """`identical`, for a stored version with references: its fingerprint is ours (the
    registry computed it, references included), so it stands for its canonical form."""
    if new.fingerprint != fingerprint or type_of(stored) is not new.type:
        return False
    message_name = stored.schema.message_name if isinstance(stored, Protobuf) else None
    raw = _raw(stored)
    return new.message_name == message_name and _document_form(new) == _form(new.type, raw)


def type_of(definition: SchemaDefinition) -> SchemaType:
    if isinstance(definition, PrimitiveSchema):
        return SchemaType(definition.value)
    if isinstance(definition, Avro):
        return SchemaType.AVRO
    if isinstance(definition, JsonSchema):
        return SchemaType.JSON_SCHEMA
    return SchemaType.PROTOBUF


def _raw(definition: SchemaDefinition) -> str:
    if isinstance(definition, Avro | JsonSchema):
        return definition.schema.raw_schema
    if isinstance(definition, Protobuf):
        return definition.schema.raw_proto
    return ""


def _document_form(schema: Schema) -> str:
    return _form(schema.type, schema.raw)


def _form(schema_type: SchemaType, raw: str) -> str:
    if schema_type in (SchemaType.AVRO, SchemaType.JSON_SCHEMA):
        return json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"))
    # A Protobuf canonical form is the whole descriptor; the scalars have no document.
    return ""
