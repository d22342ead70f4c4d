"""Snapshots: an export pinned at one revision holds exactly that revision's keys while writers
run; etcdctl's JSON gives the same snapshot and the same tables as a direct export; broken
inputs are clear errors."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from metaplane import layout
from metaplane.admin._tour import seed_examples
from metaplane.admin.cli import app
from metaplane.layout import TopicName
from metaplane.pipeline import (
    EtcdctlOutputError,
    Snapshot,
    SnapshotError,
    SnapshotWriter,
    export_snapshot,
    read_snapshot,
    snapshot_from_etcdctl,
    write_tables,
)
from metaplane.store import Entry, MetadataStore, open_store
from metaplane.testing import EtcdMember, FaultyStore
from tests.pipeline.conftest import invoke

SEED_KEYS = 300


def rows_of(snapshot: Snapshot) -> list[dict[str, Any]]:
    tables = [pq.read_table(path) for path in snapshot.paths]
    return pa.concat_tables(tables).to_pylist() if tables else []


def as_row(entry: Entry, revision: int) -> dict[str, Any]:
    return {
        "key": entry.key,
        "value": entry.value,
        "create_revision": entry.create_revision,
        "mod_revision": entry.mod_revision,
        "version": entry.version,
        "lease": entry.lease,
        "revision": revision,
    }


async def _write_and_delete(store: MetadataStore, seed: int, done: asyncio.Event) -> int:
    """Write, rewrite and delete keys until told to stop; the number of writes."""
    chance = random.Random(seed)
    writes = 0
    while not done.is_set():
        key = layout.topic_root(TopicName("busy", f"t{chance.randrange(SEED_KEYS * 2)}"))
        if chance.random() < 0.3:
            await store.delete(key)
        else:
            await store.put(key, str(writes).encode())
        writes += 1
        await asyncio.sleep(0)
    return writes


async def test_export_while_writers_run_holds_its_pinned_revision(
    store: MetadataStore, tmp_path: Path
) -> None:
    for number in range(SEED_KEYS):
        await store.put(layout.topic_root(TopicName("busy", f"t{number}")), b"0")
    done = asyncio.Event()
    writers = [asyncio.create_task(_write_and_delete(store, seed, done)) for seed in range(3)]
    await asyncio.sleep(0.05)
    # Each page answered a little late, so that the writers run between the pages on every
    # backend (memory answers without ever waiting).
    paged = FaultyStore(store)
    paged.delay("list", seconds=0.002)
    snapshot = await export_snapshot(paged, tmp_path / "snapshot", page_size=7)
    done.set()
    writes = await asyncio.gather(*writers)
    assert sum(writes) > 0
    assert await store.revision() > snapshot.revision  # the writers ran past the pinned one
    pinned = await store.list("/", revision=snapshot.revision)
    assert rows_of(snapshot) == [as_row(entry, snapshot.revision) for entry in pinned]
    assert snapshot.keys == len(pinned)


@pytest.mark.backends("etcd", reason="etcdctl reads etcd")
async def test_etcdctl_output_gives_the_snapshot_and_tables_of_an_export(
    store: MetadataStore, etcd: EtcdMember, spark: SparkSession, tmp_path: Path
) -> None:
    lease = await store.grant(300)
    for key, value in seed_examples():
        await store.put(key, value, lease=lease if key == layout.leader() else 0)
    await store.put(layout.cursor(TopicName("default", "reliable_topic"), "broken"), b"x")
    await store.put("/not/our/layout", b"\x00\xff")
    direct = await export_snapshot(store, tmp_path / "direct")
    output = tmp_path / "etcdctl.json"
    output.write_text(etcd.etcdctl("get", "/", "--prefix", "-w", "json"))
    via = snapshot_from_etcdctl(output, tmp_path / "etcdctl")
    assert (via.revision, via.keys) == (direct.revision, direct.keys)
    assert rows_of(via) == rows_of(direct)
    tables = _tables(spark, via, tmp_path / "via-tables")
    assert tables == _tables(spark, direct, tmp_path / "direct-tables")
    assert {"unknown", "cursor", "leader", "producer"} <= set(tables)
    await store.revoke(lease)


def _tables(spark: SparkSession, snapshot: Snapshot, folder: Path) -> dict[str, list[Any]]:
    """The tables `metaplane analyze` writes for `snapshot`: every row of each, in order."""
    write_tables(spark, snapshot, folder)
    return {
        path.name: sorted(pq.read_table(path).to_pylist(), key=lambda row: row["key"])
        for path in sorted(folder.iterdir())
    }


async def _seed(url: str) -> None:
    async with open_store(url) as opened:
        for key, value in seed_examples():
            await opened.put(key, value)


def test_export_command(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.db'}"
    asyncio.run(_seed(url))
    out = tmp_path / "snapshot"
    facts = json.loads(
        invoke("snapshot", "export", "--store", url, "--out", str(out), "-o", "json")
    )
    assert facts["keys"] == len(seed_examples())
    assert read_snapshot(out).revision == facts["revision"]


@pytest.mark.slow  # Spark
def test_analyze_a_live_store(tmp_path: Path) -> None:
    """`analyze --store`: the store is exported into OUT/snapshot first, then analysed."""
    url = f"sqlite://{tmp_path / 'store.db'}"
    asyncio.run(_seed(url))
    out = tmp_path / "analysis"
    summary = json.loads(invoke("analyze", "--store", url, "--out", str(out), "-o", "json"))
    snapshot = read_snapshot(out / "snapshot")
    assert snapshot.keys == len(seed_examples())
    written = json.loads((out / "summary.json").read_text())
    assert written["counts"]["keys"] == len(seed_examples())
    assert written["snapshot"]["revision"] == snapshot.revision
    assert summary["counts"] == written["counts"]
    assert (out / "report.html").exists()


# Broken input -------------------------------------------------------------------------------


def test_a_folder_without_manifest_is_no_snapshot(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match=r"no snapshot\.json"):
        read_snapshot(tmp_path)


def test_a_foreign_manifest_or_file_is_refused(tmp_path: Path) -> None:
    with SnapshotWriter(tmp_path / "s", revision=3, source="test") as writer:
        writer.add("/cluster/leader", b"1", 1, 1, 1)
        snapshot = writer.close()
    manifest = snapshot.folder / "snapshot.json"
    document = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**document, "format": "other"}))
    with pytest.raises(SnapshotError, match="format 'other'"):
        read_snapshot(snapshot.folder)
    manifest.write_text(json.dumps(document))
    pq.write_table(pa.table({"key": ["/a"]}), snapshot.paths[0])
    with pytest.raises(SnapshotError, match="columns"):
        read_snapshot(snapshot.folder)
    manifest.write_text("{broken")
    with pytest.raises(SnapshotError, match="not a snapshot manifest"):
        read_snapshot(snapshot.folder)


def test_a_snapshot_goes_only_into_a_new_folder(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(SnapshotError, match="not an empty folder"):
        SnapshotWriter(tmp_path / "taken", revision=1, source="test")


def test_rows_keep_their_order_across_row_groups_and_files(tmp_path: Path) -> None:
    # Rows added one by one and as pages, cut into row groups of 3 and files of 6: every
    # row once, in the order added, each file's groups full but the last.
    entries = [Entry(f"/k/{i:02d}", bytes([i]), i + 1, i + 1, i + 2, i % 3) for i in range(17)]
    with SnapshotWriter(
        tmp_path / "s", revision=40, source="test", rows_per_group=3, rows_per_file=6
    ) as writer:
        writer.add_entries(entries[:2])
        for entry in entries[2:4]:
            writer.add(entry.key, entry.value, entry.create_revision, entry.mod_revision,
                       entry.version, entry.lease)  # fmt: skip
        writer.add_entries(entries[4:11])
        writer.add_entries([])
        writer.add_entries(entries[11:])
        snapshot = writer.close()
    assert rows_of(snapshot) == [as_row(entry, 40) for entry in entries]
    assert snapshot.keys == 17
    groups = [
        [pq.ParquetFile(path).metadata.row_group(i).num_rows for i in range(n)]
        for path in snapshot.paths
        for n in [pq.ParquetFile(path).metadata.num_row_groups]
    ]
    assert groups == [[3, 3], [3, 3], [3, 2]]


@pytest.mark.parametrize("sizes", [(0, 6), (3, 0), (-1, 6)])
def test_row_groups_and_files_hold_a_row_at_least(tmp_path: Path, sizes: tuple[int, int]) -> None:
    group, file = sizes
    with pytest.raises(SnapshotError, match="at least 1"):
        SnapshotWriter(
            tmp_path / "s", revision=1, source="test", rows_per_group=group, rows_per_file=file
        )
    assert list(tmp_path.iterdir()) == []


def test_a_key_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    # What a store's scan gives for a key another client wrote in other bytes (etcd keeps
    # any): the key's text with surrogates. Nothing is left behind.
    key = b"/topics/ns/\xff".decode("utf-8", "surrogateescape")
    with pytest.raises(SnapshotError, match="is not UTF-8"):
        _write_keys(tmp_path / "s", ["/topics/ns/a", key])
    assert list(tmp_path.iterdir()) == []


def _write_keys(folder: Path, keys: list[str]) -> None:
    with SnapshotWriter(folder, revision=3, source="test") as writer:
        writer.add(keys[0], b"1", 1, 1, 1)
        writer.add_entries([Entry(key, b"1", 1, 2, 2) for key in keys[1:]])
        writer.close()


def _interrupted_write(folder: Path) -> None:
    with SnapshotWriter(folder, revision=1, source="test") as writer:
        writer.add("/a", b"1", 1, 1, 1)
        raise RuntimeError("interrupted")


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="interrupted"):
        _interrupted_write(tmp_path / "s")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not the output of"),
        ('{"kvs": []}', "not the output of"),
        ('{"header": {}, "kvs": []}', "no revision"),
        ('{"header": {"revision": 5}, "kvs": [{"key": "!!"}]}', "base64"),
        ('{"header": {"revision": 5}, "kvs": [], "more": true}', "cut short"),
        ('{"header": {"revision": 5}, "kvs": [], "count": 3}', "count says 3"),
    ],
)
def test_broken_etcdctl_output_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    source = tmp_path / "out.json"
    source.write_text(text)
    with pytest.raises(EtcdctlOutputError, match=message):
        snapshot_from_etcdctl(source, tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    source = tmp_path / "out.json"
    source.write_text("{not json")
    result = CliRunner().invoke(
        app, ["snapshot", "from-etcdctl", str(source), "--out", str(tmp_path / "s")]
    )
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output
