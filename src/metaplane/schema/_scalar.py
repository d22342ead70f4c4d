"""Bytes, String and Number: types without a document, compatible only with themselves.

As in Danube, the document sent with them is ignored; the canonical form is the type's name.
"""

from __future__ import annotations

from metaplane.schema._format import ParseContext, ParsedDocument, SchemaFormat
from metaplane.schema._model import Conflict


def scalar_format(name: str) -> SchemaFormat[str]:
    """The format of the scalar type `name` (`bytes`, `string` or `number`)."""

    def parse(document: str, context: ParseContext) -> ParsedDocument[str]:
        return ParsedDocument(canonical_form=name.encode(), model=name)

    return SchemaFormat(parse=parse, reader_conflicts=_same_scalar)


def _same_scalar(reader: str, writer: str) -> list[Conflict]:
    # The type itself is compared before any format is asked; nothing is left to differ.
    return []
