"""fastavro's own reader as an oracle: write a datum with the writer's schema, read it back
with the reader's, and see whether resolution succeeds.

The datum takes the last choice wherever there is one (the last enum symbol, the last union
branch), where schema changes tend to add or remove things.
"""

from __future__ import annotations

import io
import json
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

_PRIMITIVE_DATA: dict[str, Any] = {
    "null": None,
    "boolean": True,
    "int": 1,
    "long": 2,
    "float": 1.5,
    "double": 2.5,
    "bytes": b"x",
    "string": "s",
}


def fastavro_resolves(reader: str, writer: str) -> bool:
    named: dict[str, Any] = {}
    writer_schema = parse_schema(json.loads(writer), named)
    reader_schema = parse_schema(json.loads(reader), {})
    buffer = io.BytesIO()
    schemaless_writer(buffer, writer_schema, _datum(writer_schema, named))
    buffer.seek(0)
    try:
        schemaless_reader(buffer, writer_schema, reader_schema)
    except Exception:  # fastavro's resolution errors have no common base
        return False
    return True


def _datum(schema: Any, named: dict[str, Any]) -> Any:
    if isinstance(schema, str):
        return _datum(named[schema], named) if schema in named else _PRIMITIVE_DATA[schema]
    if isinstance(schema, list):
        return _datum(schema[-1], named)
    kind = schema["type"]
    if kind == "record":
        return {field["name"]: _datum(field["type"], named) for field in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][-1]
    if kind == "array":
        return [_datum(schema["items"], named)]
    if kind == "map":
        return {"key": _datum(schema["values"], named)}
    if kind == "fixed":
        return bytes(schema["size"])
    return _datum(kind, named)
