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
from typing import Any

import msgspec.inspect as mi
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.layout import U64_MAX, KeyKind
from metaplane.resources import VALUE_TYPES

U64_TYPE = T.DecimalType(20, 0)
"""Every unsigned 64-bit id and offset, in every table."""

# Integers are first read wide, with a fraction, so that 1.5 or 1e30 where an integer belongs
# is seen as malformed instead of being rounded or wrapped.
_WIDE = T.DecimalType(38, 18)
_LONG_MAX = 2**63 - 1
_CORRUPT = "_corrupt"
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
_NULL = r"^\s*null\s*$"
_NUMBER = r"^\s*(0|[1-9][0-9]{0,19})\s*$"
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


# What the runtime's value types check in code (`__post_init__`) rather than in their types.
_CODE_CHECKS = {KeyKind.STORAGE_CUR: _padded_offset}


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
    parse = F.from_json(F.concat(F.lit('{"v":'), raw, F.lit("}")), schema)["v"]
    parsed = F.col(PARSED)
    valid = parsed.isNotNull() & _holds(info, parsed)
    if isinstance(info, mi.StrType):
        # Spark's reader takes any JSON token as a string; the runtime takes only strings.
        valid = valid & raw.rlike(_JSON_STRING)
    valid = F.coalesce(valid, F.lit(False))
    return ValueColumns(F.when(valid, parsed.try_cast(_table_type(info))), valid, parse)


# Documents ----------------------------------------------------------------------------------


def _document(info: mi.StructType | mi.DictType, raw: Column) -> ValueColumns:
    parsed = F.col(PARSED)
    if isinstance(info, mi.DictType):
        parse = F.from_json(raw, T.MapType(T.StringType(), _parse_type(info.value_type)))
        valid = F.coalesce(parsed.isNotNull() & _holds(info, parsed), F.lit(False))
        return ValueColumns(F.when(valid, parsed.try_cast(_table_type(info))), valid, parse)
    schema = T.StructType(
        [*_struct_fields(info, _parse_type), T.StructField(_CORRUPT, T.StringType())]
    )
    parse = F.from_json(raw, schema, _JSON_OPTIONS)
    checks = [parsed[_CORRUPT].isNull(), _holds(info, parsed), *_strict_strings(info, parsed, raw)]
    valid = F.coalesce(reduce(lambda left, right: left & right, checks), F.lit(False))
    fields = F.struct(*(parsed[field.encode_name] for field in info.fields))
    return ValueColumns(F.when(valid, fields.try_cast(_table_type(info))), valid, parse)


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
    if not field.required:
        return True
    return isinstance(field.type, mi.UnionType) and _members(field.type) != field.type.types


def _parse_type(info: mi.Type) -> T.DataType:
    """The type Spark's JSON reader gets: integers wide, so that bad ones show."""
    return _spark_type(info, wide=True)


def _table_type(info: mi.Type) -> T.DataType:
    """The type in the tables: u64 as DecimalType(20, 0), smaller integers as LongType."""
    return _spark_type(info, wide=False)


def _int_type(info: mi.IntType, wide: bool) -> T.DataType:
    if wide:
        return _WIDE
    return T.LongType() if info.le is not None and info.le <= _LONG_MAX else U64_TYPE


def _spark_type(info: mi.Type, wide: bool) -> T.DataType:
    if isinstance(info, mi.IntType):
        return _int_type(info, wide)
    if isinstance(info, mi.FloatType):
        return T.DoubleType()
    if isinstance(info, mi.BoolType):
        return T.BooleanType()
    if isinstance(info, mi.EnumType):
        str_valued = all(isinstance(member.value, str) for member in info.cls)
        return T.StringType() if str_valued else (_WIDE if wide else T.LongType())
    if isinstance(info, mi.ListType):
        return T.ArrayType(_spark_type(info.item_type, wide))
    if isinstance(info, mi.TupleType):
        items = {repr(_spark_type(item, wide)) for item in info.item_types}
        if len(items) == 1:
            return T.ArrayType(_spark_type(info.item_types[0], wide))
        return T.StringType()
    if isinstance(info, mi.DictType):
        return T.MapType(T.StringType(), _spark_type(info.value_type, wide))
    if isinstance(info, mi.StructType):
        return T.StructType(_struct_fields(info, lambda item: _spark_type(item, wide)))
    if isinstance(info, mi.UnionType):
        single = _single(info)
        if single is not info:
            return _spark_type(single, wide)
        return T.DoubleType() if _numeric(info) else T.StringType()
    # Strings, and what Spark cannot type (a schema definition): the JSON text itself.
    return T.StringType()


def _struct_fields(info: mi.StructType, type_of: Any) -> list[T.StructField]:
    return [T.StructField(field.encode_name, type_of(field.type)) for field in info.fields]


# Checks -------------------------------------------------------------------------------------


def _holds(info: mi.Type, column: Column) -> Column:
    """True when `column` (as parsed) is null or meets `info`'s bounds, enums and shape."""
    if isinstance(info, mi.IntType):
        return column.isNull() | ((column == F.floor(column)) & _int_bounds(info, column))
    if isinstance(info, mi.EnumType):
        return column.isNull() | column.isin([_enum_value(member) for member in info.cls])
    if isinstance(info, mi.StrType):
        return column.isNull() | _str_bounds(info, column)
    if isinstance(info, mi.ListType):
        return column.isNull() | _list(info.item_type, column)
    if isinstance(info, mi.TupleType):
        return column.isNull() | _tuple(info, column)
    if isinstance(info, mi.DictType):
        values = F.map_values(column)
        return column.isNull() | F.forall(values, lambda item: _item(info.value_type, item))
    if isinstance(info, mi.StructType):
        return column.isNull() | _all(
            _field(field, column[field.encode_name]) for field in info.fields
        )
    if isinstance(info, mi.UnionType) and _single(info) is not info:
        return _holds(_single(info), column)
    return F.lit(True)


def _str_bounds(info: mi.StrType, column: Column) -> Column:
    """A string's length bounds (characters, as msgspec counts them)."""
    holds = F.lit(True)
    if info.min_length is not None:
        holds = holds & (F.length(column) >= info.min_length)
    if info.max_length is not None:
        holds = holds & (F.length(column) <= info.max_length)
    return holds


def _list(item: mi.Type, column: Column) -> Column:
    """Every item of a list meets `item`. Lists of integers (and of tuples of them) are checked
    with array_min / array_max, which Spark compiles; a lambda over each item (forall) runs
    interpreted and costs tens of times more on the storage objects' offset indexes. Those
    cheap checks leave out one case: a fraction inside such a list is not seen."""
    if isinstance(item, mi.IntType):
        return _int_items(item, column)
    first = _first_int(item) if isinstance(item, mi.TupleType) else None
    if isinstance(item, mi.TupleType) and first is not None and _int_tuple(item):
        flat = F.flatten(column)
        sized = F.size(flat) == F.size(column) * len(item.item_types)
        return sized & _int_items(first, flat)
    return F.forall(column, lambda each: _item(item, each))


def _int_tuple(info: mi.TupleType) -> bool:
    return bool(info.item_types) and all(item == _first_int(info) for item in info.item_types)


def _first_int(info: mi.TupleType) -> mi.IntType | None:
    first = info.item_types[0]
    return first if isinstance(first, mi.IntType) else None


def _int_items(info: mi.IntType, column: Column) -> Column:
    complete = F.size(F.array_compact(column)) == F.size(column)
    low, high = F.array_min(column), F.array_max(column)
    bounded = F.coalesce(_int_bounds(info, low) & _int_bounds(info, high), F.lit(True))
    return complete & bounded


def _item(info: mi.Type, item: Column) -> Column:
    return item.isNotNull() & _holds(info, item)


def _field(field: mi.Field, column: Column) -> Column:
    check = _holds(field.type, column)
    return check if _nullable(field) else check & column.isNotNull()


def _tuple(info: mi.TupleType, column: Column) -> Column:
    if not isinstance(_parse_type(info), T.ArrayType):
        return F.lit(True)
    size = F.size(column) == len(info.item_types)
    return size & _all(_item(item, column[index]) for index, item in enumerate(info.item_types))


def _all(checks: Any) -> Column:
    return reduce(lambda left, right: left & right, checks, F.lit(True))


def _int_bounds(info: mi.IntType, column: Column) -> Column:
    low = info.ge if info.ge is not None else (info.gt + 1 if info.gt is not None else 0)
    high = info.le if info.le is not None else (info.lt - 1 if info.lt is not None else U64_MAX)
    # Every integer of the layout is unsigned and at most u64, whatever its annotation says.
    return column.between(_decimal(max(low, 0)), _decimal(min(high, U64_MAX)))


def _decimal(number: int) -> Column:
    # A Python int above 2**63 is no Spark literal; a Decimal is.
    return F.lit(Decimal(number)).cast(U64_TYPE)


def _enum_value(member: Enum) -> Any:
    return member.value
