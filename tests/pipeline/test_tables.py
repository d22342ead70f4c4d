"""Keys parsed into typed tables: every kind of the layout is recognised from its segments as
`metaplane.layout.parse` recognises it (on a corpus of every kind's key and thousands of
near misses), Spark tells well-formed values from malformed ones exactly as
`metaplane.resources.decode` does on a corpus of both, and unsigned 64-bit ids come through
unchanged."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from functools import reduce
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from metaplane import layout
from metaplane.admin._tour import seed_examples
from metaplane.layout import PATTERNS, KeyKind, LayoutError, ParsedKey, TopicName, parse
from metaplane.pipeline import (
    U64_TYPE,
    Tables,
    classify,
    parse_snapshot,
    parse_tables,
    snapshot_frame,
)
from metaplane.pipeline._tables import KINDS_BY_CODE, UNKNOWN
from metaplane.pipeline._views import object_facts, ownership_facts, topic_facts
from metaplane.resources import MalformedValue, decode
from tests.pipeline.conftest import write_snapshot

K = KeyKind
SEED_PRODUCER = 13940288943180594845
SUBSCRIPTION = (
    b'{"consumer_id":%s,"consumer_name":"c","subscription_name":"s%d","subscription_type":%s}'
)
OBJECT = (
    b'{"completed":true,"created_at":1768728599,"end_offset":29,"etag":null,'
    b'"object_id":"data-0-29.dnb1","offset_index":%s,"size":%s,"start_offset":0}'
)
# (offset_index, size): integers a long holds, one just past it (a u64 all the same), past a
# u64, negative, and things that are no integer: a document whose integers all fit a long is
# read with them as longs first, any other is read wide (`_values._document`).
LONG_EDGES: list[tuple[bytes, bytes]] = [
    (b"[[9223372036854775807,0]]", b"9223372036854775807"),
    (b"[[9223372036854775808,0]]", b"9223372036854775808"),
    (b"[[0,0]]", b"18446744073709551615"),
    (b"[[0,0]]", b"18446744073709551616"),
    (b"[[18446744073709551616,0]]", b"1"),
    (b"[[-1,0]]", b"1"),
    (b"[]", b"0"),
    (b"[[1,null]]", b"1"),
    (b"null", b"1"),
    (b"[[0,0]]", b'"5"'),
    (b"[[0,0]]", b"null"),
    (b"[[0,0]]", b"-9223372036854775808"),
    (b"[[0,0]]", b"1.0"),
    (b"[[0,0]]", b"1e3"),
    (b"[[0,0]]", b"7.5E1"),
    # In the list of integers: a fraction, an exponent, a number written as a string, read
    # wide (with an integer past a long, or not: the narrow reading refuses them).
    (b"[[0.5,0]]", b"1"),
    (b'[["5",0]]', b"1"),
    (b"[[0,1e3]]", b"1"),
    (b"[[0,0],[5,100],[7,2.0E2]]", b"1"),
    (b"[[18446744073709551615,0],[1.5,0]]", b"1"),
    (b'[[18446744073709551615,0],[1,"2"]]', b"1"),
    (b"[[18446744073709551615,0],[10,200]]", b"1"),
    (b"[[0,0],[5,100],[7,200]]", b"18446744073709551615"),
]
META = next(value for key, value in seed_examples() if parse(key).kind is K.SCHEMA_METADATA)
FIRST_VERSION = b'"tags":[]},{"created_at":1768728613'
"""The end of the first version in the seed's schema metadata (`META`)."""
SAMPLES: list[tuple[KeyKind, bytes]] = [
    (K.CURSOR, b"13"),
    (K.CURSOR, b" 13\n"),
    (K.CURSOR, b"-1"),
    (K.CURSOR, b"1.5"),
    (K.CURSOR, b'"13"'),
    (K.CURSOR, b"18446744073709551615"),
    (K.CURSOR, b"18446744073709551616"),
    (K.CURSOR, b"not-a-number"),
    (K.TOPIC_ROOT, b"4294967295"),
    (K.TOPIC_ROOT, b"4294967296"),
    (K.TOPIC_DELIVERY, b'"NonReliable"'),
    (K.TOPIC_DELIVERY, b'"reliable"'),
    (K.TOPIC_DELIVERY, b"Reliable"),
    (K.ASSIGNMENT, b"null"),
    (K.ASSIGNMENT, b"{}"),
    (K.UNASSIGNED, b"null"),
    (K.UNASSIGNED, b'{"reason":"unload","from_broker":12549595323552083708}'),
    (K.UNASSIGNED, b'{"reason":"unload"}'),
    (K.UNASSIGNED, b'{"reason":"unload","from_broker":-3}'),
    (K.BROKER_STATE, b'{"mode":"draining","reason":"upgrade"}'),
    (K.BROKER_STATE, b'{"mode":"maintenance","reason":"x"}'),  # a custom state (seed 001)
    (K.BROKER_STATE, b'{"mode":"","reason":"x"}'),
    (K.BROKER_STATE, b'{"mode":"active","reason":5}'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"'),
    # Text after the document, which Spark's reader ignores and the runtime refuses.
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"} \n'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"} x'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"}{"mode":"active","reason":"y"}'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"},{}'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"}}'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"}]'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"},0]'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"}] }'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"}{ ] ,0]"}'),
    (K.BROKER_STATE, b"null"),
    (K.BROKER_STATE, b"null}"),
    (K.BROKER_STATE, b" }"),
    (K.SCHEMA_REFERENCED_BY, b"null}"),
    (K.UNASSIGNED, b"null x"),
    (K.UNASSIGNED, b'{"reason":"unload"} 7'),
    (K.SCHEMA_REFERENCED_BY, b'{"2":[{"subject":"orders","version":1}]}]'),
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"1", 5, b"1") + b" //"),
    (K.STORAGE_STATE, b'{"sealed":true,"last_committed_offset":21,"broker_id":1,"timestamp":1}x'),
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"null", 1, b"2")),
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"18446744073709551615", 2, b"0")),
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"null", 3, b"3")),
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"1.5", 4, b"1")),
    (K.SUBSCRIPTION, b"[]"),
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":"CPU","usage":1.5}],"topic_list":[],"topics_len":0}',
    ),
    (K.LOAD_REPORT, b'{"resources_usage":[],"topic_list":["/a/b"],"topics_len":1.5}'),
    (K.LOAD_REPORT, b'{"resources_usage":[{"resource":"CPU"}],"topic_list":[],"topics_len":0}'),
    # Below a document's own fields: a number where a string belongs, a string where a
    # number belongs (a nested document's field, a list of strings).
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":5,"usage":1.5}],"topic_list":[],"topics_len":0}',
    ),
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":"CPU","usage":"NaN"}],"topic_list":[],"topics_len":0}',
    ),
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":"CPU","usage":2}],"topic_list":[],"topics_len":0}',
    ),
    (K.LOAD_REPORT, b'{"resources_usage":[],"topic_list":["/a/b", 5],"topics_len":2}'),
    (K.LOAD_REPORT, b'{"resources_usage":[],"topic_list":[5],"topics_len":1}'),
    (K.LOAD_REPORT, b'{"resources_usage":[],"topic_list":["a\\"b", "/c/d"],"topics_len":2}'),
    (K.SCHEMA_REFERENCES, b'{"1":[{"name":"n","subject":"s","version":"1"}]}'),
    (K.SCHEMA_REFERENCES, b'{"1":[{"name":"n","subject":"s","version":1.0}]}'),
    (K.SCHEMA_REFERENCES, b'{"1":[{"name":"n \\"subject\\": 5","subject":"s","version":1}]}'),
    (K.SCHEMA_REFERENCED_BY, b'{"2":[{"subject":7,"version":1}]}'),
    # A key of a map, and a field the runtime does not know (a newer writer's), named as a
    # field of the layout: no fault of its value.
    (K.SCHEMA_REFERENCES, b'{"name":[]}'),
    (K.SCHEMA_REFERENCED_BY, b'{"subject":[{"subject":"s","version":1}]}'),
    (K.LOAD_REPORT, b'{"resources_usage":[],"topic_list":[],"topics_len":0,"x":{"usage":"a"}}'),
    (K.STORAGE_OBJECT, (OBJECT % (b"[[0,0]]", b"1"))[:-1] + b',"x":{"offset_index":[[0.5]]}}'),
    # A nested field named as one of the document's own, a nested explicit null where a field
    # may only be left out, a map's list of strings, NaN and single quotes.
    (
        K.SCHEMA_METADATA,
        META.replace(b'"created_by":"danube-client","version":1', b'"created_by":5,"version":1'),
    ),
    (
        K.SCHEMA_METADATA,
        META.replace(FIRST_VERSION, b'"tags":[],"description":null' + FIRST_VERSION[9:]),
    ),
    (
        K.SCHEMA_METADATA,
        META.replace(FIRST_VERSION, b'"tags":[],"deprecation_message":null' + FIRST_VERSION[9:]),
    ),
    (K.LEGACY_LOAD_BALANCE, b'{"1":["/a/b", 5]}'),
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":"CPU","usage":NaN}],"topic_list":[],"topics_len":0}',
    ),
    (K.BROKER_STATE, b"{'mode':'active','reason':'boot'}"),
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":"CPU","usage":-1}],"topic_list":[],"topics_len":0}',
    ),
    (
        K.LOAD_REPORT,
        b'{"resources_usage":[{"resource":"CPU","usage":0},{"resource":"Memory","usage":-0.5}],"topic_list":[],"topics_len":0}',
    ),
    (K.CURSOR, b"-0"),
    (K.STORAGE_OBJECT, OBJECT % (b"[[0,0]]", b"7164")),
    (K.STORAGE_OBJECT, OBJECT % (b"[[0,0,1]]", b"7164")),
    (K.STORAGE_OBJECT, OBJECT % (b"[[0,0]]", b"-1")),
    *((K.STORAGE_OBJECT, OBJECT % edge) for edge in LONG_EDGES),
    (
        K.STORAGE_STATE,
        b'{"sealed":true,"last_committed_offset":9223372036854775808,"broker_id":1,"timestamp":1}',
    ),
    (K.STORAGE_CUR, b'{"start":"00000000000000000030"}'),
    (K.STORAGE_CUR, b'{"start":"30"}'),
    (K.STORAGE_CUR, b'{"start":"99999999999999999999"}'),
    (K.NAMESPACE_POLICY, b"{}"),
    (K.NAMESPACE_POLICY, b'{"max_message_size":4294967296}'),
    (K.STORAGE_STATE, b'{"sealed":true,"last_committed_offset":21,"broker_id":1,"timestamp":1}'),
    (K.STORAGE_STATE, b'{"sealed":"yes","last_committed_offset":21,"broker_id":1,"timestamp":1}'),
    (K.SCHEMA_REFERENCES, b'{"1":[{"name":"common/money.proto","subject":"money","version":1}]}'),
    (K.SCHEMA_REFERENCES, b'{"1":[{"name":"n","subject":"s","version":0}]}'),
    (K.SCHEMA_REFERENCES, b'{"1":[{"name":"n","subject":"s"}]}'),
    (K.SCHEMA_REFERENCES, b'{"1":{"name":"n","subject":"s","version":1}}'),
    (K.SCHEMA_REFERENCED_BY, b'{"2":[{"subject":"orders","version":1}],"3":[]}'),
    (K.SCHEMA_REFERENCED_BY, b'{"2":[{"subject":"orders","version":4294967296}]}'),
    (K.SCHEMA_CONFIG, b'{"json_schema_draft":"2020-12"}'),
    (K.SCHEMA_CONFIG, b"{}"),
    (K.SCHEMA_CONFIG, b'{"json_schema_draft":7}'),
    (K.SCHEMA_CONFIG, b'"draft-07"'),  # (the global config, one key, has its value type)
    # Written as the runtime's encoder writes them, well-formed or not by their bounds and
    # required fields.
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"12", 6, b"1")),
    (K.SUBSCRIPTION, SUBSCRIPTION % (b"12", 7, b"9")),  # no such subscription type
    (K.STORAGE_OBJECT, (OBJECT % (b"[[0,0],[5,100]]", b"70")).replace(b"null", b'"e7"')),
    (K.STORAGE_OBJECT, (OBJECT % (b"[[0,0]]", b"-70")).replace(b"null", b'"e7"')),
    (K.STORAGE_STATE, b'{"sealed":true,"last_committed_offset":21,"timestamp":1}'),  # no broker
    (K.STORAGE_STATE, b'{"sealed":false,"last_committed_offset":0,"broker_id":7,"timestamp":2}'),
    (K.BROKER_STATE, b'{"mode":"active","reason":"boot"}'),
    (K.NAMESPACE_POLICY, b'{"max_producers_per_topic":3}'),
    # A field that must be there, even as null: absent, and absent where the rest is written
    # as the runtime writes it.
    (K.STORAGE_OBJECT, (OBJECT % (b"[[0,0]]", b"8")).replace(b'"etag":null,', b"")),
    (K.STORAGE_OBJECT, (OBJECT % (b"[[0,0]]", b"9")).replace(b'"etag":null,', b" ")),
]


def _key(kind: KeyKind, number: int) -> str:
    """A key of `kind` of its own (singletons such as the leader key have one key only)."""
    fields: dict[str, object] = {}
    for name, hint in get_type_hints(ParsedKey).items():
        if name != "kind":
            fields[name] = number + 1 if int in get_args(hint) else f"{name[:3]}{number}"
    return ParsedKey(kind, **fields).key  # type: ignore[arg-type]


def _accepted(kind: KeyKind, value: bytes) -> bool:
    try:
        decode(kind, value)
    except MalformedValue:
        return False
    return True


def _rows() -> list[tuple[str, bytes]]:
    rows = list(seed_examples())
    seen = {key for key, _ in rows}
    for number, (kind, value) in enumerate(SAMPLES, start=1000):
        rows.append((_key(kind, number), value))
    taken = {key for key, _ in rows}
    for number, kind in enumerate(PATTERNS, start=5000):
        key = _key(kind, number)
        if key not in taken and not any(parse(k).kind is kind for k in seen):
            rows.append((key, b"null"))  # a kind without an example: its key, any value
    # One value a key: a kind with one key only (the leader, the legacy load balance) has
    # one example or sample at most.
    assert len({key for key, _ in rows}) == len(rows)
    return rows


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Tables:
    snapshot = write_snapshot(tmp_path_factory.mktemp("tables") / "snapshot", _rows())
    return parse_tables(classify(snapshot_frame(spark, snapshot)).cache())


def _read(tables: Tables) -> dict[str, tuple[str, bool]]:
    """key → (kind, valid), from every table in one job."""
    frames: list[DataFrame] = [
        frame.select("key", F.lit(kind.value).alias("kind"), "valid")
        for kind, frame in tables.kinds.items()
    ]
    rows = reduce(DataFrame.unionByName, frames).collect()
    return {row["key"]: (row["kind"], row["valid"]) for row in rows}


def test_every_key_gets_its_kind_and_the_runtimes_verdict(tables: Tables) -> None:
    read = _read(tables)
    rows = _rows()
    assert tables.unknown.count() == 0
    assert {kind for kind, _ in read.values()} == {kind.value for kind in PATTERNS}
    for key, value in rows:
        kind = parse(key).kind
        assert read[key] == (kind.value, _accepted(kind, value)), (key, value)


def test_u64_ids_come_through_intact(tables: Tables) -> None:
    producer = tables[KeyKind.PRODUCER].where(F.col("valid")).first()
    assert producer is not None
    assert producer["producer_id"] == Decimal(SEED_PRODUCER)
    assert producer["value"]["producer_id"] == Decimal(SEED_PRODUCER)
    assert tables[KeyKind.PRODUCER].schema["producer_id"].dataType == U64_TYPE
    states = tables[KeyKind.STORAGE_STATE].where(F.col("valid")).collect()
    assert Decimal(10285063371164059634) in {row["value"]["broker_id"] for row in states}
    top = tables[KeyKind.CURSOR].where(F.col("value") == Decimal(2**64 - 1)).count()
    assert top == 1


def test_documents_read_as_longs_first_are_the_documents_read_wide(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A document whose integers all fit a long is read with them as longs first, the others
    wide as before: every table is the same, row for row, both ways. (The runtime's verdict
    on the same values: `test_every_key_gets_its_kind_and_the_runtimes_verdict`.)"""
    from metaplane.pipeline import _values
    from metaplane.pipeline._tables import _table_columns

    snapshot = write_snapshot(tmp_path / "snapshot", _rows())
    classified = classify(snapshot_frame(spark, snapshot)).cache()

    def read_all(narrow_first: bool) -> dict[KeyKind, list[Row]]:
        _values.NARROW_FIRST = narrow_first
        _table_columns.cache_clear()
        parse, _ = _table_columns(spark, K.STORAGE_OBJECT)
        assert ("AS narrow" in str(parse)) is narrow_first
        tables = parse_tables(classified)
        return {
            kind: sorted(frame.collect(), key=lambda row: str(row["key"]))
            for kind, frame in tables.kinds.items()
        }

    default = _values.NARROW_FIRST
    try:
        narrow, wide = read_all(True), read_all(False)
    finally:
        _values.NARROW_FIRST = default
        _table_columns.cache_clear()
        classified.unpersist()
    assert narrow.keys() == wide.keys()
    for kind in narrow:
        assert narrow[kind] == wide[kind], kind
    objects = narrow[K.STORAGE_OBJECT]
    assert len(objects) >= len(LONG_EDGES)
    sizes = {row["value"]["size"] for row in objects if row["valid"]}
    assert {Decimal(2**63 - 1), Decimal(2**63), Decimal(2**64 - 1)} <= sizes


def test_unknown_keys_are_kept(spark: SparkSession, tmp_path: Path) -> None:
    rows = [("/cluster/register/018", b"{}"), ("no-slash", b"x"), ("/topics/a", b"0")]
    snapshot = write_snapshot(tmp_path / "snapshot", rows)
    unknown = parse_tables(classify(snapshot_frame(spark, snapshot))).unknown
    assert sorted(row["key"] for row in unknown.collect()) == sorted(key for key, _ in rows)


# Segments that a key of another kind, or no kind, has where a valid one has its own.
PROBES = [
    "", ".", "..", "state", "leader", "leader_epoch", "register", "brokers", "unassigned",
    "load", "locks", "cluster-name", "load_balance", "_global", "_index", "by_id", "versions",
    "metadata", "subscriptions", "producers", "cursor", "delivery", "objects", "cur", "policy",
    "schema", "topics", "0", "00", "01", "1", "4294967295", "4294967296",
    "18446744073709551615", "18446744073709551616", "99999999999999999999",
    "00000000000000000030", "0000000000000000030", "000000000000000000030",
    "18446744073709551615".zfill(20), "18446744073709551616".zfill(20),
    "a.b", "a-b_C9", "a" * 255, "a" * 256, "é", "x\n", "x y", "x\u2028",
]  # fmt: skip


def _near_misses() -> list[str]:
    """Every kind's key, and each of its segments replaced by each probe; then a few keys
    cut short, grown by a segment or mangled around their slashes."""
    keys: set[str] = set()
    for number, kind in enumerate(PATTERNS):
        key = _key(kind, number)
        parts = key.split("/")
        keys |= {key, key + "/", key[1:], key + "/x", key.rsplit("/", 1)[0], "//" + key[1:]}
        keys.add(key.replace("/", "//", 2))
        for position in range(1, len(parts)):
            for probe in PROBES:
                keys.add("/".join([*parts[:position], probe, *parts[position + 1 :]]))
    return sorted(keys)


def _runtime_kind(key: str) -> str | None:
    try:
        return parse(key).kind.value
    except LayoutError:
        return None


def test_kinds_are_decided_from_segments_as_the_runtime_parses_keys(
    spark: SparkSession, tmp_path: Path
) -> None:
    keys = _near_misses()
    snapshot = write_snapshot(tmp_path / "snapshot", [(key, b"null") for key in keys])
    found = {row["key"]: row["kind"] for row in classify(snapshot_frame(spark, snapshot)).collect()}
    expected = {key: _runtime_kind(key) for key in keys}
    assert sum(kind is not None for kind in expected.values()) > len(PATTERNS) * 10
    assert found == expected


def test_a_kind_table_is_built_when_first_used_and_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a kind's table is hundreds of calls into the JVM: a job that reads a few
    kinds builds those only, each once; kept tables are persisted as they are built."""
    import metaplane.pipeline._tables as module

    built: list[KeyKind] = []
    build = module.kind_table

    def counting(classified: DataFrame, kind: KeyKind) -> DataFrame:
        built.append(kind)
        return build(classified, kind)

    monkeypatch.setattr(module, "kind_table", counting)
    snapshot = write_snapshot(tmp_path / "snapshot", [(b"/topics/ns/t", b"0")])
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    assert built == []
    assert len(tables.kinds) == len(KeyKind) and set(tables.kinds) == set(KeyKind)
    root = tables[K.TOPIC_ROOT]
    assert tables[K.TOPIC_ROOT] is root and built == [K.TOPIC_ROOT]
    assert [row["topic"] for row in root.collect()] == ["t"]
    assert not root.is_cached
    kept = tables.cached()
    kept_root = kept[K.TOPIC_ROOT]
    assert kept_root.is_cached and kept_root.storageLevel.useMemory
    assert kept[K.CURSOR].count() == 0
    assert built == [K.TOPIC_ROOT, K.TOPIC_ROOT, K.CURSOR]
    kept.unpersist()
    assert not kept_root.is_cached


def test_tables_kept_for_the_stages_are_read_back_and_only_their_views_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`parse_snapshot(keep=True)` writes the tables, then reads them back from their files
    (kept in memory as they were written, they cost more), and keeps in memory the views the
    stages share; without `write`, the tables it parses are kept instead."""
    snapshot = write_snapshot(
        tmp_path / "snapshot", [(b"/topics/ns/t", b"0"), (b"/cluster/brokers/7/ns/t", b"null")]
    )
    folder = tmp_path / "tables"
    parsed = parse_snapshot(spark, snapshot, folder, keep=True)
    root = parsed.tables[K.TOPIC_ROOT]
    assert not root.is_cached
    files = [Path(name.removeprefix("file:")) for name in root.inputFiles()]
    assert files and all(file.parent == folder / K.TOPIC_ROOT.value for file in files)
    assert [(row["topic"], row["value"]) for row in root.collect()] == [("t", 0)]
    facts = ownership_facts(parsed.tables)
    assert facts.is_cached and facts.storageLevel.useMemory
    assert [(row["topic"], row["roots"], row["owners"]) for row in facts.collect()] == [("t", 1, 1)]
    parsed.close()
    assert not facts.is_cached

    unwritten = parse_snapshot(spark, snapshot, tmp_path / "unwritten", keep=True, write=False)
    assert unwritten.tables[K.TOPIC_ROOT].is_cached
    assert not (tmp_path / "unwritten" / K.TOPIC_ROOT.value).exists()
    unwritten.close()


def test_keys_grouped_by_kind_number_give_the_kinds_and_tables_of_the_names(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`parse_snapshot` groups the keys by their kind's number (`KIND_CODES`: Spark sorts a
    number faster than a name): each key's number is its kind's, and the counts and the
    tables read from them are the ones the names give. The counts come from the files'
    footers, not from the keys; where the footers the driver sees do not add up to the
    snapshot's keys, a Spark job counts them."""
    from metaplane.pipeline import _analyze

    outside = [(b"/nowhere", b"1"), (b"/topics/ns", b"null"), (b"cluster/leader", b"1")]
    snapshot = write_snapshot(tmp_path / "snapshot", _rows() + outside)
    frame = snapshot_frame(spark, snapshot)
    named = {row["key"]: row["kind"] for row in classify(frame).collect()}
    coded = {row["key"]: row["kind"] for row in classify(frame, coded=True).collect()}
    assert {
        key: None if code is None else KINDS_BY_CODE[code].value for key, code in coded.items()
    } == named
    assert None in named.values() and len(set(named.values())) > 20
    expected: dict[str, int] = {}
    for kind in named.values():
        expected[kind or UNKNOWN] = expected.get(kind or UNKNOWN, 0) + 1

    parsed = parse_snapshot(spark, snapshot, tmp_path / "tables", keep=False, write=False)
    by_name = parse_tables(classify(frame))
    try:
        for name, table in parsed.tables:
            assert sorted(map(str, table.collect())) == sorted(
                map(str, dict(by_name)[name].collect())
            )
        classified, parsed._classified = parsed._classified, _Unusable()
        assert parsed.counts == dict(sorted(expected.items()))  # no job: the footers
        parsed._classified = classified
    finally:
        parsed.close()

    # Files the driver does not see (here: the footers found say nothing) are counted by a job.
    monkeypatch.setattr(_analyze, "_counts_in_files", lambda _: {})
    unseen = parse_snapshot(spark, snapshot, tmp_path / "unseen", keep=False, write=False)
    try:
        assert unseen.counts == dict(sorted(expected.items()))
    finally:
        unseen.close()


class _Unusable:
    """Stands for a frame that must not be used."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"the classified keys were used ({name})")


def test_an_empty_snapshot_is_parsed_into_empty_tables(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot of an empty store (a cluster not started yet) has no key to infer the
    grouped keys' schema from: it is read with the schema it was written with. Written, the
    tables are no folder at all; parsed straight from the grouped keys, they are empty; and
    a job counting the keys counts none."""
    from metaplane.pipeline import _analyze

    snapshot = write_snapshot(tmp_path / "snapshot", [])
    folder = tmp_path / "tables"
    parsed = parse_snapshot(spark, snapshot, folder, keep=True)
    try:
        assert parsed.counts == {}
        assert sorted(path.name for path in folder.iterdir()) == ["_classified"]
    finally:
        parsed.close()
    monkeypatch.setattr(_analyze, "_counts_in_files", lambda _: {"x": 1})  # a job counts
    unwritten = parse_snapshot(spark, snapshot, tmp_path / "unwritten", keep=False, write=False)
    try:
        assert unwritten.counts == {}
        assert all(table.count() == 0 for _, table in unwritten.tables)
    finally:
        unwritten.close()


def test_ownership_facts_picked_from_the_topic_facts_are_the_ones_aggregated_alone(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Where the topic facts are asked for first (`analyze`), the ownership facts are picked
    from them: the same rows as aggregated on their own, and no topic that only other kinds
    name (here a subscription). A topic's root key is there whenever it has a root, even a
    malformed one (the facts render it from the topic's name)."""
    snapshot = write_snapshot(
        tmp_path / "snapshot",
        [
            (b"/topics/ns/rooted", b"0"),
            (b"/topics/ns/parent", b"2"),
            (b"/topics/ns/malformed", b"two"),
            (b"/cluster/brokers/7/ns/rooted", b"null"),
            (b"/cluster/brokers/8/ns/rooted", b"null"),
            (b"/cluster/brokers/7/ns/rootless", b"null"),
            (b"/cluster/unassigned/ns/waiting", b"null"),
            (b"/topics/ns/other/subscriptions/s", b'{"subscription_type": "Exclusive"}'),
        ],
    )
    classified = classify(snapshot_frame(spark, snapshot))

    def rows(facts: DataFrame) -> list[tuple[object, ...]]:
        return sorted(tuple(row) for row in facts.collect())

    alone = parse_tables(classified).cached()
    expected = rows(ownership_facts(alone))
    assert not alone.has_view("topic_facts")
    alone.unpersist()
    assert expected == [
        ("ns", "malformed", "/topics/ns/malformed", None, 1, 0, 0),
        ("ns", "parent", "/topics/ns/parent", 2, 1, 0, 0),
        ("ns", "rooted", "/topics/ns/rooted", 0, 1, 2, 0),
        ("ns", "rootless", None, None, 0, 1, 0),
        ("ns", "waiting", None, None, 0, 0, 1),
    ]

    picked = parse_tables(classified).cached()
    assert rows(topic_facts(picked).where(F.col("topic") == "other").select("subscriptions")) == [
        (1,)
    ]
    facts = ownership_facts(picked)
    assert facts.columns == [
        "namespace",
        "topic",
        "root_key",
        "partitions",
        "roots",
        "owners",
        "waiting",
    ]
    assert rows(facts) == expected

    # Read from the kept topic facts (the only view with a column `listed`), not aggregated
    # again from the tables.
    def plan(frame: DataFrame) -> str:
        return str(frame._jdf.queryExecution().optimizedPlan().toString())

    assert "listed#" in plan(facts)
    assert "listed#" not in plan(ownership_facts(alone))
    picked.unpersist()


def test_a_shared_view_may_be_built_on_another_from_several_threads(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A view built on another (the last committed offsets on the object facts) takes the
    views' lock again in the same thread: it must not wait for itself. Each view is built
    once, whichever of several threads asks first."""
    snapshot = write_snapshot(tmp_path / "snapshot", [(b"/topics/ns/t", b"0")])
    tables = parse_tables(classify(snapshot_frame(spark, snapshot))).cached()
    calls: list[str] = []

    def inner(tables: Tables) -> DataFrame:
        calls.append("inner")
        return tables[K.TOPIC_ROOT].select("topic")

    def outer(tables: Tables) -> DataFrame:
        calls.append("outer")
        return tables.shared("inner", inner).select(F.upper("topic").alias("topic"))

    with ThreadPoolExecutor(4) as pool:
        views = list(pool.map(lambda _: tables.shared("outer", outer), range(8)))
    assert all(view is views[0] for view in views)
    assert sorted(calls) == ["inner", "outer"]
    assert [row["topic"] for row in views[0].collect()] == ["T"]
    tables.unpersist()


def test_object_facts_name_each_topic_s_last_object_by_its_key(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The object facts render the last object's key from its offset (padded as the layout
    pads it, a u64 past a long's range too): the key the snapshot holds. A malformed object
    is not the last, whatever its offset."""
    t, u = TopicName("ns", "t"), TopicName("ns", "u")
    good = OBJECT % (b"[]", b"1")
    huge = 18446744073709551615
    snapshot = write_snapshot(
        tmp_path / "snapshot",
        [
            (layout.storage_object(t, 0).encode(), good),
            (layout.storage_object(t, 30).encode(), good),
            (layout.storage_object(t, huge).encode(), good),
            (layout.storage_object(u, 5).encode(), good),
            (layout.storage_object(u, 900).encode(), b"{broken"),
        ],
    )
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    rows = object_facts(tables).collect()
    assert sorted((row["topic"], row["last_start"], row["last_key"]) for row in rows) == [
        ("t", Decimal(huge), layout.storage_object(t, huge)),
        ("u", Decimal(5), layout.storage_object(u, 5)),
    ]
