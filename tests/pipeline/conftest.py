"""Fixtures of the pipeline's tests: one Spark session in local mode for the whole run, a
synthetic cluster with one injected fault per audit check analysed once through the CLI, and
a real ZooKeeper. Spark is slow to start and to plan: every fixture that runs it is shared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from metaplane.admin.cli import app
from metaplane.pipeline import FAULTS_FILE, Snapshot, SnapshotWriter, spark_session, stop_spark
from metaplane.testing import ZooKeeperServer

CORES = 2


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's one Spark session: local[2], two shuffle partitions, and no whole-stage code
    generation: on frames this small, compiling each query costs more than it saves."""
    session = spark_session(f"local[{CORES}]", shuffle_partitions=CORES)
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    yield session
    stop_spark()


def invoke(*args: str) -> str:
    """Run `metaplane ARGS`; fail the test with the output unless it succeeds. Its stdout
    (progress goes to stderr)."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


@dataclass(frozen=True)
class FaultsAnalysis:
    """`metaplane analyze` of a synthetic cluster with every fault injected."""

    snapshot: Path
    out: Path

    def json(self, name: str) -> Any:
        return json.loads((self.out / name).read_text())

    @property
    def expected(self) -> dict[str, list[str]]:
        """Each injected fault's check and the keys it must name."""
        return json.loads((self.snapshot / FAULTS_FILE).read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def faults_analysis(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> FaultsAnalysis:
    folder = tmp_path_factory.mktemp("faults")
    snapshot, out = folder / "snapshot", folder / "out"
    invoke(
        "snapshot", "synth", "--out", str(snapshot), "--brokers", "4", "--topics", "240",
        "--draining", "1", "--faults",
    )  # fmt: skip
    invoke("analyze", "--snapshot", str(snapshot), "--out", str(out))
    return FaultsAnalysis(snapshot, out)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the run. Missing ZooKeeper fails; it never skips."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


def write_snapshot(folder: Path, rows: list[tuple[str, bytes]], revision: int = 100) -> Snapshot:
    """A snapshot of `rows` (key, value), each key created at its own revision."""
    with SnapshotWriter(folder, revision=revision, source="test", taken_at=1_800_000_000) as out:
        for number, (key, value) in enumerate(rows, start=1):
            out.add(key, value, number, number, 1)
        return out.close()
