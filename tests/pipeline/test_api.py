"""The pipeline's public surface: `__all__` lists every public name its modules export, and
the CLI's pipeline commands refuse bad arguments with one line."""

from __future__ import annotations

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
