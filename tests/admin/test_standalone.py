"""`metaplane standalone` and `metaplane demo` as an operator runs them: real processes,
stopped with Ctrl-C (SIGINT), on the embedded store."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaplane import layout
from metaplane.admin.cli import app
from metaplane.layout import KeyKind
from metaplane.store import MetadataStore, SqliteStore, connect_store
from metaplane.testing import ZooKeeperServer
from tests.admin.standalone import free_index_base

METAPLANE = [sys.executable, "-c", "from metaplane.admin.cli import main; main()"]


async def kinds_ever_written(store: MetadataStore) -> set[KeyKind]:
    """Every kind of key the store's history shows a write of."""
    kinds: set[KeyKind] = set()
    current = await store.revision()
    async with asyncio.timeout(30), store.watch("/", start_revision=1) as watch:
        async for batch in watch:
            kinds.update(layout.parse(event.key).kind for event in batch.events)
            if batch.revision >= current:
                break
    return kinds


async def until_registered(store: MetadataStore, count: int) -> None:
    # From the next revision: ZooKeeper keeps no history, and the listing reads the rest.
    start = await store.revision() + 1
    async with asyncio.timeout(60), store.watch("/cluster/register", start_revision=start) as w:
        while len(await store.list("/cluster/register", keys_only=True)) < count:
            await anext(w)


@pytest.mark.parametrize(
    "where",
    [
        "sqlite",
        pytest.param("zk", marks=[pytest.mark.slow, pytest.mark.timeout(180)]),
    ],
)
async def test_standalone_runs_until_ctrl_c_then_stops_cleanly(tmp_path: Path, where: str) -> None:
    """The operator's story on the embedded store and on a real ZooKeeper under a chroot:
    brokers register (each under its own session), hand their topics over on Ctrl-C, and
    their sessions go."""
    with contextlib.ExitStack() as servers:
        if where == "zk":
            zookeeper = servers.enter_context(ZooKeeperServer(tmp_path / "zookeeper"))
            url = f"zk://{zookeeper.hosts}/metaplane"
        else:
            url = f"sqlite://{tmp_path / 'cluster.db'}"
        process = await asyncio.create_subprocess_exec(
            *METAPLANE,
            "standalone",
            "--brokers",
            "2",
            "--workload",
            "--store",
            url,
            "--create",
            "--port",
            "0",
            "--index-base",
            str(free_index_base(2)),
            "--folder",
            str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "COLUMNS": "100"},
        )
        async with await connect_store(url) as store:
            try:
                await until_registered(store, 2)
            finally:
                process.send_signal(signal.SIGINT)
                async with asyncio.timeout(90):
                    out, err = await process.communicate()
            assert process.returncode == 0, err.decode()[-2000:]
            assert "cluster stopped" in out.decode()
            assert "dashboard: http://127.0.0.1:" in out.decode()
            assert (await store.list("/cluster/register")).keys() == []  # sessions closed
            storage = (await store.list(layout.storage_prefix(), keys_only=True)).keys()
            assert any(key.endswith("/state") for key in storage)  # topics handed over
    assert (tmp_path / "logs" / "broker-1.log").exists()


def test_standalone_needs_a_shared_store() -> None:
    result = CliRunner().invoke(app, ["standalone", "--store", "memory://"])
    assert result.exit_code == 1
    assert "error:" in result.output


@pytest.mark.slow
@pytest.mark.timeout(300)  # the cluster's story, then Spark's analysis of its snapshot
async def test_the_demo_tells_its_story(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *METAPLANE,
        "demo",
        "--store",
        f"sqlite://{tmp_path / 'demo.db'}",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120"},
    )
    async with asyncio.timeout(280):
        out, err = await process.communicate()
    story = out.decode()
    assert process.returncode == 0, story + err.decode()
    for chapter in (
        "brokers join",
        "spread the topics",
        "SIGKILL broker",
        "leads (epoch 2)",
        "sealed it at offset",
        "no offset used twice",
        "drained",
        "kv tree /",
        "analysis of revision",
        "report.html",
        "watch it live on the dashboard: http://127.0.0.1:",
        "metaplane serve --store",
    ):
        assert chapter in story, chapter
    sealed_at = int(story.split("sealed it at offset ")[1].split()[0])
    assert f"starts at offset {sealed_at + 1}" in story
    leftovers = await asyncio.to_thread(lambda: list(tmp_path.glob(".metaplane*")))
    assert leftovers == []  # nothing in the working directory
    async with await SqliteStore.open(tmp_path / "demo.db") as store:
        written = await kinds_ever_written(store)
    # Every kind of key of Danube's layout (seed 001) was written at some point.
    seed_kinds = {kind for kind in KeyKind if not kind.legacy} - {
        KeyKind.LOCK,  # ours, for locks; the cluster does not take one
        KeyKind.DEFAULT_COMPATIBILITY_MODE,  # ours, written only when an operator sets it
        # ours, the registry's: written only for schemas with references, or draft settings
        KeyKind.SCHEMA_REFERENCES,
        KeyKind.SCHEMA_REFERENCED_BY,
        KeyKind.SCHEMA_CONFIG,
        KeyKind.DEFAULT_SCHEMA_CONFIG,
    }
    assert seed_kinds <= written, seed_kinds - written
    # The analysis of the live cluster's snapshot: a healthy cluster has no error finding.
    analysis = tmp_path / "analysis"
    assert (analysis / "report.html").stat().st_size > 0
    audit = json.loads((analysis / "audit.json").read_text())
    assert [f for f in audit["findings"] if f["severity"] == "error"] == []
    summary = json.loads((analysis / "summary.json").read_text())
    assert summary["counts"]["keys"] > 100 and summary["leader"]["epoch"] == 2
