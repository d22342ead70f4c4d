"""Store throughput: get / put / txn operations per second for each backend at concurrency 1
and 64, and the same workload on the raw client of each distributed store in the same run:
raw aetcd against the same etcd, raw kazoo against the same ZooKeeper.

    .venv/bin/python benchmarks/store_bench.py [--duration 2] [--out results.json]
        [--backends memory,sqlite,etcd,zookeeper] [--resync-keys 100000] [--resync-rounds 3]

Prints a table and writes JSON. Targets (issue 2): etcd backend ≥ 90 % of raw aetcd at
concurrency 64; memory get ≥ 200,000/s; sqlite ≥ 3,000 committed puts/s. Issue 16: the
ZooKeeper backend ≥ 90 % of raw kazoo for get and put at concurrency 64; a LocalCache of
100,000 keys resynced within 10 s of its store's ZooKeeper session being lost.

On a small machine etcd's rate drifts by a factor of two from one second to the next (its
fsyncs, its background work). So etcd and ZooKeeper run on a core of their own, the
benchmark on another, our client and the raw one run back to back in alternating order, and
the comparison is the median of those paired ratios, with their spread; the table shows each
cell's median rate over the rounds and its spread (lowest–highest), never the best round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aetcd
from kazoo.client import KazooClient
from kazoo.interfaces import IAsyncResult
from rich.console import Console
from rich.table import Table

from metaplane.cache import CacheState, LocalCache
from metaplane.store import (
    Compare,
    Delete,
    InvalidStoreURL,
    MetadataError,
    MetadataStore,
    Put,
    connect_store,
)
from metaplane.testing import EtcdMember, ServerProcess, ZooKeeperServer, expire_session

KEYS = 1000
VALUE = b"x" * 100
OPERATIONS = ("get", "put", "txn")
CONCURRENCY = (1, 64)

Operation = Callable[[int], Awaitable[Any]]


@dataclass
class Cell:
    backend: str
    operation: str
    concurrency: int
    ops_per_second: float
    """The median over the rounds."""
    rounds: list[float]


def key(i: int) -> str:
    return f"/bench/topics/default/topic-{i % KEYS:05d}"


def store_operations(store: MetadataStore) -> dict[str, Operation]:
    async def get(i: int) -> Any:
        return await store.get(key(i))

    async def put(i: int) -> Any:
        return await store.put(key(i), VALUE)

    async def txn(i: int) -> Any:
        k = key(i)
        return await store.txn([Compare.exists(k)], [Put(k, VALUE)], [])

    return {"get": get, "put": put, "txn": txn}


def aetcd_operations(client: aetcd.Client) -> dict[str, Operation]:
    async def get(i: int) -> Any:
        return await client.get(key(i).encode())

    async def put(i: int) -> Any:
        return await client.put(key(i).encode(), VALUE)

    async def txn(i: int) -> Any:
        k = key(i).encode()
        tx = client.transactions
        return await client.transaction(
            compare=[tx.create(k) > 0], success=[tx.put(k, VALUE)], failure=[]
        )

    return {"get": get, "put": put, "txn": txn}


KAZOO_ROOT = "/kazoo-bench"
"""Raw kazoo's keys live apart from metaplane's (under the chroot of its URL)."""
METAPLANE_ZK_ROOT = "/metaplane-bench"


def kazoo_operations(client: KazooClient) -> dict[str, Operation]:
    """The same workload on kazoo's own asynchronous calls, awaited from asyncio: what a
    caller without metaplane would write, and the floor under our backend's overhead."""
    loop = asyncio.get_running_loop()

    def settle(future: asyncio.Future[Any], result: IAsyncResult) -> None:
        if future.cancelled():
            return
        if result.successful():
            future.set_result(result.value)
        else:
            future.set_exception(result.exception)

    def awaited(result: IAsyncResult) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = loop.create_future()
        result.rawlink(lambda done: loop.call_soon_threadsafe(settle, future, done))
        return future

    async def get(i: int) -> Any:
        return await awaited(client.get_async(key(i)))

    async def put(i: int) -> Any:
        return await awaited(client.set_async(key(i), VALUE))

    async def txn(i: int) -> Any:
        # Version -1 checks that the node exists, whatever its version: Compare.exists.
        transaction = client.transaction()
        transaction.check(key(i), -1)
        transaction.set_data(key(i), VALUE)
        return await awaited(transaction.commit_async())

    return {"get": get, "put": put, "txn": txn}


async def connect_kazoo(hosts: str) -> KazooClient:
    """A raw kazoo client under KAZOO_ROOT, with every key of the workload created."""
    setup = KazooClient(hosts=hosts)
    await asyncio.to_thread(setup.start)
    await asyncio.to_thread(setup.ensure_path, KAZOO_ROOT + key(0).rsplit("/", 1)[0])
    await asyncio.to_thread(setup.stop)
    setup.close()
    client = KazooClient(hosts=hosts + KAZOO_ROOT)
    await asyncio.to_thread(client.start)
    for i in range(KEYS):
        if not await asyncio.to_thread(client.exists, key(i)):
            await asyncio.to_thread(client.create, key(i), VALUE)
    return client


async def close_kazoo(client: KazooClient) -> None:
    await asyncio.to_thread(client.stop)
    client.close()


async def measure(operation: Operation, concurrency: int, duration: float) -> float:
    """Operations per second of `concurrency` tasks running `operation` for `duration`."""
    done = 0
    stop_at = time.perf_counter() + duration

    async def worker(offset: int) -> None:
        nonlocal done
        i = offset
        while time.perf_counter() < stop_at:
            await operation(i)
            i += concurrency
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return done / (time.perf_counter() - start)


async def fill(put: Operation) -> None:
    for i in range(KEYS):
        await put(i)


RAW = {"etcd": "aetcd (raw)", "zookeeper": "kazoo (raw)"}
"""The raw client measured beside each distributed backend."""

Ratios = dict[tuple[str, str, int], list[float]]
"""(backend, operation, concurrency) → backend / its raw client, one ratio per round."""


async def open_clients(
    urls: dict[str, str], console: Console
) -> tuple[dict[str, dict[str, Operation]], list[Callable[[], Awaitable[None]]]]:
    """Each backend's operations and, beside etcd and ZooKeeper, their raw client's. A
    backend this version cannot open (ZooKeeper before its backend exists) is measured on
    its raw client alone."""
    clients: dict[str, dict[str, Operation]] = {}
    closers: list[Callable[[], Awaitable[None]]] = []
    for name, url in urls.items():
        try:
            store = await connect_store(url)
        except InvalidStoreURL as error:
            console.log(f"{name}: not measured through metaplane ({error})")
        else:
            closers.append(store.aclose)
            clients[name] = store_operations(store)
        if name == "etcd":
            host, port = url.removeprefix("etcd://").split(",")[0].rsplit(":", 1)
            raw = aetcd.Client(host=host, port=int(port))
            await raw.connect()
            closers.append(raw.close)
            clients[RAW[name]] = aetcd_operations(raw)
        elif name == "zookeeper":
            hosts = url.removeprefix("zk://").removesuffix(METAPLANE_ZK_ROOT)
            kazoo = await connect_kazoo(hosts)
            closers.append(lambda kazoo=kazoo: close_kazoo(kazoo))
            clients[RAW[name]] = kazoo_operations(kazoo)
    return clients, closers


async def bench_backends(
    urls: dict[str, str], duration: float, rounds: int, console: Console
) -> tuple[list[Cell], Ratios]:
    """Every backend, each operation and concurrency measured `rounds` times, interleaved
    with the raw client where etcd or ZooKeeper is measured. Returns each cell with its rate
    in every round and the ratios backend / raw client of back-to-back runs."""
    measured: dict[tuple[str, str, int], list[float]] = {}
    ratios: Ratios = {}
    clients, closers = await open_clients(urls, console)
    try:
        for operations in clients.values():
            await fill(operations["put"])
            await measure(operations["put"], 64, duration)  # warm up: not counted
        for round_ in range(rounds):
            # Alternate the order each round, so that drift in the server (its disk, its
            # compaction) does not favour whoever runs first.
            order = list(clients.items())
            if round_ % 2:
                order.reverse()
            for operation in OPERATIONS:
                for concurrency in CONCURRENCY:
                    rates: dict[str, float] = {}
                    for name, operations in order:
                        rate = await measure(operations[operation], concurrency, duration)
                        rates[name] = rate
                        measured.setdefault((name, operation, concurrency), []).append(rate)
                        console.log(
                            f"round {round_ + 1}: {name} {operation} c{concurrency}: {rate:,.0f}/s"
                        )
                    for backend, raw in RAW.items():
                        if backend in rates and raw in rates:
                            pair = rates[backend] / rates[raw]
                            cell = (backend, operation, concurrency)
                            ratios.setdefault(cell, []).append(pair)
    finally:
        for close in closers:
            await close()
    cells = [
        Cell(name, op, c, statistics.median(rates), rates)
        for (name, op, c), rates in measured.items()
    ]
    return cells, ratios


def verdicts(cells: list[Cell], ratios: Ratios) -> dict[str, dict[str, Any]]:
    rate = {(c.backend, c.operation, c.concurrency): c.ops_per_second for c in cells}
    results: dict[str, dict[str, Any]] = {}
    for (backend, operation, concurrency), paired in ratios.items():
        if concurrency == 64:
            median = statistics.median(paired)
            name = f"{backend} {operation} c64 vs {RAW[backend]} (median of paired runs)"
            # Issue 16 sets no goal for ZooKeeper's transactions (a read, then a multi,
            # against kazoo's blind multi): reported, not judged.
            judged = backend != "zookeeper" or operation != "txn"
            results[name] = {
                "value": median,
                "spread": [min(paired), max(paired)],
                "target": 0.90 if judged else None,
                "met": median >= 0.90 if judged else None,
                "pairs": paired,
            }
    rounds = {(c.backend, c.operation, c.concurrency): c.rounds for c in cells}
    if ("memory", "get", 1) in rate:
        concurrency = max(CONCURRENCY, key=lambda c: rate[("memory", "get", c)])
        get = rate[("memory", "get", concurrency)]
        results[f"memory get/s (c{concurrency}, median)"] = {
            "value": get,
            "spread": _spread(rounds[("memory", "get", concurrency)]),
            "target": 200_000,
            "met": get >= 200_000,
        }
    if ("sqlite", "put", 1) in rate:
        concurrency = max(CONCURRENCY, key=lambda c: rate[("sqlite", "put", c)])
        put = rate[("sqlite", "put", concurrency)]
        results[f"sqlite committed put/s (c{concurrency}, median)"] = {
            "value": put,
            "spread": _spread(rounds[("sqlite", "put", concurrency)]),
            "target": 3_000,
            "met": put >= 3_000,
        }
    return results


def _spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def render(cells: list[Cell], targets: dict[str, dict[str, Any]], console: Console) -> None:
    table = Table(title="store throughput: median operations per second (lowest–highest)")
    table.add_column("backend")
    for operation in OPERATIONS:
        for concurrency in CONCURRENCY:
            table.add_column(f"{operation} c{concurrency}", justify="right")
    by_cell = {(c.backend, c.operation, c.concurrency): c for c in cells}

    def shown(cell: Cell) -> str:
        return f"{cell.ops_per_second:,.0f} ({min(cell.rounds):,.0f}–{max(cell.rounds):,.0f})"

    for backend in dict.fromkeys(c.backend for c in cells):
        table.add_row(
            backend, *(shown(by_cell[(backend, op, c)]) for op in OPERATIONS for c in CONCURRENCY)
        )
    console.print(table)
    goals = Table(title="targets")
    for column in ("target", "median", "spread", "goal", "met"):
        goals.add_column(column)
    for name, verdict in targets.items():
        value, target = verdict["value"], verdict["target"]
        low, high = verdict["spread"]
        if target is None:
            median, span, goal = f"{value:.1%}", f"{low:.0%}–{high:.0%}", "(none)"
        elif verdict.get("at_most"):
            shown = "failed" if value is None else f"{value:.2f} s"
            span = "" if value is None else f"{low:.2f}–{high:.2f} s"
            median, goal = shown, f"≤ {target:g} s"
        elif target < 1:
            median, span, goal = f"{value:.1%}", f"{low:.0%}–{high:.0%}", f"≥ {target:.0%}"
        else:
            median, span, goal = f"{value:,.0f}", f"{low:,.0f}–{high:,.0f}", f"≥ {target:,}"
        met = "—" if verdict["met"] is None else "yes" if verdict["met"] else "NO"
        goals.add_row(name, median, span, goal, met)
    console.print(goals)


BACKENDS = ("memory", "sqlite", "etcd", "zookeeper")

RESYNC_TARGET = 10.0
"""Seconds from a lost ZooKeeper session to a LocalCache of 100,000 keys synced again."""
RESYNC_PREFIX = "/resync/topics"
RESYNC_CHANGED = 1000
"""Keys changed (and as many deleted) while the cache's session is gone: its resync finds
them by diff."""


async def fill_resync(store: MetadataStore, keys: int, only: list[str] | None = None) -> list[str]:
    """The resync's keys (all of them, or `only` those), written 128 a transaction."""
    names = [f"{RESYNC_PREFIX}/default/topic-{i:06d}" for i in range(keys)]
    written = names if only is None else only
    batches = [written[start : start + 128] for start in range(0, len(written), 128)]
    pending: set[asyncio.Task[Any]] = set()
    for batch in batches:
        if len(pending) >= 16:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        pending.add(asyncio.ensure_future(store.txn([], [Put(k, VALUE) for k in batch], [])))
    await asyncio.gather(*pending)
    return names


def kazoo_clients(store: MetadataStore) -> list[KazooClient]:
    """The kazoo clients a ZooKeeper store holds (its own and its leases' sessions)."""
    found = [value for value in vars(store).values() if isinstance(value, KazooClient)]
    if not found:
        raise RuntimeError(f"{type(store).__name__} holds no kazoo client to expire")
    return found


async def expire_sessions(store: MetadataStore) -> None:
    """Expire the sessions of `store`'s kazoo clients as kazoo's own test harness does: a
    second client joins each session with its id and password and closes it."""
    for client in kazoo_clients(store):
        await expire_session(client)


async def change_behind(writer: MetadataStore, names: list[str]) -> None:
    """RESYNC_CHANGED keys changed and as many deleted, in transactions of 128 at once."""
    changed, deleted = names[:RESYNC_CHANGED], names[-RESYNC_CHANGED:]
    await asyncio.gather(
        *(
            writer.txn([], [Put(k, b"changed") for k in changed[start : start + 128]], [])
            for start in range(0, RESYNC_CHANGED, 128)
        ),
        *(
            writer.txn([], [Delete(k) for k in deleted[start : start + 128]], [])
            for start in range(0, RESYNC_CHANGED, 128)
        ),
    )


async def bench_resync(url: str, keys: int, rounds: int, console: Console) -> dict[str, Any]:
    """A LocalCache of `keys` keys on ZooKeeper; its store's session expires (kazoo's
    harness: another client closes it with its id and password) while another store changes
    and deletes keys; the time from the loss to the cache synced and equal to the store.
    The keys are written once; each round puts back the keys the round before deleted and
    opens a new cache. Returns every round's time and their median."""
    async with await connect_store(url) as store, await connect_store(url) as writer:
        await store.delete_prefix(RESYNC_PREFIX)
        names = await fill_resync(writer, keys)
        times: list[float] = []
        resyncs = 0
        for round_ in range(rounds):
            if round_:
                await fill_resync(writer, keys, names[-RESYNC_CHANGED:])
            seconds, count = await resync_once(store, writer, names, keys)
            console.log(f"resync {round_ + 1}: {keys:,} keys after a session loss: {seconds:.2f} s")
            times.append(seconds)
            resyncs += count
    return {
        "keys": keys,
        "seconds": statistics.median(times),
        "rounds": times,
        "resyncs": resyncs,
    }


async def resync_once(
    store: MetadataStore, writer: MetadataStore, names: list[str], keys: int
) -> tuple[float, int]:
    async with LocalCache(store, [RESYNC_PREFIX]) as cache:
        assert len(cache) == keys, (len(cache), keys)
        resyncs = cache.resyncs
        started = time.perf_counter()
        await expire_sessions(store)
        await change_behind(writer, names)
        deadline = started + 120
        while not (cache.resyncs > resyncs and cache.state is CacheState.SYNCED):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no resync within 120 s: {cache.state}")
            await asyncio.sleep(0.005)
        await cache.wait_for(await writer.revision(), timeout=60)
        seconds = time.perf_counter() - started
        assert len(cache) == keys - RESYNC_CHANGED
        return seconds, cache.resyncs - resyncs


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per cell")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every cell")
    parser.add_argument("--etcd", help="an existing etcd endpoint host:port (default: start one)")
    parser.add_argument(
        "--zookeeper", help="an existing ZooKeeper host:port[,…] (default: start one)"
    )
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="which to measure, comma-separated"
    )
    parser.add_argument(
        "--resync-keys", type=int, default=100_000, help="keys of the ZooKeeper resync (0: none)"
    )
    parser.add_argument("--resync-rounds", type=int, default=3, help="times the resync is measured")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/store_bench.json"))
    args = parser.parse_args()
    backends = [name for name in args.backends.split(",") if name]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}")
    console = Console()
    resync: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as servers:
        started: list[ServerProcess] = []
        urls: dict[str, str] = {}
        for name in backends:
            if name == "memory":
                urls[name] = "memory://"
            elif name == "sqlite":
                urls[name] = f"sqlite://{folder}/bench.db"
            elif name == "etcd":
                endpoint = args.etcd or _started(EtcdMember(Path(folder) / "etcd"), started)
                urls[name] = f"etcd://{endpoint}"
            else:
                hosts = args.zookeeper or _started(
                    ZooKeeperServer(Path(folder) / "zookeeper"), started
                )
                urls[name] = f"zk://{hosts}{METAPLANE_ZK_ROOT}"
        for server in started:
            servers.callback(server.kill)
        pin_apart(started, console)
        cells, ratios = await bench_backends(urls, args.duration, args.rounds, console)
        if "zookeeper" in urls and args.resync_keys:
            try:
                resync = await bench_resync(
                    urls["zookeeper"], args.resync_keys, args.resync_rounds, console
                )
            except (MetadataError, TimeoutError) as error:
                # The throughput table is still worth printing: say what failed instead.
                console.log(f"resync of {args.resync_keys:,} keys failed: {error!r}")
                resync = {"keys": args.resync_keys, "seconds": None, "error": repr(error)}
    targets = verdicts(cells, ratios)
    if resync is not None:
        seconds = resync["seconds"]
        rounds = resync.get("rounds") or [seconds]
        name = f"LocalCache resync of {resync['keys']:,} keys after a session loss (s, median)"
        targets[name] = {
            "value": seconds,
            "spread": _spread(rounds) if seconds is not None else [None, None],
            "target": RESYNC_TARGET,
            "met": seconds is not None and seconds <= RESYNC_TARGET,
            "at_most": True,
            "error": resync.get("error"),
        }
    render(cells, targets, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "store",
                "machine": {"python": platform.python_version(), "cpus": _cpus()},
                "duration_per_cell": args.duration,
                "rounds": args.rounds,
                "cells": [asdict(cell) for cell in cells],
                "targets": targets,
                "resync": resync,
            },
            indent=2,
        )
    )
    console.print(f"written to {args.out}")


def _started(server: EtcdMember | ZooKeeperServer, started: list[ServerProcess]) -> str:
    """Start `server`, note it, and return its client address."""
    started.append(server)
    server.start()
    server.wait_ready()
    return server.endpoint if isinstance(server, EtcdMember) else server.hosts


def _cpus() -> int:
    return os.cpu_count() or 0


def pin_apart(servers: list[ServerProcess], console: Console) -> None:
    """The servers on the last core, this process on the others, where there are two or more.
    Every thread of a server is pinned: an affinity set on a pid binds that one thread, and
    etcd and the JVM have started dozens before we get here."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        console.log("one core: the servers and the benchmark share it")
        return
    for server in servers:
        if server.process is None:
            continue
        for task in os.listdir(f"/proc/{server.process.pid}/task"):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(task), {cores[-1]})
    os.sched_setaffinity(0, set(cores[:-1]))
    names = ", ".join(server.label for server in servers) or "no server"
    console.log(f"{names} pinned to core {cores[-1]}, the benchmark to {cores[:-1]}")


if __name__ == "__main__":
    asyncio.run(main())
