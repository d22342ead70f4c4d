"""The compatibility matrix: each case is one rule of one format, checked in every mode.

A case lists the subject's history (oldest first) and the new schema; `breaks` is the set of
modes whose verdict must be "incompatible". Three-version cases are built so that the new
schema is compatible with the latest version and not with the first: plain and transitive
modes disagree there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from metaplane.schema import CompatibilityMode, check, parse_schema
from tests.schema.fastavro_oracle import fastavro_resolves

NO_MODE: frozenset[str] = frozenset()
BACKWARD = frozenset({"Backward", "Full", "BackwardTransitive", "FullTransitive"})
FORWARD = frozenset({"Forward", "Full", "ForwardTransitive", "FullTransitive"})
EVERY_MODE = BACKWARD | FORWARD
TRANSITIVE = frozenset({"BackwardTransitive", "ForwardTransitive", "FullTransitive"})


@dataclass(frozen=True)
class Case:
    id: str
    schema_type: str
    history: tuple[str, ...]
    new: str
    breaks: frozenset[str]
    rule: str = ""
    field: str = ""
    new_type: str = ""  # when the new version changes the schema type


# --- Avro -------------------------------------------------------------------------------


def avro(*fields: dict[str, Any], name: str = "Product", **extra: Any) -> str:
    document = {"type": "record", "name": name, "namespace": "shop", **extra}
    document["fields"] = [{"name": "id", "type": "long"}, *fields]
    return json.dumps(document)


def status(*symbols: str, **extra: Any) -> dict[str, Any]:
    enum = {"type": "enum", "name": "Status", "symbols": list(symbols), **extra}
    return {"name": "status", "type": enum}


NAME = {"name": "name", "type": "string"}
NAME_WITH_DEFAULT = {"name": "name", "type": "string", "default": ""}

AVRO_CASES = [
    Case("avro-field-added-with-default", "Avro", (avro(),), avro(NAME_WITH_DEFAULT), NO_MODE),
    Case(
        "avro-field-added-without-default", "Avro", (avro(),), avro(NAME),
        BACKWARD, "missing-field-without-default", "Product.name",
    ),
    Case(
        "avro-field-removed", "Avro", (avro(NAME),), avro(),
        FORWARD, "missing-field-without-default", "Product.name",
    ),
    Case("avro-field-removed-had-default", "Avro", (avro(NAME_WITH_DEFAULT),), avro(), NO_MODE),
    Case(
        "avro-int-to-long-promotion", "Avro",
        (avro({"name": "stock", "type": "int"}),), avro({"name": "stock", "type": "long"}),
        FORWARD, "type-mismatch", "Product.stock",
    ),
    Case(
        "avro-long-to-int-demotion", "Avro",
        (avro({"name": "stock", "type": "long"}),), avro({"name": "stock", "type": "int"}),
        BACKWARD, "type-mismatch", "Product.stock",
    ),
    Case(
        "avro-string-to-bytes", "Avro",
        (avro({"name": "sku", "type": "string"}),), avro({"name": "sku", "type": "bytes"}),
        NO_MODE,
    ),
    Case(
        "avro-enum-symbol-added", "Avro", (avro(status("NEW", "SOLD")),),
        avro(status("NEW", "SOLD", "RETURNED")), FORWARD, "enum-symbol-missing", "Product.status",
    ),
    Case(
        "avro-enum-symbol-added-with-enum-default", "Avro",
        (avro(status("NEW", "SOLD", default="NEW")),),
        avro(status("NEW", "SOLD", "RETURNED", default="NEW")), NO_MODE,
    ),
    Case(
        "avro-enum-symbol-removed", "Avro", (avro(status("NEW", "SOLD", "RETURNED")),),
        avro(status("NEW", "SOLD")), BACKWARD, "enum-symbol-missing", "RETURNED",
    ),
    Case(
        "avro-union-widened", "Avro",
        (avro({"name": "note", "type": ["null", "string"], "default": None}),),
        avro({"name": "note", "type": ["null", "string", "int"], "default": None}),
        FORWARD, "no-union-branch", "Product.note",
    ),
    Case(
        "avro-union-narrowed", "Avro",
        (avro({"name": "note", "type": ["null", "string", "int"], "default": None}),),
        avro({"name": "note", "type": ["null", "string"], "default": None}),
        BACKWARD, "no-union-branch", "Product.note",
    ),
    Case(
        "avro-record-renamed-with-alias", "Avro", (avro(),),
        avro(name="Item", aliases=["Product"]), FORWARD, "name-mismatch", "Product",
    ),
    Case(
        "avro-record-renamed-without-alias", "Avro", (avro(),), avro(name="Item"),
        EVERY_MODE, "name-mismatch", "Item",
    ),
    Case(
        # v2 drops `score`; v3 brings it back as a string with a default: v3 reads v2's data
        # (the default fills in) but not v1's, whose `score` is an int.
        "avro-field-readded-with-another-type", "Avro",
        (avro({"name": "score", "type": "int"}), avro()),
        avro({"name": "score", "type": "string", "default": ""}),
        TRANSITIVE, "type-mismatch", "Product.score",
    ),
]  # fmt: skip

# --- JSON Schema ------------------------------------------------------------------------


def json_object(*, closed: bool = False, required: tuple[str, ...] = (), **properties: Any) -> str:
    document: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"id": {"type": "integer"}, **properties},
    }
    if closed:
        document["additionalProperties"] = False
    if required:
        document["required"] = list(required)
    return json.dumps(document)


EMAIL = {"type": "string"}

JSON_CASES = [
    Case(
        "json-property-added-open-model", "JsonSchema", (json_object(),), json_object(email=EMAIL),
        BACKWARD, "property-constrained-in-open-model", "/properties/email",
    ),
    Case(
        "json-property-added-closed-model", "JsonSchema",
        (json_object(closed=True),), json_object(closed=True, email=EMAIL),
        FORWARD, "property-rejected-by-closed-model", "/properties/email",
    ),
    Case(
        "json-property-removed-open-model", "JsonSchema",
        (json_object(email=EMAIL),), json_object(),
        FORWARD, "property-constrained-in-open-model", "/properties/email",
    ),
    Case(
        "json-property-removed-closed-model", "JsonSchema",
        (json_object(closed=True, email=EMAIL),), json_object(closed=True),
        BACKWARD, "property-rejected-by-closed-model", "/properties/email",
    ),
    Case(
        "json-content-model-closed", "JsonSchema", (json_object(),), json_object(closed=True),
        BACKWARD, "content-model-closed", "/additionalProperties",
    ),
    Case(
        "json-required-grown", "JsonSchema",
        (json_object(email=EMAIL),), json_object(email=EMAIL, required=("email",)),
        BACKWARD, "required-added", "/properties/email",
    ),
    Case(
        "json-required-shrunk", "JsonSchema",
        (json_object(email=EMAIL, required=("email",)),), json_object(email=EMAIL),
        FORWARD, "required-added", "/properties/email",
    ),
    Case(
        "json-type-narrowed-number-to-integer", "JsonSchema",
        (json_object(price={"type": "number"}),), json_object(price={"type": "integer"}),
        BACKWARD, "type-narrowed", "/properties/price",
    ),
    Case(
        "json-type-widened-integer-to-number", "JsonSchema",
        (json_object(price={"type": "integer"}),), json_object(price={"type": "number"}),
        FORWARD, "type-narrowed", "/properties/price",
    ),
    Case(
        "json-type-array-widened-with-null", "JsonSchema",
        (json_object(note={"type": "string"}),), json_object(note={"type": ["string", "null"]}),
        FORWARD, "type-narrowed", "/properties/note",
    ),
    Case(
        "json-unchanged-but-for-layout-and-annotations", "JsonSchema",
        (json_object(email=EMAIL),), json_object(email={"type": "string", "title": "E-mail"}),
        NO_MODE,
    ),
    Case(
        # v2 broke v1 (registered under mode None); v3 only widens v2.
        "json-type-widened-after-a-break", "JsonSchema",
        (json_object(code={"type": "string"}), json_object(code={"type": "integer"})),
        json_object(code={"type": ["integer", "null"]}),
        EVERY_MODE - {"Backward"}, "type-narrowed", "/properties/code",
    ),
    Case(
        # The subject evolved under Backward (v2 widens v1), then moved to Forward: v3
        # narrows v2 (old readers accept it) but v1's readers reject strings.
        "json-type-narrowed-after-a-widening", "JsonSchema",
        (json_object(code={"type": "integer"}), json_object(code={"type": ["integer", "string"]})),
        json_object(code={"type": "string"}),
        EVERY_MODE - {"Forward"}, "type-narrowed", "/properties/code",
    ),
]  # fmt: skip

# JSON Schema keyword by keyword: each one analysed as the constraint it is. `js` writes a
# 2020-12 document unless another draft is named ("" for no $schema: read as draft-07).

DRAFTS = {
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "draft-04": "http://json-schema.org/draft-04/schema#",
}


def js(draft: str = "2020-12", /, **keywords: Any) -> str:
    document = {"$schema": DRAFTS[draft]} if draft else {}
    return json.dumps({**document, **keywords})


OBJECT = {"type": "object"}
ARRAY = {"type": "array"}
ID = {"id": {"type": "integer"}}
IS_CARD = {"properties": {"kind": {"const": "card"}}, "required": ["kind"]}

JSON_KEYWORD_CASES = [
    # not: proved disjoint from what the writer allows.
    Case(
        "json-not-widened", "JsonSchema",
        (js(**{"not": {"type": "number"}}),), js(**{"not": {"type": "integer"}}),
        FORWARD, "not-overlaps", "/not",
    ),
    Case(
        "json-not-added", "JsonSchema",
        (js(type="string"),), js(type="string", **{"not": {"const": ""}}),
        BACKWARD, "not-overlaps", "/not",
    ),
    Case(
        "json-not-of-a-disjoint-type-added", "JsonSchema",
        (js(type="string"),), js(type="string", **{"not": {"type": "integer"}}), NO_MODE,
    ),
    # patternProperties: in the new schema, in the old one, narrowed.
    Case(
        "json-pattern-properties-added-to-closed-model", "JsonSchema",
        (js(**OBJECT, properties=ID, additionalProperties=False),),
        js(**OBJECT, properties=ID, additionalProperties=False,
           patternProperties={"^x-": {"type": "string"}}),
        FORWARD, "property-rejected-by-closed-model", "/additionalProperties",
    ),
    Case(
        "json-pattern-properties-narrowed", "JsonSchema",
        (js(**OBJECT, patternProperties={"^x-": {"type": "string"}}),),
        js(**OBJECT, patternProperties={"^x-": {"type": "string", "maxLength": 3}}),
        BACKWARD, "bound-narrowed", "/patternProperties/^x-/maxLength",
    ),
    Case(
        "json-pattern-property-covers-a-listed-one", "JsonSchema",
        (js(**OBJECT, properties={"x-id": {"type": "string"}}, additionalProperties=False),),
        js(**OBJECT, patternProperties={"^x-": {"type": "string"}}, additionalProperties=False),
        FORWARD, "property-rejected-by-closed-model", "/additionalProperties",
    ),
    # dependencies (draft 7), dependentRequired and dependentSchemas (2019-09 on).
    Case(
        "json-dependencies-removed", "JsonSchema",
        (js("draft-07", **OBJECT, dependencies={"card": ["billing"]}),), js("draft-07", **OBJECT),
        FORWARD, "dependency-added", "/dependencies/card",
    ),
    Case(
        "json-dependent-required-added", "JsonSchema",
        (js(**OBJECT),), js(**OBJECT, dependentRequired={"card": ["billing"]}),
        BACKWARD, "dependency-added", "/dependentRequired/card",
    ),
    Case(
        "json-dependent-schemas-removed", "JsonSchema",
        (js(**OBJECT, dependentSchemas={"card": {"required": ["billing"]}}),), js(**OBJECT),
        FORWARD, "required-added", "/dependentSchemas/card",
    ),
    Case(
        "json-dependent-required-met-by-required", "JsonSchema",
        (js(**OBJECT, required=["card", "billing"]),),
        js(**OBJECT, dependentRequired={"card": ["billing"]}),
        FORWARD, "required-added", "/properties/card",
    ),
    # unevaluatedProperties: false is a closed content model, through allOf too.
    Case(
        "json-unevaluated-properties-property-added", "JsonSchema",
        (js(**OBJECT, properties=ID, unevaluatedProperties=False),),
        js(**OBJECT, properties={**ID, "email": {"type": "string"}}, unevaluatedProperties=False),
        FORWARD, "property-rejected-by-closed-model", "/properties/email",
    ),
    Case(
        "json-unevaluated-properties-through-all-of", "JsonSchema",
        (js(**OBJECT, allOf=[{"properties": ID}], unevaluatedProperties=False),),
        js(**OBJECT, allOf=[{"properties": ID}, {"properties": {"email": {"type": "string"}}}],
           unevaluatedProperties=False),
        FORWARD, "property-rejected-by-closed-model", "/properties/email",
    ),
    Case(
        "json-unevaluated-properties-closes-an-open-model", "JsonSchema",
        (js(**OBJECT, properties=ID),), js(**OBJECT, properties=ID, unevaluatedProperties=False),
        BACKWARD, "content-model-closed", "/unevaluatedProperties",
    ),
    # prefixItems, tuple items and unevaluatedItems.
    Case(
        "json-prefix-items-spelled-out", "JsonSchema",
        (js(**ARRAY, items={"type": "string"}),),
        js(**ARRAY, prefixItems=[{"type": "string"}], items={"type": "string"}), NO_MODE,
    ),
    Case(
        "json-prefix-item-added", "JsonSchema",
        (js(**ARRAY, prefixItems=[{"type": "string"}]),),
        js(**ARRAY, prefixItems=[{"type": "string"}, {"type": "integer"}]),
        BACKWARD, "constraint-added", "/prefixItems/1",
    ),
    Case(
        "json-unevaluated-items-prefix-grown", "JsonSchema",
        (js(**ARRAY, prefixItems=[{"type": "string"}], unevaluatedItems=False),),
        js(**ARRAY, prefixItems=[{"type": "string"}, {"type": "integer"}], unevaluatedItems=False),
        FORWARD, "nothing-accepted", "/unevaluatedItems",
    ),
    Case(
        # No $schema: draft-07, where an items array is a tuple (2020-12 would refuse it).
        "json-undeclared-tuple-items-closed", "JsonSchema",
        (js("", **ARRAY, items=[{"type": "string"}, {"type": "integer"}]),),
        js("", **ARRAY, items=[{"type": "string"}, {"type": "integer"}], additionalItems=False),
        BACKWARD, "nothing-accepted", "/additionalItems",
    ),
    # contains, minContains, maxContains.
    Case(
        "json-min-contains-lowered", "JsonSchema",
        (js(**ARRAY, contains={"type": "integer"}, minContains=2),),
        js(**ARRAY, contains={"type": "integer"}, minContains=1),
        FORWARD, "contains-narrowed", "/contains",
    ),
    Case(
        "json-max-contains-lowered", "JsonSchema",
        (js(**ARRAY, contains={"type": "integer"}, maxContains=3),),
        js(**ARRAY, contains={"type": "integer"}, maxContains=2),
        BACKWARD, "contains-narrowed", "/maxContains",
    ),
    Case(
        "json-contains-met-by-items", "JsonSchema",
        (js(**ARRAY, items={"type": "integer"}, minItems=1),),
        js(**ARRAY, contains={"type": "number"}),
        FORWARD, "constraint-added", "/items",
    ),
    # if / then / else.
    Case(
        "json-else-added", "JsonSchema",
        (js(**OBJECT, **{"if": IS_CARD, "then": {"required": ["number"]}}),),
        js(**OBJECT, **{"if": IS_CARD, "then": {"required": ["number"]},
                        "else": {"required": ["iban"]}}),
        BACKWARD, "required-added", "/else/properties/iban",
    ),
    Case(
        "json-then-relaxed", "JsonSchema",
        (js(**OBJECT, **{"if": IS_CARD, "then": {"required": ["number", "expiry"]}}),),
        js(**OBJECT, **{"if": IS_CARD, "then": {"required": ["number"]}}),
        FORWARD, "required-added", "/then/properties/expiry",
    ),
    # const, enum, format, content.
    Case(
        "json-const-widened-to-enum", "JsonSchema",
        (js(const="a"),), js(enum=["a", "b"]), FORWARD, "enum-narrowed", "(root)",
    ),
    Case(
        "json-format-added", "JsonSchema",
        (js(type="string"),), js(type="string", format="email"),
        BACKWARD, "format-changed", "/format",
    ),
    Case(
        "json-format-widened", "JsonSchema",
        (js(type="string", format="uri"),), js(type="string", format="iri-reference"),
        FORWARD, "format-changed", "/format",
    ),
    Case(
        "json-content-encoding-added", "JsonSchema",
        (js(type="string"),), js(type="string", contentEncoding="base64"),
        BACKWARD, "content-changed", "/contentEncoding",
    ),
    # anyOf, oneOf: a branch for each kind of value; oneOf's branches disjoint from it.
    Case(
        "json-any-of-branch-narrowed", "JsonSchema",
        (js(type=["string", "integer"]),),
        js(anyOf=[{"type": "string", "maxLength": 3}, {"type": "integer"}]),
        BACKWARD, "no-branch-accepts", "(root)",
    ),
    Case(
        "json-one-of-overlapping-branches", "JsonSchema",
        (js(type="integer"),), js(oneOf=[{"type": "integer"}, {"type": "integer", "maximum": 10}]),
        BACKWARD, "one-of-overlap", "/oneOf",
    ),
    Case(
        "json-one-of-disjoint-branches", "JsonSchema",
        (js(type=["integer", "string"]),), js(oneOf=[{"type": "integer"}, {"type": "string"}]),
        NO_MODE,
    ),
    # Counts and names of properties, items, and the drafts' integers.
    Case(
        "json-property-names-narrowed", "JsonSchema",
        (js(**OBJECT),), js(**OBJECT, propertyNames={"maxLength": 3}),
        BACKWARD, "property-names-narrowed", "/propertyNames",
    ),
    Case(
        "json-max-properties-lowered", "JsonSchema",
        (js(**OBJECT, maxProperties=5),), js(**OBJECT, maxProperties=3),
        BACKWARD, "bound-narrowed", "/maxProperties",
    ),
    Case(
        "json-unique-items-added", "JsonSchema",
        (js(**ARRAY, items={"type": "integer"}),),
        js(**ARRAY, items={"type": "integer"}, uniqueItems=True),
        BACKWARD, "unique-items-added", "/uniqueItems",
    ),
    Case(
        "json-pattern-added", "JsonSchema",
        (js(type="string"),), js(type="string", pattern="^[a-z]+$"),
        BACKWARD, "pattern-changed", "/pattern",
    ),
    Case(
        "json-items-added-to-an-open-array", "JsonSchema",
        (js(**ARRAY),), js(**ARRAY, items={"type": "string"}),
        BACKWARD, "constraint-added", "/items",
    ),
    Case(
        "json-draft-04-integer-refuses-1.0", "JsonSchema",
        (js("draft-07", type="integer"),), js("draft-04", type="integer"),
        BACKWARD, "type-narrowed", "/type",
    ),
    Case(
        "json-every-keyword-unchanged", "JsonSchema",
        (js(**OBJECT, properties=ID, patternProperties={"^x-": {"type": "string"}},
            dependentSchemas={"id": {"required": ["id"]}}, dependentRequired={"id": ["id"]},
            propertyNames={"maxLength": 8}, unevaluatedProperties=False,
            **{"if": IS_CARD, "then": {"required": ["id"]}, "else": {"maxProperties": 4},
               "not": {"required": ["forbidden"]}}),),
        js(**OBJECT, properties=ID, patternProperties={"^x-": {"type": "string"}},
           dependentSchemas={"id": {"required": ["id"]}}, dependentRequired={"id": ["id"]},
           propertyNames={"maxLength": 8}, unevaluatedProperties=False,
           **{"if": IS_CARD, "then": {"required": ["id"]}, "else": {"maxProperties": 4},
              "not": {"required": ["forbidden"]}}, title="annotations never matter"),
        NO_MODE,
    ),
    # Transitive: the new version is fine against the latest, not against the first.
    Case(
        "json-min-contains-lowered-twice", "JsonSchema",
        (js(**ARRAY, contains={"type": "integer"}, minContains=2),
         js(**ARRAY, contains={"type": "integer"}, minContains=1)),
        js(**ARRAY, contains={"type": "integer"}, minContains=1, description="v3"),
        frozenset({"ForwardTransitive", "FullTransitive"}), "contains-narrowed", "/contains",
    ),
    Case(
        # v2 leaves email to unevaluatedProperties (integers); v3 lists it as an integer:
        # fine after v2, but v1's writers sent strings.
        "json-unevaluated-property-readded", "JsonSchema",
        (js(**OBJECT, properties={**ID, "email": {"type": "string"}}, unevaluatedProperties=False),
         js(**OBJECT, properties=ID, unevaluatedProperties={"type": "integer"})),
        js(**OBJECT, properties={**ID, "email": {"type": "integer"}},
           unevaluatedProperties={"type": "integer"}),
        TRANSITIVE, "type-narrowed", "/properties/email",
    ),
]  # fmt: skip

# --- Protobuf ---------------------------------------------------------------------------


def proto(body: str, enum: str = "NEW = 0; SOLD = 1; RETURNED = 2;") -> str:
    return f"""
        syntax = "proto3";
        package shop;
        enum Status {{ {enum} }}
        message Product {{
            int64 id = 1;
            Status status = 3;
            {body}
        }}
    """


PROTOBUF_CASES = [
    Case(
        "proto-field-number-reused-with-another-type", "Protobuf",
        (proto("int32 count = 2;"),), proto("string label = 2;"),
        EVERY_MODE, "field-type-changed", "count",
    ),
    Case(
        # Old readers would truncate the new int64 values to int32.
        "proto-field-widened-within-wire-group", "Protobuf",
        (proto("int32 count = 2;"),), proto("int64 count = 2;"),
        FORWARD, "field-type-changed", "count",
    ),
    Case(
        "proto-field-renamed-same-type", "Protobuf",
        (proto("int32 count = 2;"),), proto("int32 quantity = 2;"), NO_MODE,
    ),
    Case(
        "proto-field-removed-without-reserved", "Protobuf",
        (proto("int32 count = 2;"),), proto(""),
        EVERY_MODE, "field-removed-unreserved", "count",
    ),
    Case(
        "proto-field-removed-with-reserved", "Protobuf",
        (proto("int32 count = 2;"),), proto('reserved 2; reserved "count";'), NO_MODE,
    ),
    Case(
        "proto-field-removed-with-number-reserved-only", "Protobuf",
        (proto("int32 count = 2;"),), proto("reserved 2;"),
        EVERY_MODE, "field-removed-unreserved", "name 'count'",
    ),
    Case(
        "proto-enum-value-removed", "Protobuf", (proto(""),), proto("", enum="NEW = 0; SOLD = 1;"),
        EVERY_MODE, "enum-value-removed-unreserved", "shop.Status.RETURNED",
    ),
    Case(
        "proto-enum-value-removed-with-reserved", "Protobuf",
        (proto(""),), proto("", enum='NEW = 0; SOLD = 1; reserved 2; reserved "RETURNED";'),
        BACKWARD, "enum-value-missing", "shop.Status.RETURNED",
    ),
    Case(
        "proto-enum-value-added", "Protobuf",
        (proto(""),), proto("", enum="NEW = 0; SOLD = 1; RETURNED = 2; LOST = 3;"),
        FORWARD, "enum-value-missing", "shop.Status.LOST",
    ),
    Case(
        "proto-message-renamed", "Protobuf",
        (proto(""),), proto("").replace("message Product", "message Item"),
        EVERY_MODE, "message-removed", "shop.Product",
    ),
    Case(
        # v2 removes `count` properly; v3 drops the reservation and reuses 2 for a string:
        # nothing v2 holds conflicts, but v1's data has an int32 there.
        "proto-reserved-number-reused-later", "Protobuf",
        (proto("int32 count = 2;"), proto('reserved 2; reserved "count";')),
        proto("string count = 2;"),
        TRANSITIVE, "field-type-changed", "count",
    ),
]  # fmt: skip

# Oneof membership: a reader's oneof keeps the last of the fields it holds, so the writer must
# never set two of them; and singular / repeated for string, bytes and messages.

PROTOBUF_ONEOF_CASES = [
    Case(
        "proto-two-fields-moved-into-a-new-oneof", "Protobuf",
        (proto("int32 a = 4; string b = 5;"),),
        proto("oneof choice { int32 a = 4; string b = 5; }"),
        BACKWARD, "oneof-field-moved", "shop.Product.choice",
    ),
    Case(
        "proto-field-moved-into-an-existing-oneof", "Protobuf",
        (proto("oneof choice { int32 a = 4; } string b = 5;"),),
        proto("oneof choice { int32 a = 4; string b = 5; }"),
        BACKWARD, "oneof-field-moved", "shop.Product.choice",
    ),
    Case(
        "proto-field-moved-out-of-a-oneof", "Protobuf",
        (proto("oneof choice { int32 a = 4; string b = 5; }"),),
        proto("int32 a = 4; oneof choice { string b = 5; }"),
        FORWARD, "oneof-field-moved", "shop.Product.choice",
    ),
    Case(
        "proto-field-moved-between-oneofs", "Protobuf",
        (proto("oneof x { int32 a = 4; string b = 5; } oneof y { bool c = 6; }"),),
        proto("oneof x { int32 a = 4; } oneof y { string b = 5; bool c = 6; }"),
        EVERY_MODE, "oneof-field-moved", "shop.Product",
    ),
    Case(
        "proto-one-field-made-a-oneof", "Protobuf",
        (proto("int32 a = 4;"),), proto("oneof choice { int32 a = 4; }"), NO_MODE,
    ),
    Case(
        # Confluent's compatible case: one existing field and a new one.
        "proto-one-field-and-a-new-one-made-a-oneof", "Protobuf",
        (proto("int32 a = 4;"),), proto("oneof choice { int32 a = 4; string c = 7; }"), NO_MODE,
    ),
    Case(
        "proto-optional-field-made-a-oneof", "Protobuf",
        (proto("optional int32 a = 4;"),), proto("oneof choice { int32 a = 4; }"), NO_MODE,
    ),
    Case(
        "proto-string-made-repeated", "Protobuf",
        (proto("string note = 4;"),), proto("repeated string note = 4;"),
        FORWARD, "field-cardinality-changed", "shop.Product.note",
    ),
    Case(
        "proto-message-made-singular", "Protobuf",
        (proto("repeated Line lines = 4; message Line { int32 n = 1; }"),),
        proto("Line lines = 4; message Line { int32 n = 1; }"),
        BACKWARD, "field-cardinality-changed", "shop.Product.lines",
    ),
    Case(
        "proto-number-made-repeated", "Protobuf",
        (proto("int32 count = 4;"),), proto("repeated int32 count = 4;"),
        EVERY_MODE, "field-cardinality-changed", "shop.Product.count",
    ),
    Case(
        # v2 put a and b in a oneof (under mode None); v3 adds a field: fine after v2, but
        # v1's writers set a and b together.
        "proto-oneof-after-two-fields", "Protobuf",
        (proto("int32 a = 4; string b = 5;"), proto("oneof choice { int32 a = 4; string b = 5; }")),
        proto("oneof choice { int32 a = 4; string b = 5; } bool c = 6;"),
        frozenset({"BackwardTransitive", "FullTransitive"}), "oneof-field-moved", "choice",
    ),
]  # fmt: skip

# --- Bytes, String, Number, and changes of format ---------------------------------------

SCALAR_CASES = [
    Case("bytes-unchanged", "Bytes", ("",), "", NO_MODE),
    Case("number-unchanged", "Number", ("",), "", NO_MODE),
    Case(
        "bytes-to-string", "Bytes", ("",), "",
        EVERY_MODE, "schema-type-changed", "String", new_type="String",
    ),
    Case(
        "avro-to-json-schema", "Avro", (avro(),), json_object(),
        EVERY_MODE, "schema-type-changed", "JsonSchema", new_type="JsonSchema",
    ),
]  # fmt: skip

CASES = (
    AVRO_CASES
    + JSON_CASES
    + JSON_KEYWORD_CASES
    + PROTOBUF_CASES
    + PROTOBUF_ONEOF_CASES
    + SCALAR_CASES
)


@pytest.mark.parametrize("mode", list(CompatibilityMode), ids=lambda mode: mode.value)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_verdict(case: Case, mode: CompatibilityMode) -> None:
    history = [parse_schema(case.schema_type, document) for document in case.history]
    new = parse_schema(case.new_type or case.schema_type, case.new)

    result = check(new, history, mode)

    expected_ok = mode.value not in case.breaks
    assert result.ok is expected_ok, result.reasons
    if not expected_ok:
        assert any(f"[{case.rule}]" in reason for reason in result.reasons), result.reasons
        assert any(case.field in reason for reason in result.reasons), result.reasons


def test_cases_are_named_uniquely() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", AVRO_CASES, ids=lambda case: case.id)
def test_avro_verdict_agrees_with_fastavro_reader(case: Case) -> None:
    old, new = case.history[-1], case.new
    plain = [check(parse_schema("Avro", new), [parse_schema("Avro", old)], mode).ok
             for mode in (CompatibilityMode.BACKWARD, CompatibilityMode.FORWARD)]  # fmt: skip
    assert plain == [fastavro_resolves(new, old), fastavro_resolves(old, new)]


ONE_VERSION_CASES = [case for case in CASES if len(case.history) == 1]


@pytest.mark.parametrize("mode", list(CompatibilityMode), ids=lambda mode: mode.value)
@pytest.mark.parametrize("case", ONE_VERSION_CASES, ids=lambda case: case.id)
def test_verdict_with_the_rule_buried_under_three_versions(
    case: Case, mode: CompatibilityMode
) -> None:
    """Every one-version rule again, against three versions: the old schema is version 1,
    versions 2 and 3 are already the new one. A plain mode checks version 3 only and finds
    nothing; a transitive mode checks all three and finds the rule, at version 1."""
    schema_type = case.new_type or case.schema_type
    old = parse_schema(case.schema_type, case.history[0])
    new = parse_schema(schema_type, case.new)

    result = check(new, [old, new, new], mode)

    if mode is CompatibilityMode.NONE:
        assert result.ok and result.checked_versions == ()
    elif not mode.transitive:
        assert result.ok, result.reasons
        assert result.checked_versions == (3,)
    else:
        assert result.checked_versions == (1, 2, 3)
        assert result.ok is (mode.value not in case.breaks), result.reasons
    if not result.ok:
        assert {found.version for found in result.incompatibilities} == {1}
        assert any(f"[{case.rule}]" in reason for reason in result.reasons), result.reasons
        assert any(case.field in reason for reason in result.reasons), result.reasons
