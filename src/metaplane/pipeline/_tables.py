"""Keys parsed into typed tables with the layout's own patterns (`metaplane.layout.PATTERNS`):
one table per key kind, with the key's fields as columns, the value typed as
`metaplane.resources` reads it, and a table of the keys outside the layout.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType, UnionType
from typing import get_args, get_type_hints

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.layout import PATTERNS, KeyKind, KeyPattern, ParsedKey
from metaplane.pipeline._snapshot import SPARK_SCHEMA
from metaplane.pipeline._values import PARSED, U64_TYPE, value_columns

UNKNOWN = "unknown"
"""The table (and folder) of the keys that match no kind of the layout."""

ENTRY_COLUMNS = ("create_revision", "mod_revision", "key_version", "lease")
"""What every table carries of the store's entry (`key_version` is the entry's `version`,
renamed: `version` is the field of a schema version's key)."""


def _numeric_fields() -> frozenset[str]:
    """The key fields the layout parses as numbers (ids, versions, offsets)."""
    hints = get_type_hints(ParsedKey)
    return frozenset(
        name
        for name, hint in hints.items()
        if isinstance(hint, UnionType) and int in get_args(hint)
    )


NUMERIC_FIELDS = _numeric_fields()


@dataclass(frozen=True)
class Tables:
    """The typed tables of one snapshot: one per key kind (empty when the kind is absent)
    and the keys outside the layout."""

    kinds: Mapping[KeyKind, DataFrame]
    unknown: DataFrame

    def __getitem__(self, kind: KeyKind) -> DataFrame:
        return self.kinds[kind]

    def __iter__(self) -> Iterator[tuple[str, DataFrame]]:
        yield from ((kind.value, frame) for kind, frame in self.kinds.items())
        yield UNKNOWN, self.unknown

    def cached(self) -> Tables:
        """The same tables, kept in memory once read (for snapshots that fit)."""
        kinds = {
            kind: frame.persist(StorageLevel.MEMORY_AND_DISK) for kind, frame in self.kinds.items()
        }
        return Tables(MappingProxyType(kinds), self.unknown.persist(StorageLevel.MEMORY_AND_DISK))

    def unpersist(self) -> None:
        for _, frame in self:
            frame.unpersist()


# Classifying --------------------------------------------------------------------------------


def _root(pattern: KeyPattern) -> str | None:
    """The literal first segment every key of the pattern starts with."""
    match = re.match(r"\^/([A-Za-z0-9_-]+)(?:/|\(\?!)", pattern.regex)
    return match.group(1) if match else None


@cache
def _patterns_by_root() -> Mapping[str | None, tuple[KeyPattern, ...]]:
    by_root: defaultdict[str | None, list[KeyPattern]] = defaultdict(list)
    for pattern in PATTERNS.values():
        by_root[_root(pattern)].append(pattern)
    return MappingProxyType({root: tuple(patterns) for root, patterns in by_root.items()})


def _kind_expression(key: Column) -> Column:
    """The kind of each key, or null. The patterns are grouped by their first segment, so
    that a key is only tried against the patterns of its own root."""
    root = F.substring_index(F.substring(key, 2, 1 << 20), "/", 1)
    expression: Column | None = None
    for name, patterns in _patterns_by_root().items():
        inner = _first_match(key, patterns)
        condition = F.lit(True) if name is None else (root == name)
        expression = (
            F.when(condition, inner) if expression is None else expression.when(condition, inner)
        )
    assert expression is not None
    return expression


def _first_match(key: Column, patterns: tuple[KeyPattern, ...]) -> Column:
    expression = F.when(key.rlike(patterns[0].regex), F.lit(patterns[0].kind.value))
    for pattern in patterns[1:]:
        expression = expression.when(key.rlike(pattern.regex), F.lit(pattern.kind.value))
    return expression


def classify(snapshot: DataFrame) -> DataFrame:
    """The snapshot's rows with `kind` (null outside the layout), `raw`, the value's text
    (bytes that are not UTF-8 replaced, so that every output can hold it) and `utf8`, whether
    the value was UTF-8 at all (the runtime refuses one that is not)."""
    key = F.col("key")
    text = F.col("value").cast("string")
    return snapshot.select(
        key,
        F.make_valid_utf8(text).alias("raw"),
        F.is_valid_utf8(text).alias("utf8"),
        "create_revision",
        "mod_revision",
        F.col("version").alias("key_version"),
        "lease",
        F.when(key.startswith("/"), _kind_expression(key)).alias("kind"),
    )


# Typed tables -------------------------------------------------------------------------------


def kind_table(classified: DataFrame, kind: KeyKind) -> DataFrame:
    """The table of `kind`: key, its fields, `value`, `valid`, `raw` (kept only when the
    value is malformed) and the entry's revisions."""
    pattern = PATTERNS[kind]
    raw = F.col("raw")
    read = value_columns(kind, raw)
    rows = classified.where(F.col("kind") == kind.value)
    if read.parse is not None:
        rows = rows.select("*", read.parse.alias(PARSED))
    valid = F.col("utf8") & read.valid
    columns = [F.col("key"), *_field_columns(pattern)]
    if read.value is not None:
        columns.append(F.when(valid, read.value).alias("value"))
    columns += [
        valid.alias("valid"),
        F.when(~valid, raw).alias("raw"),
        *(F.col(name) for name in ENTRY_COLUMNS),
    ]
    return rows.select(*columns)


def _field_columns(pattern: KeyPattern) -> list[Column]:
    columns = []
    for index, name in enumerate(pattern.groups, start=1):
        text = F.regexp_extract(F.col("key"), pattern.regex, index)
        # The pattern admits only canonical decimals within u64, but Spark may evaluate the
        # cast before the filter on the kind: on another kind's key it must give null, not fail.
        columns.append((text.try_cast(U64_TYPE) if name in NUMERIC_FIELDS else text).alias(name))
    return columns


def unknown_table(classified: DataFrame) -> DataFrame:
    """The keys that are no kind of key of the layout."""
    return classified.where(F.col("kind").isNull()).select(
        "key", "raw", *(F.col(name) for name in ENTRY_COLUMNS)
    )


def parse_tables(classified: DataFrame) -> Tables:
    """Every kind's table (lazily: nothing runs until a table is used)."""
    kinds = {kind: kind_table(classified, kind) for kind in PATTERNS}
    return Tables(MappingProxyType(kinds), unknown_table(classified))


@cache
def _schemas(spark: SparkSession) -> Mapping[str, T.StructType]:
    empty = classify(spark.createDataFrame([], SPARK_SCHEMA))
    tables = parse_tables(empty)
    return MappingProxyType({name: frame.schema for name, frame in tables})


def read_tables(spark: SparkSession, folder: Path) -> Tables:
    """The tables written by `write_tables` (a kind without a folder is an empty table)."""
    schemas = _schemas(spark)

    def read(name: str) -> DataFrame:
        path = folder / name
        if path.is_dir():
            return spark.read.schema(schemas[name]).parquet(str(path))
        # No partitions at all: an absent kind costs the queries that union it nothing.
        return spark.createDataFrame(spark.sparkContext.emptyRDD(), schemas[name])

    kinds = {kind: read(kind.value) for kind in PATTERNS}
    return Tables(MappingProxyType(kinds), read(UNKNOWN))
