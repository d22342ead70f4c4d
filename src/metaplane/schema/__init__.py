"""The schema registry's engine: parse and validate schema documents, fingerprint them, and
check a new version against earlier ones under a compatibility mode.

    new = parse_schema("Avro", document)          # InvalidSchema, UnknownSchemaType
    result = check(new, [v1, v2], "BackwardTransitive")
    result.ok, result.reasons                     # True, [] — or False and why, rule by rule

Formats: Avro (fastavro), JSON Schema (jsonschema), Protobuf (grpcio-tools' protoc), and
the document-less Bytes, String and Number.
"""

from metaplane.resources import CompatibilityMode
from metaplane.schema._compat import check
from metaplane.schema._errors import InvalidSchema, UnknownCompatibilityMode, UnknownSchemaType
from metaplane.schema._model import (
    CompatibilityResult,
    Incompatibility,
    Schema,
    SchemaType,
    parse_mode,
)
from metaplane.schema._parse import fingerprint, parse_schema

__all__ = [
    "CompatibilityMode",
    "CompatibilityResult",
    "Incompatibility",
    "InvalidSchema",
    "Schema",
    "SchemaType",
    "UnknownCompatibilityMode",
    "UnknownSchemaType",
    "check",
    "fingerprint",
    "parse_mode",
    "parse_schema",
]
