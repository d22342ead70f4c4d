"""`metaplane import kafka-zk`: a Kafka 0.8 cluster's ZooKeeper tree (live, or a dump file)
brought into metaplane's layout. A dry run first, with counts per kind; --execute writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from metaplane.admin._console import (
    DEFAULT_STORE,
    Create,
    Output,
    OutputFormat,
    StoreURL,
    console,
    errors,
    fail,
    print_json,
    run,
)
from metaplane.admin._runner import check_store
from metaplane.admin._snapshot import guarded
from metaplane.store import open_store

if TYPE_CHECKING:
    from metaplane.pipeline import ImportPlan, ImportResult, KafkaNode

import_app = typer.Typer(
    help="Bring another system's metadata into metaplane.", no_args_is_help=True
)


@import_app.command("kafka-zk")
def kafka_zk(
    zk: Annotated[
        str | None, typer.Option("--zk", help="A live ZooKeeper: HOST:PORT[,…]\\[/chroot].")
    ] = None,
    dump: Annotated[
        Path | None, typer.Option("--dump", help="A dump file (JSON Lines; docs/pipeline.md).")
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    namespace: Annotated[
        str, typer.Option(help="The namespace of the imported topics.")
    ] = "default",
    cluster_name: Annotated[
        str | None, typer.Option(help="Also write the /cluster/{name} marker.")
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Write the keys (without it: a dry run).")
    ] = False,
    save_dump: Annotated[
        Path | None, typer.Option(help="Also write the znodes read to this dump file.")
    ] = None,
    zk_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds to wait for ZooKeeper.")
    ] = 10.0,
    spark_master: Annotated[str | None, typer.Option(help="A Spark master URL.")] = None,
    create_store: Create = False,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Import Kafka 0.8's brokers, topics (as partitioned topics, each partition assigned to
    its leader), consumer group offsets (as subscriptions and cursors), controller and epoch."""
    from metaplane.pipeline import plan_kafka_import, spark_session, write_kafka_dump

    if execute:  # before anything is read: a mistyped path never makes an empty store
        guarded(lambda: check_store(store, create_store))
    nodes = guarded(lambda: _read(zk, dump, zk_timeout))
    if save_dump is not None:
        count = write_kafka_dump(nodes, save_dump)
        errors.print(f"wrote {count} znodes to {save_dump}")
    with console.status("transforming in Spark", spinner="dots"):
        plan = guarded(
            lambda: plan_kafka_import(spark_session(spark_master), nodes, namespace, cluster_name)
        )
    result = _write(store, plan) if execute else None
    _show(plan, result, store, output)


def _read(zk: str | None, dump: Path | None, timeout: float) -> list[KafkaNode]:
    from metaplane.pipeline import read_kafka_dump, read_kafka_zookeeper

    if (zk is None) == (dump is None):
        fail("give exactly one of --zk HOST:PORT and --dump FILE")
    if dump is not None:
        return read_kafka_dump(dump)
    assert zk is not None
    return read_kafka_zookeeper(zk, timeout)


def _write(store: str, plan: ImportPlan) -> ImportResult:
    from metaplane.pipeline import apply_import

    async def write() -> ImportResult:
        async with open_store(store) as opened:
            with Progress(
                TextColumn("writing"), BarColumn(), MofNCompleteColumn(), console=errors
            ) as progress:
                task = progress.add_task("writing", total=len(plan.entries))
                return await apply_import(
                    opened, plan, lambda done: progress.update(task, completed=done)
                )

    return run(write())


def _show(plan: ImportPlan, result: ImportResult | None, store: str, output: Output) -> None:
    if output is Output.JSON:
        print_json(
            {
                "dry_run": result is None,
                "kinds": dict(sorted(plan.kinds.items())),
                "keys": len(plan.entries),
                "skipped": [{"what": what, "reason": why} for what, why in plan.skipped],
                "written": None if result is None else result.written,
                "unchanged": None if result is None else result.unchanged,
            }
        )
        return
    table = Table("kind", "keys", title="keys to write" if result is None else "keys imported")
    for kind, count in sorted(plan.kinds.items()):
        table.add_row(kind, str(count))
    table.add_row("[bold]total[/]", f"[bold]{len(plan.entries)}[/]")
    console.print(table)
    for what, why in plan.skipped:
        console.print(f"[yellow]skipped[/] {what}: {why}", highlight=False)
    if result is None:
        console.print(f"dry run: nothing written to {store}; run again with --execute")
    else:
        console.print(f"{result.written} keys written, {result.unchanged} already there")
