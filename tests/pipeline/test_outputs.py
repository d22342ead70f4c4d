"""The outputs of `metaplane analyze`, checked against the same figures computed in plain
Python from the snapshot (layout.parse and resources.decode): counts, backlog, storage and
the retention plan."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from metaplane.layout import U64_MAX, KeyKind, LayoutError, parse
from metaplane.pipeline import (
    AUDIT,
    BACKLOG,
    REBALANCE_PLAN,
    REPORT,
    RETENTION_PLAN,
    STORAGE,
    SUMMARY,
    TABLES,
    U64_TYPE,
    analyze,
    read_snapshot,
)
from metaplane.pipeline._analyze import _plain, ordered_json_lines
from metaplane.resources import (
    CurrentObject,
    LoadReport,
    MalformedValue,
    ObjectDescriptor,
    SealedState,
    decode,
)
from tests.pipeline.conftest import FaultsAnalysis, write_snapshot

Topic = tuple[str, str]
WEEK = 7 * 86_400


@dataclass
class Expected:
    """What the outputs must say, worked out key by key."""

    kinds: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    objects: dict[Topic, list[tuple[int, ObjectDescriptor, str]]] = field(default_factory=dict)
    cursors: dict[tuple[str, str, str], int] = field(default_factory=dict)
    subscriptions: set[tuple[str, str, str]] = field(default_factory=set)
    sealed: dict[Topic, int] = field(default_factory=dict)
    current: dict[Topic, int] = field(default_factory=dict)
    topics: set[Topic] = field(default_factory=set)
    assigned: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    cpu: dict[int, int | float] = field(default_factory=dict)
    epoch: int | None = None

    def last_committed(self, topic: Topic) -> int | None:
        ends = [o.end_offset for _, o, _ in self.objects.get(topic, []) if o.completed]
        ends += [self.sealed[topic]] if topic in self.sealed else []
        return max(ends) if ends else None


def _expected(folder: Path) -> tuple[Expected, float]:
    snapshot = read_snapshot(folder)
    rows = pa.concat_tables([pq.read_table(path) for path in snapshot.paths]).to_pylist()
    expected = Expected()
    for row in rows:
        try:
            parsed = parse(row["key"])
        except LayoutError:
            expected.kinds["unknown"] += 1
            continue
        expected.kinds[parsed.kind.value] += 1
        if parsed.kind is KeyKind.SUBSCRIPTION:  # a subscription is its key, whatever its value
            expected.subscriptions.add((parsed.namespace, parsed.topic, parsed.subscription))
        try:
            value = decode(parsed.kind, row["value"])
        except MalformedValue:
            continue
        _note(expected, parsed.kind, parsed, value, row["key"])
    return expected, snapshot.taken_at


def _note(expected: Expected, kind: KeyKind, parsed: Any, value: Any, key: str) -> None:
    topic = (parsed.namespace, parsed.topic)
    if kind is KeyKind.STORAGE_OBJECT:
        expected.objects.setdefault(topic, []).append((parsed.offset, value, key))
    elif kind is KeyKind.CURSOR:
        expected.cursors[(*topic, parsed.subscription)] = value
    elif kind is KeyKind.STORAGE_STATE and isinstance(value, SealedState):
        expected.sealed[topic] = value.last_committed_offset
    elif kind is KeyKind.STORAGE_CUR and isinstance(value, CurrentObject):
        expected.current[topic] = value.offset
    elif kind is KeyKind.TOPIC_ROOT:
        expected.topics.add(topic)
    elif kind is KeyKind.ASSIGNMENT:
        expected.assigned[parsed.broker_id] += 1
    elif kind is KeyKind.LOAD_REPORT and isinstance(value, LoadReport):
        usage = [item.usage for item in value.resources_usage if item.resource == "CPU"]
        if usage:
            expected.cpu[parsed.broker_id] = usage[0]
    elif kind is KeyKind.LEADER_EPOCH:
        expected.epoch = value


@pytest.fixture(scope="module")
def expected(faults_analysis: FaultsAnalysis) -> tuple[Expected, float]:
    return _expected(faults_analysis.snapshot)


def _parquet(folder: Path) -> list[dict[str, Any]]:
    return pq.read_table(folder).to_pylist()  # type: ignore[no-any-return]


def test_every_output_is_written(faults_analysis: FaultsAnalysis) -> None:
    for name in (SUMMARY, AUDIT, BACKLOG, STORAGE, RETENTION_PLAN, REBALANCE_PLAN, REPORT):
        assert (faults_analysis.out / name).exists(), name
    counts = faults_analysis.json(SUMMARY)["counts"]["by_kind"]
    assert sorted(path.name for path in (faults_analysis.out / TABLES).iterdir()) == sorted(counts)


def test_summary_counts_every_kind(
    faults_analysis: FaultsAnalysis, expected: tuple[Expected, float]
) -> None:
    summary = faults_analysis.json(SUMMARY)
    assert summary["counts"]["by_kind"] == dict(expected[0].kinds)
    assert summary["counts"]["keys"] == read_snapshot(faults_analysis.snapshot).keys
    brokers = {broker["broker_id"] for broker in summary["brokers"]}
    assert summary["leader"]["broker_id"] in brokers
    assert any(int(broker) >= 2**63 for broker in brokers)
    assert summary["audit"]["findings"] == len(faults_analysis.json(AUDIT)["findings"])


def test_summary_per_broker_balance_and_leader(
    faults_analysis: FaultsAnalysis, expected: tuple[Expected, float]
) -> None:
    model = expected[0]
    summary = faults_analysis.json(SUMMARY)
    by_id = {int(broker["broker_id"]): broker for broker in summary["brokers"]}
    assert {broker: by_id[broker]["topics"] for broker in model.assigned} == dict(model.assigned)
    assert all(b["topics"] == 0 for broker, b in by_id.items() if broker not in model.assigned)
    assert model.cpu, "the synthetic cluster has load reports"
    assert {broker: by_id[broker]["cpu"] for broker in model.cpu} == model.cpu
    assert summary["leader"]["epoch"] == model.epoch
    # The faults snapshot has its leader's epoch removed (leader-without-epoch).
    assert model.epoch is None and summary["leader"]["broker_id"] is not None
    balance = summary["rebalance"]["balance_before"]
    # Over the registered brokers that still serve (active or draining), as the plan says.
    counts = [b["topics"] for b in by_id.values() if b["registered"] and b["mode"] != "drained"]
    mean = sum(counts) / len(counts)
    cv = (sum((c - mean) ** 2 for c in counts) / len(counts)) ** 0.5 / mean
    assert balance["brokers"] == len(counts)
    assert balance["mean"] == pytest.approx(mean, abs=1e-3)
    assert balance["cv"] == pytest.approx(cv, abs=1e-3)
    assert balance["max_over_mean"] == pytest.approx(max(counts) / mean, abs=1e-3)


def test_backlog_is_last_committed_minus_cursor(
    faults_analysis: FaultsAnalysis, expected: tuple[Expected, float]
) -> None:
    model = expected[0]
    rows = _parquet(faults_analysis.out / BACKLOG)
    assert {(r["namespace"], r["topic"], r["subscription"]) for r in rows} == model.subscriptions
    for row in rows:
        topic = (row["namespace"], row["topic"])
        last = model.last_committed(topic)
        cursor = model.cursors.get((*topic, row["subscription"]))
        want = None if last is None else max(last - (cursor if cursor is not None else -1), 0)
        assert row["backlog"] == want, row
    largest = faults_analysis.json(SUMMARY)["backlog"]["largest"]
    known = sorted((row["backlog"] for row in rows if row["backlog"] is not None), reverse=True)
    assert [item["backlog"] for item in largest] == known[: len(largest)]
    assert len(largest) == min(10, len(known))


def test_storage_rolls_up_objects_and_bytes(
    faults_analysis: FaultsAnalysis, expected: tuple[Expected, float]
) -> None:
    objects = [o for items in expected[0].objects.values() for _, o, _ in items]
    rows = _parquet(faults_analysis.out / STORAGE)
    cluster = [row for row in rows if row["level"] == "cluster"]
    assert [(c["objects"], c["bytes"]) for c in cluster] == [
        (len(objects), sum(o.size for o in objects))
    ]
    namespaces = [row for row in rows if row["level"] == "namespace"]
    assert sum(row["bytes"] for row in namespaces) == cluster[0]["bytes"]
    topics = [row for row in rows if row["level"] == "topic"]
    assert sum(row["objects"] for row in topics) == len(objects)


def test_retention_plan_holds_only_consumed_old_objects(
    faults_analysis: FaultsAnalysis, expected: tuple[Expected, float]
) -> None:
    model, taken_at = expected
    plan = faults_analysis.json(RETENTION_PLAN)
    assert plan["objects"], "the synthetic cluster has objects past a week"
    for item in plan["objects"]:
        topic = (item["namespace"], item["topic"])
        starts = [start for start, _, _ in model.objects[topic]]
        assert item["start_offset"] not in (max(starts), model.current.get(topic))
        assert item["created_at"] <= taken_at - WEEK
        cursors = [model.cursors.get(sub, -1) for sub in model.subscriptions if sub[:2] == topic]
        assert not cursors or item["end_offset"] <= min(cursors)
        assert topic in model.topics
    assert plan["totals"]["bytes"] == sum(item["size"] for item in plan["objects"])


def test_retention_plan_lists_every_such_object_in_order(
    faults_analysis: FaultsAnalysis, expected: tuple[Expected, float]
) -> None:
    """Every object the rule lets go is listed, once, ordered by namespace, topic and start
    (Spark writes the lines; their files are copied in order), with totals per namespace."""
    model, taken_at = expected
    wanted = set()
    for topic, items in model.objects.items():
        starts = [start for start, _, _ in items]
        cursors = [model.cursors.get(sub, -1) for sub in model.subscriptions if sub[:2] == topic]
        for start, value, key in items:
            if (
                topic in model.topics
                and value.completed
                and start not in (max(starts), model.current.get(topic))
                and value.created_at <= taken_at - WEEK
                and (not cursors or value.end_offset <= min(cursors))
            ):
                wanted.add(key)
    plan = faults_analysis.json(RETENTION_PLAN)
    listed = [item["key"] for item in plan["objects"]]
    assert sorted(listed) == sorted(wanted) and len(set(listed)) == len(listed)
    order = [(item["namespace"], item["topic"], item["start_offset"]) for item in plan["objects"]]
    assert order == sorted(order)
    namespaces: defaultdict[str, dict[str, int]] = defaultdict(lambda: {"objects": 0, "bytes": 0})
    for item in plan["objects"]:
        namespaces[item["namespace"]]["objects"] += 1
        namespaces[item["namespace"]]["bytes"] += item["size"]
    assert plan["totals"] == {
        "objects": len(listed),
        "bytes": sum(item["size"] for item in plan["objects"]),
        "namespaces": dict(namespaces),
    }


def test_an_empty_snapshot_is_analysed_into_every_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A snapshot of a store with no key yet (a cluster not started): every output is
    written, and says there is nothing."""
    snapshot = write_snapshot(tmp_path / "snapshot", [])
    out = tmp_path / "out"
    summary = analyze(spark, snapshot, out).summary
    for name in (SUMMARY, AUDIT, BACKLOG, STORAGE, RETENTION_PLAN, REBALANCE_PLAN, REPORT):
        assert (out / name).exists(), name
    assert summary["counts"] == {"keys": 0, "namespaces": 0, "by_kind": {}}
    assert summary["brokers"] == [] and summary["leader"]["broker_id"] is None
    assert (summary["storage"]["objects"], summary["retention"]["objects"]) == (0, 0)
    assert summary["backlog"]["subscriptions"] == 0 and summary["rebalance"]["moves"] == 0
    assert json.loads((out / SUMMARY).read_text()) == summary
    assert _parquet(out / BACKLOG) == [] and _parquet(out / STORAGE) == []
    assert json.loads((out / RETENTION_PLAN).read_text())["objects"] == []


def test_ordered_json_lines_keep_a_sorted_frame_s_order_across_its_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The plan's lines come from one file per partition: read back in the frame's order,
    every row once, rendered as `_plain` would (u64 decimals as plain numbers, nulls kept)."""
    rows = 5_000
    numbers = spark.range(rows).select(
        (F.col("id") * 7919 % rows).alias("n"),
        (F.lit(Decimal(U64_MAX)).cast(U64_TYPE) - F.col("id")).cast(U64_TYPE).alias("big"),
        F.when(F.col("id") % 2 == 0, F.lit('é"\n')).alias("text"),
    )
    ordered = numbers.repartition(3).orderBy(F.desc("n"))
    folder = tmp_path / "lines"
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # else it joins small partitions
    try:
        assert ordered.rdd.getNumPartitions() > 1, "the case must span several files"
        lines = list(ordered_json_lines(ordered, folder))
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive or "true")
    items = [json.loads(line) for line in lines]
    assert [item["n"] for item in items] == list(range(rows - 1, -1, -1))
    by_n = {int(row["n"]): row for row in ordered.collect()}
    assert items == [_plain(by_n[item["n"]].asDict()) for item in items]
    assert not folder.exists()
