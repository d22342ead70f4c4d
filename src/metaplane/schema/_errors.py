"""The errors of the schema registry's engine, all refused requests of the store contract.

    MetadataError
    └── InvalidRequest
        ├── InvalidSchema              a document its format's own library rejects
        ├── UnknownSchemaType          a type name that is none of the registry's types
        └── UnknownCompatibilityMode   a mode name that is none of the registry's modes

Each carries the library's own message; the library's exception is its __cause__.
"""

from __future__ import annotations

from metaplane.store import InvalidRequest


class InvalidSchema(InvalidRequest):
    """A schema document that its format's library refuses to parse or validate."""

    def __init__(self, schema_type: str, message: str) -> None:
        super().__init__(f"invalid {schema_type} schema: {message}")
        self.schema_type = schema_type
        self.reason = message


class UnknownSchemaType(InvalidRequest):
    """A schema type name that names none of the registry's types."""

    def __init__(self, name: object, known: list[str]) -> None:
        super().__init__(f"unknown schema type {name!r}: expected one of {', '.join(known)}")
        self.name = name


class UnknownCompatibilityMode(InvalidRequest):
    """A compatibility mode name that names none of the registry's modes."""

    def __init__(self, name: object, known: list[str]) -> None:
        super().__init__(f"unknown compatibility mode {name!r}: expected one of {', '.join(known)}")
        self.name = name
