"""Spark's reading of the layout's values: each kind's schema derived from its msgspec type in
`metaplane.resources` (one source of truth with the runtime), and the checks that tell a
well-formed value from a malformed one. Unsigned 64-bit integers are DecimalType(20, 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from functools import cache, reduce
from typing import Any, Literal

import msgspec.inspect as mi
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.layout import U64_MAX, KeyKind
from metaplane.resources import VALUE_TYPES

U64_TYPE = T.DecimalType(20, 0)
"""Every unsigned 64-bit id and offset, in every table."""

# Integers are read wide, with a fraction, so that 1.5 or 1e30 where an integer belongs is seen
# as malformed instead of being rounded or wrapped (a document without ids is read with its
# integers as longs first, and wide only when that fails: `_document`).
_WIDE = T.DecimalType(38, 18)
Width = Literal["wide", "narrow", "table"]
"""How a type's integers are read: `wide` (_WIDE), `narrow` (LongType: a document whose
integers all fit is read so first, see `_document`) or as the tables hold them (`table`)."""
_LONG_MAX = 2**63 - 1
_CORRUPT = "_corrupt"
# Spark's reader takes NaN and Infinity as numbers, and single quotes around names and
# strings; the runtime takes neither.
_STRICT = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false"}
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, **_STRICT}
_NULL = r"^\s*null\s*$"
_NUMBER = r"^\s*(-?0|[1-9][0-9]{0,19})\s*$"  # the runtime reads -0 as 0
_JSON_STRING = r'^\s*"(?:[^"\\]|\\.)*"\s*$'


PARSED = "_parsed"
"""The column a document is parsed into, once, before `value` and `valid` read it."""


@dataclass(frozen=True)
class ValueColumns:
    """A kind's value read from its raw text: `value` (None for kinds whose value is always
    JSON null) is null unless `valid`. When `parse` is set, it must be selected as the column
    `PARSED` first: `value` and `valid` refer to that column, so that the JSON is parsed
    once, not once per check."""

    value: Column | None
    valid: Column
    parse: Column | None = None


def value_columns(kind: KeyKind, raw: Column) -> ValueColumns:
    """The typed value and the validity of `raw` (a value's text) as a value of `kind`."""
    read = _read(kind, raw)
    extra = _CODE_CHECKS.get(kind)
    if extra is None or read.value is None:
        return read
    valid = read.valid & F.coalesce(extra(read.value), F.lit(False))
    return ValueColumns(F.when(valid, read.value), valid, read.parse)


def _padded_offset(value: Column) -> Column:
    start = value["start"]
    number = start.try_cast(U64_TYPE)
    return start.rlike(r"^[0-9]{20}$") & number.isNotNull() & (number <= _decimal(U64_MAX))


def _usages_not_negative(value: Column) -> Column:
    # A lambda runs interpreted: load reports are a few keys, one a broker.
    return F.forall(value["resources_usage"], lambda usage: usage["usage"] >= 0)


# What the runtime's value types check in code (`__post_init__`) rather than in their types.
_CODE_CHECKS = {
    KeyKind.STORAGE_CUR: _padded_offset,
    KeyKind.LOAD_REPORT: _usages_not_negative,
}


def _read(kind: KeyKind, raw: Column) -> ValueColumns:
    if kind not in VALUE_TYPES:  # a kind the layout has and the resources do not, yet
        return ValueColumns(raw, F.lit(True))
    info = _info(kind)
    if isinstance(info, mi.NoneType):
        return ValueColumns(None, _is_null(raw))
    if isinstance(info, mi.IntType):
        return _number(info, raw)
    if isinstance(info, mi.EnumType):
        return _enum(info, raw)
    if isinstance(info, mi.StructType | mi.DictType):
        return _document(info, raw)
    if isinstance(info, mi.UnionType) and _members(info) != info.types:
        inner = _document(_single(info), raw)
        null = _is_null(raw)
        return ValueColumns(F.when(~null, inner.value), null | inner.valid, inner.parse)
    return _wrapped(info, raw)


def value_type(kind: KeyKind) -> T.DataType | None:
    """The type of the `value` column of `kind`'s table (None: no such column)."""
    if kind not in VALUE_TYPES:
        return T.StringType()
    info = _info(kind)
    if isinstance(info, mi.NoneType):
        return None
    if isinstance(info, mi.UnionType) and _members(info) != info.types:
        return _table_type(_single(info))
    return _table_type(info)


@cache
def _info(kind: KeyKind) -> mi.Type:
    return mi.type_info(VALUE_TYPES[kind])


def _is_null(raw: Column) -> Column:
    # The exact text first: Spark skips the regex when the cheap comparison holds.
    return (raw == "null") | raw.rlike(_NULL)


# Scalars ------------------------------------------------------------------------------------


def _number(info: mi.IntType, raw: Column) -> ValueColumns:
    digits = F.regexp_extract(raw, _NUMBER, 1)
    number = F.when(digits != "", digits.try_cast(U64_TYPE))
    valid = F.coalesce(number.isNotNull() & _int_bounds(info, number), F.lit(False))
    return ValueColumns(F.when(valid, number.try_cast(_table_type(info))), valid)


def _enum(info: mi.EnumType, raw: Column) -> ValueColumns:
    values = [member.value for member in info.cls]
    if all(isinstance(value, str) for value in values):
        choices = "|".join(re.escape(value) for value in values)
        text = F.regexp_extract(raw, rf'^\s*"({choices})"\s*$', 1)
        return ValueColumns(F.when(text != "", text), text != "")
    digits = F.regexp_extract(raw, _NUMBER, 1)
    number = F.when(digits != "", digits.try_cast(T.LongType()))
    valid = F.coalesce(number.isin(values), F.lit(False))
    return ValueColumns(F.when(valid, number), valid)


def _wrapped(info: mi.Type, raw: Column) -> ValueColumns:
    """Any other top-level scalar: read as the field of a one-field document."""
    schema = T.StructType([T.StructField("v", _parse_type(info))])
    parse = F.from_json(F.concat(F.lit('{"v":'), raw, F.lit("}")), schema, _STRICT)["v"]
    parsed = F.col(PARSED)
    valid = parsed.isNotNull() & _holds(info, parsed)
    if isinstance(info, mi.StrType):
        # Spark's reader takes any JSON token as a string; the runtime takes only strings.
        valid = valid & raw.rlike(_JSON_STRING)
    else:
        # `5}x` would close the wrapper early, and `x` be ignored.
        valid = valid & _alone(raw, an_object=False)
    valid = F.coalesce(valid, F.lit(False))
    return ValueColumns(F.when(valid, parsed.try_cast(_table_type(info))), valid, parse)


# Documents ----------------------------------------------------------------------------------


def _document(info: mi.StructType | mi.DictType, raw: Column) -> ValueColumns:
    parsed = F.col(PARSED)
    if isinstance(info, mi.DictType):
        map_type = T.MapType(T.StringType(), _parse_type(info.value_type))
        parse = F.from_json(raw, map_type, _STRICT)
        keys = F.map_keys(parsed)
        # A key of the map named as a field below it is no field: such a name is not searched.
        odd = [found & ~F.array_contains(keys, name) for name, found in _below(info, raw, False)]
        checks = [parsed.isNotNull(), _holds(info, parsed), ~_any(odd)]
        valid = F.coalesce(_all(checks), F.lit(False)) & _alone(raw, an_object=True)
        return ValueColumns(F.when(valid, parsed.try_cast(_table_type(info))), valid, parse)
    wide = _document_schema(info, "wide")
    narrow = _document_schema(info, "narrow")
    if narrow == wide or not NARROW_FIRST or _has_ids(info):
        parse = F.from_json(raw, wide, _JSON_OPTIONS)
        valid, value = _document_read(info, parsed, raw, narrow=False)
        valid = valid & _alone(raw, an_object=True)
        return ValueColumns(F.when(valid, value), valid, parse)
    # Read with its integers as LongType first: Spark's reader refuses a record whose integer
    # token does not fit a long, or is a fraction or a string, and such a record (a u64 id
    # above 2**63, a malformed value) is read again wide, exactly as before. A record read
    # narrow holds the same integers the wide reading would (longs fit DecimalType(38, 18)),
    # checked against the same bounds, without a decimal per field: the storage objects'
    # table was computed in 8.7-9.4 s instead of 10.4-10.6 s at 10M keys (docs/pipeline.md).
    first = F.from_json(raw, narrow, _JSON_OPTIONS)
    fits = first.isNotNull() & first[_CORRUPT].isNull()
    parse = F.struct(
        first.alias("narrow"), F.when(~fits, F.from_json(raw, wide, _JSON_OPTIONS)).alias("wide")
    )
    read_narrow = parsed["narrow"]
    fitted = read_narrow.isNotNull() & read_narrow[_CORRUPT].isNull()
    valid_narrow, value_narrow = _document_read(info, read_narrow, raw, narrow=True)
    valid_wide, value_wide = _document_read(info, parsed["wide"], raw, narrow=False)
    valid = F.when(fitted, valid_narrow).otherwise(valid_wide) & _alone(raw, an_object=True)
    return ValueColumns(
        F.when(valid, F.when(fitted, value_narrow).otherwise(value_wide)), valid, parse
    )


NARROW_FIRST = True
"""Whether documents are read with their integers as LongType first (`_document`); the
tests read them both ways and compare."""

ID_FIELDS = frozenset({"producer_id", "consumer_id", "broker_id", "from_broker", "to_broker"})
"""The layout's id fields: random u64 in Danube, half of them above a long. A document with
one is read wide at once: read narrow first, half of them would be read twice (a producer's
and a subscription's table took 11.2 s instead of 7.3 s at 10M keys)."""


def _has_ids(info: mi.StructType) -> bool:
    return any(field.encode_name in ID_FIELDS for field in info.fields)


def _document_schema(info: mi.StructType, width: Width) -> T.StructType:
    fields = _struct_fields(info, lambda item: _spark_type(item, width))
    return T.StructType([*fields, T.StructField(_CORRUPT, T.StringType())])


def _document_read(
    info: mi.StructType, parsed: Column, raw: Column, *, narrow: bool
) -> tuple[Column, Column]:
    """Whether `parsed` (the document as read, wide or narrow) is valid, and its typed value
    (to be taken only where valid)."""
    odd = [
        *_absent_not_null(info, parsed, raw),
        *_unquoted_numbers(info, parsed, raw, narrow),
        *(found for _, found in _below(info, raw, narrow)),
    ]
    checks = [
        parsed[_CORRUPT].isNull(),
        _holds(info, parsed, narrow),
        *_present(info, parsed, raw),
        *_strict_strings(info, parsed, raw),
        ~_any(odd) | _unknown_fields(info, raw),
    ]
    valid = F.coalesce(reduce(lambda left, right: left & right, checks), F.lit(False))
    fields = F.struct(*(parsed[field.encode_name] for field in info.fields))
    return valid, fields.try_cast(_table_type(info))


def _present(info: mi.StructType, parsed: Column, raw: Column) -> list[Column]:
    """Spark reads an absent field and an explicit null alike; the runtime refuses the
    absence of a field that must be there even if null (a storage object's `etag`), so such
    a field, when read as null, is checked to be written as null in the raw text. A name
    that a nested document's field has too is not searched: the search cannot tell the
    levels apart (nor a field the type does not know, holding the name as a key, from the
    document's own: such a document hides the absence)."""
    below = {field.encode_name for field in _fields_below(info)}
    checks = []
    for field in info.fields:
        if field.required and _nullable_type(field.type) and field.encode_name not in below:
            name = re.escape(field.encode_name)
            written = raw.rlike(rf'"{name}"\s*:\s*null\b')
            checks.append(parsed[field.encode_name].isNotNull() | written)
    return checks


def _unknown_fields(info: mi.StructType, raw: Column) -> Column:
    """Whether the document has a field of its own that its type does not (the runtime ignores
    it: a newer writer's addition). The raw-text searches below cannot tell a key inside such
    a field from the document's own, so where one matched in such a document, it is not
    taken as a fault. (A parse of the document: it runs only where a search matched.)"""
    known = F.array(*(F.lit(field.encode_name) for field in info.fields))
    return F.size(F.array_except(F.json_object_keys(raw), known)) > 0


def _any(checks: list[Column]) -> Column:
    return reduce(lambda left, right: left | right, checks, F.lit(False))


def _strict_strings(info: mi.StructType, parsed: Column, raw: Column) -> list[Column]:
    """Spark reads a number where a string belongs as its text; the runtime refuses it, so the
    top-level string fields are checked to be JSON strings (or null) in the raw text."""
    checks = []
    for field in info.fields:
        if _is_text(field.type):
            name = re.escape(field.encode_name)
            quoted = raw.rlike(rf'"{name}"\s*:\s*(?:"|null\b)')
            checks.append(parsed[field.encode_name].isNull() | quoted)
    return checks


def _absent_not_null(info: mi.StructType, parsed: Column, raw: Column) -> list[Column]:
    """Spark reads an explicit null and an absent field alike; the runtime takes only the
    absence where a field may be left out but is not nullable (a storage object's
    `offset_index`), so the raw text of such a field, when read as null, is checked not to
    hold it as null: what is returned is true where it does. The pattern runs only where the
    field was read as null."""
    found = []
    for field in info.fields:
        if not field.required and not _nullable_type(field.type):
            name = re.escape(field.encode_name)
            explicit = raw.rlike(rf'"{name}"\s*:\s*null\b')
            found.append(parsed[field.encode_name].isNull() & explicit)
    return found


def _unquoted_numbers(
    info: mi.StructType, parsed: Column, raw: Column, narrow: bool
) -> list[Column]:
    """Spark's wide reading takes a number written as a string ("5"), and an integer written
    with a fraction or an exponent (1.0, 1e3), in a field or in a list of integers; the
    runtime refuses them, so the top-level integer fields and lists of integers (or of
    tuples of them) read wide are checked to hold plain integers in the raw text, and the
    floating-point fields not to be strings: what is returned is true where they are not.
    (Read narrow, an integer refuses them.)"""
    found = []
    for field in info.fields:
        kind = _single(field.type) if isinstance(field.type, mi.UnionType) else field.type
        if isinstance(kind, mi.IntType) and not narrow:
            odd = _ODD_INT
        elif isinstance(kind, mi.ListType) and _of_ints(kind.item_type) and not narrow:
            odd = _ODD_ITEM
        elif isinstance(kind, mi.FloatType):
            odd = '"'
        else:
            continue
        name = re.escape(field.encode_name)
        written = raw.rlike(rf'"{name}"\s*:\s*{odd}')
        found.append(parsed[field.encode_name].isNotNull() & written)
    return found


_ODD_INT = r'(?:"|-?[0-9]*[.eE])'
"""After an integer field's key: a string, or a number with a fraction or an exponent."""
_PLAIN = r'[^\[\]".eE]'
_ODD_ITEM = rf'\[(?:{_PLAIN}|\[{_PLAIN}*+\])*+\[?{_PLAIN}*+[".eE]'
"""A list (of integers, or of lists of them) with a quote, a point or an exponent in it,
before it closes: what its plain items and inner lists hold up to there is taken whole
(possessive), so that the match is linear in the list's length."""


def _below(
    info: mi.StructType | mi.DictType, raw: Column, narrow: bool
) -> list[tuple[str, Column]]:
    """The checks above, for the fields below a document's own (in its nested documents, such
    as a load report's resource usages or a schema reference's entries), and for lists of
    strings at any depth (a load report's topics): Spark's reader takes a number where a
    string belongs, and, read wide, a string or a fraction where an integer belongs; it
    reads an explicit null where a field may only be left out as its absence. Each name
    with, as a column, whether the raw text holds such a value after it.

    The raw text is searched for the field's name as a key anywhere in the document (a key
    is a quoted name followed by a colon: inside a string, its quotes are escaped). So a
    name is searched only where every field of that name in the document is of the same
    kind; a name only the document's own fields have keeps the checks above (which also see
    whether the field was read as null). A map's values with no fields (a list of strings
    per key) are searched after any key."""
    fields = _fields_below(info)
    kinds: dict[str, set[_Odd]] = {}
    for field in [*fields, *(info.fields if isinstance(info, mi.StructType) else ())]:
        kinds.setdefault(field.encode_name, set()).add(_odd_value(field, narrow))
    below = {field.encode_name for field in fields}
    found = []
    for name, odds in sorted(kinds.items()):
        (odd,) = odds if len(odds) == 1 else (None,)
        if odd is None or (name not in below and odd[0] != _ODD_TEXT_ITEM):
            continue
        found.append((name, raw.rlike(rf'"{re.escape(name)}"\s*:\s*{_pattern(odd)}')))
    if isinstance(info, mi.DictType) and not fields:
        values = mi.Field(name="", encode_name="", type=info.value_type)
        odd = _odd_value(values, narrow)
        if odd is not None:
            found.append(("", raw.rlike(rf"{_QUOTED}\s*:\s*{_pattern(odd)}")))
    return found


_QUOTED = r'"(?:[^"\\]|\\.)*+"'
"""A JSON string (a key or a value), taken whole."""


def _fields_below(info: mi.Type, depth: int = 0) -> list[mi.Field]:
    """Every field of the documents nested in `info`, at any depth."""
    if isinstance(info, mi.UnionType):
        return [found for member in _members(info) for found in _fields_below(member, depth)]
    if isinstance(info, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
        return _fields_below(info.item_type, depth)
    if isinstance(info, mi.TupleType):
        return [found for item in info.item_types for found in _fields_below(item, depth)]
    if isinstance(info, mi.DictType):
        return _fields_below(info.value_type, depth + 1)
    if isinstance(info, mi.StructType):
        nested = [found for f in info.fields for found in _fields_below(f.type, depth + 1)]
        return [*(info.fields if depth > 0 else ()), *nested]
    return []


_ODD_TEXT = r'[^"\sn]'
"""After a string field's key: a value that is neither a string nor null."""
_ODD_TEXT_ITEM = rf'\[\s*+(?:{_QUOTED}\s*+,\s*+)*+[^"\s\]n]'
"""After a list of strings' key: an item, after the strings before it, that is no string."""
_Odd = tuple[str | None, bool] | None
"""What, after a field's key, the runtime refuses and Spark's reader takes: a pattern of the
value, and whether an explicit null is refused too (None: nothing)."""


def _odd_value(field: mi.Field, narrow: bool) -> _Odd:
    info = field.type
    kind = _single(info) if isinstance(info, mi.UnionType) else info
    pattern: str | None = None
    if _is_text(kind):
        pattern = _ODD_TEXT
    elif isinstance(kind, mi.IntType):
        pattern = None if narrow else _ODD_INT
    elif isinstance(kind, mi.FloatType) or (isinstance(kind, mi.UnionType) and _numeric(kind)):
        pattern = '"'
    elif isinstance(kind, mi.ListType) and _is_text(kind.item_type):
        pattern = _ODD_TEXT_ITEM
    elif isinstance(kind, mi.ListType) and _of_ints(kind.item_type):
        pattern = None if narrow else _ODD_ITEM
    null = not field.required and not _nullable_type(info)
    return (pattern, null) if pattern is not None or null else None


def _pattern(odd: tuple[str | None, bool]) -> str:
    pattern, null = odd
    if pattern is None:
        return r"null\b"
    return rf"(?:{pattern}|null\b)" if null else pattern


def _of_ints(item: mi.Type) -> bool:
    return isinstance(item, mi.IntType) or (isinstance(item, mi.TupleType) and _int_tuple(item))


def _alone(raw: Column, *, an_object: bool) -> Column:
    """Whether `raw`, a JSON value Spark's reader took (an object, when `an_object`), is alone:
    nothing after it but whitespace. The reader stops at the end of the first value and
    ignores what follows; the runtime refuses a value with trailing text.

    An object ends with a closing brace: where the text's first closing brace is its last
    character, the object ends there (the common case, found without parsing). Elsewhere,
    Jackson counts the items of `[raw]`: exactly one unless what follows the value starts a
    second item (a comma) or is no JSON at all; and where the text holds a closing bracket,
    the items of `[raw,0]`: exactly two unless what follows closes the list early. Both
    hold only where nothing follows. (Each count is a parse: about 1 µs of CPU.)"""
    one = F.json_array_length(F.concat(F.lit("["), raw, F.lit("]")))
    two = F.json_array_length(F.concat(F.lit("["), raw, F.lit(",0]")))
    parsed = (one == 1) & (~raw.contains("]") | (two == 2))
    if an_object:
        # The text before the first closing brace, and the brace, are the whole text (in
        # bytes: counting characters, as `locate` and `length` do, costs more than Jackson).
        before = F.substring_index(raw, "}", 1)
        parsed = (F.octet_length(before) + 1 == F.octet_length(raw)) | parsed
    return F.coalesce(parsed, F.lit(False))


def _nullable_type(info: mi.Type) -> bool:
    return isinstance(info, mi.NoneType) or (
        isinstance(info, mi.UnionType) and _members(info) != info.types
    )


def _is_text(info: mi.Type) -> bool:
    if isinstance(info, mi.UnionType):
        members = _members(info)
        return len(members) == 1 and _is_text(members[0])
    if isinstance(info, mi.EnumType):
        return all(isinstance(member.value, str) for member in info.cls)
    return isinstance(info, mi.StrType)


# Types --------------------------------------------------------------------------------------


def _members(info: mi.UnionType) -> tuple[mi.Type, ...]:
    return tuple(member for member in info.types if not isinstance(member, mi.NoneType))


def _single(info: mi.UnionType) -> Any:
    members = _members(info)
    if len(members) == 1:
        return members[0]
    return info


def _numeric(info: mi.UnionType) -> bool:
    return all(isinstance(member, mi.IntType | mi.FloatType) for member in _members(info))


def _nullable(field: mi.Field) -> bool:
    return not field.required or _nullable_type(field.type)


def _parse_type(info: mi.Type) -> T.DataType:
    """The type Spark's JSON reader gets: integers wide, so that bad ones show."""
    return _spark_type(info, "wide")


def _table_type(info: mi.Type) -> T.DataType:
    """The type in the tables: u64 as DecimalType(20, 0), smaller integers as LongType."""
    return _spark_type(info, "table")


def _int_type(info: mi.IntType, width: Width) -> T.DataType:
    if width == "wide":
        return _WIDE
    if width == "narrow":
        return T.LongType()
    return T.LongType() if info.le is not None and info.le <= _LONG_MAX else U64_TYPE


def _spark_type(info: mi.Type, width: Width) -> T.DataType:
    wide = width == "wide"
    if isinstance(info, mi.IntType):
        return _int_type(info, width)
    if isinstance(info, mi.FloatType):
        return T.DoubleType()
    if isinstance(info, mi.BoolType):
        return T.BooleanType()
    if isinstance(info, mi.EnumType):
        str_valued = all(isinstance(member.value, str) for member in info.cls)
        return T.StringType() if str_valued else (_WIDE if wide else T.LongType())
    if isinstance(info, mi.ListType):
        return T.ArrayType(_spark_type(info.item_type, width))
    if isinstance(info, mi.TupleType):
        items = {repr(_spark_type(item, width)) for item in info.item_types}
        if len(items) == 1:
            return T.ArrayType(_spark_type(info.item_types[0], width))
        return T.StringType()
    if isinstance(info, mi.DictType):
        return T.MapType(T.StringType(), _spark_type(info.value_type, width))
    if isinstance(info, mi.StructType):
        return T.StructType(_struct_fields(info, lambda item: _spark_type(item, width)))
    if isinstance(info, mi.UnionType):
        single = _single(info)
        if single is not info:
            return _spark_type(single, width)
        return T.DoubleType() if _numeric(info) else T.StringType()
    # Strings, and what Spark cannot type (a schema definition): the JSON text itself.
    return T.StringType()


def _struct_fields(info: mi.StructType, type_of: Any) -> list[T.StructField]:
    return [T.StructField(field.encode_name, type_of(field.type)) for field in info.fields]


# Checks -------------------------------------------------------------------------------------


def _holds(info: mi.Type, column: Column, narrow: bool = False) -> Column:
    """True when `column` (as parsed, `narrow`: its integers as LongType) is null or meets
    `info`'s bounds, enums and shape."""
    if isinstance(info, mi.IntType):
        if narrow:
            return column.isNull() | _int_bounds(info, column, narrow)
        return column.isNull() | ((column == F.floor(column)) & _int_bounds(info, column))
    if isinstance(info, mi.EnumType):
        return column.isNull() | column.isin([_enum_value(member) for member in info.cls])
    if isinstance(info, mi.StrType):
        return column.isNull() | _str_bounds(info, column)
    if isinstance(info, mi.ListType):
        return column.isNull() | _list(info.item_type, column, narrow)
    if isinstance(info, mi.TupleType):
        return column.isNull() | _tuple(info, column, narrow)
    if isinstance(info, mi.DictType):
        values = F.map_values(column)
        return column.isNull() | F.forall(values, lambda item: _item(info.value_type, item, narrow))
    if isinstance(info, mi.StructType):
        return column.isNull() | _all(
            _field(field, column[field.encode_name], narrow) for field in info.fields
        )
    if isinstance(info, mi.UnionType) and _single(info) is not info:
        return _holds(_single(info), column, narrow)
    return F.lit(True)


def _str_bounds(info: mi.StrType, column: Column) -> Column:
    """A string's length bounds (characters, as msgspec counts them)."""
    holds = F.lit(True)
    if info.min_length is not None:
        holds = holds & (F.length(column) >= info.min_length)
    if info.max_length is not None:
        holds = holds & (F.length(column) <= info.max_length)
    return holds


def _list(item: mi.Type, column: Column, narrow: bool) -> Column:
    """Every item of a list meets `item`. Lists of integers (and of tuples of them) are checked
    with array_min / array_max, which Spark compiles; a lambda over each item (forall) runs
    interpreted and costs tens of times more on the storage objects' offset indexes. Read
    wide, a fraction (or a number written as a string) inside such a list is not seen here:
    the raw text is checked for it (`_unquoted_numbers`). Read narrow (`_document`), the
    reader refuses both, and the document is read wide."""
    if isinstance(item, mi.IntType):
        return _int_items(item, column, narrow)
    first = _first_int(item) if isinstance(item, mi.TupleType) else None
    if isinstance(item, mi.TupleType) and first is not None and _int_tuple(item):
        flat = F.flatten(column)
        sized = F.size(flat) == F.size(column) * len(item.item_types)
        return sized & _int_items(first, flat, narrow)
    return F.forall(column, lambda each: _item(item, each, narrow))


def _int_tuple(info: mi.TupleType) -> bool:
    return bool(info.item_types) and all(item == _first_int(info) for item in info.item_types)


def _first_int(info: mi.TupleType) -> mi.IntType | None:
    first = info.item_types[0]
    return first if isinstance(first, mi.IntType) else None


def _int_items(info: mi.IntType, column: Column, narrow: bool) -> Column:
    complete = F.size(F.array_compact(column)) == F.size(column)
    low, high = F.array_min(column), F.array_max(column)
    bounds = _int_bounds(info, low, narrow) & _int_bounds(info, high, narrow)
    bounded = F.coalesce(bounds, F.lit(True))
    return complete & bounded


def _item(info: mi.Type, item: Column, narrow: bool = False) -> Column:
    return item.isNotNull() & _holds(info, item, narrow)


def _field(field: mi.Field, column: Column, narrow: bool) -> Column:
    check = _holds(field.type, column, narrow)
    return check if _nullable(field) else check & column.isNotNull()


def _tuple(info: mi.TupleType, column: Column, narrow: bool) -> Column:
    if not isinstance(_parse_type(info), T.ArrayType):
        return F.lit(True)
    size = F.size(column) == len(info.item_types)
    items = enumerate(info.item_types)
    return size & _all(_item(item, column[index], narrow) for index, item in items)


def _all(checks: Any) -> Column:
    return reduce(lambda left, right: left & right, checks, F.lit(True))


def _int_bounds(info: mi.IntType, column: Column, narrow: bool = False) -> Column:
    low = info.ge if info.ge is not None else (info.gt + 1 if info.gt is not None else 0)
    high = info.le if info.le is not None else (info.lt - 1 if info.lt is not None else U64_MAX)
    # Every integer of the layout is unsigned and at most u64, whatever its annotation says.
    low, high = max(low, 0), min(high, U64_MAX)
    if narrow:  # a LongType column, compared with longs (not a decimal per row)
        if low > _LONG_MAX:
            return F.when(column.isNotNull(), F.lit(False))  # null stays null, as in `between`
        return column.between(F.lit(low), F.lit(min(high, _LONG_MAX)))
    return column.between(_decimal(low), _decimal(high))


def _decimal(number: int) -> Column:
    # A Python int above 2**63 is no Spark literal; a Decimal is.
    return F.lit(Decimal(number)).cast(U64_TYPE)


def _enum_value(member: Enum) -> Any:
    return member.value
