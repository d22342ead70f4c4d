"""The contract each schema format implements: parse a document, and name the conflicts
between a reader's and a writer's schema. `_compat` composes these into modes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from metaplane.schema._model import Conflict, Schema

Model = TypeVar("Model")


@dataclass(frozen=True)
class ParseContext:
    """What a document is read with besides its text.

    `message_name`: the Protobuf message the schema describes (its file's first by default).
    `documents`: the referenced schemas by reference name, their own references' included
    (what Protobuf imports and JSON Schema `$ref`s resolve to). `json_schema_draft`: the draft
    of a JSON Schema document that declares none (None: draft-07). `strict`: refuse a
    reference that resolves to nothing (a new document; stored ones are read leniently).
    """

    message_name: str | None = None
    documents: Mapping[str, Schema] = field(default_factory=dict)
    json_schema_draft: str | None = None
    strict: bool = True


@dataclass(frozen=True)
class ParsedDocument(Generic[Model]):
    """What a format makes of a valid document: the bytes to fingerprint and its model."""

    canonical_form: bytes
    model: Model
    message_name: str | None = None


def no_conflicts(old: object, new: object) -> list[Conflict]:
    """For formats whose every rule depends on which side reads."""
    return []


@dataclass(frozen=True)
class SchemaFormat(Generic[Model]):
    """One format's rules.

    `reader_conflicts(reader, writer)`: why data written with `writer` may not be readable
    (or valid) under `reader`. `evolution_conflicts(old, new)`: direction-free rules about
    what `new` may drop from `old`.
    """

    parse: Callable[[str, ParseContext], ParsedDocument[Model]]
    reader_conflicts: Callable[[Model, Model], list[Conflict]]
    evolution_conflicts: Callable[[Model, Model], list[Conflict]] = no_conflicts
