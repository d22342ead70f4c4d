"""The analysis job, the one place that reads and writes: a snapshot parsed into typed tables
(written, then read back), the pure transforms run on them, and every output written into one
folder (tables/, summary.json, audit.json, backlog, storage, the plans, report.html).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane import layout
from metaplane.cluster._rankings import BrokerLoad
from metaplane.cluster._rebalance import Quotas, balance_after, balance_before, plan_quotas
from metaplane.layout import KeyKind, TopicName
from metaplane.pipeline._apply import PLAN_FORMAT, PLAN_FORMAT_VERSION
from metaplane.pipeline._audit import CHECKS, SEVERITIES, Check
from metaplane.pipeline._backlog import backlog, backlog_histogram, largest_backlogs
from metaplane.pipeline._errors import InvalidSetting
from metaplane.pipeline._rebalance import broker_load, broker_loads, chosen_moves
from metaplane.pipeline._report import (
    LARGEST_BACKLOGS,
    BrokerBars,
    ReportData,
    render_report,
)
from metaplane.pipeline._snapshot import Snapshot, snapshot_frame
from metaplane.pipeline._spark import spark_errors
from metaplane.pipeline._storage import retention_plan, storage
from metaplane.pipeline._summary import broker_summary, leadership
from metaplane.pipeline._tables import (
    UNKNOWN,
    Tables,
    classify,
    kind_name,
    parse_tables,
    read_tables,
)
from metaplane.pipeline._views import topic_facts, topics

DAY = 86_400
TABLES = "tables"
CLASSIFIED = "_classified"
SUMMARY = "summary.json"
AUDIT = "audit.json"
BACKLOG = "backlog.parquet"
STORAGE = "storage.parquet"
RETENTION_PLAN = "retention-plan.json"
REBALANCE_PLAN = "rebalance-plan.json"
REPORT = "report.html"
INTERPRETED_KEYS = 200_000
"""Up to this many keys, queries run without whole-stage code generation."""
CONCURRENT_JOBS = 4
"""Spark jobs submitted at once where a stage has many small ones (the checks, the tables):
planning a job happens on the driver, and overlaps another's running."""

Step = Callable[[str], None]
"""Told the name of each stage as it starts (the CLI shows it)."""


@dataclass(frozen=True)
class AnalyzeSettings:
    """The knobs of an analysis: the rebalance threshold (coefficient of variation of topics
    per active broker) and cap on balance moves, the retention (seconds, with per-namespace
    overrides), and how many of the largest backlogs the summary lists."""

    threshold: float = 0.1
    max_moves: int | None = None
    retention_seconds: int = 7 * DAY
    namespace_retention: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    top_backlogs: int = 10
    metaplane_election: bool | None = None
    """Whether metaplane's leader election runs on the cluster (the audit's checks of what it
    adds apply only there); None: seen in the snapshot (see `Check`)."""

    def check(self) -> None:
        if self.threshold < 0:
            raise InvalidSetting(f"the threshold must be at least 0, not {self.threshold}")
        if self.max_moves is not None and self.max_moves < 0:
            raise InvalidSetting(f"max moves must be at least 0, not {self.max_moves}")
        if self.retention_seconds < 0 or any(v < 0 for v in self.namespace_retention.values()):
            raise InvalidSetting("a retention must not be negative")


@dataclass(frozen=True)
class Analysis:
    """What an analysis wrote, and the figures a caller shows."""

    out: Path
    summary: dict[str, Any]

    @property
    def report(self) -> Path:
        return self.out / REPORT


def analyze(
    spark: SparkSession,
    snapshot: Snapshot,
    out: Path,
    settings: AnalyzeSettings | None = None,
    step: Step | None = None,
) -> Analysis:
    """Run every stage on `snapshot` and write the outputs into `out`."""
    settings = settings or AnalyzeSettings()
    settings.check()
    tell = step or (lambda _: None)
    out.mkdir(parents=True, exist_ok=True)
    with spark_errors(), _tuned(spark, snapshot):
        tell("parsing keys into tables")
        parsed = parse_snapshot(spark, snapshot, out / TABLES, keep=True)
        try:
            return _outputs(spark, snapshot, parsed.tables, parsed.counts, out, settings, tell)
        finally:
            parsed.close()


@contextlib.contextmanager
def _tuned(spark: SparkSession, snapshot: Snapshot) -> Iterator[None]:
    """On a small snapshot Spark spends more time compiling each query than running it:
    whole-stage code generation is switched off for it (and restored after)."""
    with _interpreted(spark, snapshot.keys <= INTERPRETED_KEYS):
        yield


@contextlib.contextmanager
def _interpreted(spark: SparkSession, wanted: bool = True) -> Iterator[None]:
    """Whole-stage code generation switched off while inside (when `wanted`)."""
    name = "spark.sql.codegen.wholeStage"
    previous = spark.conf.get(name)
    if wanted:
        spark.conf.set(name, "false")
    try:
        yield
    finally:
        spark.conf.set(name, previous or "true")


def _outputs(
    spark: SparkSession,
    snapshot: Snapshot,
    tables: Tables,
    counts: dict[str, int],
    out: Path,
    settings: AnalyzeSettings,
    tell: Step,
) -> Analysis:
    tell("audit")
    # Asked for first, so that the ownership facts are picked from them (`ownership_facts`).
    topic_facts(tables)
    # Some forty small jobs, each compiling its own code (in a JVM of its own, most of them
    # for the first time): at 10M keys the audit took 92.5 s and 79.7 s interpreted, against
    # 102.0 s and 96.7 s compiled (docs/pipeline.md, Performance).
    with _interpreted(spark):
        findings = run_audit(tables, metaplane_election=settings.metaplane_election)
    _write_json(out / AUDIT, audit_document(snapshot, findings))
    tell("backlog")
    backlog_frame = backlog(tables)
    backlog_frame.write.mode("overwrite").parquet(str(out / BACKLOG))
    backlog_rows = spark.read.parquet(str(out / BACKLOG))
    tell("storage")
    storage(tables).write.mode("overwrite").parquet(str(out / STORAGE))
    storage_rows = spark.read.parquet(str(out / STORAGE))
    tell("retention plan")
    retention = write_retention_plan(spark, tables, snapshot, settings, out / RETENTION_PLAN)
    tell("rebalance plan")
    plan = write_rebalance_plan(spark, tables, snapshot, settings, out / REBALANCE_PLAN)
    tell("summary")
    summary = _summary(snapshot, tables, counts, findings, backlog_rows, storage_rows, settings)
    summary["retention"] = retention
    summary["rebalance"] = _plan_summary(plan)
    _write_json(out / SUMMARY, summary)
    tell("report")
    (out / REPORT).write_text(render_report(_report_data(summary, plan, findings, backlog_rows)))
    return Analysis(out, summary)


# Tables -------------------------------------------------------------------------------------


def write_tables(spark: SparkSession, snapshot: Snapshot, folder: Path) -> dict[str, int]:
    """Parse the snapshot's keys and write one Parquet folder per kind present (and
    `unknown`); the count of keys of each kind. `read_tables` reads them back."""
    parsed = parse_snapshot(spark, snapshot, folder, keep=False)
    parsed.close()
    return parsed.counts


class ParsedSnapshot:
    """A snapshot's tables, and the keys of each kind. Until `close`, the keys grouped by
    kind are in `folder`/_classified, and `tables` the tables as the job reads them."""

    def __init__(self, folder: Path, tables: Tables, classified: DataFrame, keys: int) -> None:
        self.folder = folder
        self.tables = tables
        self._classified = classified
        self._keys = keys
        self._counts: dict[str, int] | None = None

    @property
    def counts(self) -> dict[str, int]:
        """The keys of each kind (`unknown`: outside the layout), counted when first asked
        for; ask before `close`.

        Read from the row counts in the footers of the files the keys were written into, a
        folder per kind, as the driver sees them (local mode, or a filesystem the cluster
        shares with it, as the snapshot and the outputs need anyway): a Spark job that
        counted them took about 1.3 s at 10M keys in a JVM of its own. Where those counts do
        not add up to the snapshot's keys (files the driver does not see), that job counts."""
        if self._counts is None:
            found = _counts_in_files(self.folder / CLASSIFIED)
            if sum(found.values()) != self._keys:
                by_kind = self._classified.groupBy("kind").count().collect()
                found = {kind_name(row["kind"]): row["count"] for row in by_kind}
            self._counts = dict(sorted(found.items()))
        return self._counts

    def close(self) -> None:
        self.tables.unpersist()
        shutil.rmtree(self.folder / CLASSIFIED, ignore_errors=True)


_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The folder name a partitioned write gives the rows whose partition value is null."""


def _counts_in_files(scratch: Path) -> dict[str, int]:
    """The keys of each kind in the folders of a write partitioned by the kind's number, from
    the Parquet footers' row counts of the files the driver sees there."""
    counts: dict[str, int] = {}
    for part in scratch.glob("kind=*"):
        value = part.name.removeprefix("kind=")
        rows = sum(pq.read_metadata(file).num_rows for file in part.glob("*.parquet"))
        if rows:
            counts[kind_name(None if value == _NULL_PARTITION else int(value))] = rows
    return counts


def parse_snapshot(
    spark: SparkSession, snapshot: Snapshot, folder: Path, *, keep: bool, write: bool = True
) -> ParsedSnapshot:
    """Classify every key in one pass over the snapshot, written grouped by kind (so that each
    kind's table reads its own keys only); then each kind's table, written into `folder`,
    several at once.

    With `keep`, the tables are for stages that follow. Written, they are read back from
    their files, and the views shared between the stages are kept in memory: keeping the
    tables in memory as they are written cost more (at 10M keys, 102-106 s of parsing
    against 86-87 s, and 231-232 s against 208-223 s for all of `analyze`) than scanning
    their columns again. Without `write`, no table is written: each is parsed when first
    used, and kept in memory with `keep`."""
    shutil.rmtree(folder, ignore_errors=True)
    scratch = folder / CLASSIFIED
    keys = classify(snapshot_frame(spark, snapshot), coded=True)
    # Without dictionaries: these files live for one run, and the keys and values they would
    # make dictionaries of are nearly all distinct. At 10M keys, 13.7 s (13.4–13.9) against
    # 14.5 s (14.0–15.6), 4 % larger, read back as fast (three alternated rounds).
    keys.write.partitionBy("kind").option("parquet.enable.dictionary", "false").parquet(
        str(scratch)
    )
    # Read with the schema it was written with: nothing to infer (an empty snapshot writes
    # no file to infer it from), and the kind stays a number.
    classified = spark.read.schema(keys.schema).parquet(str(scratch))
    parsed = parse_tables(classified)
    if not write:
        kept = parsed.cached() if keep else parsed
        return ParsedSnapshot(folder, kept, classified, snapshot.keys)
    result = ParsedSnapshot(folder, parsed, classified, snapshot.keys)
    counts = result.counts

    def write_one(name: str) -> None:
        frame = parsed.unknown if name == UNKNOWN else parsed[KeyKind(name)]
        frame.write.parquet(str(folder / name))

    with ThreadPoolExecutor(CONCURRENT_JOBS) as pool:
        list(pool.map(write_one, sorted(counts, key=lambda name: -counts[name])))
    if keep:
        result.tables = read_tables(spark, folder, keep_views=True)
    return result


# Audit --------------------------------------------------------------------------------------

_SEVERITY_ORDER = {name: index for index, name in enumerate(SEVERITIES)}


def run_audit(
    tables: Tables,
    checks: list[Check] | None = None,
    *,
    metaplane_election: bool | None = None,
) -> list[dict[str, Any]]:
    """Every finding, errors first. A job per check: many small plans cost Spark less than
    one plan with every check in it, and several run at once."""
    chosen = [c for c in (CHECKS if checks is None else checks) if c.applies(metaplane_election)]

    def run(one: Check) -> list[dict[str, Any]]:
        return [_finding(row) for row in one.run(tables, metaplane_election).collect()]

    with ThreadPoolExecutor(CONCURRENT_JOBS) as pool:
        findings = [f for found in pool.map(run, chosen) for f in found]
    findings.sort(key=lambda f: (_SEVERITY_ORDER[f["severity"]], f["check"], f["subject"] or ""))
    return findings


def _finding(row: Row) -> dict[str, Any]:
    return {
        "check": row["check"],
        "severity": row["severity"],
        "subject": row["subject"],
        "keys": list(row["keys"] or []),
        "message": row["message"],
    }


def audit_document(snapshot: Snapshot, findings: list[dict[str, Any]]) -> dict[str, Any]:
    severities = Counter(finding["severity"] for finding in findings)
    return {
        "snapshot": snapshot.describe(),
        "severities": {name: severities.get(name, 0) for name in SEVERITIES},
        "checks": dict(sorted(Counter(finding["check"] for finding in findings).items())),
        "findings": findings,
    }


# Retention ----------------------------------------------------------------------------------


def write_retention_plan(
    spark: SparkSession,
    tables: Tables,
    snapshot: Snapshot,
    settings: AnalyzeSettings,
    path: Path,
) -> dict[str, Any]:
    """Write the retention plan and return its totals. Spark renders its objects as lines of
    JSON, in order, into files beside it, which are then copied into the plan line by line
    (memory stays flat whatever the plan's size)."""
    schema = T.StructType(
        [T.StructField("namespace", T.StringType()), T.StructField("seconds", T.LongType())]
    )
    overrides = spark.createDataFrame(list(settings.namespace_retention.items()), schema)
    plan = retention_plan(tables, overrides, settings.retention_seconds, int(snapshot.taken_at))
    header = {
        "snapshot": snapshot.describe(),
        "retention": {
            "default_seconds": settings.retention_seconds,
            "namespaces": dict(settings.namespace_retention),
        },
    }
    plan = plan.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        totals = _retention_totals(plan)
        ordered = plan.orderBy("namespace", "topic", "start_offset")
        with path.open("wb") as out:
            head = "".join(f"{json.dumps(k)}: {json.dumps(v)},\n" for k, v in header.items())
            out.write(("{\n" + head + '"objects": [').encode())
            separator = b"\n"
            for line in ordered_json_lines(ordered, path.with_name(path.name + ".lines")):
                out.write(separator + line)
                separator = b",\n"
            out.write(f'\n],\n"totals": {json.dumps(totals)}\n}}\n'.encode())
    finally:
        plan.unpersist()
    return totals


def ordered_json_lines(frame: DataFrame, folder: Path) -> Iterator[bytes]:
    """Each row of `frame`, in its order, as one line of JSON (without its newline). Spark
    writes them into `folder` (removed after), a file per partition: the partitions of a
    sorted frame hold consecutive ranges, and their files are named in that order."""
    shutil.rmtree(folder, ignore_errors=True)
    try:
        _json_lines(frame).write.text(str(folder))
        for part in sorted(folder.glob("part-*")):
            with part.open("rb") as lines:
                for line in lines:
                    yield line.rstrip(b"\n")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _json_lines(frame: DataFrame) -> DataFrame:
    """Each row of `frame` as one line of JSON, as `_plain` renders it: decimals as numbers
    (the retention plan has no id that `_plain` quotes), nulls kept. Spark renders them,
    so that the driver copies text instead of turning a million rows into Python objects
    (at 10M keys the retention plan has a million objects: that took most of its stage)."""
    assert not _ID_FIELDS.intersection(frame.columns), "ids are rendered as strings"
    row = F.struct(*(F.col(name) for name in frame.columns))
    return frame.select(F.to_json(row, {"ignoreNullFields": "false"}).alias("value"))


def _retention_totals(plan: DataFrame) -> dict[str, Any]:
    """Objects and bytes of a retention plan, in all and per namespace."""
    rows = plan.groupBy("namespace").agg(
        F.count(F.lit(1)).alias("objects"), F.sum("size").alias("bytes")
    )
    namespaces = {
        row["namespace"]: {"objects": row["objects"], "bytes": int(row["bytes"] or 0)}
        for row in rows.collect()
    }
    return {
        "objects": sum(counts["objects"] for counts in namespaces.values()),
        "bytes": sum(counts["bytes"] for counts in namespaces.values()),
        "namespaces": dict(sorted(namespaces.items())),
    }


# Rebalance ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The rebalance plan as written: its document, and the loads it was planned from."""

    document: dict[str, Any]
    loads: list[BrokerLoad]
    quotas: Quotas


def write_rebalance_plan(
    spark: SparkSession,
    tables: Tables,
    snapshot: Snapshot,
    settings: AnalyzeSettings,
    path: Path,
) -> Plan:
    loads = [broker_load(row) for row in broker_loads(tables).collect()]
    quotas = plan_quotas(loads, settings.threshold, settings.max_moves)
    moves = [_move(row) for row in chosen_moves(spark, tables, quotas).collect()]
    moves.sort(key=lambda move: (move["reason"] != "drain", move["from"], move["topic"]))
    after = _counts_after(loads, moves)
    document = rebalance_document(snapshot, settings, loads, after, moves, quotas.notes)
    _write_json(path, document)
    return Plan(document, loads, quotas)


def _move(row: Row) -> dict[str, Any]:
    topic = TopicName(row["namespace"], row["topic"])
    target = int(row["target"])
    return {
        "topic": topic.path,
        "namespace": topic.namespace,
        "name": topic.topic,
        "from": str(int(row["source"])),
        "to": str(target),
        "reason": row["reason"],
        "assignment_key": row["assignment_key"],
        "assignment_mod_revision": row["assignment_mod_revision"],
        "target_key": layout.assignment(target, topic),
        "subscriptions": row["subscriptions"],
    }


def _counts_after(loads: list[BrokerLoad], moves: list[dict[str, Any]]) -> dict[int, int]:
    """The counts the chosen moves leave (a quota may find fewer movable topics)."""
    counts = {load.broker_id: load.topic_count for load in loads}
    for move in moves:
        counts[int(move["from"])] -= 1
        counts[int(move["to"])] += 1
    return counts


def rebalance_document(
    snapshot: Snapshot,
    settings: AnalyzeSettings,
    loads: list[BrokerLoad],
    after: dict[int, int],
    moves: list[dict[str, Any]],
    notes: list[str],
) -> dict[str, Any]:
    """The reviewable plan: everything `metaplane rebalance apply` needs to move each topic
    with compare-guarded transactions and to skip one that changed since the snapshot."""
    before_balance, after_balance = balance_before(loads), balance_after(loads, after)
    return {
        "format": PLAN_FORMAT,
        "format_version": PLAN_FORMAT_VERSION,
        "snapshot": snapshot.describe(),
        "metric": "topics per broker: coefficient of variation over the active brokers",
        "threshold": settings.threshold,
        "max_moves": settings.max_moves,
        "balance_before": before_balance.as_dict(),
        "balance_after": after_balance.as_dict(),
        "threshold_met": after_balance.cv <= settings.threshold,
        "brokers": [
            {
                "broker_id": str(load.broker_id),
                "mode": load.mode,
                "registered": load.registered,
                "before": load.topic_count,
                "after": after[load.broker_id],
            }
            for load in sorted(loads, key=lambda load: load.broker_id)
        ],
        "notes": notes,
        "moves": moves,
    }


def _plan_summary(plan: Plan) -> dict[str, Any]:
    document = plan.document
    reasons = Counter(move["reason"] for move in document["moves"])
    return {
        "moves": len(document["moves"]),
        "by_reason": dict(sorted(reasons.items())),
        "threshold": document["threshold"],
        "balance_before": document["balance_before"],
        "balance_after": document["balance_after"],
        "threshold_met": document["threshold_met"],
    }


# Summary and report -------------------------------------------------------------------------


def _summary(
    snapshot: Snapshot,
    tables: Tables,
    counts: dict[str, int],
    findings: list[dict[str, Any]],
    backlog_rows: DataFrame,
    storage_rows: DataFrame,
    settings: AnalyzeSettings,
) -> dict[str, Any]:
    leader = leadership(tables).first()
    severities = Counter(finding["severity"] for finding in findings)
    return {
        "snapshot": snapshot.describe(),
        "counts": {
            "keys": sum(counts.values()),
            "namespaces": topics(tables).select("namespace").distinct().count(),
            "by_kind": counts,
        },
        "leader": {
            "broker_id": _id(leader["leader"]) if leader else None,
            "epoch": _plain(leader["epoch"]) if leader else None,
        },
        "brokers": [_plain(row.asDict()) for row in broker_summary(tables).collect()],
        "backlog": _backlog_summary(backlog_rows, settings.top_backlogs),
        "storage": _storage_summary(storage_rows),
        "audit": {
            "findings": len(findings),
            "severities": {name: severities.get(name, 0) for name in SEVERITIES},
        },
    }


def _backlog_summary(rows: DataFrame, top: int) -> dict[str, Any]:
    total = rows.agg(
        F.count(F.lit(1)).alias("subscriptions"),
        F.sum("backlog").alias("messages"),
        F.count("backlog").alias("known"),
    ).first()
    assert total is not None
    return {
        "subscriptions": total["subscriptions"],
        "with_known_backlog": total["known"],
        "messages": _plain(total["messages"]) or 0,
        "largest": [_plain(row.asDict()) for row in largest_backlogs(rows, top).collect()],
        "distribution": [_plain(row.asDict()) for row in backlog_histogram(rows).collect()],
    }


def _storage_summary(rows: DataFrame) -> dict[str, Any]:
    levels = {"cluster": [], "namespace": []}  # type: dict[str, list[dict[str, Any]]]
    for row in rows.where(F.col("level") != "topic").orderBy("namespace").collect():
        levels[row["level"]].append(_plain(row.asDict()))
    cluster = levels["cluster"][0] if levels["cluster"] else {"objects": 0, "bytes": 0}
    return {
        "objects": cluster["objects"],
        "bytes": cluster["bytes"] or 0,
        "namespaces": [
            {"namespace": item["namespace"], "objects": item["objects"], "bytes": item["bytes"]}
            for item in levels["namespace"]
        ],
    }


def _report_data(
    summary: dict[str, Any], plan: Plan, findings: list[dict[str, Any]], backlog_rows: DataFrame
) -> ReportData:
    document = plan.document
    bars = [
        BrokerBars(
            broker["broker_id"],
            broker["mode"] if broker["registered"] else "unregistered",
            broker["before"],
            broker["after"],
        )
        for broker in document["brokers"]
    ]
    distribution = summary["backlog"]["distribution"]
    return ReportData(
        snapshot=summary["snapshot"],
        counts={
            "keys": summary["counts"]["keys"],
            "brokers": len(document["brokers"]),
            "topics": summary["counts"]["by_kind"].get(KeyKind.TOPIC_ROOT.value, 0),
            "subscriptions": summary["backlog"]["subscriptions"],
            "findings": len(findings),
            "moves": len(document["moves"]),
        },
        brokers=bars,
        balance_before=document["balance_before"],
        balance_after=document["balance_after"],
        threshold=document["threshold"],
        moves=len(document["moves"]),
        backlog=[(item["digits"], item["subscriptions"]) for item in distribution],
        storage=[
            (item["namespace"], item["bytes"] or 0, item["objects"])
            for item in summary["storage"]["namespaces"]
        ],
        findings=findings,
        severities={k: v for k, v in summary["audit"]["severities"].items() if v},
        retention=summary.get("retention", {}),
        planned_moves=document["moves"],
        largest_backlogs=[
            _plain(row.asDict())
            for row in largest_backlogs(backlog_rows, LARGEST_BACKLOGS).collect()
        ],
    )


# JSON ---------------------------------------------------------------------------------------

_ID_FIELDS = frozenset({"broker_id", "producer_id", "consumer_id", "leader", "from_broker"})


def _id(value: object) -> str | None:
    return None if value is None else str(int(value))  # type: ignore[call-overload]


def _plain(value: Any, name: str = "") -> Any:
    """A Spark value as JSON: u64 ids as strings (JavaScript and jq read numbers as doubles),
    other decimals as integers."""
    if isinstance(value, Row):
        value = value.asDict()
    if isinstance(value, dict):
        return {key: _plain(item, key) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, name) for item in value]
    if isinstance(value, Decimal):
        return str(int(value)) if name in _ID_FIELDS else int(value)
    return value


def _write_json(path: Path, document: object) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n")
