"""Protobuf: `.proto` text compiled to descriptors by grpcio-tools' protoc, fingerprinted over
the message name and the file descriptor's deterministic serialisation, compared by the wire.

A schema may import other registered schemas: each reference is written under its name
beside the document, so that `import "NAME";` finds it (the well-known types need none).
Messages and enums are matched by full name, fields by number, enum values by number; a
field whose message or enum type has another name on the other side is compared with it
structurally. Rules between a reader's and a writer's schema:

- `field-type-changed`: the reader's type does not hold every value of the writer's. Of the
  types protobuf's language guide calls wire-compatible, only the widenings keep the value:
  int32 to int64 (or to an open, proto3 enum), uint32 to uint64 or int64, sint32 to sint64,
  bool to any integer, an enum to int32 or int64, string to bytes. The others truncate (int64
  to int32), reinterpret the sign (int32 and uint32, fixed32 and sfixed32) or fail (bytes that
  are not UTF-8, read as string): the data changes silently, so they are refused. Message and
  enum types are compared by their fields and values.
- `field-cardinality-changed`: a field singular on one side and repeated on the other, except
  a `string`, `bytes` or message field that the reader has repeated (each value the writer
  sends is one element). A singular reader of repeated data keeps the last value or merges
  them, and numeric fields change encoding (packed), so every other change loses data.
- `oneof-field-moved`: the reader holds in one oneof fields the writer may set together
  (a field moved into a oneof with another existing field, out of one, or between two):
  parsing keeps the last of them and drops the others. A oneof made of one existing field is
  safe.
- `required-field-missing`: the reader requires (proto2) a field the writer may leave out.
- `enum-value-missing`: the writer's enum has a value the reader's lacks.

Rules about what a new version drops from an old one, whichever side reads (a number or name
freed without `reserved` lets a later version give it another meaning); they concern the
schema's own file, not the files it imports:

- `field-removed-unreserved`: a field is gone and its number or its name is not reserved.
- `enum-value-removed-unreserved`: the same for an enum value.
- `message-removed`, `enum-removed`: a type is gone (removed or renamed).
- `message-name-changed`: the schema now describes another message.

Not compared: extensions, services, options.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import lru_cache
from pathlib import Path
from typing import Any

from google.protobuf.descriptor_pb2 import (  # type: ignore[import-untyped, unused-ignore]
    FieldDescriptorProto,
    FileDescriptorProto,
    FileDescriptorSet,
)
from grpc_tools import _protoc_compiler  # type: ignore[import-untyped, unused-ignore]

from metaplane.schema._errors import InvalidSchema
from metaplane.schema._format import ParseContext, ParsedDocument, SchemaFormat
from metaplane.schema._model import Conflict

_SOURCE = "schema.proto"
# The well-known types (google/protobuf/*.proto) that grpcio-tools ships, for imports.
_WELL_KNOWN_TYPES = str(Path(_protoc_compiler.__file__).parent / "_proto")
# protoc keeps process-wide state (its logging, for one); one compilation at a time.
_protoc_lock = threading.Lock()
# A reference name is a relative path of plain segments: it becomes a file beside the schema.
_IMPORT_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")

_T = FieldDescriptorProto
_INTEGERS = frozenset({_T.TYPE_INT32, _T.TYPE_INT64, _T.TYPE_UINT32, _T.TYPE_UINT64})
# Writer type → the other reader types that read each of its values as the same value.
_WIDENINGS: Mapping[int, frozenset[int]] = {
    _T.TYPE_INT32: frozenset({_T.TYPE_INT64}),
    _T.TYPE_UINT32: frozenset({_T.TYPE_UINT64, _T.TYPE_INT64}),
    _T.TYPE_SINT32: frozenset({_T.TYPE_SINT64}),
    _T.TYPE_BOOL: _INTEGERS,
    _T.TYPE_ENUM: frozenset({_T.TYPE_INT32, _T.TYPE_INT64}),
    _T.TYPE_STRING: frozenset({_T.TYPE_BYTES}),
}
_NAMED_TYPES = frozenset({_T.TYPE_MESSAGE, _T.TYPE_ENUM, _T.TYPE_GROUP})
# Length-delimited on the wire: one value of a singular field reads as one element.
_LENGTH_DELIMITED = frozenset({_T.TYPE_STRING, _T.TYPE_BYTES, _T.TYPE_MESSAGE})
_TYPE_NAMES: dict[int, str] = {
    value.number: value.name.removeprefix("TYPE_").lower()
    for value in _T.DESCRIPTOR.enum_types_by_name["Type"].values
}
_LABEL_REPEATED: int = _T.LABEL_REPEATED
_LABEL_REQUIRED: int = _T.LABEL_REQUIRED


@dataclass(frozen=True)
class Field:
    name: str
    number: int
    label: int
    type: int
    type_name: str
    oneof: str | None = None  # the oneof it belongs to (proto3's synthetic ones are none)

    @property
    def repeated(self) -> bool:
        return self.label == _LABEL_REPEATED

    @property
    def required(self) -> bool:
        return self.label == _LABEL_REQUIRED

    def describe(self) -> str:
        kind = self.type_name or _TYPE_NAMES[self.type]
        member = f" (in oneof {self.oneof})" if self.oneof else ""
        return f"{'repeated ' if self.repeated else ''}{kind} {self.name} = {self.number}{member}"


@dataclass(frozen=True)
class Reservations:
    """Numbers (as half-open ranges) and names a message or enum keeps from reuse."""

    ranges: tuple[range, ...]
    names: frozenset[str]

    def keep_number(self, number: int) -> bool:
        return any(number in reserved for reserved in self.ranges)


@dataclass(frozen=True)
class Message:
    name: str
    fields: Mapping[int, Field]
    reserved: Reservations
    map_entry: bool
    oneofs: Mapping[str, frozenset[int]] = dataclass_field(default_factory=dict)


@dataclass(frozen=True)
class Enum:
    name: str
    values: Mapping[int, str]
    reserved: Reservations
    closed: bool = False  # proto2: a reader drops a number it does not know


@dataclass(frozen=True)
class ProtobufModel:
    """The messages and enums a schema reaches (its file's and its imports') by full name,
    the ones its own file defines, and the message it describes."""

    message_name: str
    messages: Mapping[str, Message]
    enums: Mapping[str, Enum]
    own: frozenset[str] = frozenset()


def parse(document: str, context: ParseContext) -> ParsedDocument[ProtobufModel]:
    files = [FileDescriptorProto.FromString(data) for data in _compile(document, _imports(context))]
    descriptor = files[-1]  # protoc lists the imports first
    messages: dict[str, Message] = {}
    enums: dict[str, Enum] = {}
    for file in files:
        _types(file, messages, enums)
    own_messages: dict[str, Message] = {}
    own_enums: dict[str, Enum] = {}
    _types(descriptor, own_messages, own_enums)
    root = _root_message(descriptor, own_messages, context.message_name)
    canonical = root.encode() + b"\n" + descriptor.SerializeToString(deterministic=True)
    model = ProtobufModel(root, messages, enums, frozenset(own_messages) | frozenset(own_enums))
    return ParsedDocument(canonical, model, message_name=root)


def reader_conflicts(reader: ProtobufModel, writer: ProtobufModel) -> list[Conflict]:
    """Why data written with `writer` may be misread by `reader`."""
    comparison = _Comparison(reader, writer)
    for name, message in writer.messages.items():
        if name in reader.messages:
            comparison.messages(reader.messages[name], message)
    for name, enum in writer.enums.items():
        if name in reader.enums:
            comparison.conflicts += _enum_conflicts(reader.enums[name], enum)
    return list(dict.fromkeys(comparison.conflicts))


def evolution_conflicts(old: ProtobufModel, new: ProtobufModel) -> list[Conflict]:
    """What `new` drops from `old` without keeping it from reuse."""
    conflicts = _removed_types(old, new)
    if old.message_name != new.message_name:
        detail = f"the schema described {old.message_name}, it now describes {new.message_name}"
        conflicts.append(Conflict("message-name-changed", new.message_name, detail))
    for name, message in old.messages.items():
        if name in old.own and name in new.messages:
            conflicts += _removed_fields(message, new.messages[name])
    for name, enum in old.enums.items():
        if name in old.own and name in new.enums:
            conflicts += _removed_values(enum, new.enums[name])
    return conflicts


PROTOBUF = SchemaFormat(
    parse=parse, reader_conflicts=reader_conflicts, evolution_conflicts=evolution_conflicts
)


def _imports(context: ParseContext) -> tuple[tuple[str, str], ...]:
    """The referenced documents as (import path, text), checked to be plain relative paths."""
    found = []
    for name, schema in sorted(context.documents.items()):
        if not _IMPORT_PATH.fullmatch(name) or ".." in name.split("/") or name == _SOURCE:
            raise InvalidSchema(
                "Protobuf",
                f"reference name {name!r} is not an import path: use the path the schema "
                f"imports (a/b.proto: letters, digits, _ . - and /; not {_SOURCE!r})",
            )
        found.append((name, schema.raw))
    return tuple(found)


@lru_cache(maxsize=512)
def _compile(source: str, imports: tuple[tuple[str, str], ...] = ()) -> tuple[bytes, ...]:
    """The serialised FileDescriptorProtos of `source` and the files it imports, imports
    first; compilations are cached by text."""
    with _protoc_lock, tempfile.TemporaryDirectory(prefix="metaplane-proto-") as folder:
        for name, text in imports:
            path = Path(folder) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (Path(folder) / _SOURCE).write_text(source, encoding="utf-8")
        _check(folder)
        output = Path(folder) / "descriptor_set.pb"
        arguments = [
            b"protoc",
            f"--proto_path={folder}".encode(),
            f"--proto_path={_WELL_KNOWN_TYPES}".encode(),
            f"--descriptor_set_out={output}".encode(),
            b"--include_imports",
            _SOURCE.encode(),
        ]
        if _protoc_compiler.run_main(arguments) != 0:
            raise InvalidSchema("Protobuf", "protoc could not write the descriptor set")
        descriptor_set = FileDescriptorSet.FromString(output.read_bytes())
    return tuple(bytes(file.SerializeToString(deterministic=True)) for file in descriptor_set.file)


def _check(folder: str) -> None:
    """Raise protoc's own errors, with line and column, as InvalidSchema."""
    include = [folder.encode(), _WELL_KNOWN_TYPES.encode()]
    try:
        _protoc_compiler.get_protos(_SOURCE.encode(), include)
    except _protoc_compiler.ProtocErrors as error:
        messages = [_protoc_message(e) for e in error.errors()]
        raise InvalidSchema("Protobuf", "; ".join(messages)) from error


def _protoc_message(error: Any) -> str:
    text = error.message.decode(errors="replace")
    filename = error.filename.decode(errors="replace")
    if filename != _SOURCE:
        return f"{filename}: {text}"  # an imported file, which has no place in the document
    # protoc counts lines and columns from 0 here; its command line (and editors) from 1.
    return f"line {error.line + 1}:{error.column + 1}: {text}"


def _types(descriptor: Any, messages: dict[str, Message], enums: dict[str, Enum]) -> None:
    prefix = f"{descriptor.package}." if descriptor.package else ""
    closed = descriptor.syntax in ("", "proto2")
    for enum in descriptor.enum_type:
        enums[prefix + enum.name] = _enum(prefix + enum.name, enum, closed)
    for message in descriptor.message_type:
        _collect(prefix + message.name, message, messages, enums, closed)


def _collect(
    name: str, message: Any, messages: dict[str, Message], enums: dict[str, Enum], closed: bool
) -> None:
    messages[name] = _message(name, message)
    for enum in message.enum_type:
        enums[f"{name}.{enum.name}"] = _enum(f"{name}.{enum.name}", enum, closed)
    for nested in message.nested_type:
        _collect(f"{name}.{nested.name}", nested, messages, enums, closed)


def _message(name: str, message: Any) -> Message:
    fields = {field.number: _field(message, field) for field in message.field}
    # A message's reserved ranges end before `end`.
    ranges = tuple(range(r.start, r.end) for r in message.reserved_range)
    reserved = Reservations(ranges, frozenset(message.reserved_name))
    oneofs: dict[str, set[int]] = {}
    for found in fields.values():
        if found.oneof is not None:
            oneofs.setdefault(found.oneof, set()).add(found.number)
    members = {oneof: frozenset(numbers) for oneof, numbers in oneofs.items()}
    return Message(name, fields, reserved, bool(message.options.map_entry), members)


def _field(message: Any, field: Any) -> Field:
    oneof = None
    # proto3 `optional` puts a field alone in a synthetic oneof: presence, not a choice.
    if field.HasField("oneof_index") and not field.proto3_optional:
        oneof = str(message.oneof_decl[field.oneof_index].name)
    return Field(
        field.name, field.number, field.label, field.type, field.type_name.lstrip("."), oneof
    )


def _enum(name: str, enum: Any, closed: bool) -> Enum:
    values = {value.number: value.name for value in enum.value}
    # An enum's reserved ranges include `end`.
    ranges = tuple(range(r.start, r.end + 1) for r in enum.reserved_range)
    return Enum(name, values, Reservations(ranges, frozenset(enum.reserved_name)), closed)


def _root_message(descriptor: Any, messages: Mapping[str, Message], wanted: str | None) -> str:
    prefix = f"{descriptor.package}." if descriptor.package else ""
    if wanted is None:
        if not descriptor.message_type:
            raise InvalidSchema("Protobuf", "the file defines no message")
        return prefix + str(descriptor.message_type[0].name)
    for candidate in (wanted.lstrip("."), prefix + wanted):
        if candidate in messages:
            return candidate
    raise InvalidSchema("Protobuf", f"the file defines no message {wanted!r}")


class _Comparison:
    """The reader-against-writer rules over two models. Message types with different names
    on the two sides (another package, an import) are compared by their fields; a pair met
    again while it is being compared (a recursive type) is taken as compatible."""

    def __init__(self, reader: ProtobufModel, writer: ProtobufModel) -> None:
        self.reader, self.writer = reader, writer
        self.conflicts: list[Conflict] = []
        self.comparing: set[tuple[str, str]] = set()

    def messages(self, reader: Message, writer: Message) -> None:
        self.conflicts += self.pair(reader, writer)

    def pair(self, reader: Message, writer: Message) -> list[Conflict]:
        key = (reader.name, writer.name)
        if key in self.comparing:
            return []
        self.comparing.add(key)
        try:
            return self._pair(reader, writer)
        finally:
            self.comparing.discard(key)

    def _pair(self, reader: Message, writer: Message) -> list[Conflict]:
        conflicts: list[Conflict] = []
        for number, field in writer.fields.items():
            if number in reader.fields:
                conflicts += self.field(reader.name, reader.fields[number], field)
        for number, field in reader.fields.items():
            if field.required and number not in writer.fields:
                detail = f"the reader requires {field.describe()}, the writer has no field {number}"
                location = f"{reader.name}.{field.name}"
                conflicts.append(Conflict("required-field-missing", location, detail))
        return conflicts + _oneof_conflicts(reader, writer)

    def field(self, message: str, reader: Field, writer: Field) -> list[Conflict]:
        if reader == writer and reader.type not in _NAMED_TYPES:
            return []
        location = f"{message}.{reader.name}"
        conflicts = []
        why = self.wire_incompatibility(reader, writer)
        if why is not None:
            conflicts.append(Conflict("field-type-changed", location, _both(reader, writer) + why))
        if reader.repeated != writer.repeated and not _reads_as_element(reader, writer):
            detail = f"{_both(reader, writer)}: {_why_lost(reader)}"
            conflicts.append(Conflict("field-cardinality-changed", location, detail))
        if reader.required and not writer.required:
            detail = f"the reader requires {reader.describe()}, the writer may leave it out"
            conflicts.append(Conflict("required-field-missing", location, detail))
        return conflicts

    def wire_incompatibility(self, reader: Field, writer: Field) -> str | None:
        """None when the writer's values read right; else why not ("" needs no more words)."""
        if reader.type in _NAMED_TYPES and reader.type == writer.type:
            if reader.type_name == writer.type_name:
                return None
            return self.named_types(reader, writer)
        if reader.type == writer.type or reader.type in _WIDENINGS.get(writer.type, ()):
            return None
        if reader.type == _T.TYPE_ENUM and writer.type in (_T.TYPE_INT32, _T.TYPE_BOOL):
            # An open (proto3) enum keeps any int32 it does not know; a closed one drops it.
            enum = self.reader.enums.get(reader.type_name)
            return None if enum is not None and not enum.closed else ": the enum is closed"
        return ""

    def named_types(self, reader: Field, writer: Field) -> str | None:
        """Two types of different names, compared by content."""
        found: list[Conflict]
        if reader.type == _T.TYPE_ENUM:
            reader_enum = self.reader.enums.get(reader.type_name)
            writer_enum = self.writer.enums.get(writer.type_name)
            if reader_enum is None or writer_enum is None:
                return ""
            found = _enum_conflicts(reader_enum, writer_enum)
        else:
            reader_message = self.reader.messages.get(reader.type_name)
            writer_message = self.writer.messages.get(writer.type_name)
            if reader_message is None or writer_message is None:
                return ""
            found = self.pair(reader_message, writer_message)
        if not found:
            return None
        first = found[0]
        return f"; their contents differ: [{first.rule}] at {first.location}: {first.detail}"


def _both(reader: Field, writer: Field) -> str:
    return f"the reader has {reader.describe()}, the writer {writer.describe()}"


def _reads_as_element(reader: Field, writer: Field) -> bool:
    """A singular length-delimited value the writer sends is one element of a repeated
    reader's field (protobuf's language guide: string, bytes and messages)."""
    return reader.repeated and not writer.repeated and writer.type in _LENGTH_DELIMITED


def _why_lost(reader: Field) -> str:
    if not reader.repeated:
        return "a singular reader of repeated data keeps only the last value (or merges messages)"
    return "numeric fields are encoded differently (packed) when repeated"


def _oneof_conflicts(reader: Message, writer: Message) -> list[Conflict]:
    """A reader's oneof holding fields the writer may set together keeps only the last."""
    conflicts = []
    for oneof, numbers in sorted(reader.oneofs.items()):
        present = sorted(number for number in numbers if number in writer.fields)
        if len(present) < 2:
            continue
        groups = {writer.fields[number].oneof for number in present}
        if len(groups) == 1 and None not in groups:
            continue  # one writer oneof: at most one of them is ever set
        names = ", ".join(writer.fields[number].describe() for number in present)
        detail = (
            f"the writer may set {names} together; the reader's oneof {oneof} keeps only the "
            "last of them"
        )
        conflicts.append(Conflict("oneof-field-moved", f"{reader.name}.{oneof}", detail))
    return conflicts


def _enum_conflicts(reader: Enum, writer: Enum) -> list[Conflict]:
    return [
        Conflict(
            "enum-value-missing",
            f"{reader.name}.{name}",
            f"the writer's enum has {name} = {number}, the reader's has no value {number}",
        )
        for number, name in writer.values.items()
        if number not in reader.values
    ]


def _removed_types(old: ProtobufModel, new: ProtobufModel) -> list[Conflict]:
    conflicts = [
        Conflict("message-removed", name, f"message {name} is gone (removed or renamed)")
        for name, message in old.messages.items()
        # A map's entry type goes with its field, which has its own rule.
        if name in old.own and name not in new.messages and not message.map_entry
    ]
    return conflicts + [
        Conflict("enum-removed", name, f"enum {name} is gone (removed or renamed)")
        for name in old.enums
        if name in old.own and name not in new.enums
    ]


def _removed_fields(old: Message, new: Message) -> list[Conflict]:
    names_in_use = {field.name for field in new.fields.values()}
    conflicts = []
    for number, field in old.fields.items():
        if number in new.fields:
            continue
        loose = _unreserved(number, field.name, new.reserved, names_in_use)
        if loose:
            detail = f"{field.describe()} was removed without reserving its {loose}"
            conflicts.append(
                Conflict("field-removed-unreserved", f"{old.name}.{field.name}", detail)
            )
    return conflicts


def _removed_values(old: Enum, new: Enum) -> list[Conflict]:
    names_in_use = set(new.values.values())
    conflicts = []
    for number, name in old.values.items():
        if number in new.values:
            continue
        loose = _unreserved(number, name, new.reserved, names_in_use)
        if loose:
            detail = f"{name} = {number} was removed without reserving its {loose}"
            conflicts.append(
                Conflict("enum-value-removed-unreserved", f"{old.name}.{name}", detail)
            )
    return conflicts


def _unreserved(number: int, name: str, reserved: Reservations, names_in_use: set[str]) -> str:
    """What of a removed number and name is left free for reuse: '', 'number', 'name', both."""
    loose = []
    if not reserved.keep_number(number):
        loose.append(f"number {number}")
    # A name another field now carries cannot be reserved; reusing it is the rename's business.
    if name not in reserved.names and name not in names_in_use:
        loose.append(f"name {name!r}")
    return " and ".join(loose)
