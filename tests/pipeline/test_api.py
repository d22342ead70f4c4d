"""The pipeline's public surface: `__all__` lists every public name its modules export, and
the CLI's pipeline commands refuse bad arguments with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import metaplane.pipeline as pipeline
from metaplane.admin.cli import app
from metaplane.store import MetadataError


def test_all_is_complete() -> None:
    public = {name for name in vars(pipeline) if not name.startswith("_")}
    assert set(pipeline.__all__) == public
    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None


def test_errors_are_metadata_errors() -> None:
    errors = [pipeline.PipelineError, pipeline.SnapshotError, pipeline.EtcdctlOutputError]
    errors += [pipeline.KafkaDumpError, pipeline.ImportConflict, pipeline.InvalidSetting]
    errors += [pipeline.SparkJobFailed]
    assert all(issubclass(error, MetadataError) for error in errors)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze", "--out", "x"], "exactly one of --snapshot"),
        (["analyze", "--out", "x", "--snapshot", "a", "--store", "memory://"], "exactly one of"),
        (["analyze", "--out", "x", "--snapshot", "a", "--retention", "7 days"], "not a duration"),
        (["analyze", "--out", "x", "--snapshot", "a", "--namespace-retention", "x"], "NAMESPACE"),
        (["analyze", "--out", "x", "--snapshot", "/nowhere"], "no snapshot.json"),
        (["import", "kafka-zk", "--store", "memory://"], "exactly one of --zk"),
        (["snapshot", "synth", "--out", "x", "--brokers", "2", "--draining", "2"], "active"),
    ],
)
def test_bad_arguments_are_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_java_runtime_follows_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert pipeline.java_runtime() is None
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert pipeline.java_runtime() == str(java)


def test_without_java_analyze_says_so_in_one_line(tmp_path: Path) -> None:
    """A fresh process (this one's Spark session is already running) with no Java at all."""
    snapshot = tmp_path / "snapshot"
    with pipeline.SnapshotWriter(snapshot, revision=1, source="test") as writer:
        writer.add("/cluster/c", b"null", 1, 1, 1)
        writer.close()
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk"), "PATH": str(tmp_path)}
    command = "from metaplane.admin.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", command, "analyze", "--snapshot", str(snapshot),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: spark needs a Java runtime"), done.stderr
    assert "Traceback" not in done.stderr
