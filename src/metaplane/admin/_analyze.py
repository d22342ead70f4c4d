"""`metaplane analyze`: the whole pipeline on a snapshot (or a live store, snapshotted first)
in Spark, with each stage shown as it runs and a summary at the end."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from metaplane.admin._console import Output, OutputFormat, console, errors, fail, print_json
from metaplane.admin._heap import heap_frozen
from metaplane.admin._operations import Operations
from metaplane.admin._runner import execute
from metaplane.admin._snapshot import counting, guarded

if TYPE_CHECKING:
    from metaplane.pipeline import Analysis, AnalyzeSettings, Snapshot

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"^(\d+)([smhdw]?)$")


def parse_duration(text: str) -> int:
    """Seconds in "7d", "12h", "30m", "90s" or a plain number of seconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise typer.BadParameter(f"{text!r} is not a duration like 7d, 12h, 30m or 3600")
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


def parse_namespace_retention(items: list[str]) -> dict[str, int]:
    """{"ns": seconds} from "ns=DURATION" items."""
    retention = {}
    for item in items:
        namespace, sep, duration = item.partition("=")
        if not sep or not namespace:
            raise typer.BadParameter(f"{item!r} is not NAMESPACE=DURATION (e.g. logs=3d)")
        retention[namespace] = parse_duration(duration)
    return retention


@contextmanager
def stages() -> Iterator[Callable[[str], None]]:
    """A Rich line naming the running stage, with the time spent."""
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
    ) as progress:
        task = progress.add_task("starting Spark", total=None)

        def step(name: str) -> None:
            errors.print(f"[dim]·[/] {name}", highlight=False)
            progress.update(task, description=name)

        yield step


def analyze(
    out: Annotated[Path, typer.Option("--out", help="The folder for every output.")],
    snapshot: Annotated[
        Path | None, typer.Option("--snapshot", help="A snapshot folder to analyse.")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="A live store to snapshot first (into OUT/snapshot)."),
    ] = None,
    spark_master: Annotated[
        str | None,
        typer.Option(help="A Spark master URL (spark://h:7077, yarn, local[4]); default local[*]."),
    ] = None,
    threshold: Annotated[
        float, typer.Option(min=0.0, help="Balance target: coefficient of variation.")
    ] = 0.1,
    max_moves: Annotated[
        int | None, typer.Option(min=0, help="Cap on balance moves (drains are not capped).")
    ] = None,
    retention: Annotated[str, typer.Option(help="Default retention: 7d, 12h, 3600…")] = "7d",
    namespace_retention: Annotated[
        list[str] | None, typer.Option(help="NAMESPACE=DURATION, once per namespace.")
    ] = None,
    driver_memory: Annotated[
        str | None, typer.Option(help="Spark driver memory (local mode: all of it), e.g. 4g.")
    ] = None,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Analyse a snapshot with Spark: tables/, summary.json, audit.json, backlog.parquet,
    storage.parquet, retention-plan.json, rebalance-plan.json and report.html."""
    from metaplane.pipeline import AnalyzeSettings

    if (snapshot is None) == (store is None):
        fail("give exactly one of --snapshot DIR and --store URL")
    settings = AnalyzeSettings(
        threshold=threshold,
        max_moves=max_moves,
        retention_seconds=parse_duration(retention),
        namespace_retention=parse_namespace_retention(namespace_retention or []),
    )
    source = snapshot if snapshot is not None else _export(store or "", out / "snapshot")
    analysis = guarded(lambda: run_analysis(source, out, settings, spark_master, driver_memory))
    show_analysis(analysis, output)


def _export(store: str, folder: Path) -> Path:
    from metaplane.pipeline import export_snapshot

    async def export_all(ops: Operations) -> Snapshot:
        with counting(f"snapshot of {ops.store.url}") as progress, heap_frozen():
            return await export_snapshot(ops.store, folder, progress=progress)

    return execute(store, export_all).folder


def run_analysis(
    source: Path,
    out: Path,
    settings: AnalyzeSettings,
    master: str | None,
    driver_memory: str | None,
) -> Analysis:
    from metaplane.pipeline import analyze as analyze_snapshot
    from metaplane.pipeline import read_snapshot, spark_session

    snapshot = read_snapshot(source)
    with stages() as step:
        spark = spark_session(master, driver_memory=driver_memory)
        return analyze_snapshot(spark, snapshot, out, settings, step)


def show_analysis(analysis: Analysis, output: Output) -> None:
    summary = analysis.summary
    if output is Output.JSON:
        print_json(summary)
        return
    table = Table(
        title=f"analysis of revision {summary['snapshot']['revision']}", show_header=False
    )
    for name, value in _facts(summary).items():
        table.add_row(name, value)
    console.print(table)
    console.print(f"outputs in {analysis.out}")
    console.print(f"report: [bold]{analysis.report.resolve().as_uri()}[/]", highlight=False)


def _facts(summary: dict[str, Any]) -> dict[str, str]:
    audit, plan, backlog = summary["audit"], summary["rebalance"], summary["backlog"]
    storage, retention = summary["storage"], summary["retention"]
    severities = ", ".join(f"{count} {name}" for name, count in audit["severities"].items())
    return {
        "keys": f"{summary['counts']['keys']:,}",
        "brokers": str(len(summary["brokers"])),
        "leader": f"{summary['leader']['broker_id']} (epoch {summary['leader']['epoch']})",
        "audit": f"{audit['findings']} findings ({severities})",
        "backlog": f"{backlog['messages']:,} messages, {backlog['subscriptions']:,} subscriptions",
        "storage": f"{storage['bytes']:,} bytes in {storage['objects']:,} objects",
        "retention plan": f"{retention['objects']:,} objects, {retention['bytes']:,} bytes",
        "rebalance plan": (
            f"{plan['moves']} moves; cv {plan['balance_before']['cv']} → "
            f"{plan['balance_after']['cv']} (threshold {plan['threshold']})"
        ),
    }
