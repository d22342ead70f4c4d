"""The schema registry: subjects, versions and global ids in the store (`SchemaRegistry`), and
its engine, which parses, fingerprints and checks documents with each format's own library.

    registry = SchemaRegistry(store)
    registration = await registry.register("orders", "Avro", document)   # one transaction
    registration.version.version, registration.schema_id, registration.revision

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
    InvalidSchema,
    RegistryConflict,
    SchemaIdNotFound,
    SchemaVersionNotFound,
    SubjectInUse,
    SubjectNotFound,
    TopicNotBound,
    TopicNotFound,
    UnknownCompatibilityMode,
    UnknownSchemaType,
)
from metaplane.schema._model import (
    CompatibilityResult,
    Incompatibility,
    Schema,
    SchemaType,
    parse_mode,
)
from metaplane.schema._parse import fingerprint, parse_schema
from metaplane.schema._registry import Registration, SchemaRegistry, SubjectVersion

__all__ = [
    "CompatibilityMode",
    "CompatibilityResult",
    "Incompatibility",
    "IncompatibleSchema",
    "InvalidSchema",
    "Registration",
    "RegistryConflict",
    "Schema",
    "SchemaIdNotFound",
    "SchemaRegistry",
    "SchemaType",
    "SchemaVersionNotFound",
    "SubjectInUse",
    "SubjectNotFound",
    "SubjectVersion",
    "TopicNotBound",
    "TopicNotFound",
    "UnknownCompatibilityMode",
    "UnknownSchemaType",
    "check",
    "fingerprint",
    "parse_mode",
    "parse_schema",
]
