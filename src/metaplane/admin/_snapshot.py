"""`metaplane snapshot export | from-etcdctl | synth`: consistent snapshots of the store as
Parquet, the input of `metaplane analyze`. The pipeline (and pyspark) is imported inside each
command: the other commands of `metaplane` should not pay for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    errors,
    fail,
    print_json,
)
from metaplane.admin._heap import heap_frozen
from metaplane.admin._operations import Operations
from metaplane.admin._runner import execute
from metaplane.store import MetadataError

if TYPE_CHECKING:
    from metaplane.pipeline import Snapshot

T = TypeVar("T")

snapshot_app = typer.Typer(
    help="Consistent snapshots of the store as Parquet (the input of `metaplane analyze`).",
    no_args_is_help=True,
)

OutFolder = Annotated[
    Path,
    typer.Option("--out", help="A new (or empty) folder for the snapshot.", show_default=False),
]


@contextmanager
def counting(what: str) -> Iterator[Callable[[int], None]]:
    """A Rich progress line counting keys (on stderr: stdout is for results)."""
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.completed:,} keys"),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
    ) as progress:
        task = progress.add_task(what, total=None)
        yield lambda count: progress.update(task, completed=count)


def guarded(action: Callable[[], T]) -> T:
    """Run a synchronous step; a metaplane error ends the command with one line."""
    try:
        return action()
    except MetadataError as error:
        fail(str(error))


def show_snapshot(snapshot: Snapshot, output: Output) -> None:
    facts = {
        "folder": str(snapshot.folder),
        "revision": snapshot.revision,
        "keys": snapshot.keys,
        "source": snapshot.source,
        "files": len(snapshot.files),
    }
    if output is Output.JSON:
        print_json(facts)
        return
    table = Table(title="snapshot", show_header=False)
    for name, value in facts.items():
        table.add_row(name, f"{value:,}" if isinstance(value, int) else str(value))
    console.print(table)


@snapshot_app.command("export")
def export(
    out: OutFolder,
    store: StoreURL = DEFAULT_STORE,
    page_size: Annotated[int, typer.Option(min=1, help="Keys a page of the scan holds.")] = 10_000,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Every key of a live store, read at one pinned revision (writers may keep running)."""
    from metaplane.pipeline import export_snapshot

    async def export_all(ops: Operations) -> Snapshot:
        with counting(f"reading {ops.store.url}") as progress, heap_frozen():
            return await export_snapshot(ops.store, out, page_size=page_size, progress=progress)

    show_snapshot(execute(store, export_all), output)


@snapshot_app.command("from-etcdctl")
def from_etcdctl(
    file: Annotated[Path, typer.Argument(help="What `etcdctl get / --prefix -w json` printed.")],
    out: OutFolder,
    output: OutputFormat = Output.TABLE,
) -> None:
    """A snapshot of etcdctl's JSON output (base64 keys and values, its header's revision)."""
    from metaplane.pipeline import snapshot_from_etcdctl

    show_snapshot(guarded(lambda: snapshot_from_etcdctl(file, out)), output)


@snapshot_app.command("synth")
def synth(
    out: OutFolder,
    brokers: Annotated[int, typer.Option(min=1, help="Brokers.")] = 3,
    topics: Annotated[int, typer.Option(min=0, help="Served topics (a partition is one).")] = 100,
    subscriptions_per_topic: Annotated[int, typer.Option(min=0)] = 2,
    objects_per_topic: Annotated[int, typer.Option(min=0, help="Storage objects.")] = 3,
    namespaces: Annotated[int, typer.Option(min=1)] = 3,
    draining: Annotated[int, typer.Option(min=0, help="Brokers in draining mode.")] = 0,
    faults: Annotated[
        bool, typer.Option("--faults", help="Inject one inconsistency per audit check.")
    ] = False,
    seed: Annotated[int, typer.Option(help="The same seed gives the same cluster.")] = 1,
    output: OutputFormat = Output.TABLE,
) -> None:
    """A realistic synthetic cluster in exactly seed 001's formats, for scale tests; with
    --faults, faults.json beside it lists each injected inconsistency's keys."""
    from metaplane.pipeline import SynthSpec, synth_snapshot

    spec = SynthSpec(
        brokers=brokers,
        topics=topics,
        subscriptions_per_topic=subscriptions_per_topic,
        objects_per_topic=objects_per_topic,
        namespaces=namespaces,
        draining=draining,
        faults=faults,
        seed=seed,
    )
    with counting("generating") as progress:
        snapshot = guarded(lambda: synth_snapshot(spec, out, progress))
    show_snapshot(snapshot, output)
