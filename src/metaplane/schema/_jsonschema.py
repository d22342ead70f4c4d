"""JSON Schema: documents checked against their own metaschema by jsonschema, fingerprinted
over canonical JSON (sorted keys, no insignificant whitespace), and compared by inclusion.

A reader's schema is compatible with a writer's when every document valid under the writer
is valid under the reader: Backward asks it of (new, old), Forward of (old, new). The check
is sound but not complete: where it cannot prove inclusion it reports a conflict. The rules,
by the name each conflict carries:

- `type-narrowed`: the writer allows a type the reader does not ("integer" ⊂ "number";
  a missing "type" allows every type; type arrays are sets).
- `enum-narrowed`: a writer with `enum`/`const` is checked value by value with the reader's
  validator; a reader with `enum`/`const` over a writer without one is narrower.
- `property-constrained-in-open-model`: the writer does not list a property and its content
  model is open (additionalProperties absent or true), so the property may hold any value,
  but the reader constrains it. Adding a property under an open model is backward-
  incompatible; removing one is forward-incompatible.
- `property-rejected-by-closed-model`: the writer lists a property, the reader's content model
  is closed (additionalProperties false) and does not. Adding a property under a closed model
  is forward-incompatible; removing one is backward-incompatible.
- `content-model-closed`: the writer allows unlisted properties, the reader rejects them.
- `required-added`: the reader requires a property the writer does not.
- `bound-narrowed`: minimum/maximum (exclusive or not, draft-4 booleans included),
  multipleOf, min/maxLength, min/maxItems, min/maxProperties tighter in the reader.
- `unique-items-added`, `pattern-changed`, `format-changed`: the reader adds uniqueItems,
  or a pattern or format the writer does not have (patterns are compared as text).
- `constraint-added`: the writer accepts anything here (true, {}), the reader does not.
- `nothing-accepted`: the reader is `false` where the writer accepts something.
- `no-branch-accepts`: no branch of the reader's anyOf/oneOf accepts the writer (oneOf's
  exclusivity is not checked).
- `keyword-changed`: a keyword whose effect is not analysed (not, if/then/else,
  patternProperties, prefixItems, tuple items, dependencies, propertyNames, contains,
  unevaluated*, remote $ref, …) is in the reader and not identical in the writer.

Nested objects, array items and additionalProperties schemas are compared recursively;
local `$ref`s are resolved (recursive schemas assume inclusion where they loop back). A
writer's anyOf/oneOf must be included branch by branch; a writer's allOf is merged when its
parts share no keyword, and otherwise one of its parts must be included on its own.
Annotations (title, description, default, examples, $comment, …) never matter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from jsonschema import SchemaError  # type: ignore[import-untyped, unused-ignore]
from jsonschema.validators import (  # type: ignore[import-untyped, unused-ignore]
    Draft202012Validator,
    validator_for,
)

from metaplane.schema._errors import InvalidSchema
from metaplane.schema._format import ParsedDocument, SchemaFormat
from metaplane.schema._model import Conflict

_NUMERIC = ("number", "integer")

# Keywords that restrict instances but whose effect this module does not analyse.
_UNANALYSED = (
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "propertyNames",
    "patternProperties",
    "unevaluatedProperties",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "contentEncoding",
    "contentMediaType",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
)

_ANALYSED = (
    "type",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "minProperties",
    "maxProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
)

_CONSTRAINTS = frozenset(_UNANALYSED + _ANALYSED)

# (keyword, the reader's must be ≤ the writer's) for size bounds.
_SIZE_BOUNDS = {
    "object": (("minProperties", True), ("maxProperties", False)),
    "array": (("minItems", True), ("maxItems", False)),
    "string": (("minLength", True), ("maxLength", False)),
}


@dataclass(frozen=True)
class JsonSchemaModel:
    """The decoded document and a validator of its draft, for checking values against it."""

    root: Any
    validator: Any


def parse(document: str, message_name: str | None) -> ParsedDocument[JsonSchemaModel]:
    root = _decode(document)
    validator_class = _validator_class(root)
    try:
        validator_class.check_schema(root)
    except SchemaError as error:
        raise InvalidSchema("JsonSchema", f"{error.message} (at {error.json_path})") from error
    canonical = json.dumps(root, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ParsedDocument(canonical.encode(), JsonSchemaModel(root, validator_class(root)))


def reader_conflicts(reader: JsonSchemaModel, writer: JsonSchemaModel) -> list[Conflict]:
    """Why a document valid under `writer` may be invalid under `reader`."""
    return _Inclusion(reader, writer).conflicts(reader.root, writer.root, "")


JSON_SCHEMA = SchemaFormat(parse=parse, reader_conflicts=reader_conflicts)


def _decode(document: str) -> Any:
    try:
        root = json.loads(document, parse_constant=_refuse_constant)
    except ValueError as error:
        raise InvalidSchema("JsonSchema", f"not JSON: {error}") from error
    if not isinstance(root, dict | bool):
        raise InvalidSchema("JsonSchema", "a schema is a JSON object or a boolean")
    return root


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python accepts them unless told otherwise.
    raise ValueError(f"{name} is not a JSON value")


def _validator_class(root: Any) -> Any:
    try:
        # None as the default tells "no $schema" or an unknown one apart from a known draft.
        found = validator_for(root, default=cast(Any, None))
    except Exception as error:  # an unhashable $schema, for one
        raise InvalidSchema("JsonSchema", f"unusable $schema: {error}") from error
    if found is not None:
        return found
    if isinstance(root, dict) and "$schema" in root:
        raise InvalidSchema("JsonSchema", f"unknown metaschema {root['$schema']!r}")
    return Draft202012Validator


class _Inclusion:
    """One check that the writer's documents are all valid under the reader."""

    def __init__(self, reader: JsonSchemaModel, writer: JsonSchemaModel) -> None:
        self._reader = reader
        self._writer = writer
        self._assumed: set[tuple[str, str]] = set()

    def conflicts(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        if _same(reader, writer):
            return []
        pair = _ref_pair(reader, writer)
        if pair in self._assumed:
            return []  # a recursive schema looping back: assume what is being proved
        with self._assuming(pair):
            reader = _resolve(reader, self._reader.root)
            writer = _resolve(writer, self._writer.root)
            return self._resolved(reader, writer, path)

    @contextmanager
    def _assuming(self, pair: tuple[str, str] | None) -> Iterator[None]:
        if pair is None:
            yield
            return
        self._assumed.add(pair)
        try:
            yield
        finally:
            self._assumed.discard(pair)

    def _resolved(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        if writer is False or _accepts_all(reader):
            return []
        if reader is False:
            return [_conflict("nothing-accepted", path, "the reader accepts no value here")]
        if _accepts_all(writer):
            return [_conflict("constraint-added", path, "the writer accepts any value here")]
        if "allOf" in writer:
            return self._writer_all_of(reader, writer, path)
        if "anyOf" in writer or "oneOf" in writer:
            return self._writer_any_of(reader, writer, path)
        if "allOf" in reader:
            return self._reader_all_of(reader, writer, path)
        if "anyOf" in reader or "oneOf" in reader:
            return self._reader_any_of(reader, writer, path)
        return self._keywords(reader, writer, path)

    def _writer_all_of(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        parts = [_without(writer, "allOf"), *writer["allOf"]]
        merged = _merged(parts)
        if merged is not None:
            return self.conflicts(reader, merged, path)
        # Each part alone allows more than all of them together: one included part suffices.
        attempts = [self.conflicts(reader, part, path) for part in parts]
        return min(attempts, key=len)

    def _writer_any_of(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        keyword = "anyOf" if "anyOf" in writer else "oneOf"
        rest = _without(writer, keyword)
        conflicts: list[Conflict] = []
        for branch in writer[keyword]:
            merged = _merged([rest, branch])
            conflicts += self.conflicts(reader, branch if merged is None else merged, path)
        return conflicts

    def _reader_all_of(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        conflicts = self.conflicts(_without(reader, "allOf"), writer, path)
        for part in reader["allOf"]:
            conflicts += self.conflicts(part, writer, path)
        return conflicts

    def _reader_any_of(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        keyword = "anyOf" if "anyOf" in reader else "oneOf"
        conflicts = self.conflicts(_without(reader, keyword), writer, path)
        if all(
            self._some_branch_accepts(reader[keyword], variant, path)
            for variant in _by_type(writer)
        ):
            return conflicts
        detail = f"no branch of the reader's {keyword} accepts all the writer allows"
        return [*conflicts, _conflict("no-branch-accepts", path, detail)]

    def _some_branch_accepts(self, branches: list[Any], writer: Any, path: str) -> bool:
        return any(not self.conflicts(branch, writer, path) for branch in branches)

    def _keywords(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        if "enum" in writer or "const" in writer:
            return self._values(reader, writer, path)
        conflicts = _types(reader, writer, path) + _enum_added(reader, path)
        for kind in _kinds_in_common(reader, writer):
            conflicts += self._kind(kind, reader, writer, path)
        return conflicts + _unanalysed(reader, writer, path)

    def _kind(self, kind: str, reader: Any, writer: Any, path: str) -> list[Conflict]:
        conflicts = _size_bounds(kind, reader, writer, path)
        if kind == "object":
            conflicts += self._object(reader, writer, path)
        elif kind == "array":
            conflicts += self._array(reader, writer, path)
        elif kind == "string":
            conflicts += _string(reader, writer, path)
        elif kind == "number":
            conflicts += _number(reader, writer, path)
        return conflicts

    def _values(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        values = writer["enum"] if "enum" in writer else [writer["const"]]
        allowed = self._writer.validator.evolve(schema=writer)
        checker = self._reader.validator.evolve(schema=reader)
        rejected = [v for v in values if allowed.is_valid(v) and not checker.is_valid(v)]
        return [
            _conflict("enum-narrowed", path, f"the writer allows {value!r}, the reader rejects it")
            for value in rejected
        ]

    def _object(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        names = sorted(reader.get("properties", {}).keys() | writer.get("properties", {}).keys())
        conflicts: list[Conflict] = []
        for name in names:
            conflicts += self._property(name, reader, writer, f"{path}/properties/{name}")
        conflicts += self._additional_properties(reader, writer, path)
        return conflicts + _required(reader, writer, path)

    def _property(self, name: str, reader: Any, writer: Any, path: str) -> list[Conflict]:
        reader_property = _property_schema(reader, name)
        writer_property = _property_schema(writer, name)
        listed_by_writer = name in writer.get("properties", {})
        listed_by_reader = name in reader.get("properties", {})
        if writer_property is False:
            return []
        if not listed_by_writer and _accepts_all(writer_property) and listed_by_reader:
            if _accepts_all(reader_property):
                return []
            detail = (
                f"the writer's open content model allows {name!r} with any value; "
                "the reader constrains it"
            )
            return [_conflict("property-constrained-in-open-model", path, detail)]
        if not listed_by_reader and reader_property is False:
            detail = f"the writer allows {name!r}; the reader's closed content model rejects it"
            return [_conflict("property-rejected-by-closed-model", path, detail)]
        return self.conflicts(reader_property, writer_property, path)

    def _additional_properties(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        reader_extra = reader.get("additionalProperties", True)
        writer_extra = writer.get("additionalProperties", True)
        path = f"{path}/additionalProperties"
        if writer_extra is False:
            return []
        if reader_extra is False:
            detail = (
                "the writer allows properties it does not list; "
                "the reader's closed content model rejects them"
            )
            return [_conflict("content-model-closed", path, detail)]
        return self.conflicts(reader_extra, writer_extra, path)

    def _array(self, reader: Any, writer: Any, path: str) -> list[Conflict]:
        reader_items = reader.get("items", True)
        writer_items = writer.get("items", True)
        conflicts: list[Conflict] = []
        if isinstance(reader_items, list) or isinstance(writer_items, list):
            # Tuple forms (draft 4 to 2019-09) are compared as text, like prefixItems.
            if not _same(reader_items, writer_items):
                conflicts.append(_changed("items", path))
        else:
            conflicts += self.conflicts(reader_items, writer_items, f"{path}/items")
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            detail = "the reader requires unique items, the writer does not"
            conflicts.append(_conflict("unique-items-added", f"{path}/uniqueItems", detail))
        return conflicts


def _conflict(rule: str, path: str, detail: str) -> Conflict:
    return Conflict(rule, path or "(root)", detail)


def _changed(keyword: str, path: str) -> Conflict:
    detail = f"the reader's {keyword!r} is not the writer's, and its effect is not analysed"
    return _conflict("keyword-changed", f"{path}/{keyword}", detail)


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _same(reader: Any, writer: Any) -> bool:
    # Identical text proves nothing when a $ref inside points into two different documents.
    text = _canonical(reader)
    return text == _canonical(writer) and '"$ref"' not in text


def _accepts_all(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict) and not schema.keys() & _CONSTRAINTS)


def _without(schema: dict[str, Any], keyword: str) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != keyword}


def _merged(parts: list[Any]) -> dict[str, Any] | None:
    """The parts as one schema, when no keyword appears in two of them; None otherwise."""
    merged: dict[str, Any] = {}
    for part in parts:
        if part is True:
            continue
        if part is False or merged.keys() & part.keys() & _CONSTRAINTS:
            return None
        merged.update(part)
    return merged


def _ref_pair(reader: Any, writer: Any) -> tuple[str, str] | None:
    if isinstance(reader, dict) and isinstance(writer, dict):
        reader_ref, writer_ref = reader.get("$ref"), writer.get("$ref")
        if isinstance(reader_ref, str) and isinstance(writer_ref, str):
            return reader_ref, writer_ref
    return None


def _resolve(schema: Any, root: Any) -> Any:
    """The schema with a local `$ref` at its top replaced by (or combined with) its target."""
    for _ in range(32):  # a chain of references that loops never ends otherwise
        if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
            return schema
        target = _pointer(root, schema["$ref"])
        if target is None:
            return schema
        rest = _without(schema, "$ref")
        schema = target if _accepts_all(rest) else {"allOf": [target, rest]}
    return schema


def _pointer(root: Any, reference: str) -> Any:
    if not reference.startswith("#"):
        return None  # remote references are compared as text
    node = root
    for token in reference[1:].split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def _types_of(schema: Any) -> set[str] | None:
    """The types a schema allows; None when it does not say (every type)."""
    declared = schema.get("type")
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else set(declared)


def _allows(types: set[str] | None, kind: str) -> bool:
    if types is None:
        return True
    return kind in types or (kind == "integer" and "number" in types)


def _by_type(schema: Any) -> list[Any]:
    """A schema with several types as one schema a type, so each can meet its own branch."""
    types = _types_of(schema)
    if types is None or len(types) < 2:
        return [schema]
    return [{**schema, "type": kind} for kind in sorted(types)]


def _types(reader: Any, writer: Any, path: str) -> list[Conflict]:
    reader_types, writer_types = _types_of(reader), _types_of(writer)
    if reader_types is None:
        return []
    if writer_types is None:
        detail = f"the writer allows every type, the reader only {', '.join(sorted(reader_types))}"
        return [_conflict("type-narrowed", f"{path}/type", detail)]
    lost = sorted(kind for kind in writer_types if not _allows(reader_types, kind))
    if not lost:
        return []
    detail = (
        f"the writer allows {', '.join(lost)}, the reader only {', '.join(sorted(reader_types))}"
    )
    return [_conflict("type-narrowed", f"{path}/type", detail)]


def _enum_added(reader: Any, path: str) -> list[Conflict]:
    # Only reached when the writer has no enum or const of its own.
    if "enum" not in reader and "const" not in reader:
        return []
    detail = "the reader accepts a fixed set of values, the writer does not restrict them"
    return [_conflict("enum-narrowed", path, detail)]


def _kinds_in_common(reader: Any, writer: Any) -> list[str]:
    reader_types, writer_types = _types_of(reader), _types_of(writer)
    kinds = ["object", "array", "string"]
    common = [k for k in kinds if _allows(writer_types, k) and _allows(reader_types, k)]
    if any(_allows(writer_types, k) and _allows(reader_types, k) for k in _NUMERIC):
        common.append("number")
    return common


def _size_bounds(kind: str, reader: Any, writer: Any, path: str) -> list[Conflict]:
    conflicts = []
    for keyword, is_floor in _SIZE_BOUNDS.get(kind, ()):
        if keyword not in reader:
            continue
        limit, given = reader[keyword], writer.get(keyword)
        if given is None or (given < limit if is_floor else given > limit):
            detail = f"the reader's {keyword} is {limit}, the writer's {given}"
            conflicts.append(_conflict("bound-narrowed", f"{path}/{keyword}", detail))
    return conflicts


def _string(reader: Any, writer: Any, path: str) -> list[Conflict]:
    conflicts = []
    for keyword, rule in (("pattern", "pattern-changed"), ("format", "format-changed")):
        limit, given = reader.get(keyword), writer.get(keyword)
        if limit is not None and limit != given:
            detail = f"the reader's {keyword} is {limit!r}, the writer's {given!r}"
            conflicts.append(_conflict(rule, f"{path}/{keyword}", detail))
    return conflicts


def _number(reader: Any, writer: Any, path: str) -> list[Conflict]:
    conflicts = []
    for side, bound in (("minimum", _floor), ("maximum", _ceiling)):
        limit, given = bound(reader), bound(writer)
        if limit is not None and not _within(given, limit, side == "minimum"):
            detail = f"the reader's {side} is {_show(limit)}, the writer's {_show(given)}"
            conflicts.append(_conflict("bound-narrowed", f"{path}/{side}", detail))
    return conflicts + _multiple_of(reader, writer, path)


_Bound = tuple[float, bool]  # (value, exclusive)


def _floor(schema: Any) -> _Bound | None:
    # The tighter of two floors is the higher one; at a tie, the exclusive one.
    return max(_bounds(schema, "minimum", "exclusiveMinimum"), default=None)


def _ceiling(schema: Any) -> _Bound | None:
    # The tighter of two ceilings is the lower one; at a tie, the exclusive one.
    candidates = _bounds(schema, "maximum", "exclusiveMaximum")
    return min(candidates, key=lambda b: (b[0], not b[1]), default=None)


def _bounds(schema: Any, inclusive: str, exclusive: str) -> list[_Bound]:
    bounds: list[_Bound] = []
    flag = schema.get(exclusive)
    if inclusive in schema:
        # Draft 4 spells an exclusive bound as a boolean beside the inclusive keyword.
        bounds.append((schema[inclusive], flag is True))
    if isinstance(flag, int | float) and not isinstance(flag, bool):
        bounds.append((flag, True))
    return bounds


def _within(given: _Bound | None, limit: _Bound, is_floor: bool) -> bool:
    if given is None:
        return False
    if given[0] != limit[0]:
        return given[0] > limit[0] if is_floor else given[0] < limit[0]
    return given[1] or not limit[1]


def _show(bound: _Bound | None) -> str:
    if bound is None:
        return "absent"
    return f"{bound[0]} (exclusive)" if bound[1] else str(bound[0])


def _multiple_of(reader: Any, writer: Any, path: str) -> list[Conflict]:
    if "multipleOf" not in reader:
        return []
    step, given = reader["multipleOf"], writer.get("multipleOf")
    # Through decimal text, so that 0.3 is a multiple of 0.1 as its author meant.
    if given is not None and (Fraction(str(given)) / Fraction(str(step))).denominator == 1:
        return []
    detail = f"the reader's multipleOf is {step}, the writer's {given}"
    return [_conflict("bound-narrowed", f"{path}/multipleOf", detail)]


def _required(reader: Any, writer: Any, path: str) -> list[Conflict]:
    added = sorted(set(reader.get("required", ())) - set(writer.get("required", ())))
    return [
        _conflict(
            "required-added",
            f"{path}/properties/{name}",
            f"the reader requires {name!r}, the writer does not",
        )
        for name in added
    ]


def _property_schema(schema: Any, name: str) -> Any:
    """The subschema that governs property `name` of an object valid under `schema`."""
    if name in schema.get("properties", {}):
        return schema["properties"][name]
    for pattern, subschema in schema.get("patternProperties", {}).items():
        if _matches(pattern, name):
            return subschema
    return schema.get("additionalProperties", True)


def _matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False  # an ECMA-262 construct Python lacks: the name is treated as unlisted


def _unanalysed(reader: Any, writer: Any, path: str) -> list[Conflict]:
    return [
        _changed(keyword, path)
        for keyword in _UNANALYSED
        if keyword in reader and not _same(reader[keyword], writer.get(keyword))
    ]
