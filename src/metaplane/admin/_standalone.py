"""`metaplane standalone`: a local cluster of broker processes (each serving its metrics and
admin endpoint at the addresses it registers) and the admin server with the dashboard, shown
live until Ctrl-C, then stopped cleanly (topics sealed with their cursors, registrations
revoked)."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live

from metaplane.admin._brokers import brokers_of, brokers_table
from metaplane.admin._cluster_ops import brokers_document
from metaplane.admin._console import (
    DEFAULT_STORE,
    Create,
    StoreURL,
    console,
    data_home,
    fail,
    interrupted,
)
from metaplane.admin._heap import freeze_heap
from metaplane.admin._progress import spinner
from metaplane.admin._runner import check_store
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.admin._workload import create_workload
from metaplane.cluster import LocalCluster
from metaplane.cluster._node import registration
from metaplane.store import MetadataError, MetadataStore, open_store

log = logging.getLogger(__name__)

Brokers = Annotated[int, typer.Option("--brokers", "-n", min=1, max=64, help="Broker processes.")]
Workload = Annotated[
    bool,
    typer.Option(
        "--workload/--no-workload",
        help="Create namespaces, topics, subscriptions and a schema, and simulate traffic.",
    ),
]
Folder = Annotated[
    Path | None,
    typer.Option(
        "--folder",
        help="Where the brokers' logs go (logs/broker-N.log; default: beside the store).",
    ),
]
Port = Annotated[
    int, typer.Option("--port", min=0, max=65535, help="The admin server's port (0: a free one).")
]
IndexBase = Annotated[
    int,
    typer.Option(
        "--index-base",
        min=0,
        max=1000,
        help="Broker i registers admin port 50051+BASE+i and metrics port 9040+BASE+i.",
    ),
]


def logs_folder(url: str, folder: Path | None) -> Path:
    if folder is not None:
        return folder
    from metaplane.admin._runner import sqlite_path

    path = sqlite_path(url)
    return path.parent if path is not None else data_home()


def standalone(
    brokers: Brokers = 3,
    workload: Workload = False,
    store: StoreURL = DEFAULT_STORE,
    create_store: Create = False,
    folder: Folder = None,
    port: Port = 8080,
    index_base: IndexBase = 0,
) -> None:
    """Run a local cluster of N broker processes and the admin server (API, metrics,
    dashboard on loopback) until Ctrl-C."""
    if store.startswith("memory://"):
        fail("a memory store lives in one process: the brokers need sqlite, etcd or ZooKeeper")
    try:
        check_store(store, create_store)
        asyncio.run(serve(store, brokers, workload, logs_folder(store, folder), port, index_base))
    except MetadataError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot listen on 127.0.0.1:{port}: {error.strerror}")
    except KeyboardInterrupt:
        interrupted()


async def serve(
    url: str, brokers: int, workload: bool, folder: Path, port: int, index_base: int
) -> None:
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
        admin = AdminServer(store, ServerSettings(port=port))
        try:
            with spinner(f"starting {brokers} brokers"):
                for index in range(brokers):
                    await cluster.start_node(1 + index, index_base + index)
            with spinner("loading the admin server's cache"):
                await admin.start()
            log.debug("heap frozen after the caches' load: %d objects", freeze_heap())
            announce(url, brokers, folder, index_base, admin)
            await show(store, stop)
        finally:
            with spinner("stopping the brokers (sealing their topics)"):
                await cluster.stop()
            await admin.stop()
    console.print("cluster stopped")


def announce(url: str, brokers: int, folder: Path, index_base: int, admin: AdminServer) -> None:
    console.print(f"{brokers} brokers on {url}; logs in {folder / 'logs'}; Ctrl-C stops")
    for index in range(brokers):
        addresses = registration(1 + index, index_base + index)
        console.print(
            f"  broker {1 + index}: metrics http://{addresses.prom_exporter}/metrics, "
            f"admin {addresses.admin_addr}",
            highlight=False,
        )
    console.print(f"admin API: {admin.url}admin/v2 (metrics: {admin.url}metrics)", highlight=False)
    console.print(f"dashboard: [bold]{admin.url}[/]", highlight=False)


async def show(store: MetadataStore, stop: asyncio.Event) -> None:
    """The brokers table, redrawn every second until `stop` is set."""
    with Live(console=console, refresh_per_second=2, transient=True) as live:
        while not stop.is_set():
            try:
                live.update(brokers_table(brokers_document(await brokers_of(store))))
            except MetadataError as error:  # the store is away for a while: so is the table
                live.update(f"[yellow]the store does not answer: {error}[/]; retrying")
            try:
                async with asyncio.timeout(1.0):
                    await stop.wait()
            except TimeoutError:
                pass
