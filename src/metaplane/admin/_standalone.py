"""`metaplane standalone`: a local cluster of broker processes and their load manager on the
embedded store, shown live until Ctrl-C, then stopped cleanly (topics sealed with their
cursors, registrations revoked)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live

from metaplane.admin._brokers import brokers_json, brokers_table, read_brokers
from metaplane.admin._console import DEFAULT_STORE, StoreURL, console, fail, run
from metaplane.admin._progress import spinner
from metaplane.admin._workload import create_workload
from metaplane.cluster import LocalCluster
from metaplane.store import MetadataError, MetadataStore, open_store

Brokers = Annotated[int, typer.Option("--brokers", "-n", min=1, max=64, help="Broker processes.")]
Workload = Annotated[
    bool,
    typer.Option(
        "--workload/--no-workload",
        help="Create namespaces, topics, subscriptions and a schema, and simulate traffic.",
    ),
]
Folder = Annotated[
    Path, typer.Option("--folder", help="Where the brokers' logs go (logs/broker-N.log).")
]


def standalone(
    brokers: Brokers = 3,
    workload: Workload = False,
    store: StoreURL = DEFAULT_STORE,
    folder: Folder = Path(".metaplane"),
) -> None:
    """Run a local cluster of N broker processes until Ctrl-C."""
    if store.startswith("memory://"):
        fail("a memory store lives in one process: the brokers need sqlite or etcd")
    run(serve(store, brokers, workload, folder))


async def serve(url: str, brokers: int, workload: bool, folder: Path) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_store(url) as store:
        if workload:
            with spinner("creating the workload"):
                topics = await create_workload(store)
            console.print(f"workload: {len(topics)} topics with subscriptions and producers")
        cluster = LocalCluster(url, folder, workload=workload)
        try:
            with spinner(f"starting {brokers} brokers"):
                await cluster.start(brokers)
            console.print(f"{brokers} brokers on {url}; logs in {folder / 'logs'}; Ctrl-C stops")
            await show(store, stop)
        finally:
            with spinner("stopping the brokers (sealing their topics)"):
                await cluster.stop()
    console.print("cluster stopped")


async def show(store: MetadataStore, stop: asyncio.Event) -> None:
    """The brokers table, redrawn every second until `stop` is set."""
    with Live(console=console, refresh_per_second=2) as live:
        while not stop.is_set():
            try:
                live.update(brokers_table(brokers_json(await read_brokers(store))))
            except MetadataError as error:  # the store is away for a while: so is the table
                live.update(f"[yellow]the store does not answer: {error}[/]; retrying")
            try:
                async with asyncio.timeout(1.0):
                    await stop.wait()
            except TimeoutError:
                pass
