"""Parsing: each format's library validates the document, errors are typed, fingerprints are
stable across layout, and type and mode names follow Danube's spellings.
"""

from __future__ import annotations

import hashlib
import json
import types

import pytest
from fastavro.schema import parse_schema as fastavro_parse
from fastavro.schema import to_parsing_canonical_form

import metaplane.schema
from metaplane.schema import (
    CompatibilityMode,
    InvalidSchema,
    SchemaType,
    UnknownCompatibilityMode,
    UnknownSchemaType,
    check,
    parse_mode,
    parse_schema,
)
from metaplane.store import InvalidRequest, MetadataError

AVRO = {
    "type": "record",
    "name": "Product",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id"],
}
PROTO = (
    'syntax = "proto3";\npackage shop;\nmessage Product {\n  int64 id = 1;\n  string name = 2;\n}\n'
)


def test_every_public_name_is_exported() -> None:
    public = {
        name
        for name, value in vars(metaplane.schema).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(metaplane.schema.__all__)


def test_type_values_are_danube_serde_names() -> None:
    assert [t.value for t in SchemaType] == [
        "Bytes", "String", "Number", "Avro", "JsonSchema", "Protobuf",
    ]  # fmt: skip


def test_mode_values_are_danube_spellings() -> None:
    assert [m.value for m in CompatibilityMode] == [
        "None", "Backward", "Forward", "Full",
        "BackwardTransitive", "ForwardTransitive", "FullTransitive",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("avro", SchemaType.AVRO),
        ("AVRO", SchemaType.AVRO),
        ("json", SchemaType.JSON_SCHEMA),
        ("json_schema", SchemaType.JSON_SCHEMA),
        ("JsonSchema", SchemaType.JSON_SCHEMA),
        ("proto", SchemaType.PROTOBUF),
        ("Protobuf", SchemaType.PROTOBUF),
        ("int64", SchemaType.NUMBER),
        ("double", SchemaType.NUMBER),
        ("bytes", SchemaType.BYTES),
        ("String", SchemaType.STRING),
    ],
)
def test_type_names_and_danube_aliases(name: str, expected: SchemaType) -> None:
    assert SchemaType.parse(name) is expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("backward", CompatibilityMode.BACKWARD),
        ("FULL", CompatibilityMode.FULL),
        ("BackwardTransitive", CompatibilityMode.BACKWARD_TRANSITIVE),
        ("FORWARD_TRANSITIVE", CompatibilityMode.FORWARD_TRANSITIVE),
        ("full-transitive", CompatibilityMode.FULL_TRANSITIVE),
        ("None", CompatibilityMode.NONE),
    ],
)
def test_mode_names(name: str, expected: CompatibilityMode) -> None:
    assert parse_mode(name) is expected


@pytest.mark.parametrize("name", ["xml", "", "avro2", 3])
def test_unknown_type_is_refused(name: object) -> None:
    with pytest.raises(UnknownSchemaType, match="unknown schema type") as raised:
        parse_schema(name, "{}")  # type: ignore[arg-type]
    assert isinstance(raised.value, InvalidRequest)
    assert isinstance(raised.value, MetadataError)
    assert "JsonSchema" in str(raised.value)


@pytest.mark.parametrize("name", ["sideways", "Transitive", ""])
def test_unknown_mode_is_refused(name: str) -> None:
    schema = parse_schema("String", "")
    with pytest.raises(UnknownCompatibilityMode, match="unknown compatibility mode") as raised:
        check(schema, [schema], name)
    assert isinstance(raised.value, InvalidRequest)
    assert "BackwardTransitive" in str(raised.value)


BAD_DOCUMENTS = [
    ("avro-not-json", "Avro", '{"type": "record",', "not JSON"),
    ("avro-unknown-type", "Avro", '{"type": "nope"}', "nope"),
    ("avro-default-of-wrong-type", "Avro",
     json.dumps({"type": "record", "name": "P",
                 "fields": [{"name": "a", "type": "int", "default": "x"}]}),
     "Default value"),
    ("avro-fixed-without-size", "Avro", '{"type": "fixed", "name": "F"}', "size"),
    ("avro-duplicate-enum-symbol", "Avro",
     '{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "unique"),
    ("json-not-json", "JsonSchema", '{"type": ', "not JSON"),
    ("json-not-an-object", "JsonSchema", "[1, 2]", "object or a boolean"),
    ("json-bad-type", "JsonSchema", '{"type": "invalid_type"}', "invalid_type"),
    ("json-bad-minimum", "JsonSchema", '{"minimum": "zero"}', "'zero' is not of type 'number'"),
    ("json-unknown-metaschema", "JsonSchema", '{"$schema": "urn:nowhere"}', "unknown metaschema"),
    ("json-nan", "JsonSchema", '{"minimum": NaN}', "NaN"),
    ("proto-syntax-error", "Protobuf", 'syntax = "proto3"; message A { int32 a = 1 }', "line 1:"),
    ("proto-unknown-type", "Protobuf", 'syntax = "proto3"; message A { strin a = 1; }',
     '"strin" is not defined'),
    ("proto-duplicate-number", "Protobuf",
     'syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }', "has already been used"),
    ("proto-missing-import", "Protobuf",
     'syntax = "proto3"; import "shop/other.proto"; message A { int32 a = 1; }', "other.proto"),
    ("proto-no-message", "Protobuf", 'syntax = "proto3"; enum E { Z = 0; }', "defines no message"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schema_type", "document", "library_says"),
    [case[1:] for case in BAD_DOCUMENTS],
    ids=[case[0] for case in BAD_DOCUMENTS],
)
def test_bad_document_is_invalid_schema(schema_type: str, document: str, library_says: str) -> None:
    with pytest.raises(InvalidSchema) as raised:
        parse_schema(schema_type, document)
    assert library_says in str(raised.value)
    assert raised.value.schema_type == schema_type
    assert isinstance(raised.value, InvalidRequest)


def test_library_error_is_the_cause() -> None:
    with pytest.raises(InvalidSchema) as raised:
        parse_schema("Avro", '{"type": "nope"}')
    assert raised.value.__cause__ is not None


def test_document_that_is_not_utf8_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match="not UTF-8"):
        parse_schema("Avro", b'"\xff"')


def test_protobuf_message_not_in_file_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match="no message 'Order'"):
        parse_schema("Protobuf", PROTO, message_name="Order")


@pytest.mark.parametrize("name", [None, "Product", "shop.Product", ".shop.Product"])
def test_protobuf_message_name_is_qualified(name: str | None) -> None:
    assert parse_schema("Protobuf", PROTO, message_name=name).message_name == "shop.Product"


def test_protobuf_imports_well_known_types() -> None:
    document = PROTO.replace(
        "package shop;", 'package shop;\nimport "google/protobuf/timestamp.proto";'
    ).replace("string name = 2;", "google.protobuf.Timestamp at = 2;")
    assert parse_schema("Protobuf", document).message_name == "shop.Product"


# --- fingerprints -----------------------------------------------------------------------


def _sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_avro_fingerprint_is_over_parsing_canonical_form() -> None:
    schema = parse_schema("Avro", json.dumps(AVRO))
    canonical = to_parsing_canonical_form(fastavro_parse(AVRO, _write_hint=False))
    assert schema.fingerprint == _sha256(canonical)


def test_avro_fingerprint_ignores_layout_and_key_order() -> None:
    compact = json.dumps(AVRO, separators=(",", ":"))
    reordered = json.dumps(dict(reversed(list(AVRO.items()))), indent=4)
    assert compact != reordered
    assert parse_schema("Avro", compact).fingerprint == parse_schema("Avro", reordered).fingerprint


def test_json_schema_fingerprint_is_over_sorted_compact_json() -> None:
    pretty = json.dumps(JSON_SCHEMA, indent=2)
    reordered = json.dumps(dict(reversed(list(JSON_SCHEMA.items()))))
    canonical = json.dumps(JSON_SCHEMA, sort_keys=True, separators=(",", ":"))
    first, second = parse_schema("JsonSchema", pretty), parse_schema("JsonSchema", reordered)
    assert first.fingerprint == second.fingerprint == _sha256(canonical)
    assert first == second


def test_protobuf_fingerprint_ignores_layout_and_comments() -> None:
    squeezed = 'syntax="proto3";package shop;message Product{int64 id=1;string name=2;}'
    commented = "// the catalogue\n" + PROTO.replace("int64 id = 1;", "int64   id = 1; // key")
    fingerprints = {
        parse_schema("Protobuf", doc).fingerprint for doc in (PROTO, squeezed, commented)
    }
    assert len(fingerprints) == 1


@pytest.mark.parametrize(
    ("schema_type", "document", "changed"),
    [
        ("Avro", json.dumps(AVRO), json.dumps(AVRO).replace('"long"', '"int"')),
        (
            "JsonSchema",
            json.dumps(JSON_SCHEMA),
            json.dumps(JSON_SCHEMA).replace('"id"]', '"name"]'),
        ),
        ("Protobuf", PROTO, PROTO.replace("string name", "bytes name")),
    ],
    ids=["avro", "json-schema", "protobuf"],
)
def test_a_different_schema_has_a_different_fingerprint(
    schema_type: str, document: str, changed: str
) -> None:
    assert parse_schema(schema_type, document) != parse_schema(schema_type, changed)
    assert (
        parse_schema(schema_type, document).fingerprint
        != parse_schema(schema_type, changed).fingerprint
    )


def test_protobuf_fingerprint_names_the_message() -> None:
    document = PROTO + "message Order { int64 id = 1; }\n"
    product = parse_schema("Protobuf", document, message_name="Product")
    order = parse_schema("Protobuf", document, message_name="Order")
    assert product.fingerprint != order.fingerprint


@pytest.mark.parametrize("schema_type", ["Bytes", "String", "Number"])
def test_scalar_fingerprint_is_over_the_type_name(schema_type: str) -> None:
    schema = parse_schema(schema_type, "ignored, as in Danube")
    assert schema.fingerprint == _sha256(schema_type.lower())
    assert schema == parse_schema(schema_type, b"")
