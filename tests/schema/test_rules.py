"""Each format's rules beyond the matrix: nesting, recursion, references, bounds, wire groups.

Each case gives an old and a new schema and the rules broken in each direction: Backward
(the new schema reads the old one's data) and Forward (the old reads the new's).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from metaplane.schema import CompatibilityMode, InvalidSchema, check, parse_schema
from tests.schema.fastavro_oracle import fastavro_resolves

Rules = tuple[str, ...]


def broken(schema_type: str, old: str, new: str, mode: CompatibilityMode) -> list[str]:
    """The rules (with their location) that `new` breaks against `old` in `mode`."""
    result = check(parse_schema(schema_type, new), [parse_schema(schema_type, old)], mode)
    return [f"{i.rule}@{i.location}" for i in result.incompatibilities]


def assert_rules(schema_type: str, old: str, new: str, backward: Rules, forward: Rules) -> None:
    assert broken(schema_type, old, new, CompatibilityMode.BACKWARD) == list(backward)
    assert broken(schema_type, old, new, CompatibilityMode.FORWARD) == list(forward)


# --- Avro -------------------------------------------------------------------------------


def record(*fields: dict[str, Any], name: str = "Order") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


def dimensions(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"name": "dimensions", "type": {"type": "record", "name": "Dims", "fields": [*fields]}}


WIDTH = {"name": "width", "type": "int"}
DEPTH = {"name": "depth", "type": "int"}

AVRO_RULES = [
    ("nested-record-field-added", record(dimensions(WIDTH)), record(dimensions(WIDTH, DEPTH)),
     ("missing-field-without-default@Order.dimensions.depth",), ()),
    ("array-items-promoted", record({"name": "tags", "type": {"type": "array", "items": "int"}}),
     record({"name": "tags", "type": {"type": "array", "items": "long"}}),
     (), ("type-mismatch@Order.tags[]",)),
    ("map-values-changed", record({"name": "attrs", "type": {"type": "map", "values": "string"}}),
     record({"name": "attrs", "type": {"type": "map", "values": "int"}}),
     ("type-mismatch@Order.attrs{}",), ("type-mismatch@Order.attrs{}",)),
    ("fixed-resized", record({"name": "hash", "type": {"type": "fixed", "name": "H", "size": 16}}),
     record({"name": "hash", "type": {"type": "fixed", "name": "H", "size": 32}}),
     ("fixed-size-mismatch@Order.hash",), ("fixed-size-mismatch@Order.hash",)),
    ("field-renamed-with-alias", record({"name": "qty", "type": "int"}),
     record({"name": "quantity", "type": "int", "aliases": ["qty"]}),
     (), ("missing-field-without-default@Order.qty",)),
    ("nullable-made-required", record({"name": "note", "type": ["string", "null"]}),
     record({"name": "note", "type": "string"}),
     ("type-mismatch@Order.note",), ()),
    ("logical-type-added", record({"name": "at", "type": "long"}),
     record({"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}), (), ()),
    ("int-to-double-promotion", record({"name": "price", "type": "int"}),
     record({"name": "price", "type": "double"}), (), ("type-mismatch@Order.price",)),
    ("enum-renamed-with-alias",
     record({"name": "s", "type": {"type": "enum", "name": "S", "symbols": ["A"]}}),
     record({"name": "s",
             "type": {"type": "enum", "name": "T", "symbols": ["A"], "aliases": ["S"]}}),
     (), ("name-mismatch@Order.s",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [case[1:] for case in AVRO_RULES],
    ids=[case[0] for case in AVRO_RULES],
)
def test_avro_rule(old: str, new: str, backward: Rules, forward: Rules) -> None:
    assert_rules("Avro", old, new, backward, forward)


def test_avro_recursive_record_terminates() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "value", "type": "int"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }
    grown = {**node, "fields": [*node["fields"], {"name": "label", "type": "string"}]}
    assert broken("Avro", json.dumps(node), json.dumps(grown), CompatibilityMode.FULL) == [
        "missing-field-without-default@Node.label"
    ]


# --- JSON Schema ------------------------------------------------------------------------


def obj(properties: dict[str, Any], **keywords: Any) -> str:
    return json.dumps({"type": "object", "properties": properties, **keywords})


def address(**zip_keywords: Any) -> dict[str, Any]:
    zip_code = {"type": "string", **zip_keywords}
    return {"address": {"type": "object", "properties": {"zip": zip_code}}}


TAGS_OF = {"tags": {"type": "array", "items": {"type": "number"}}}
INT_TAGS = {"tags": {"type": "array", "items": {"type": "integer"}}}

JSON_RULES = [
    ("nested-object-bound", obj(address()), obj(address(maxLength=5)),
     ("bound-narrowed@/properties/address/properties/zip/maxLength",), ()),
    ("array-items-narrowed", obj(TAGS_OF), obj(INT_TAGS),
     ("type-narrowed@/properties/tags/items/type",), ()),
    ("enum-shrunk", obj({"c": {"enum": ["r", "g", "b"]}}), obj({"c": {"enum": ["r", "g"]}}),
     ("enum-narrowed@/properties/c",), ()),
    ("enum-added", obj({"c": {"type": "string"}}), obj({"c": {"type": "string", "enum": ["r"]}}),
     ("enum-narrowed@/properties/c",), ()),
    ("const-changed", obj({"v": {"const": 1}}), obj({"v": {"const": 2}}),
     ("enum-narrowed@/properties/v",), ("enum-narrowed@/properties/v",)),
    ("minimum-raised", obj({"n": {"type": "number", "minimum": 0}}),
     obj({"n": {"type": "number", "minimum": 1}}), ("bound-narrowed@/properties/n/minimum",), ()),
    ("minimum-made-exclusive", obj({"n": {"type": "number", "minimum": 0}}),
     obj({"n": {"type": "number", "exclusiveMinimum": 0}}),
     ("bound-narrowed@/properties/n/minimum",), ()),
    # 0.3 is no multiple of 0.1 to a validator in binary floating point (jsonschema's among
    # them: see test_float_multiples_are_not_trusted), so only the same step proves it.
    ("multiple-of-coarsened", obj({"n": {"type": "number", "multipleOf": 0.1}}),
     obj({"n": {"type": "number", "multipleOf": 0.3}}),
     ("bound-narrowed@/properties/n/multipleOf",), ("bound-narrowed@/properties/n/multipleOf",)),
    ("multiple-of-coarsened-integers", obj({"n": {"type": "integer", "multipleOf": 2}}),
     obj({"n": {"type": "integer", "multipleOf": 6}}),
     ("bound-narrowed@/properties/n/multipleOf",), ()),
    ("pattern-added", obj({"s": {"type": "string"}}),
     obj({"s": {"type": "string", "pattern": "^[a-z]+$"}}),
     ("pattern-changed@/properties/s/pattern",), ()),
    ("unique-items-added", obj({"t": {"type": "array"}}),
     obj({"t": {"type": "array", "uniqueItems": True}}),
     ("unique-items-added@/properties/t/uniqueItems",), ()),
    ("nullable-through-any-of", obj({"s": {"type": "string"}}),
     obj({"s": {"anyOf": [{"type": "null"}, {"type": "string"}]}}),
     (), ("type-narrowed@/properties/s/type",)),
    ("type-array-meets-any-of", obj({"s": {"type": ["string", "null"]}}),
     obj({"s": {"anyOf": [{"type": "null"}, {"type": "string"}]}}), (), ()),
    ("additional-properties-schema-narrowed", obj({}, additionalProperties={"type": "number"}),
     obj({}, additionalProperties={"type": "integer"}),
     ("type-narrowed@/additionalProperties/type",), ()),
    ("property-made-false", obj({"x": {"type": "string"}}), obj({"x": False}),
     ("nothing-accepted@/properties/x",), ()),
    ("not-added", obj({"x": {"type": "string"}}),
     obj({"x": {"type": "string", "not": {"const": ""}}}),
     ("not-overlaps@/properties/x/not",), ()),
    ("draft4-exclusive-minimum",
     json.dumps({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 0}),
     json.dumps({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 0,
                 "exclusiveMinimum": True}),
     ("bound-narrowed@/minimum",), ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [case[1:] for case in JSON_RULES],
    ids=[case[0] for case in JSON_RULES],
)
def test_json_schema_rule(old: str, new: str, backward: Rules, forward: Rules) -> None:
    assert_rules("JsonSchema", old, new, backward, forward)


def test_json_schema_refs_are_resolved_not_compared_as_text() -> None:
    def with_definition(zip_type: str) -> str:
        return json.dumps({
            "$defs": {"zip": {"type": zip_type}},
            "type": "object",
            "properties": {"zip": {"$ref": "#/$defs/zip"}},
        })  # fmt: skip

    assert_rules(
        "JsonSchema", with_definition("number"), with_definition("integer"),
        ("type-narrowed@/properties/zip/type",), (),
    )  # fmt: skip


def test_json_schema_recursive_ref_terminates() -> None:
    tree = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
    }
    assert_rules("JsonSchema", json.dumps(tree), json.dumps(tree), (), ())


def test_json_schema_recursive_ref_compares_every_level() -> None:
    def tree(leaf: str) -> str:
        children = {"type": "array", "items": {"$ref": "#"}}
        properties = {"name": {"type": leaf}, "children": children}
        return json.dumps({"type": "object", "properties": properties})

    # Found at the root and again one level down, through the recursive reference.
    found = (
        "type-narrowed@/properties/children/items/properties/name/type",
        "type-narrowed@/properties/name/type",
    )
    assert_rules("JsonSchema", tree("string"), tree("number"), found, found)


TWENTY_TWENTY = "https://json-schema.org/draft/2020-12/schema"
TREE = {
    "$schema": TWENTY_TWENTY,
    "$id": "https://example.com/tree",
    "$dynamicAnchor": "node",
    "type": "object",
    "properties": {"data": True, "children": {"type": "array", "items": {"$dynamicRef": "#node"}}},
}
STRICT_TREE = {
    "$schema": TWENTY_TWENTY, "$id": "https://example.com/strict-tree", "$dynamicAnchor": "node",
    "$ref": "tree", "unevaluatedProperties": False,
}  # fmt: skip


def test_json_schema_dynamic_refs_resolve_through_the_dynamic_scope() -> None:
    """2020-12's own example: a strict tree extends a tree through $dynamicRef; every level of
    the strict tree is closed, so it reads less than the tree. The tree is a reference."""
    from metaplane.schema import Dependency, SchemaReference

    tree = parse_schema("JsonSchema", json.dumps(TREE))
    reference = [Dependency(SchemaReference("https://example.com/tree", "tree", 1), tree)]
    strict = parse_schema("JsonSchema", json.dumps(STRICT_TREE), references=reference)
    assert not check(strict, [tree], CompatibilityMode.BACKWARD).ok
    assert check(tree, [strict], CompatibilityMode.BACKWARD).ok
    assert check(strict, [strict], CompatibilityMode.FULL).ok


def test_json_schema_one_of_needs_exclusive_branches() -> None:
    old = json.dumps({"type": ["string", "integer"]})
    overlapping = json.dumps({"oneOf": [{"type": "string"}, {"type": "number"}, {"minimum": 0}]})
    # Strings match the string branch and `minimum` (which ignores strings); non-negative
    # integers match both numeric branches: one conflict for each kind of value.
    assert broken("JsonSchema", old, overlapping, CompatibilityMode.BACKWARD) == [
        "one-of-overlap@/oneOf",
        "one-of-overlap@/oneOf",
    ]


def test_a_stored_schema_whose_ref_resolves_to_nothing_is_refused_as_a_reader() -> None:
    document = json.dumps({"properties": {"a": {"$ref": "https://elsewhere.example/a.json"}}})
    with pytest.raises(InvalidSchema, match="resolves to no document"):
        parse_schema("JsonSchema", document)
    stored = parse_schema("JsonSchema", document, strict=False)  # as a stored version is read
    plain = parse_schema("JsonSchema", json.dumps({"properties": {"a": {"type": "string"}}}))
    result = check(stored, [plain], CompatibilityMode.BACKWARD)
    assert [i.rule for i in result.incompatibilities] == ["reference-unresolved"]
    # As a writer it may hold anything there: a reader that constrains `a` is refused.
    result = check(plain, [stored], CompatibilityMode.BACKWARD)
    assert [i.rule for i in result.incompatibilities] == ["type-narrowed"]


def test_required_and_dependent_schemas_say_nothing_of_non_objects() -> None:
    """Found by the soundness test: a writer's required name triggers its dependent schema
    for objects only; `true` stays valid under the writer and the reader must accept it."""
    dependent = {"$schema": TWENTY_TWENTY, "required": ["a"],
                 "dependentSchemas": {"a": {"type": "null"}}}  # fmt: skip
    writer = json.dumps(dependent)
    reader = json.dumps({"$schema": TWENTY_TWENTY, "type": "null"})
    assert broken("JsonSchema", writer, reader, CompatibilityMode.BACKWARD) == [
        "type-narrowed@/type"
    ]
    closed = json.dumps({**dependent, "type": "object"})  # no object can be written
    assert broken("JsonSchema", closed, reader, CompatibilityMode.BACKWARD) == []


def test_a_reference_that_loops_in_place_is_refused() -> None:
    looping = json.dumps({
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a",
    })  # fmt: skip
    assert broken("JsonSchema", json.dumps({"type": "string"}), looping,
                  CompatibilityMode.BACKWARD) == ["reference-loop@(root)"]  # fmt: skip


def test_a_check_too_deep_to_finish_is_refused() -> None:
    def nested(leaf: str) -> str:
        schema: Any = {"type": leaf}
        for _ in range(60):
            schema = {"type": "object", "properties": {"x": schema}}
        return json.dumps(schema)

    rules = broken("JsonSchema", nested("string"), nested("number"), CompatibilityMode.BACKWARD)
    assert rules and rules[0].startswith("analysis-too-complex@/properties/x/")


@pytest.mark.parametrize("draft", ["draft-04", "draft-06", "draft-07", "2019-09", "2020-12"])
def test_every_keyword_jsonschema_validates_is_analysed(draft: str) -> None:
    """No keyword of the five drafts falls through to `keyword-not-analysed`: that refusal is
    for keywords of drafts to come."""
    from metaplane.schema._json_inclusion import _HANDLED
    from metaplane.schema._json_node import Draft

    assert set(Draft.parse(draft).validator_class.VALIDATORS) <= _HANDLED


def test_float_multiples_are_not_trusted() -> None:
    """Why multipleOf 0.3 does not prove 0.1: jsonschema rejects 0.3 under 0.1."""
    from jsonschema import Draft7Validator  # type: ignore[import-untyped, unused-ignore]

    assert Draft7Validator({"multipleOf": 0.3}).is_valid(0.3)
    assert not Draft7Validator({"multipleOf": 0.1}).is_valid(0.3)


# --- Protobuf ---------------------------------------------------------------------------


def message(body: str, syntax: str = "proto3") -> str:
    return f"""
        syntax = "{syntax}";
        package shop;
        enum Kind {{ A = 0; }}
        message Item {{ optional string id = 1; }}
        message Order {{ {body} }}
    """


PROTOBUF_RULES = [
    ("sint32-to-int32", message("sint32 n = 1;"), message("int32 n = 1;"),
     ("field-type-changed@shop.Order.n",), ("field-type-changed@shop.Order.n",)),
    # One wire encoding, two readings of the sign: 2^31 and above change value.
    ("fixed32-to-sfixed32", message("fixed32 n = 1;"), message("sfixed32 n = 1;"),
     ("field-type-changed@shop.Order.n",), ("field-type-changed@shop.Order.n",)),
    # Every string is bytes; bytes that are not UTF-8 fail as a string.
    ("string-to-bytes", message("string s = 1;"), message("bytes s = 1;"),
     (), ("field-type-changed@shop.Order.s",)),
    # An enum is an int32; proto3's enums are open and keep any int32.
    ("enum-to-int32", message("Kind k = 1;"), message("int32 k = 1;"), (), ()),
    ("int64-to-int32", message("int64 n = 1;"), message("int32 n = 1;"),
     ("field-type-changed@shop.Order.n",), ()),
    ("uint32-to-int32", message("uint32 n = 1;"), message("int32 n = 1;"),
     ("field-type-changed@shop.Order.n",), ("field-type-changed@shop.Order.n",)),
    ("uint32-to-int64", message("uint32 n = 1;"), message("int64 n = 1;"),
     (), ("field-type-changed@shop.Order.n",)),
    ("bool-to-int32", message("bool b = 1;"), message("int32 b = 1;"),
     (), ("field-type-changed@shop.Order.b",)),
    ("sint32-to-sint64", message("sint32 n = 1;"), message("sint64 n = 1;"),
     (), ("field-type-changed@shop.Order.n",)),
    ("int32-to-closed-enum", message("optional int32 k = 1;", "proto2"),
     message("optional Kind k = 1;", "proto2"), ("field-type-changed@shop.Order.k",), ()),
    ("int32-to-double", message("int32 n = 1;"), message("double n = 1;"),
     ("field-type-changed@shop.Order.n",), ("field-type-changed@shop.Order.n",)),
    ("message-type-changed", message("Item x = 1;"), message("Order x = 1;"),
     ("field-type-changed@shop.Order.x",), ("field-type-changed@shop.Order.x",)),
    # A repeated reader reads one string (bytes, message) as one element; a singular reader
    # of repeated data keeps the last one.
    ("singular-to-repeated", message("string s = 1;"), message("repeated string s = 1;"),
     (), ("field-cardinality-changed@shop.Order.s",)),
    ("repeated-to-singular", message("repeated bytes s = 1;"), message("bytes s = 1;"),
     ("field-cardinality-changed@shop.Order.s",), ()),
    ("singular-message-to-repeated", message("Item x = 1;"), message("repeated Item x = 1;"),
     (), ("field-cardinality-changed@shop.Order.x",)),
    # Numbers are packed when repeated: refused both ways.
    ("numeric-singular-to-repeated", message("int32 n = 1;"), message("repeated int32 n = 1;"),
     ("field-cardinality-changed@shop.Order.n",), ("field-cardinality-changed@shop.Order.n",)),
    ("required-field-added", message("optional int32 a = 1;", "proto2"),
     message("optional int32 a = 1; required int32 b = 2;", "proto2"),
     ("required-field-missing@shop.Order.b",), ()),
    ("field-made-required", message("optional int32 a = 1;", "proto2"),
     message("required int32 a = 1;", "proto2"), ("required-field-missing@shop.Order.a",), ()),
    ("map-field-removed", message("map<string, int32> attrs = 1;"), message(""),
     ("field-removed-unreserved@shop.Order.attrs",),
     ("field-removed-unreserved@shop.Order.attrs",)),
    ("enum-removed", message(""), message("").replace("enum Kind { A = 0; }", ""),
     ("enum-removed@shop.Kind",), ("enum-removed@shop.Kind",)),
    ("package-changed", message(""), message("").replace("package shop;", "package store;"),
     ("message-removed@shop.Item", "message-removed@shop.Order", "enum-removed@shop.Kind",
      "message-name-changed@store.Item"),
     ("message-removed@shop.Item", "message-removed@shop.Order", "enum-removed@shop.Kind",
      "message-name-changed@store.Item")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [case[1:] for case in PROTOBUF_RULES],
    ids=[case[0] for case in PROTOBUF_RULES],
)
def test_protobuf_rule(old: str, new: str, backward: Rules, forward: Rules) -> None:
    assert_rules("Protobuf", old, new, backward, forward)


def test_protobuf_message_switched_within_file() -> None:
    document = message("string id = 1;")
    item = parse_schema("Protobuf", document, message_name="Item")
    order = parse_schema("Protobuf", document, message_name="Order")
    result = check(order, [item], CompatibilityMode.BACKWARD)
    assert [i.rule for i in result.incompatibilities] == ["message-name-changed"]


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [case[1:] for case in AVRO_RULES],
    ids=[case[0] for case in AVRO_RULES],
)
def test_avro_rule_agrees_with_fastavro_reader(
    old: str, new: str, backward: Rules, forward: Rules
) -> None:
    assert fastavro_resolves(new, old) == (not backward)
    assert fastavro_resolves(old, new) == (not forward)
