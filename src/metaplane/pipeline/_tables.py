"""Keys parsed into typed tables with the layout's own table: one pass splits every key into
its segments and decides its kind from them (the segment count, the literal segments, each
field checked by the layout's own field pattern), as `metaplane.layout.parse` does; then one
table per key kind, with the key's fields as columns, the value typed as `metaplane.resources`
reads it, and a table of the keys outside the layout.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache, partial
from pathlib import Path
from types import MappingProxyType, UnionType
from typing import get_args, get_type_hints

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.layout import KeyKind, ParsedKey

# The layout's own table (each kind's segments) and field patterns, the ones `parse` and
# `PATTERNS` are made of: metaplane.layout does not export them.
from metaplane.layout._patterns import END, FIELD_REGEXES
from metaplane.layout._table import TEMPLATES, Field, Template
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


class _Frames(Mapping[KeyKind, DataFrame]):
    """Each kind's table, built the first time it is asked for (and persisted then, when
    kept): building one is hundreds of calls into the JVM (its fields, its value's checks),
    about 0.1 s of the driver's time a kind; a job that reads a few kinds pays for those."""

    def __init__(self, build: Callable[[KeyKind], DataFrame], keep: bool) -> None:
        self._build = build
        self._keep = keep
        self._built: dict[KeyKind, DataFrame] = {}
        self._lock = threading.Lock()

    def __getitem__(self, kind: KeyKind) -> DataFrame:
        with self._lock:
            frame = self._built.get(kind)
            if frame is None:
                if kind not in TEMPLATES:
                    raise KeyError(kind)
                frame = self._build(kind)
                if self._keep:
                    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                self._built[kind] = frame
            return frame

    def __iter__(self) -> Iterator[KeyKind]:
        return iter(TEMPLATES)

    def __len__(self) -> int:
        return len(TEMPLATES)

    def unpersist(self) -> None:
        with self._lock:
            for frame in self._built.values():
                frame.unpersist()
            self._built.clear()


class Tables:
    """The typed tables of one snapshot: one per key kind (empty when the kind is absent)
    and the keys outside the layout. A kind's table is built when first used.

    `shared` builds a view that several transforms use once per set of tables; when the
    tables are kept in memory, so are such views (`kept`), and so they are with
    `keep_views` (tables read from files, cheap to scan again, with views that join and
    aggregate them)."""

    def __init__(
        self,
        build: Callable[[KeyKind], DataFrame],
        unknown: DataFrame,
        *,
        keep: bool = False,
        keep_views: bool = False,
    ) -> None:
        self._build = build
        self._frames = _Frames(build, keep)
        self.kinds: Mapping[KeyKind, DataFrame] = self._frames
        self.unknown = unknown.persist(StorageLevel.MEMORY_AND_DISK) if keep else unknown
        self.kept = keep or keep_views
        self._views: dict[str, DataFrame] = {}
        # Re-entrant: a view may be built on another (the last committed offsets on the
        # object facts), by the thread that holds the lock.
        self._lock = threading.RLock()

    def __getitem__(self, kind: KeyKind) -> DataFrame:
        return self.kinds[kind]

    def __iter__(self) -> Iterator[tuple[str, DataFrame]]:
        yield from ((kind.value, frame) for kind, frame in self.kinds.items())
        yield UNKNOWN, self.unknown

    def shared(self, name: str, build: Callable[[Tables], DataFrame]) -> DataFrame:
        """The view `name`, built by `build` the first time it is asked for."""
        with self._lock:
            view = self._views.get(name)
            if view is None:
                view = build(self)
                if self.kept:
                    view = view.persist(StorageLevel.MEMORY_AND_DISK)
                self._views[name] = view
            return view

    def has_view(self, name: str) -> bool:
        """Whether the view `name` was asked for (it may not be computed yet)."""
        with self._lock:
            return name in self._views

    def cached(self) -> Tables:
        """The same tables, kept in memory once read (for snapshots that fit)."""
        return Tables(self._build, self.unknown, keep=True)

    def unpersist(self) -> None:
        self._frames.unpersist()
        self.unknown.unpersist()
        with self._lock:
            for view in self._views.values():
                view.unpersist()
            self._views.clear()


# Classifying --------------------------------------------------------------------------------


def segments(key: Column) -> Column:
    """A key's segments: "/cluster/leader" is ["", "cluster", "leader"]."""
    return F.split(key, "/")


def _segment(parts: Column, position: int) -> Column:
    """Segment `position` of a template (0 is the root), null past the end."""
    return F.get(parts, position + 1)


@cache
def _field_regex(name: str) -> str:
    """The layout's pattern of one field, for a whole segment."""
    return f"^(?:{FIELD_REGEXES[name]}){END}"


# The decision is written as SQL text and handed to Spark in one call: built from Columns it
# took about 3,500 calls from Python into the JVM (a third of a second) for every job that
# classifies. The text is what those Columns were: `get` (null past the end, never an error
# in ANSI mode), `=`, RLIKE with the layout's own pattern (anchored: a whole segment), and
# CASE WHEN without ELSE (null: no kind).


def _sql_text(text: str) -> str:
    """`text` as a Spark SQL string literal (a backslash is an escape there)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_segment(parts: str, position: int) -> str:
    return f"get({parts}, {position + 1})"


def _fits(parts: str, template: Template) -> str:
    """The key has the template's shape: its segment count and literal segments (the root
    is already checked)."""
    checks = [f"size({parts}) = {len(template.segments) + 1}"]
    checks += [
        f"{_sql_segment(parts, position)} = {_sql_text(segment)}"
        for position, segment in enumerate(template.segments)
        if position > 0 and isinstance(segment, str)
    ]
    return " AND ".join(checks)


def _valid_fields(parts: str, template: Template) -> str:
    """Each field segment holds a valid value by its field's pattern; a field named twice
    (a namespace topic entry's namespace) holds the same text both times."""
    checks: list[str] = []
    first: dict[str, int] = {}
    for position, segment in enumerate(template.segments):
        if not isinstance(segment, Field):
            continue
        text = _sql_segment(parts, position)
        if segment.name in first:
            checks.append(f"{text} = {_sql_segment(parts, first[segment.name])}")
        else:
            first[segment.name] = position
            checks.append(f"{text} RLIKE {_sql_text(_field_regex(segment.name))}")
    return " AND ".join(checks) or "true"


@cache
def _templates_by_root() -> Mapping[str, tuple[Template, ...]]:
    """The templates under each root, as `parse` tries them: by segment count, the one with
    the most literal segments first (`/cluster/leader` is the leader key, not a cluster
    named "leader")."""
    by_root: defaultdict[str, list[Template]] = defaultdict(list)
    for template in TEMPLATES.values():
        root = template.segments[0]
        assert isinstance(root, str), "every template starts with a literal root"
        by_root[root].append(template)
    return MappingProxyType(
        {
            root: tuple(sorted(found, key=lambda t: (len(t.segments), -t.literal_count)))
            for root, found in sorted(by_root.items())
        }
    )


KIND_CODES: Mapping[KeyKind, int] = MappingProxyType(
    {kind: code for code, kind in enumerate(TEMPLATES)}
)
"""Each kind's number in a coded classification (`classify(coded=True)`): the keys grouped
by kind are sorted by it, and Spark sorts a number by its bits (a radix sort) where it
compares strings that share their first eight bytes (`storage_object`, `storage_state`)
one by one. At 10M keys, the keys' write grouped by number took 13.4 s (13.1–14.6) against
14.8 s (14.6–16.2) by name (three alternated rounds in one JVM). Only within a run: nothing
that outlives it holds a code."""

KINDS_BY_CODE: Mapping[int, KeyKind] = MappingProxyType(
    {code: kind for kind, code in KIND_CODES.items()}
)
"""The kind of each number of `KIND_CODES`."""


def _kind_value(kind: KeyKind, coded: bool) -> int | str:
    return KIND_CODES[kind] if coded else kind.value


def _kind_literal(kind: KeyKind, coded: bool) -> str:
    """`kind` as Spark SQL text: its number, or its name as a string literal."""
    return str(KIND_CODES[kind]) if coded else _sql_text(kind.value)


def _kind_of(parts: str, templates: Sequence[Template], coded: bool) -> str:
    """Among one root's templates: the first whose shape fits decides, and the key is of its
    kind if its fields are valid, else of none (no other template is tried, as in `parse`)."""
    branches = [
        f"WHEN {_fits(parts, template)} THEN "
        f"CASE WHEN {_valid_fields(parts, template)} "
        f"THEN {_kind_literal(template.kind, coded)} END"
        for template in templates
    ]
    return f"CASE {' '.join(branches)} END"


@cache
def kind_sql(parts: str, *, coded: bool = False) -> str:
    """The kind of each key (a `KeyKind` value, or with `coded` its `KIND_CODES` number) from
    its segments, the array column `parts` (`segments(key)`), or null for a key outside the
    layout: as Spark SQL text."""
    root = _sql_segment(parts, 0)
    branches = [
        f"WHEN {root} = {_sql_text(name)} THEN {_kind_of(parts, templates, coded)}"
        for name, templates in _templates_by_root().items()
    ]
    return f"CASE WHEN get({parts}, 0) = '' THEN CASE {' '.join(branches)} END END"


PARTS = "_parts"
"""The column a key's segments are split into, once, before its kind is decided on them."""


def classify(snapshot: DataFrame, *, coded: bool = False) -> DataFrame:
    """The snapshot's rows (the entry's `version` named `key_version`) with `kind`, a
    `KeyKind` value (with `coded`, its number in `KIND_CODES`), null outside the layout.

    Each key is split once, into a column of its own: the decision reads its segments
    dozens of times, and Spark would otherwise split the key again for each. The value stays
    as it is (bytes): only the tables of the kinds a job reads turn theirs into text."""
    split = snapshot.select("*", segments(F.col("key")).alias(PARTS))
    return split.select(
        "key",
        "value",
        "create_revision",
        "mod_revision",
        F.col("version").alias("key_version"),
        "lease",
        F.expr(kind_sql(PARTS, coded=coded)).alias("kind"),
    )


def kind_name(row_kind: str | int | None) -> str:
    """The table name of a classified row's `kind`, coded or not (`UNKNOWN` for null)."""
    if row_kind is None:
        return UNKNOWN
    return KINDS_BY_CODE[row_kind].value if isinstance(row_kind, int) else row_kind


def _with_text(rows: DataFrame) -> DataFrame:
    """`rows` with `raw`, the value's text (bytes that are not UTF-8 replaced, so that every
    output can hold it) and `utf8`, whether the value was UTF-8 at all (the runtime refuses
    one that is not)."""
    text = F.col("value").cast("string")
    return rows.select(
        "*", F.make_valid_utf8(text).alias("raw"), F.is_valid_utf8(text).alias("utf8")
    )


# Typed tables -------------------------------------------------------------------------------


def kind_table(classified: DataFrame, kind: KeyKind) -> DataFrame:
    """The table of `kind`: key, its fields, `value`, `valid`, `raw` (kept only when the
    value is malformed) and the entry's revisions."""
    parse, columns = _table_columns(classified.sparkSession, kind)
    coded = isinstance(classified.schema["kind"].dataType, T.IntegralType)
    rows = _with_text(classified.where(F.col("kind") == F.lit(_kind_value(kind, coded))))
    if parse is not None:
        rows = rows.select("*", parse.alias(PARSED))
    return rows.select(*columns)


@cache
def _table_columns(
    session: SparkSession, kind: KeyKind
) -> tuple[Column | None, tuple[Column, ...]]:
    """What `kind_table` selects: the value's parse (or None) and the table's columns. Built
    once per session and kind: they are names and expressions, not bound to one snapshot's
    rows, and building a kind's value checks is hundreds of calls into the JVM (about
    0.05 s), for every set of tables that reads the kind."""
    raw = F.col("raw")
    read = value_columns(kind, raw)
    valid = F.col("utf8") & read.valid
    columns = [F.col("key"), *_field_columns(TEMPLATES[kind])]
    if read.value is not None:
        columns.append(F.when(valid, read.value).alias("value"))
    columns += [
        valid.alias("valid"),
        F.when(~valid, raw).alias("raw"),
        *(F.col(name) for name in ENTRY_COLUMNS),
    ]
    return read.parse, tuple(columns)


def _field_columns(template: Template) -> list[Column]:
    """The key's fields, each from its segment (the kind's rows are known to fit)."""
    parts = segments(F.col("key"))
    columns = []
    named: set[str] = set()
    for position, segment in enumerate(template.segments):
        if isinstance(segment, Field) and segment.name not in named:
            named.add(segment.name)
            text = _segment(parts, position)
            # try_cast: Spark may evaluate the cast before the filter on the kind, on
            # another kind's key; there it must give null, not fail.
            value = text.try_cast(U64_TYPE) if segment.name in NUMERIC_FIELDS else text
            columns.append(value.alias(segment.name))
    return columns


def unknown_table(classified: DataFrame) -> DataFrame:
    """The keys that are no kind of key of the layout."""
    return _with_text(classified.where(F.col("kind").isNull())).select(
        "key", "raw", *(F.col(name) for name in ENTRY_COLUMNS)
    )


def parse_tables(classified: DataFrame) -> Tables:
    """Every kind's table (lazily: nothing runs until a table is used)."""
    return Tables(partial(kind_table, classified), unknown_table(classified))


@cache
def _schemas(spark: SparkSession) -> Mapping[str, T.StructType]:
    empty = classify(spark.createDataFrame([], SPARK_SCHEMA))
    tables = parse_tables(empty)
    return MappingProxyType({name: frame.schema for name, frame in tables})


def read_tables(spark: SparkSession, folder: Path, *, keep_views: bool = False) -> Tables:
    """The tables written by `write_tables` (a kind without a folder is an empty table);
    with `keep_views`, the views shared between transforms are kept in memory."""
    schemas = _schemas(spark)

    def read(name: str) -> DataFrame:
        path = folder / name
        if path.is_dir():
            return spark.read.schema(schemas[name]).parquet(str(path))
        # No partitions at all: an absent kind costs the queries that union it nothing.
        return spark.createDataFrame(spark.sparkContext.emptyRDD(), schemas[name])

    return Tables(lambda kind: read(kind.value), read(UNKNOWN), keep_views=keep_views)
