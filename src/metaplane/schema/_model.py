"""The registry's vocabulary: schema types, compatibility modes, parsed schemas and verdicts.

Enum values are the names Danube's serde writes into the store (`"JsonSchema"`, `"Backward"`),
so they round-trip through seed 001's JSON unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from metaplane.resources import CompatibilityMode
from metaplane.schema._errors import UnknownCompatibilityMode, UnknownSchemaType


def _folded(name: str) -> str:
    """A name with case, `_` and `-` folded away: `json_schema`, `JSON-SCHEMA` → `jsonschema`."""
    return name.lower().replace("_", "").replace("-", "")


class SchemaType(StrEnum):
    """The kinds of schema the registry holds; the value is Danube's `SchemaDefinition` tag."""

    BYTES = "Bytes"
    STRING = "String"
    NUMBER = "Number"
    AVRO = "Avro"
    JSON_SCHEMA = "JsonSchema"
    PROTOBUF = "Protobuf"

    @classmethod
    def parse(cls, name: str | SchemaType) -> SchemaType:
        """The type a name stands for, with Danube's aliases (`json`, `proto`, `int64`, …)."""
        if isinstance(name, SchemaType):
            return name
        found = _SCHEMA_TYPE_ALIASES.get(_folded(name)) if isinstance(name, str) else None
        if found is None:
            raise UnknownSchemaType(name, [member.value for member in cls])
        return found


# Danube's `SchemaType::from_str` accepts these (case-insensitive); "jsonschema" is its
# serde name folded.
_SCHEMA_TYPE_ALIASES: dict[str, SchemaType] = {
    "bytes": SchemaType.BYTES,
    "string": SchemaType.STRING,
    "number": SchemaType.NUMBER,
    "int64": SchemaType.NUMBER,
    "int": SchemaType.NUMBER,
    "float": SchemaType.NUMBER,
    "double": SchemaType.NUMBER,
    "avro": SchemaType.AVRO,
    "jsonschema": SchemaType.JSON_SCHEMA,
    "json": SchemaType.JSON_SCHEMA,
    "protobuf": SchemaType.PROTOBUF,
    "proto": SchemaType.PROTOBUF,
}


def parse_mode(name: str | CompatibilityMode) -> CompatibilityMode:
    """The mode a name stands for: `Backward`, `backward`, `BACKWARD_TRANSITIVE`, …"""
    if isinstance(name, CompatibilityMode):
        return name
    folded = _folded(name) if isinstance(name, str) else None
    for member in CompatibilityMode:
        if _folded(member.value) == folded:
            return member
    raise UnknownCompatibilityMode(name, [member.value for member in CompatibilityMode])


@dataclass(frozen=True, order=True)
class SchemaReference:
    """A schema's reference to another subject's version, as Confluent spells it: `name` is
    what the document uses for it (a Protobuf import path, a JSON Schema `$ref` URI, an Avro
    type's full name)."""

    name: str
    subject: str
    version: int

    def __str__(self) -> str:
        return f"{self.name}={self.subject}:{self.version}"


@dataclass(frozen=True)
class Dependency:
    """A reference with the schema it resolved to (itself parsed with its own references)."""

    reference: SchemaReference
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """A parsed, validated schema document.

    Two schemas are equal when they have the same type and canonical form: documents that
    differ only in layout are the same schema. The canonical form of a schema with references
    ends with them, so that the same text importing another version is another schema.
    `model` is the format's parsed form, for the compatibility rules.
    """

    type: SchemaType
    raw: str = field(compare=False)
    canonical_form: bytes
    fingerprint: str = field(compare=False)
    message_name: str | None = field(default=None, compare=False)
    model: object = field(default=None, repr=False, compare=False)
    dependencies: tuple[Dependency, ...] = field(default=(), repr=False, compare=False)

    @property
    def references(self) -> tuple[SchemaReference, ...]:
        return tuple(dependency.reference for dependency in self.dependencies)


@dataclass(frozen=True)
class Conflict:
    """One rule a format found broken between a reader's and a writer's schema."""

    rule: str
    location: str
    detail: str


Direction = Literal["backward", "forward", "evolution"]

_DIRECTION_TEXT: dict[Direction, str] = {
    "backward": "backward: the new schema cannot read data written with version {v}",
    "forward": "forward: version {v} cannot read data written with the new schema",
    "evolution": "evolution from version {v}",
}


@dataclass(frozen=True)
class Incompatibility:
    """A conflict between the new schema and one earlier version, in one direction.

    `evolution` conflicts hold whatever the direction: a change that makes a later,
    innocent-looking version unsafe (a field number freed without being reserved).
    """

    direction: Direction
    version: int
    rule: str
    location: str
    detail: str

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        context = _DIRECTION_TEXT[self.direction].format(v=self.version)
        return f"{context}: [{self.rule}]{where}: {self.detail}"


@dataclass(frozen=True)
class CompatibilityResult:
    """The verdict of a compatibility check and, when it fails, every reason why."""

    mode: CompatibilityMode
    checked_versions: tuple[int, ...]
    incompatibilities: tuple[Incompatibility, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.incompatibilities

    @property
    def reasons(self) -> list[str]:
        return [str(incompatibility) for incompatibility in self.incompatibilities]
