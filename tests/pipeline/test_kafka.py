"""The Kafka 0.8 importer on seed 002's cluster (topic test_kafka, 3 partitions, 3 replicas,
leader 2, controller epoch 9, a consumer group with offsets), from a dump file and from a
live ZooKeeper: the same keys, written with transactions, idempotent, refusing conflicts."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from metaplane import layout
from metaplane.admin.cli import app
from metaplane.layout import TopicName
from metaplane.pipeline import (
    ImportConflict,
    ImportPlan,
    KafkaDumpError,
    apply_import,
    plan_kafka_import,
    read_kafka_dump,
)
from metaplane.resources import SubscriptionMetadata, SubscriptionType, decode
from metaplane.store import open_store
from metaplane.testing import ZooKeeperServer
from tests.pipeline.conftest import invoke

DUMP = Path(__file__).parent / "data" / "kafka-0.8-seed002.jsonl"
TOPIC = TopicName("default", "test_kafka")
PARTS = TOPIC.partitions(3)
GROUP = "test_group"
EXPECTED_KEYS = {
    layout.namespace_policy("default"),
    *(layout.broker_registration(broker) for broker in (0, 1, 2)),
    *(layout.broker_state(broker) for broker in (0, 1, 2)),
    layout.leader(),
    layout.leader_epoch(),
    layout.topic_root(TOPIC),
    layout.namespace_topic(TOPIC),
    *(layout.topic_root(part) for part in PARTS),
    *(layout.namespace_topic(part) for part in PARTS),
    *(layout.topic_delivery(part) for part in PARTS),
    *(layout.assignment(2, part) for part in PARTS),
    *(layout.subscription(part, GROUP) for part in PARTS),
    # Offsets 42 and 17 are next-to-consume: cursors 41 and 16. Offset 0: nothing acked.
    layout.cursor(PARTS[0], GROUP),
    layout.cursor(PARTS[2], GROUP),
}


@pytest.fixture(scope="module")
def entries(spark: SparkSession) -> dict[str, bytes]:
    plan = plan_kafka_import(spark, read_kafka_dump(DUMP), "default")
    assert plan.skipped == []
    return dict(plan.entries)


def test_seed_002_becomes_our_layout(entries: dict[str, bytes]) -> None:
    assert set(entries) == EXPECTED_KEYS
    assert entries[layout.topic_root(TOPIC)] == b"3"
    assert entries[layout.cursor(PARTS[0], GROUP)] == b"41"
    assert entries[layout.cursor(PARTS[2], GROUP)] == b"16"
    assert (entries[layout.leader()], entries[layout.leader_epoch()]) == (b"2", b"9")
    key = layout.subscription(PARTS[1], GROUP)
    subscription = decode(SubscriptionMetadata, entries[key])
    assert subscription.subscription_type is SubscriptionType.FAILOVER
    registration = json.loads(entries[layout.broker_registration(0)])
    assert registration["advertised_addr"] == "JobTracker:9092"
    for key, value in entries.items():
        decode(layout.parse(key).kind, value)  # every value in its kind's format


async def _read(url: str) -> dict[str, bytes]:
    async with open_store(url) as store:
        return {entry.key: entry.value for entry in await store.list("/")}


def test_a_dry_run_writes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    dry = invoke("import", "kafka-zk", "--dump", str(DUMP), "--store", url)
    assert "dry run" in dry and "assignment" in dry and str(len(EXPECTED_KEYS)) in dry
    counted = json.loads(
        invoke("import", "kafka-zk", "--dump", str(DUMP), "--store", url, "-o", "json")
    )
    per_kind = Counter(layout.parse(key).kind.value for key in EXPECTED_KEYS)
    assert counted["dry_run"] is True and counted["written"] is None
    assert counted["kinds"] == dict(per_kind)
    assert counted["keys"] == len(EXPECTED_KEYS)
    for kind, count in per_kind.items():  # the table shows each kind with its count
        assert re.search(rf"\b{kind}\b\s*│\s*{count}\b", dry), kind
    assert asyncio.run(_read(url)) == {}


def _plan(entries: dict[str, bytes]) -> ImportPlan:
    plan = ImportPlan()
    for key, value in entries.items():
        plan.add(layout.parse(key).kind, key, value)
    return plan


async def test_an_import_is_idempotent_and_refuses_conflicts(
    entries: dict[str, bytes], tmp_path: Path
) -> None:
    async with open_store(f"sqlite://{tmp_path / 'store.db'}") as store:
        first = await apply_import(store, _plan(entries))
        assert (first.written, first.unchanged) == (len(EXPECTED_KEYS), 0)
        again = await apply_import(store, _plan(entries))
        assert (again.written, again.unchanged) == (0, len(EXPECTED_KEYS))
    async with open_store(f"sqlite://{tmp_path / 'other.db'}") as store:
        await store.put(layout.leader(), b"7")
        with pytest.raises(ImportConflict, match="already hold other values") as raised:
            await apply_import(store, _plan(entries))
        assert raised.value.keys == (layout.leader(),)
        assert [entry.key for entry in await store.list("/")] == [layout.leader()]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", ":2: not JSON"),
        ('{"data": "x"}', 'with a "path" string'),
        ('{"path": "brokers"}', "absolute"),
        ('{"path": "/a", "data": 5}', '"data" is a string or null'),
        ('{"path": "/a", "data_base64": "!!"}', "not base64"),
    ],
)
def test_a_broken_dump_line_is_a_clear_error(tmp_path: Path, line: str, message: str) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text('{"path": "/controller_epoch", "data": "1"}\n' + line + "\n")
    with pytest.raises(KafkaDumpError, match=message):
        read_kafka_dump(dump)


def _populate(client: KazooClient) -> None:
    """Seed 002's cluster as Kafka 0.8 leaves it in ZooKeeper: broker ids are ephemeral."""
    for line in DUMP.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        node = json.loads(line)
        data = node["data"].encode() if node["data"] is not None else b""
        ephemeral = node["path"].startswith("/brokers/ids/")
        if client.exists(node["path"]):
            client.set(node["path"], data)
        else:
            client.create(node["path"], data, ephemeral=ephemeral, makepath=True)


def test_a_live_zookeeper_gives_the_same_keys(
    entries: dict[str, bytes], zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=15)
    try:
        _populate(client)
        url = f"sqlite://{tmp_path / 'store.db'}"
        saved = tmp_path / "saved.jsonl"
        invoke(
            "import", "kafka-zk", "--zk", zookeeper.hosts, "--store", url, "--execute",
            "--create", "--save-dump", str(saved),
        )  # fmt: skip
    finally:
        client.stop()
        client.close()
    assert asyncio.run(_read(url)) == entries
    dumped = {(node.path, node.data) for node in read_kafka_dump(DUMP) if node.data}
    assert dumped <= {(node.path, node.data) for node in read_kafka_dump(saved)}


def test_an_unreachable_zookeeper_is_one_line(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/s.db"
    args = ["import", "kafka-zk", "--zk", "127.0.0.1:1", "--zk-timeout", "1", "--store", store]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "not reachable" in result.output and "Traceback" not in result.output


def test_an_import_into_a_missing_store_file_needs_create(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`--execute` into a sqlite file that does not exist is refused before anything is read;
    `--create` makes it."""
    path = tmp_path / "nested" / "store.db"
    args = ["import", "kafka-zk", "--dump", str(DUMP), "--store", f"sqlite://{path}", "--execute"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 1, refused.output
    assert f"no store at {path}" in refused.stderr and "--create" in refused.stderr
    assert not path.parent.exists()  # nothing made, not even its folder
    invoke(*args, "--create")
    assert len(asyncio.run(_read(f"sqlite://{path}"))) == len(EXPECTED_KEYS)
