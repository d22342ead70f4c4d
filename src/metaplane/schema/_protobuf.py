"""Protobuf: `.proto` text compiled to descriptors by grpcio-tools' protoc, fingerprinted over
the message name and the file descriptor's deterministic serialisation, compared by the wire.

Messages and enums are matched by full name, fields by number, enum values by number. Rules
between a reader's and a writer's schema:

- `field-type-changed`: a field number holds types that do not share a wire encoding. The
  groups protobuf documents as compatible are {int32, uint32, int64, uint64, bool, enum},
  {sint32, sint64}, {fixed32, sfixed32}, {fixed64, sfixed64}, {string, bytes}; message and
  enum fields must keep their type's name. A field renamed with a compatible type passes.
- `field-cardinality-changed`: repeated on one side, singular on the other.
- `required-field-missing`: the reader requires (proto2) a field the writer may leave out.
- `enum-value-missing`: the writer's enum has a value the reader's lacks.

Rules about what a new version drops from an old one, whichever side reads (a number or name
freed without `reserved` lets a later version give it another meaning):

- `field-removed-unreserved`: a field is gone and its number or its name is not reserved.
- `enum-value-removed-unreserved`: the same for an enum value.
- `message-removed`, `enum-removed`: a type is gone (removed or renamed).
- `message-name-changed`: the schema now describes another message.

Not compared: oneof membership, extensions, services, options.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
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
from metaplane.schema._format import ParsedDocument, SchemaFormat
from metaplane.schema._model import Conflict

_SOURCE = "schema.proto"
# The well-known types (google/protobuf/*.proto) that grpcio-tools ships, for imports.
_WELL_KNOWN_TYPES = str(Path(_protoc_compiler.__file__).parent / "_proto")
# protoc keeps process-wide state (its logging, for one); one compilation at a time.
_protoc_lock = threading.Lock()

_T = FieldDescriptorProto
_WIRE_GROUPS = (
    frozenset(
        {_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_INT64, _T.TYPE_UINT64, _T.TYPE_BOOL, _T.TYPE_ENUM}
    ),
    frozenset({_T.TYPE_SINT32, _T.TYPE_SINT64}),
    frozenset({_T.TYPE_FIXED32, _T.TYPE_SFIXED32}),
    frozenset({_T.TYPE_FIXED64, _T.TYPE_SFIXED64}),
    frozenset({_T.TYPE_STRING, _T.TYPE_BYTES}),
)
_NAMED_TYPES = frozenset({_T.TYPE_MESSAGE, _T.TYPE_ENUM, _T.TYPE_GROUP})
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

    @property
    def repeated(self) -> bool:
        return self.label == _LABEL_REPEATED

    @property
    def required(self) -> bool:
        return self.label == _LABEL_REQUIRED

    def describe(self) -> str:
        kind = self.type_name or _TYPE_NAMES[self.type]
        return f"{'repeated ' if self.repeated else ''}{kind} {self.name} = {self.number}"


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


@dataclass(frozen=True)
class Enum:
    name: str
    values: Mapping[int, str]
    reserved: Reservations


@dataclass(frozen=True)
class ProtobufModel:
    """The messages and enums of one `.proto` file by full name, and the one it describes."""

    message_name: str
    messages: Mapping[str, Message]
    enums: Mapping[str, Enum]


def parse(document: str, message_name: str | None) -> ParsedDocument[ProtobufModel]:
    descriptor = FileDescriptorProto.FromString(_compile(document))
    messages, enums = _types(descriptor)
    root = _root_message(descriptor, messages, message_name)
    canonical = root.encode() + b"\n" + descriptor.SerializeToString(deterministic=True)
    model = ProtobufModel(root, messages, enums)
    return ParsedDocument(canonical, model, message_name=root)


def reader_conflicts(reader: ProtobufModel, writer: ProtobufModel) -> list[Conflict]:
    """Why data written with `writer` may be misread by `reader`."""
    conflicts: list[Conflict] = []
    for name, message in writer.messages.items():
        if name in reader.messages:
            conflicts += _message_conflicts(reader.messages[name], message)
    for name, enum in writer.enums.items():
        if name in reader.enums:
            conflicts += _enum_conflicts(reader.enums[name], enum)
    return conflicts


def evolution_conflicts(old: ProtobufModel, new: ProtobufModel) -> list[Conflict]:
    """What `new` drops from `old` without keeping it from reuse."""
    conflicts = _removed_types(old, new)
    if old.message_name != new.message_name:
        detail = f"the schema described {old.message_name}, it now describes {new.message_name}"
        conflicts.append(Conflict("message-name-changed", new.message_name, detail))
    for name, message in old.messages.items():
        if name in new.messages:
            conflicts += _removed_fields(message, new.messages[name])
    for name, enum in old.enums.items():
        if name in new.enums:
            conflicts += _removed_values(enum, new.enums[name])
    return conflicts


PROTOBUF = SchemaFormat(
    parse=parse, reader_conflicts=reader_conflicts, evolution_conflicts=evolution_conflicts
)


@lru_cache(maxsize=512)
def _compile(source: str) -> bytes:
    """The serialised FileDescriptorProto of `source`; compilations are cached by text."""
    with _protoc_lock, tempfile.TemporaryDirectory(prefix="metaplane-proto-") as folder:
        (Path(folder) / _SOURCE).write_text(source, encoding="utf-8")
        _check(folder)
        output = Path(folder) / "descriptor_set.pb"
        arguments = [
            b"protoc",
            f"--proto_path={folder}".encode(),
            f"--proto_path={_WELL_KNOWN_TYPES}".encode(),
            f"--descriptor_set_out={output}".encode(),
            _SOURCE.encode(),
        ]
        if _protoc_compiler.run_main(arguments) != 0:
            raise InvalidSchema("Protobuf", "protoc could not write the descriptor set")
        descriptor_set = FileDescriptorSet.FromString(output.read_bytes())
    return bytes(descriptor_set.file[-1].SerializeToString(deterministic=True))


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


def _types(descriptor: Any) -> tuple[dict[str, Message], dict[str, Enum]]:
    messages: dict[str, Message] = {}
    enums: dict[str, Enum] = {}
    prefix = f"{descriptor.package}." if descriptor.package else ""
    for enum in descriptor.enum_type:
        enums[prefix + enum.name] = _enum(prefix + enum.name, enum)
    for message in descriptor.message_type:
        _collect(prefix + message.name, message, messages, enums)
    return messages, enums


def _collect(name: str, message: Any, messages: dict[str, Message], enums: dict[str, Enum]) -> None:
    messages[name] = _message(name, message)
    for enum in message.enum_type:
        enums[f"{name}.{enum.name}"] = _enum(f"{name}.{enum.name}", enum)
    for nested in message.nested_type:
        _collect(f"{name}.{nested.name}", nested, messages, enums)


def _message(name: str, message: Any) -> Message:
    fields = {
        field.number: Field(
            field.name, field.number, field.label, field.type, field.type_name.lstrip(".")
        )
        for field in message.field
    }
    # A message's reserved ranges end before `end`.
    ranges = tuple(range(r.start, r.end) for r in message.reserved_range)
    reserved = Reservations(ranges, frozenset(message.reserved_name))
    return Message(name, fields, reserved, bool(message.options.map_entry))


def _enum(name: str, enum: Any) -> Enum:
    values = {value.number: value.name for value in enum.value}
    # An enum's reserved ranges include `end`.
    ranges = tuple(range(r.start, r.end + 1) for r in enum.reserved_range)
    return Enum(name, values, Reservations(ranges, frozenset(enum.reserved_name)))


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


def _message_conflicts(reader: Message, writer: Message) -> list[Conflict]:
    conflicts: list[Conflict] = []
    for number, field in writer.fields.items():
        if number in reader.fields:
            conflicts += _field_conflicts(reader.name, reader.fields[number], field)
    for number, field in reader.fields.items():
        if field.required and number not in writer.fields:
            detail = f"the reader requires {field.describe()}, the writer has no field {number}"
            conflicts.append(
                Conflict("required-field-missing", f"{reader.name}.{field.name}", detail)
            )
    return conflicts


def _field_conflicts(message: str, reader: Field, writer: Field) -> list[Conflict]:
    location = f"{message}.{reader.name}"
    conflicts: list[Conflict] = []
    if not _wire_compatible(reader, writer):
        detail = f"the reader has {reader.describe()}, the writer {writer.describe()}"
        conflicts.append(Conflict("field-type-changed", location, detail))
    if reader.repeated != writer.repeated:
        detail = f"the reader has {reader.describe()}, the writer {writer.describe()}"
        conflicts.append(Conflict("field-cardinality-changed", location, detail))
    if reader.required and not writer.required:
        detail = f"the reader requires {reader.describe()}, the writer may leave it out"
        conflicts.append(Conflict("required-field-missing", location, detail))
    return conflicts


def _wire_compatible(reader: Field, writer: Field) -> bool:
    if reader.type == writer.type:
        return reader.type not in _NAMED_TYPES or reader.type_name == writer.type_name
    if reader.type in _NAMED_TYPES and writer.type in _NAMED_TYPES:
        return False  # an enum, a message and a group never share an encoding
    return any(reader.type in group and writer.type in group for group in _WIRE_GROUPS)


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
        if name not in new.messages and not message.map_entry
    ]
    return conflicts + [
        Conflict("enum-removed", name, f"enum {name} is gone (removed or renamed)")
        for name in old.enums
        if name not in new.enums
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
