"""Avro: documents parsed by fastavro, fingerprinted over Avro's Parsing Canonical Form, and
compared with the "Schema Resolution" rules of the Avro specification (reader vs writer).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastavro.schema import parse_schema, to_parsing_canonical_form

from metaplane.schema._errors import InvalidSchema
from metaplane.schema._format import ParseContext, ParsedDocument, SchemaFormat
from metaplane.schema._model import Conflict

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

# Writer type → reader types it may be promoted to (the specification's list).
_PROMOTIONS: Mapping[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

_Assumed = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class AvroModel:
    """A fastavro-parsed schema (names fully qualified) and its named types by full name."""

    schema: Any
    named: Mapping[str, Any]


def parse(document: str, context: ParseContext) -> ParsedDocument[AvroModel]:
    try:
        decoded = json.loads(document)
    except json.JSONDecodeError as error:
        raise InvalidSchema("Avro", f"not JSON: {error}") from error
    # A reference brings the named types its schema defines (Confluent's Avro references).
    named: dict[str, Any] = {}
    for referenced_schema in context.documents.values():
        assert isinstance(referenced_schema.model, AvroModel)
        named.update(referenced_schema.model.named)
    referenced = dict(named)
    try:
        schema = parse_schema(decoded, named, _write_hint=False)
        written_out = _inlined(schema, referenced, set()) if referenced else schema
        canonical = to_parsing_canonical_form(written_out)
    # fastavro signals malformed shapes with KeyError, TypeError, … besides its own errors.
    except Exception as error:
        raise InvalidSchema("Avro", f"{type(error).__name__}: {error}") from error
    return ParsedDocument(canonical.encode(), AvroModel(schema, named))


def _inlined(schema: Any, referenced: Mapping[str, Any], defined: set[str]) -> Any:
    """`schema` with each named type a reference brings written out where it is first used,
    as Avro's Parsing Canonical Form writes a named type (fastavro's parser, which computes
    the form, knows only the types a schema defines itself)."""
    if isinstance(schema, str):
        if schema in referenced and schema not in defined:
            defined.add(schema)
            return _inlined(referenced[schema], referenced, defined)
        return schema
    if isinstance(schema, list):
        return [_inlined(branch, referenced, defined) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    if "name" in schema and schema.get("type") in ("record", "error", "enum", "fixed"):
        defined.add(schema["name"])
    inlined = dict(schema)
    if "fields" in schema:
        inlined["fields"] = [
            {**field, "type": _inlined(field["type"], referenced, defined)}
            for field in schema["fields"]
        ]
    for key in ("items", "values"):
        if key in schema:
            inlined[key] = _inlined(schema[key], referenced, defined)
    if isinstance(schema.get("type"), dict | list):
        inlined["type"] = _inlined(schema["type"], referenced, defined)
    return inlined


def reader_conflicts(reader: AvroModel, writer: AvroModel) -> list[Conflict]:
    """Why data written with `writer` may fail to resolve against `reader`."""
    return _Resolution(reader, writer).conflicts(reader.schema, writer.schema, "", frozenset())


AVRO = SchemaFormat(parse=parse, reader_conflicts=reader_conflicts)


class _Resolution:
    """One resolution of a reader's schema against a writer's, both walked together."""

    def __init__(self, reader: AvroModel, writer: AvroModel) -> None:
        self._reader_named = reader.named
        self._writer_named = writer.named

    def conflicts(self, reader: Any, writer: Any, path: str, assumed: _Assumed) -> list[Conflict]:
        reader = self._reader_named.get(reader, reader) if isinstance(reader, str) else reader
        writer = self._writer_named.get(writer, writer) if isinstance(writer, str) else writer
        if isinstance(writer, list):
            return self._writer_union(reader, writer, path, assumed)
        if isinstance(reader, list):
            return self._reader_union(reader, writer, path, assumed)
        reader_kind, writer_kind = _kind(reader), _kind(writer)
        if reader_kind != writer_kind:
            return _promotion(reader, writer, path)
        if reader_kind == "record":
            return self._record(reader, writer, path, assumed)
        if reader_kind == "array":
            return self.conflicts(reader["items"], writer["items"], f"{path}[]", assumed)
        if reader_kind == "map":
            return self.conflicts(reader["values"], writer["values"], f"{path}{{}}", assumed)
        if reader_kind == "enum":
            return _enum(reader, writer, path)
        if reader_kind == "fixed":
            return _fixed(reader, writer, path)
        return []

    def _writer_union(
        self, reader: Any, branches: list[Any], path: str, assumed: _Assumed
    ) -> list[Conflict]:
        # Every branch the writer may have chosen must resolve.
        return [
            conflict
            for branch in branches
            for conflict in self.conflicts(reader, branch, path, assumed)
        ]

    def _reader_union(
        self, branches: list[Any], writer: Any, path: str, assumed: _Assumed
    ) -> list[Conflict]:
        # The specification takes the first matching branch; like Java's checker (and so
        # Confluent's) we accept any branch that resolves.
        if any(not self.conflicts(branch, writer, path, assumed) for branch in branches):
            return []
        return [
            Conflict(
                "no-union-branch",
                path or "(root)",
                f"no branch of the reader's union {_describe(branches)} can read "
                f"the writer's {_describe(writer)}",
            )
        ]

    def _record(self, reader: Any, writer: Any, path: str, assumed: _Assumed) -> list[Conflict]:
        path = path or _short_name(reader["name"])
        if not _names_match(reader, writer):
            return [_renamed(reader, writer, path)]
        pair = (reader["name"], writer["name"])
        if pair in assumed:
            return []  # a recursive type: resolving it again leads back here
        assumed = assumed | {pair}
        writer_fields = {field["name"]: field for field in writer.get("fields", [])}
        conflicts: list[Conflict] = []
        for field in reader.get("fields", []):
            conflicts += self._field(field, writer_fields, f"{path}.{field['name']}", assumed)
        return conflicts

    def _field(
        self, field: Any, writer_fields: Mapping[str, Any], path: str, assumed: _Assumed
    ) -> list[Conflict]:
        source = next(
            (
                writer_fields[name]
                for name in (field["name"], *field.get("aliases", ()))
                if name in writer_fields
            ),
            None,
        )
        if source is not None:
            return self.conflicts(field["type"], source["type"], path, assumed)
        if "default" in field:
            return []
        return [
            Conflict(
                "missing-field-without-default",
                path,
                f"the reader's field {field['name']!r} ({_describe(field['type'])}) is absent "
                "from the writer's schema and has no default",
            )
        ]


def _kind(schema: Any) -> str:
    """`record`, `enum`, `array`, …, or the primitive (logical types resolve as their base)."""
    if isinstance(schema, dict):
        return _kind(schema["type"])
    # A protocol's error is a record by another keyword.
    return "record" if schema == "error" else str(schema)


def _promotion(reader: Any, writer: Any, path: str) -> list[Conflict]:
    if _kind(reader) in _PROMOTIONS.get(_kind(writer), frozenset()):
        return []
    return [
        Conflict(
            "type-mismatch",
            path or "(root)",
            f"the reader's {_describe(reader)} cannot read the writer's {_describe(writer)}",
        )
    ]


def _enum(reader: Any, writer: Any, path: str) -> list[Conflict]:
    if not _names_match(reader, writer):
        return [_renamed(reader, writer, path)]
    missing = [symbol for symbol in writer["symbols"] if symbol not in reader["symbols"]]
    if not missing or "default" in reader:
        return []
    return [
        Conflict(
            "enum-symbol-missing",
            path or _short_name(reader["name"]),
            f"enum {reader['name']} has no symbol {', '.join(missing)} and no default "
            "to read it as",
        )
    ]


def _fixed(reader: Any, writer: Any, path: str) -> list[Conflict]:
    if not _names_match(reader, writer):
        return [_renamed(reader, writer, path)]
    if reader["size"] == writer["size"]:
        return []
    return [
        Conflict(
            "fixed-size-mismatch",
            path or _short_name(reader["name"]),
            f"fixed {reader['name']} is {reader['size']} bytes for the reader, "
            f"{writer['size']} for the writer",
        )
    ]


def _names_match(reader: Any, writer: Any) -> bool:
    """Same unqualified name, or the writer's full name is one of the reader's aliases."""
    if _short_name(reader["name"]) == _short_name(writer["name"]):
        return True
    namespace = reader["name"].rpartition(".")[0]
    aliases = {
        alias if "." in alias or not namespace else f"{namespace}.{alias}"
        for alias in reader.get("aliases", ())
    }
    return writer["name"] in aliases


def _renamed(reader: Any, writer: Any, path: str) -> Conflict:
    return Conflict(
        "name-mismatch",
        path or _short_name(reader["name"]),
        f"the reader's {_kind(reader)} {reader['name']} has neither the writer's name "
        f"{writer['name']} nor an alias for it",
    )


def _short_name(fullname: str) -> str:
    return fullname.rpartition(".")[2]


def _describe(schema: Any) -> str:
    if isinstance(schema, list):
        return "[" + ", ".join(_describe(branch) for branch in schema) + "]"
    if isinstance(schema, dict) and "name" in schema:
        return f"{schema['type']} {schema['name']}"
    if isinstance(schema, dict) and schema["type"] in ("array", "map"):
        inner = schema["items"] if schema["type"] == "array" else schema["values"]
        return f"{schema['type']}<{_describe(inner)}>"
    return _kind(schema)
