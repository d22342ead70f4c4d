"""The schema registry: subjects, versions and global ids in the store (`SchemaRegistry`), and
its engine, which parses, fingerprints and checks documents with each format's own library.

    registry = SchemaRegistry(store)
    registration = await registry.register("orders", "Avro", document)   # one transaction
    registration.version.version, registration.schema_id, registration.revision
    await registry.register("orders-pb", "Protobuf", proto,               # with an import
                            references=["common/money.proto=common-money:1"])

    new = parse_schema("Avro", document)          # InvalidSchema, UnknownSchemaType
    result = check(new, [v1, v2], "BackwardTransitive")
    result.ok, result.reasons                     # True, [] — or False and why, rule by rule

Formats: Avro (fastavro), JSON Schema (jsonschema), Protobuf (grpcio-tools' protoc), and
the document-less Bytes, String and Number.
"""

from metaplane.resources import CompatibilityMode
from metaplane.schema._compat import check
from metaplane.schema._errors import (
    IncompatibleSchema,
    InvalidReference,
    InvalidSchema,
    ReferenceNotFound,
    RegistryConflict,
    SchemaIdNotFound,
    SchemaReferenced,
    SchemaVersionNotFound,
    SubjectInUse,
    SubjectNotFound,
    SubjectTooLarge,
    TopicAlreadyBound,
    TopicNotBound,
    TopicNotFound,
    UnknownCompatibilityMode,
    UnknownJsonSchemaDraft,
    UnknownSchemaType,
)
from metaplane.schema._jsonschema import parse_draft
from metaplane.schema._model import (
    CompatibilityResult,
    Dependency,
    Incompatibility,
    Schema,
    SchemaReference,
    SchemaType,
    parse_mode,
)
from metaplane.schema._parse import fingerprint, parse_schema
from metaplane.schema._references import parse_reference
from metaplane.schema._registry import Registration, SchemaRegistry, SubjectVersion

__all__ = [
    "CompatibilityMode",
    "CompatibilityResult",
    "Dependency",
    "Incompatibility",
    "IncompatibleSchema",
    "InvalidReference",
    "InvalidSchema",
    "ReferenceNotFound",
    "Registration",
    "RegistryConflict",
    "Schema",
    "SchemaIdNotFound",
    "SchemaReference",
    "SchemaReferenced",
    "SchemaRegistry",
    "SchemaType",
    "SchemaVersionNotFound",
    "SubjectInUse",
    "SubjectNotFound",
    "SubjectTooLarge",
    "SubjectVersion",
    "TopicAlreadyBound",
    "TopicNotBound",
    "TopicNotFound",
    "UnknownCompatibilityMode",
    "UnknownJsonSchemaDraft",
    "UnknownSchemaType",
    "check",
    "fingerprint",
    "parse_draft",
    "parse_mode",
    "parse_reference",
    "parse_schema",
]
