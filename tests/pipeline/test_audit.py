"""The audit: every check fires on the fault injected for it and names its keys, nothing fires
that was not injected, the checks a synthetic cluster cannot carry fire on crafted snapshots,
a clean synthetic cluster yields no finding at all, and nor does a cluster written by Danube
itself (seed 001's examples as one consistent cluster, read from `etcdctl -w json`)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import metaplane.pipeline._audit as audit_module
import metaplane.pipeline._views as views_module
from metaplane import layout
from metaplane.layout import KeyKind, TopicName, parse
from metaplane.pipeline import (
    AUDIT,
    CHECKS,
    SUMMARY,
    TABLES,
    SynthSpec,
    analyze,
    audit,
    classify,
    parse_tables,
    read_tables,
    run_audit,
    snapshot_frame,
    snapshot_from_etcdctl,
    synth_snapshot,
    write_tables,
)
from metaplane.pipeline._audit import checks_named
from metaplane.resources import (
    BrokerMode,
    BrokerState,
    LoadReport,
    ObjectDescriptor,
    decode,
    encode,
)
from metaplane.schema import SchemaRegistry
from metaplane.store import MemoryStore
from tests.pipeline.conftest import FaultsAnalysis, write_snapshot

# One snapshot holds one leader: these are crafted below instead.
CRAFTED = {"no-leader", "leader-not-registered", "drained-broker-has-topics"}
CRAFTED |= {"partition-count-mismatch"}
INJECTED = sorted(check.name for check in CHECKS if check.name not in CRAFTED)
SEVERITY = {check.name: check.severity for check in CHECKS}
REGISTRATION = b'{"admin_addr":"a","advertised_addr":"b","broker_addr":"c"}'
DANUBE = Path(__file__).parent / "data" / "danube-seed001.etcdctl.json"
"""Seed 001's examples as one consistent cluster, written by etcdctl as Danube writes it
(tests/pipeline/data/danube_seed001.py made it)."""


def test_synth_injects_every_other_check(faults_analysis: FaultsAnalysis) -> None:
    assert sorted(faults_analysis.expected) == INJECTED


@pytest.mark.parametrize("check", INJECTED)
def test_injected_fault_is_found(faults_analysis: FaultsAnalysis, check: str) -> None:
    findings = [f for f in faults_analysis.json(AUDIT)["findings"] if f["check"] == check]
    assert findings, f"{check} found nothing"
    reported = {key for finding in findings for key in finding["keys"]}
    assert set(faults_analysis.expected[check]) <= reported
    for finding in findings:
        assert finding["severity"] == SEVERITY[check]
        assert finding["message"] and finding["subject"]


def test_nothing_fires_that_was_not_injected(faults_analysis: FaultsAnalysis) -> None:
    audit = faults_analysis.json(AUDIT)
    assert set(audit["checks"]) == set(INJECTED)
    assert sum(audit["severities"].values()) == len(audit["findings"])


def test_topic_checks_find_the_same_whether_their_topics_are_broadcast_or_not(
    spark: SparkSession, faults_analysis: FaultsAnalysis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The topic checks join keys with the topics the facts pick (and the cursors with the
    last committed offsets of unserved topics), broadcast when few (as in `analyze` above);
    past BROADCAST_TOPICS they are joined as they are, and find the same."""
    monkeypatch.setattr(views_module, "BROADCAST_TOPICS", 0)
    tables = read_tables(spark, faults_analysis.out / TABLES)
    found = run_audit(tables)
    assert found, "the faults snapshot has findings"

    def key(finding: dict[str, object]) -> str:
        return json.dumps(finding, sort_keys=True)

    assert sorted(map(key, found)) == sorted(map(key, faults_analysis.json(AUDIT)["findings"]))


def _crafted(spark: SparkSession, folder: Path, rows: list[tuple[str, bytes]]) -> set[str]:
    """The crafted checks' findings on `rows`, from tables parsed in memory."""
    snapshot = write_snapshot(folder / "snapshot", rows)
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    checks = [check for check in CHECKS if check.name in CRAFTED]
    return {row["check"] for row in audit(tables, checks).collect()}  # one job, not four


def test_crafted_leadership_and_partitions(spark: SparkSession, tmp_path: Path) -> None:
    parted = TopicName("default", "parted")
    drained = encode(BrokerState(mode=BrokerMode.DRAINED, reason="upgrade"))
    rows = [
        (layout.broker_registration(1), REGISTRATION),
        (layout.broker_state(1), drained),
        (layout.assignment(1, parted.partition(0)), b"null"),
        (layout.leader(), b"3"),
        (layout.topic_root(parted), b"3"),
        (layout.topic_root(parted.partition(0)), b"0"),
        (layout.topic_root(parted.partition(5)), b"0"),
    ]
    found = _crafted(spark, tmp_path, rows)
    assert found == CRAFTED - {"no-leader"}


def test_crafted_no_leader(spark: SparkSession, tmp_path: Path) -> None:
    rows = [(layout.broker_registration(1), REGISTRATION)]
    assert _crafted(spark, tmp_path, rows) == {"no-leader"}


def test_clean_synthetic_cluster_has_no_finding(spark: SparkSession, tmp_path: Path) -> None:
    # 1000 topics: every state a healthy cluster has, topics between owners (an unload marker
    # and a sealed state) and new topics waiting for their first owner among them.
    spec = SynthSpec(brokers=4, topics=1000, draining=1, seed=7)
    snapshot = synth_snapshot(spec, tmp_path / "snapshot")
    write_tables(spark, snapshot, tmp_path / "tables")
    tables = read_tables(spark, tmp_path / "tables").cached()
    markers = [row["value"] for row in tables[KeyKind.UNASSIGNED].collect()]
    assert None in markers and any(m is not None and m["reason"] == "unload" for m in markers)
    assert tables[KeyKind.STORAGE_STATE].count() > 0
    assert run_audit(tables) == []


def test_a_cursor_ahead_of_the_uploads_is_a_fault_only_without_a_live_owner(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A served topic's broker holds in its write-ahead log what it has not uploaded yet:
    a cursor there is normal. Once no live broker serves the topic, the next owner starts
    after the last uploaded offset, and the same cursor would skip messages."""
    served, orphaned = TopicName("default", "served"), TopicName("default", "orphaned")
    uploaded = ObjectDescriptor(
        completed=True, created_at=1_700_000_000, end_offset=99, etag="e",
        object_id="data-0-99.dnb1", offset_index=[(0, 0)], size=100, start_offset=0,
    )  # fmt: skip
    rows = [(layout.broker_registration(1), REGISTRATION)]
    for topic in (served, orphaned):
        rows += [
            (layout.topic_root(topic), b"0"),
            (layout.storage_object(topic, 0), encode(uploaded)),
            (layout.cursor(topic, "sub"), b"150"),  # past offset 99
        ]
    rows += [
        (layout.assignment(1, served), b"null"),
        (layout.assignment(2, orphaned), b"null"),  # broker 2 is gone
    ]
    snapshot = write_snapshot(tmp_path / "snapshot", rows)
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    findings = audit(tables, checks_named(["cursor-beyond-last-committed"])).collect()
    assert [row["keys"] for row in findings] == [[layout.cursor(orphaned, "sub")]]


async def _registry_rows() -> list[tuple[str, bytes]]:
    """What the schema registry writes when it has references and settings."""
    store = MemoryStore()
    registry = SchemaRegistry(store)
    await registry.set_json_schema_draft("2020-12")
    await registry.register("money", "proto", MONEY)
    await registry.register("orders", "proto", ORDER, references=["common/money.proto=money:1"])
    await registry.set_json_schema_draft("draft-07", subject="events")
    return [(entry.key, entry.value) for entry in await store.list(layout.schemas_prefix())]


MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
    "message Order { common.Money total = 1; }\n"
)


def test_the_registry_s_own_keys_are_kinds_of_the_layout(
    spark: SparkSession, tmp_path: Path
) -> None:
    """References, referrers and settings are classified and read as their kinds: no
    unknown-key warning, every value well-formed."""
    rows = asyncio.run(_registry_rows())
    ours = {KeyKind.SCHEMA_REFERENCES, KeyKind.SCHEMA_REFERENCED_BY, KeyKind.SCHEMA_CONFIG}
    ours |= {KeyKind.DEFAULT_SCHEMA_CONFIG}
    assert ours <= {parse(key).kind for key, _ in rows}
    snapshot = write_snapshot(tmp_path / "snapshot", rows)
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    assert audit(tables, checks_named(["unknown-key"])).collect() == []
    assert tables.unknown.count() == 0
    for kind in ours:
        assert [row["valid"] for row in tables[kind].collect()] == [True] * tables[kind].count()


def _etcdctl_entries(path: Path) -> dict[str, tuple[bytes, int]]:
    document = json.loads(path.read_text())
    return {
        base64.b64decode(kv["key"]).decode(): (base64.b64decode(kv["value"]), kv.get("lease", 0))
        for kv in document["kvs"]
    }


def test_the_danube_cluster_is_in_seed_001s_formats_only() -> None:
    entries = _etcdctl_entries(DANUBE)
    kinds = {key: parse(key).kind for key in entries}
    ours = {KeyKind.LEADER_EPOCH, KeyKind.LOCK, KeyKind.DEFAULT_COMPATIBILITY_MODE}
    ours |= {KeyKind.SCHEMA_REFERENCES, KeyKind.SCHEMA_REFERENCED_BY, KeyKind.SCHEMA_CONFIG}
    ours |= {KeyKind.DEFAULT_SCHEMA_CONFIG}
    assert not ours & set(kinds.values()), "nothing metaplane adds"
    assert not any(kind.legacy for kind in kinds.values())
    for key, (value, _) in entries.items():
        decode(kinds[key], value)  # every value in its kind's format
    leased = {key for key, (_, lease) in entries.items() if lease}
    registrations = {key for key, kind in kinds.items() if kind is KeyKind.BROKER_REGISTRATION}
    assert leased == registrations | {layout.leader()} and len(registrations) == 2
    leader = entries[layout.leader()][0].decode()
    assert entries[layout.leader()][1] == entries[layout.broker_registration(int(leader))][1]


def test_a_cluster_written_by_danube_audits_clean(spark: SparkSession, tmp_path: Path) -> None:
    snapshot = snapshot_from_etcdctl(DANUBE, tmp_path / "snapshot")
    analysis = analyze(spark, snapshot, tmp_path / "out")
    assert json.loads((tmp_path / "out" / AUDIT).read_text())["findings"] == []
    assert analysis.summary["audit"]["findings"] == 0
    summary = json.loads((tmp_path / "out" / SUMMARY).read_text())
    assert summary["leader"] == {"broker_id": "625722408599041316", "epoch": None}
    # Where metaplane's election is said to run, the missing epoch is its one finding; where
    # it is said not to, nothing is.
    tables = read_tables(spark, tmp_path / "out" / "tables")
    told = run_audit(tables, metaplane_election=True)
    assert [(f["check"], f["keys"]) for f in told] == [("leader-without-epoch", [layout.leader()])]
    assert run_audit(tables, metaplane_election=False) == []


def test_the_epoch_check_applies_where_metaplanes_coordination_shows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Told nothing, the audit sees metaplane's election by its own coordination keys: a
    fenced lock without the epoch is a metaplane cluster that lost its epoch."""
    base = [(layout.broker_registration(1), REGISTRATION), (layout.leader(), b"1")]
    lock = (layout.lock("rebalance", 7), b"1")
    epoch = (layout.leader_epoch(), b"3")
    check = checks_named(["leader-without-epoch"])
    for number, (rows, fires) in enumerate(
        [(base, False), ([*base, lock], True), ([*base, lock, epoch], False)]
    ):
        snapshot = write_snapshot(tmp_path / f"snapshot-{number}", rows)
        tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
        assert bool(audit(tables, check).collect()) is fires, rows


def test_a_load_report_may_list_only_its_first_topics_and_count_them_all(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """metaplane's brokers list at most LOAD_REPORT_TOPICS topics (the first) and count them
    all; a report is still stale when it counts wrong, lists fewer below the cap, or lists
    a topic its broker does not own."""
    monkeypatch.setattr(audit_module, "LOAD_REPORT_TOPICS", 2)
    topics = [TopicName("default", f"t{i}") for i in range(10)]
    owned = {1: topics[0:3], 2: topics[3:6], 3: topics[6:7], 4: topics[7:10]}
    listed = {
        1: (topics[0:2], 3),  # capped, all counted: not stale
        2: (topics[3:5], 2),  # capped, but counted as listed
        3: (topics[6:7], 1),  # whole: not stale
        4: (topics[7:8], 3),  # fewer than the cap listed
    }
    rows = [(layout.topic_root(topic), b"0") for topic in topics]
    for broker, mine in owned.items():
        rows.append((layout.broker_registration(broker), REGISTRATION))
        rows += [(layout.assignment(broker, topic), b"null") for topic in mine]
        paths, count = listed[broker]
        report = LoadReport(
            resources_usage=[], topic_list=[t.path for t in paths], topics_len=count
        )
        rows.append((layout.load_report(broker), encode(report)))
    another = LoadReport(resources_usage=[], topic_list=[topics[0].path], topics_len=1)
    rows += [(layout.broker_registration(6), REGISTRATION)]
    rows += [(layout.load_report(6), encode(another))]
    snapshot = write_snapshot(tmp_path / "snapshot", rows)
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    findings = audit(tables, checks_named(["load-report-stale"])).collect()
    stale = sorted(key for row in findings for key in row["keys"])
    assert stale == sorted(layout.load_report(b) for b in (2, 4, 6))  # 6 lists another's


def test_a_stale_load_report_counts_each_listing_it_does_not_own_and_each_topic_it_misses(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The counts in the message: a topic listed twice that the broker does not own is two
    listings it does not own; one listed twice that it owns is none; an owned topic listed
    nowhere is one missed. Another broker's topics count for their own broker only."""
    topics = [TopicName("default", f"t{i}") for i in range(5)]
    rows = [(layout.topic_root(topic), b"0") for topic in topics]
    for broker in (1, 2):
        rows.append((layout.broker_registration(broker), REGISTRATION))
    rows += [(layout.assignment(1, topic), b"null") for topic in topics[0:3]]
    rows += [(layout.assignment(2, topic), b"null") for topic in topics[3:5]]
    listed = [topics[0], topics[0], topics[1], topics[3], topics[3]]  # t2 missing
    report = LoadReport(resources_usage=[], topic_list=[t.path for t in listed], topics_len=5)
    rows.append((layout.load_report(1), encode(report)))
    whole = LoadReport(resources_usage=[], topic_list=[t.path for t in topics[3:5]], topics_len=2)
    rows.append((layout.load_report(2), encode(whole)))
    snapshot = write_snapshot(tmp_path / "snapshot", rows)
    tables = parse_tables(classify(snapshot_frame(spark, snapshot)))
    findings = audit(tables, checks_named(["load-report-stale"])).collect()
    assert [(row["subject"], row["message"]) for row in findings] == [
        (
            "1",
            "broker 1 reports 2 topics it does not own and misses 1 it owns (5 counted, 5 listed)",
        )
    ]
