"""The pipeline at scale, on synthetic snapshots (every audit fault injected) at local[2]:

- `metaplane analyze`, whole, against the target of issue 13: 10M keys in at most 120 s, as
  a user runs it (a process and a JVM of its own: the target's figure), and in this process
  after the subset's rounds (warm; with the time of each stage);
- one subset of the job — topics per broker, topics assigned twice or never, cursors past the
  last committed offset, storage per namespace — done three ways in the same run, in
  alternating order round after round: metaplane's own path (its one-pass classification, its
  tables and its transforms), a minimal hand-written Spark job of the same subset (the
  layout's own regexes, a minimal JSON schema), and DuckDB as the single-machine reference.
  The three must give the same counts. Target: metaplane's path at most 1.2 times the
  minimal Spark job.

    .venv/bin/python benchmarks/pipeline_bench.py [--sizes 100000 1000000 10000000]
        [--rounds 3] [--warmup 1] [--analyze-rounds 1] [--work /tmp/metaplane-bench]
        [--driver-memory 6g]

DuckDB is installed for the benchmark only, with pip into benchmarks/results/duckdb/ (never a
dependency of the package), and runs in a process of its own with two threads. Every figure
is the median of the rounds with its spread (lowest–highest), never the best round; the ratio
is the median of each round's own ratio; one untimed run of each contender comes first (a
JVM's first jobs pay its class loading and JIT). Prints a table; writes JSON
(benchmarks/results/pipeline_bench.json). Snapshots are kept in --work between runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from rich.console import Console
from rich.table import Table

from metaplane.layout import PATTERNS, KeyKind
from metaplane.layout._names import NAME_RULES
from metaplane.layout._patterns import FIELD_REGEXES
from metaplane.pipeline import (
    Snapshot,
    SynthSpec,
    analyze,
    audit,
    parse_snapshot,
    read_snapshot,
    spark_session,
    storage,
    synth_snapshot,
    topics_for_keys,
)
from metaplane.pipeline._analyze import _tuned as tuned
from metaplane.pipeline._audit import checks_named
from metaplane.pipeline._views import brokers

SIZES = (100_000, 1_000_000, 10_000_000)
TAKEN_AT = 1_800_000_000.0
DUCKDB = "duckdb==1.1.3"
RESULTS = Path(__file__).parent / "results"
TARGET_KEYS = 9_000_000  # the 10M snapshot (synth lands a few percent under its size)
TARGET_SECONDS = 120.0
TARGET_RATIO = 1.2
console = Console()

Counts = dict[str, Any]
"""The subset's answer: {"topics_per_broker": {id: n}, "assigned_twice": n, "never_assigned":
n, "cursors_past_last_committed": n, "storage_per_namespace": {ns: [objects, bytes]}}."""


# Snapshots ------------------------------------------------------------------------------------


def snapshot_of(size: int, work: Path) -> Snapshot:
    """The synthetic snapshot of about `size` keys (generated unless kept from a past run)."""
    folder = work / f"synth-{size}"
    if (folder / "snapshot.json").exists():
        return read_snapshot(folder)
    shutil.rmtree(folder, ignore_errors=True)
    topics = max(topics_for_keys(size, SynthSpec(faults=True)), 200)
    spec = SynthSpec(
        brokers=max(3, topics // 10_000), topics=topics, faults=True, seed=1, taken_at=TAKEN_AT
    )
    return synth_snapshot(spec, folder)


# metaplane's path -----------------------------------------------------------------------------

SUBSET_CHECKS = ("topic-assigned-twice", "topic-unowned", "cursor-beyond-last-committed")


def metaplane_subset(spark: SparkSession, snapshot: Snapshot, scratch: Path) -> Counts:
    """The subset by metaplane's own path: every key classified in one pass, the tables the
    subset needs parsed from it (and kept), then the pipeline's own transforms."""
    with tuned(spark, snapshot):  # as analyze runs it
        parsed = parse_snapshot(spark, snapshot, scratch, keep=True, write=False)
        try:
            tables = parsed.tables
            found = audit(tables, checks_named(SUBSET_CHECKS)).groupBy("check").count().collect()
            by_check = {row["check"]: row["count"] for row in found}
            loads = brokers(tables).where(F.col("topics") > 0).collect()
            rolled = storage(tables).where(F.col("level") == "namespace").collect()
        finally:
            parsed.close()
    return {
        "topics_per_broker": {str(int(row["broker_id"])): row["topics"] for row in loads},
        "assigned_twice": by_check.get("topic-assigned-twice", 0),
        "never_assigned": by_check.get("topic-unowned", 0),
        "cursors_past_last_committed": by_check.get("cursor-beyond-last-committed", 0),
        "storage_per_namespace": {
            row["namespace"]: [row["objects"], int(row["bytes"] or 0)] for row in rolled
        },
    }


# A minimal hand-written Spark job of the same subset ------------------------------------------

U64 = T.DecimalType(20, 0)
TOPIC = ["namespace", "topic"]


def minimal_subset(spark: SparkSession, snapshot: Snapshot, scratch: Path) -> Counts:
    """What one would write by hand for the subset alone: each kind it needs picked out by a
    prefix and the layout's own regex, its fields extracted by the regex, values read with
    a minimal JSON schema; the snapshot read once into memory."""
    keys = (
        spark.read.parquet(*snapshot.paths)
        .select("key", F.col("value").cast("string").alias("value"))
        .cache()
    )
    try:
        return _minimal_counts(keys)
    finally:
        keys.unpersist()


def _of_kind(keys: DataFrame, kind: KeyKind, prefix: str) -> DataFrame:
    pattern = PATTERNS[kind]
    key = F.col("key")
    rows = keys.where(key.startswith(prefix) & key.rlike(pattern.regex))
    fields = [
        F.regexp_extract(key, pattern.regex, i + 1).alias(g) for i, g in enumerate(pattern.groups)
    ]
    return rows.select(*fields, "value")


def _minimal_counts(keys: DataFrame) -> Counts:
    assignments = _of_kind(keys, KeyKind.ASSIGNMENT, "/cluster/brokers/").cache()
    registered = _of_kind(keys, KeyKind.BROKER_REGISTRATION, "/cluster/register/")
    waiting = _of_kind(keys, KeyKind.UNASSIGNED, "/cluster/unassigned/").select(*TOPIC)
    roots = _of_kind(keys, KeyKind.TOPIC_ROOT, "/topics/").where(F.trim("value") == "0")
    cursors = _of_kind(keys, KeyKind.CURSOR, "/topics/").select(
        *TOPIC, F.trim("value").try_cast(U64).alias("cursor")
    )
    schema = T.StructType(
        [
            T.StructField("completed", T.BooleanType()),
            T.StructField("end_offset", U64),
            T.StructField("size", U64),
        ]
    )
    objects = _of_kind(keys, KeyKind.STORAGE_OBJECT, "/danube-data/storage/topics/").select(
        *TOPIC, F.from_json("value", schema).alias("o")
    )
    sealed = _of_kind(keys, KeyKind.STORAGE_STATE, "/danube-data/storage/topics/").select(
        *TOPIC,
        F.get_json_object("value", "$.last_committed_offset").try_cast(U64).alias("last"),
    )
    per_broker = assignments.groupBy("broker_id").count().collect()
    twice = assignments.groupBy(*TOPIC).count().where("count > 1").count()
    owned = assignments.select(*TOPIC)
    never = roots.select(*TOPIC).join(owned, TOPIC, "left_anti").join(waiting, TOPIC, "left_anti")
    uploaded = objects.where("o.completed").select(*TOPIC, F.col("o.end_offset").alias("last"))
    last = uploaded.unionByName(sealed).groupBy(*TOPIC).agg(F.max("last").alias("last"))
    served = assignments.join(registered.select("broker_id"), "broker_id").select(*TOPIC)
    beyond = (
        cursors.join(last, TOPIC).join(served.distinct(), TOPIC, "left_anti").where("cursor > last")
    )
    rolled = (
        objects.where("o is not null")
        .groupBy("namespace")
        .agg(F.count("*").alias("objects"), F.sum("o.size").alias("bytes"))
    )
    result = {
        "topics_per_broker": {row["broker_id"]: row["count"] for row in per_broker},
        "assigned_twice": twice,
        "never_assigned": never.count(),
        "cursors_past_last_committed": beyond.count(),
        "storage_per_namespace": {
            row["namespace"]: [row["objects"], int(row["bytes"] or 0)] for row in rolled.collect()
        },
    }
    assignments.unpersist()
    return result


# DuckDB, the single-machine reference ---------------------------------------------------------


def duckdb_site() -> Path:
    """DuckDB, installed with pip into a folder of the benchmark's own (once)."""
    site = RESULTS / "duckdb"
    if not (site / "duckdb").is_dir():
        console.print(f"installing {DUCKDB} into {site} (for the benchmark only)")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site), DUCKDB],
            check=True,
        )
    return site


def _name_check(column: str, name: str) -> str:
    rule = NAME_RULES[name]
    reserved = ", ".join(f"'{word}'" for word in rule.reserved)
    check = f"regexp_full_match({column}, '[{rule.chars}]{{1,255}}')"
    return f"({check} AND {column} NOT IN ({reserved}))" if reserved else check


def _number_check(column: str, name: str) -> str:
    # The layout's numeric field patterns are plain alternations: RE2 reads them as they are.
    return f"regexp_full_match({column}, '{FIELD_REGEXES[name]}')"


def duckdb_sql(paths: list[str]) -> str:
    """The subset in DuckDB's SQL: keys split into segments (lists are 1-based), each field
    checked by the layout's rules (names by their characters and reserved words, numbers by
    the layout's own patterns)."""
    files = ", ".join(f"'{path}'" for path in paths)
    ns, topic = _name_check("p[5]", "namespace"), _name_check("p[6]", "topic")
    ts_ns, ts_topic = _name_check("p[3]", "namespace"), _name_check("p[4]", "topic")
    st_ns, st_topic = _name_check("p[5]", "namespace"), _name_check("p[6]", "topic")
    return f"""
    CREATE TEMP TABLE k AS
      SELECT key, value AS v, string_split(key, '/') AS p
      FROM read_parquet([{files}], binary_as_string = true);
    CREATE TEMP TABLE assignments AS SELECT p[4] AS broker, p[5] AS ns, p[6] AS topic FROM k
      WHERE len(p) = 6 AND p[1] = '' AND p[2] = 'cluster' AND p[3] = 'brokers'
        AND {_number_check("p[4]", "broker_id")} AND {_name_check("p[5]", "namespace")}
        AND {_name_check("p[6]", "topic")};
    CREATE TEMP TABLE registered AS SELECT p[4] AS broker FROM k
      WHERE len(p) = 4 AND p[2] = 'cluster' AND p[3] = 'register' AND p[1] = ''
        AND {_number_check("p[4]", "broker_id")};
    CREATE TEMP TABLE waiting AS SELECT p[4] AS ns, p[5] AS topic FROM k
      WHERE len(p) = 5 AND p[2] = 'cluster' AND p[3] = 'unassigned' AND p[1] = ''
        AND {_name_check("p[4]", "namespace")} AND {_name_check("p[5]", "topic")};
    CREATE TEMP TABLE roots AS SELECT p[3] AS ns, p[4] AS topic FROM k
      WHERE len(p) = 4 AND p[2] = 'topics' AND p[1] = '' AND {ts_ns} AND {ts_topic}
        AND trim(v) = '0';
    CREATE TEMP TABLE cursors AS
      SELECT p[3] AS ns, p[4] AS topic, TRY_CAST(trim(v) AS DECIMAL(20, 0)) AS cursor FROM k
      WHERE len(p) = 7 AND p[2] = 'topics' AND p[5] = 'subscriptions' AND p[7] = 'cursor'
        AND p[1] = '' AND {ts_ns} AND {ts_topic} AND {_name_check("p[6]", "subscription")};
    CREATE TEMP TABLE objects AS
      SELECT p[5] AS ns, p[6] AS topic,
             TRY_CAST(json_extract_string(v, '$.completed') AS BOOLEAN) AS completed,
             TRY_CAST(json_extract_string(v, '$.end_offset') AS DECIMAL(20, 0)) AS end_offset,
             TRY_CAST(json_extract_string(v, '$.size') AS DECIMAL(20, 0)) AS size
      FROM k
      WHERE len(p) = 8 AND p[2] = 'danube-data' AND p[3] = 'storage' AND p[4] = 'topics'
        AND p[7] = 'objects' AND p[1] = '' AND {ns} AND {topic}
        AND {_number_check("p[8]", "offset")} AND json_valid(v);
    CREATE TEMP TABLE sealed AS
      SELECT p[5] AS ns, p[6] AS topic,
             TRY_CAST(json_extract_string(v, '$.last_committed_offset') AS DECIMAL(20, 0)) AS last
      FROM k
      WHERE len(p) = 7 AND p[2] = 'danube-data' AND p[3] = 'storage' AND p[4] = 'topics'
        AND p[7] = 'state' AND p[1] = '' AND {st_ns} AND {st_topic} AND json_valid(v);
    """


DUCKDB_QUERIES = {
    "topics_per_broker": "SELECT broker, count(*) FROM assignments GROUP BY broker",
    "assigned_twice": """SELECT count(*) FROM (SELECT ns, topic FROM assignments
        GROUP BY ns, topic HAVING count(*) > 1)""",
    "never_assigned": """SELECT count(*) FROM roots r WHERE
        NOT EXISTS (SELECT 1 FROM assignments a WHERE a.ns = r.ns AND a.topic = r.topic)
        AND NOT EXISTS (SELECT 1 FROM waiting w WHERE w.ns = r.ns AND w.topic = r.topic)""",
    "cursors_past_last_committed": """WITH last AS (
          SELECT ns, topic, max(l) AS last FROM (
            SELECT ns, topic, end_offset AS l FROM objects WHERE completed
            UNION ALL SELECT ns, topic, last FROM sealed) GROUP BY ns, topic),
        served AS (SELECT DISTINCT ns, topic FROM assignments JOIN registered USING (broker))
        SELECT count(*) FROM cursors c JOIN last USING (ns, topic)
        WHERE c.cursor > last.last
          AND NOT EXISTS (SELECT 1 FROM served s WHERE s.ns = c.ns AND s.topic = c.topic)""",
    "storage_per_namespace": "SELECT ns, count(*), sum(size) FROM objects GROUP BY ns",
}

DUCKDB_RUNNER = """
import json, sys, time
import duckdb
sql, queries = json.loads(sys.stdin.read())
started = time.monotonic()
db = duckdb.connect()
db.execute("SET threads TO 2")
db.execute("SET enable_progress_bar = false")
db.execute(sql)
answer = {name: db.execute(query).fetchall() for name, query in queries.items()}
print(json.dumps({"seconds": time.monotonic() - started, "answer": answer}, default=str))
"""


def duckdb_subset(snapshot: Snapshot) -> tuple[float, Counts]:
    """The subset in DuckDB (in a process of its own): its own seconds, and the counts."""
    env = {**os.environ, "PYTHONPATH": str(duckdb_site())}
    request = json.dumps([duckdb_sql(snapshot.paths), DUCKDB_QUERIES])
    done = subprocess.run(
        [sys.executable, "-c", DUCKDB_RUNNER],
        input=request, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"DuckDB failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    answer = result["answer"]
    counts = {
        "topics_per_broker": {broker: n for broker, n in answer["topics_per_broker"]},
        "assigned_twice": answer["assigned_twice"][0][0],
        "never_assigned": answer["never_assigned"][0][0],
        "cursors_past_last_committed": answer["cursors_past_last_committed"][0][0],
        "storage_per_namespace": {
            ns: [n, int(float(size or 0))] for ns, n, size in answer["storage_per_namespace"]
        },
    }
    return float(result["seconds"]), counts


# Measuring ------------------------------------------------------------------------------------


def jvm_cpu() -> float:
    """CPU seconds used so far by this process's children (Spark's JVM)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def timed(run: Callable[[], Counts]) -> tuple[float, float, Counts]:
    cpu, started = jvm_cpu(), time.monotonic()
    counts = run()
    return time.monotonic() - started, jvm_cpu() - cpu, counts


@dataclass
class Spread:
    """The median of some rounds, and the lowest and highest of them."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(
            round(statistics.median(values), 2), round(min(values), 2), round(max(values), 2)
        )

    def __str__(self) -> str:
        return f"{self.median:.1f} ({self.low:.1f}–{self.high:.1f})"


@dataclass
class SizeResult:
    keys: int
    rounds: int
    metaplane: Spread
    minimal: Spread
    duckdb: Spread
    ratio: Spread
    """metaplane's path over the minimal job, round by round."""
    metaplane_cpu: Spread
    minimal_cpu: Spread
    agree: bool
    counts: Counts
    analyze: Spread | None = None
    """In this process, after the subset's rounds."""
    analyze_cpu: Spread | None = None
    analyze_command: Spread | None = None
    """`metaplane analyze` in a process of its own: what the target is about."""
    stages: dict[str, float] = field(default_factory=dict)
    load_average: float = 0.0


def measure(size: int, args: argparse.Namespace) -> SizeResult:
    snapshot = snapshot_of(size, args.work)
    spark = spark_session()
    console.print(f"[bold]{snapshot.keys:,} keys[/]")
    contenders: dict[str, Callable[[], Counts]] = {
        "metaplane": lambda: metaplane_subset(spark, snapshot, args.work / "scratch"),
        "minimal": lambda: minimal_subset(spark, snapshot, args.work / "scratch"),
    }
    wall: dict[str, list[float]] = {"metaplane": [], "minimal": [], "duckdb": []}
    cpu: dict[str, list[float]] = {"metaplane": [], "minimal": []}
    answers: dict[str, Counts] = {}
    for _ in range(args.warmup):
        # A JVM's first jobs pay its class loading and JIT, for whichever contender runs
        # first: both run once, untimed, before the rounds.
        for name, run in contenders.items():
            run()
            console.print(f"  warm-up: {name}")
    for number in range(args.rounds):
        order = ["metaplane", "minimal", "duckdb"]
        if number % 2:
            order.reverse()  # alternate: neither contender always runs first (or warm)
        for name in order:
            if name == "duckdb":
                seconds, answers[name] = duckdb_subset(snapshot)
                wall[name].append(seconds)
            else:
                seconds, used, answers[name] = timed(contenders[name])
                wall[name].append(seconds)
                cpu[name].append(used)
            console.print(f"  round {number + 1}: {name} {wall[name][-1]:.1f}s")
    ratios = [a / b for a, b in zip(wall["metaplane"], wall["minimal"], strict=True)]
    agree = answers["metaplane"] == answers["minimal"] == answers["duckdb"]
    if not agree:
        console.print(f"  [red]the counts differ[/]: {json.dumps(answers, indent=1)[:3000]}")
    result = SizeResult(
        keys=snapshot.keys,
        rounds=args.rounds,
        metaplane=Spread.of(wall["metaplane"]),
        minimal=Spread.of(wall["minimal"]),
        duckdb=Spread.of(wall["duckdb"]),
        ratio=Spread.of(ratios),
        metaplane_cpu=Spread.of(cpu["metaplane"]),
        minimal_cpu=Spread.of(cpu["minimal"]),
        agree=agree,
        counts=answers["metaplane"],
    )
    if args.analyze_rounds:
        analyze_runs(snapshot, args, result)
    result.load_average = round(os.getloadavg()[0], 2)
    return result


def analyze_runs(snapshot: Snapshot, args: argparse.Namespace, result: SizeResult) -> None:
    walls, cpus = [], []
    for _ in range(args.analyze_rounds):
        out = args.work / f"out-{snapshot.keys}"
        shutil.rmtree(out, ignore_errors=True)
        marks: list[tuple[str, float]] = []
        cpu, started = jvm_cpu(), time.monotonic()
        analyze(spark_session(), snapshot, out, step=_marking(marks))
        marks.append(("end", time.monotonic()))
        walls.append(time.monotonic() - started)
        cpus.append(jvm_cpu() - cpu)
        result.stages = {n: round(b - a, 1) for (n, a), (_, b) in itertools.pairwise(marks)}
        console.print(f"  analyze {walls[-1]:.1f}s, JVM {cpus[-1]:.0f} CPU-s: {result.stages}")
    result.analyze, result.analyze_cpu = Spread.of(walls), Spread.of(cpus)
    commands = []
    for _ in range(args.analyze_rounds):
        commands.append(analyze_command(snapshot, args))
        console.print(f"  metaplane analyze (a JVM of its own) {commands[-1]:.1f}s")
    result.analyze_command = Spread.of(commands)


def analyze_command(snapshot: Snapshot, args: argparse.Namespace) -> float:
    """`metaplane analyze` as a user runs it: a process and a JVM of its own, cold (the
    in-process runs above follow the subset's rounds, in a JVM they warmed up)."""
    out = args.work / f"out-cli-{snapshot.keys}"
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable, "-c", "from metaplane.admin.cli import main; main()", "analyze",
        "--snapshot", str(snapshot.folder), "--out", str(out), "--spark-master", args.master,
        "--driver-memory", args.driver_memory, "-o", "json",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"metaplane analyze failed: {done.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return seconds


def _marking(marks: list[tuple[str, float]]) -> Callable[[str], None]:
    return lambda name: marks.append((name, time.monotonic()))


def show(results: list[SizeResult]) -> None:
    table = Table(title="pipeline at local[2]: median (lowest–highest) of the rounds, seconds")
    columns = ["keys", "analyze (own JVM)", "analyze (warm)", "metaplane subset", "minimal Spark"]
    columns += ["metaplane / minimal"]
    columns += ["DuckDB", "JVM CPU-s: metaplane / minimal", "agree", "load"]
    for column in columns:
        table.add_column(column, justify="right")
    for result in results:
        table.add_row(
            f"{result.keys:,}",
            str(result.analyze_command) if result.analyze_command else "–",
            str(result.analyze) if result.analyze else "–",
            str(result.metaplane),
            str(result.minimal),
            f"{result.ratio.median:.2f} ({result.ratio.low:.2f}–{result.ratio.high:.2f})",
            str(result.duckdb),
            f"{result.metaplane_cpu.median:.0f} / {result.minimal_cpu.median:.0f}",
            "yes" if result.agree else "NO",
            f"{result.load_average}",
        )
    console.print(table)
    for result in results:
        verdicts = [f"subset ratio {result.ratio.median:.2f} (at most {TARGET_RATIO})"]
        if result.keys >= TARGET_KEYS and result.analyze_command is not None:
            seconds = result.analyze_command.median
            verdicts.append(f"metaplane analyze {seconds:.0f} s (at most {TARGET_SECONDS:.0f})")
        met = targets_met(result)
        state = "met" if met else "[red]NOT met[/]"
        console.print(f"{result.keys:,} keys: {', '.join(verdicts)}: {state}")


def targets_met(result: SizeResult) -> bool:
    met = result.ratio.median <= TARGET_RATIO
    if result.keys >= TARGET_KEYS and result.analyze_command is not None:
        met = met and result.analyze_command.median <= TARGET_SECONDS
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--analyze-rounds", type=int, default=1)
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed runs of each contender before the rounds"
    )
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "metaplane-bench"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--out", type=Path, default=RESULTS / "pipeline_bench.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    duckdb_site()
    spark_session(args.master, driver_memory=args.driver_memory)
    results = [measure(size, args) for size in sorted(args.sizes)]
    show(results)
    document = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "master": args.master,
        "driver_memory": args.driver_memory,
        "duckdb": DUCKDB,
        "targets": {"ratio": TARGET_RATIO, "keys": TARGET_KEYS, "seconds": TARGET_SECONDS},
        "results": [{**asdict(r), "targets_met": targets_met(r)} for r in results],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    if not all(result.agree for result in results):
        console.print("[red]the three ways of the subset gave different counts[/]")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
