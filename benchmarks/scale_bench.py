"""Scale: what a broker and an operator pay at 100k and 1M keys shaped like the layout
(`metaplane.pipeline.synth_snapshot`), each beside its peer in the same run.

    .venv/bin/python benchmarks/scale_bench.py [--section reads] [--sizes 100000 1000000]

Sections (run one or all; each adds its rows and targets to one table and one JSON file):

- reads: a LocalCache start and `metaplane snapshot export` (a process of its own, with its
  peak memory) beside the backend's own single-request read — sqlite's one SELECT in one
  transaction, etcd's one Range over the whole keyspace with no deadline — on sqlite quiet
  and under a writer (a key every 50 ms, from another process), and on etcd. Targets
  (issue 13): a cache start ≤ 1.5× the read, in wall time and in this process's CPU time;
  a snapshot ≤ 1.5× the read plus a process start (`metaplane --help`); its peak memory
  ≤ 500 MB.
- memory: a LocalCache's bytes per key once started over the whole store (tracemalloc:
  what it still holds after `start`), beside plain tuples of the same six fields in a dict
  with a sorted list of the keys; and each backend's bytes per key on disk (sqlite: the
  file after the keys were written, without change history; etcd: its bolt file after one
  put per key, uncompacted), beside the raw bytes of the keys and values; and a standalone
  ZooKeeper's live heap per znode (raw kazoo; `jcmd GC.class_histogram` before and after
  creating the smallest size's keys and their ancestors).
- follow: a broker's LocalCache (started on cluster-wide keys) given every topic of the
  store at once — each topic's two prefixes, `/topics/{ns}/{topic}` and its storage's —
  until it serves them all, beside the backend's own read of those keys (etcd: one Range a
  root, sqlite: one list a root); and on etcd the watchers the cache then holds (etcd's
  own gauge). Target (issue 13): the follow ≤ 2× the read.
- typed: typed reads per second through a manager served from the cache
  (`SubscriptionManager.cursor`) and through `Reader.get`, beside the raw `LocalCache.get`
  of the same keys in the same rounds. Target (issue 13): ≥ 1,000,000 typed reads a second.

Every measure is a round of paired runs in alternating order (the peer first in even
rounds, last in odd ones); the table gives the median of each ratio over the rounds and
its spread (lowest–highest), never the best round. etcd runs on a core of its own where
there are two.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
from aetcd import rpc
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from rich.console import Console
from rich.table import Table
from sortedcontainers import SortedList

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.layout import TopicName
from metaplane.pipeline import SynthSpec, read_snapshot, synth_snapshot, topics_for_keys
from metaplane.resources import Reader, SubscriptionManager, decode_value, encode
from metaplane.store import EtcdStore, MemoryStore, MetadataStore, Put, SqliteStore, connect_store
from metaplane.store._etcd_wire import entry_of
from metaplane.testing import EtcdMember
from metaplane.testing.zookeeper import ZooKeeperServer

WRITER_PERIOD = 0.05
RESULTS = Path("benchmarks/results/scale_bench.json")


@dataclass
class Row:
    """One measure: seconds of each side per round, and the ratio per round."""

    section: str
    size: int
    backend: str
    case: str
    peer: str
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    target: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    unit: str = "s"

    def add(self, ours: float, theirs: float) -> None:
        """One round: each side's measure and their ratio."""
        self.ours.append(ours)
        self.theirs.append(theirs)
        self.ratios.append(ours / theirs)

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.median <= self.target


# -- data --------------------------------------------------------------------------------


def snapshot_of(size: int, work: Path) -> Path:
    """The synthetic cluster of about `size` keys, made once per work folder."""
    folder = work / f"synth-{size}"
    if not (folder / "snapshot.json").exists():
        spec = SynthSpec(brokers=10, namespaces=10, seed=1)
        spec = SynthSpec(brokers=10, namespaces=10, seed=1, topics=topics_for_keys(size, spec))
        synth_snapshot(spec, folder)
    return folder


def rows_of(folder: Path) -> list[tuple[str, bytes, int, int, int, int]]:
    snapshot = read_snapshot(folder)
    columns = ["key", "value", "version", "create_revision", "mod_revision", "lease"]
    table = pq.read_table(snapshot.paths, columns=columns)
    rows = list(zip(*(table.column(name).to_pylist() for name in columns), strict=True))
    rows.sort()
    return [(k, v, ver, c, m, 0) for k, v, ver, c, m, _ in rows]  # no live leases here


async def load_sqlite(path: Path, rows: list[tuple[str, bytes, int, int, int, int]]) -> None:
    """The rows written straight into a new store's file (its own API would take minutes
    to put a million keys one transaction at a time)."""
    store = await SqliteStore.open(path)
    await store.aclose()
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO kv VALUES (?, ?, ?, ?, ?, ?)", rows)
        top = max(row[4] for row in rows)
        conn.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (top + 1,))


async def load_etcd(endpoint: str, rows: list[tuple[str, bytes, int, int, int, int]]) -> None:
    async with await connect_store(f"etcd://{endpoint}") as store:
        assert isinstance(store, EtcdStore)
        kv = store._members[0].kv
        batches: list[list[Any]] = [[]]
        size = 0
        for key, value, *_ in rows:
            if len(batches[-1]) >= 128 or size + len(value) > 1_000_000:
                batches.append([])
                size = 0
            put = rpc.PutRequest(key=key.encode(), value=value)
            batches[-1].append(rpc.RequestOp(request_put=put))
            size += len(value) + len(key)
        gate = asyncio.Semaphore(16)

        async def send(ops: list[Any]) -> None:
            async with gate:
                await kv.Txn(rpc.TxnRequest(success=ops), timeout=60)

        await asyncio.gather(*(send(ops) for ops in batches))


# -- the reads section -------------------------------------------------------------------


async def single_read(store: MetadataStore) -> int:
    """The backend's own read of everything in one request: the peer."""
    if isinstance(store, EtcdStore):
        member = store._members[store._active]
        response = await member.kv.Range(rpc.RangeRequest(key=b"/", range_end=b"0"))
        return len([entry_of(kv) for kv in response.kvs])
    return len(await store.list("/"))


async def cache_start(store: MetadataStore) -> int:
    async with LocalCache(store, ["/"]) as cache:
        return len(cache)


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await action()
    return time.perf_counter() - started


async def timed_cpu(action: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of `action` (a server's are not counted:
    etcd's walk of its index is its own CPU, on the other core)."""
    started, cpu = time.perf_counter(), time.process_time()
    await action()
    return time.perf_counter() - started, time.process_time() - cpu


def measure_peak(command: list[str]) -> tuple[float, int]:
    """Seconds and peak megabytes of one child, alone (ru_maxrss of children is a maximum
    over all of them: each measure runs in a fresh helper process)."""
    helper = (
        "import resource,subprocess,sys,time;"
        "t=time.perf_counter();subprocess.run(sys.argv[1:],check=True,capture_output=True);"
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", helper, *command], check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), int(out[1]) // 1024


async def reads(
    url: str, size: int, backend: str, rounds: int, work: Path, console: Console
) -> list[Row]:
    cli = [str(Path(sys.executable).with_name("metaplane"))]
    cache = Row("reads", size, backend, "LocalCache start", "single-request read", target=1.5)
    cpu = Row("reads", size, backend, "LocalCache start CPU", "single-request read CPU", target=1.5)
    snap = Row(
        "reads", size, backend, "snapshot export", "single-request read + process start", target=1.5
    )
    peaks: list[int] = []
    async with await connect_store(url) as store:
        for round_ in range(rounds):
            peer_first = round_ % 2 == 0
            pair: dict[str, float] = {}
            used: dict[str, float] = {}
            for name in ("peer", "cache") if peer_first else ("cache", "peer"):
                action = single_read if name == "peer" else cache_start
                pair[name], used[name] = await timed_cpu(
                    lambda action=action: action(store)  # type: ignore[misc]
                )
            cache.add(pair["cache"], pair["peer"])
            cpu.add(used["cache"], used["peer"])
            out = work / f"snapshot-{backend}-{size}"
            shutil.rmtree(out, ignore_errors=True)
            export = [*cli, "snapshot", "export", "--store", url, "--out", str(out)]
            steps: dict[str, float] = {}
            for name in (
                ("peer", "start", "snapshot") if peer_first else ("snapshot", "start", "peer")
            ):
                if name == "peer":
                    steps[name] = await timed(lambda: single_read(store))
                elif name == "start":
                    steps[name] = measure_peak([*cli, "--help"])[0]
                else:
                    steps[name], megabytes = measure_peak(export)
                    peaks.append(megabytes)
            snap.add(steps["snapshot"], steps["peer"] + steps["start"])
            console.log(
                f"{backend} {size:,}: read {pair['peer']:.2f}s ({used['peer']:.2f} CPU-s),"
                f" cache start {pair['cache']:.2f}s ({used['cache']:.2f} CPU-s),"
                f" snapshot {steps['snapshot']:.2f}s (start {steps['start']:.2f}s,"
                f" peak {peaks[-1]} MB)"
            )
    snap.extra["peak_mb"] = peaks
    memory = Row("reads", size, backend, "snapshot peak memory", "500 MB", target=1.0, unit="MB")
    memory.ours = [float(p) for p in peaks]
    memory.ratios = [p / 500 for p in peaks]
    return [cache, cpu, snap, memory]


class Writer:
    """A process putting a key every 50 ms into the store while a measure runs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Writer:
        code = (
            "import asyncio,sys\n"
            "from metaplane.store import connect_store\n"
            "async def main():\n"
            "    async with await connect_store(sys.argv[1]) as s:\n"
            "        i = 0\n"
            "        while True:\n"
            "            await s.put(f'/bench-writer/k{i % 1000}', b'x' * 100)\n"
            f"            i += 1; await asyncio.sleep({WRITER_PERIOD})\n"
            "asyncio.run(main())\n"
        )
        self.process = subprocess.Popen([sys.executable, "-c", code, self.url])
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait()


async def reads_section(args: argparse.Namespace, work: Path, console: Console) -> list[Row]:
    rows: list[Row] = []
    for size in args.sizes:
        data = rows_of(snapshot_of(size, work))
        console.log(f"{len(data):,} keys")
        db = work / f"store-{size}.db"
        if not db.exists():
            await load_sqlite(db, data)
        url = f"sqlite://{db}"
        rows += await reads(url, size, "sqlite", args.rounds, work, console)
        with Writer(url):
            under = await reads(url, size, "sqlite + writer", args.rounds, work, console)
        rows += under
        member = EtcdMember(work / f"etcd-{size}", extra_args=["--quota-backend-bytes=8589934592"])
        member.start()
        try:
            member.wait_ready()
            pin_apart(member, console)
            await load_etcd(member.endpoint, data)
            rows += await reads(member.url, size, "etcd", args.rounds, work, console)
            with Writer(member.url):
                rows += await reads(member.url, size, "etcd + writer", args.rounds, work, console)
        finally:
            member.kill()
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    return rows


# -- the memory section ------------------------------------------------------------------


async def cache_bytes(store: MetadataStore) -> tuple[int, int]:
    """(bytes a started LocalCache of every key still holds, its keys), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    cache = LocalCache(store)
    await cache.start()
    await cache.aclose()  # stops its watch; the content stays referenced by `cache`
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return held, len(cache)


def tuple_bytes(data: list[tuple[str, bytes, int, int, int, int]]) -> int:
    """Bytes of the same fields as plain tuples in a dict, and the keys in a sorted list
    (copies made under tracemalloc, so none is shared with `data`)."""
    gc.collect()
    tracemalloc.start()
    held = {}
    for key, value, version, create, mod, lease in data:
        copy = key.encode().decode()
        held[copy] = (copy, bytes(bytearray(value)), version + 0, create + 0, mod + 0, lease)
    keys = SortedList(held)
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del held, keys
    return size


def disk_row(size: int, backend: str, on_disk: int, data: list[Any]) -> Row:
    raw = sum(len(key.encode()) + len(value) for key, value, *_ in data)
    row = Row("memory", size, backend, "bytes/key on disk", "raw key + value", unit="B/key")
    row.ours, row.theirs, row.ratios = [on_disk / len(data)], [raw / len(data)], [on_disk / raw]
    row.extra = {"file_bytes": on_disk, "keys": len(data)}
    return row


def file_size(*paths: Path) -> int:
    return sum(path.stat().st_size for path in paths if path.exists())


async def memory_section(args: argparse.Namespace, work: Path, console: Console) -> list[Row]:
    rows: list[Row] = []
    for size in args.sizes:
        data = rows_of(snapshot_of(size, work))
        db = work / f"store-{size}.db"
        if not db.exists():
            await load_sqlite(db, data)
        with sqlite3.connect(db) as conn:  # the WAL folded into the file: its steady size
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows.append(disk_row(size, "sqlite", file_size(db, Path(f"{db}-wal")), data))
        row = Row("memory", size, "sqlite", "cache bytes/key", "plain tuples", unit="B/key")
        async with await connect_store(f"sqlite://{db}") as store:
            for round_ in range(args.rounds):
                ours = theirs = 0.0
                for side in ("ours", "theirs") if round_ % 2 == 0 else ("theirs", "ours"):
                    if side == "ours":
                        held, keys = await cache_bytes(store)
                        ours = held / keys
                    else:
                        theirs = tuple_bytes(data) / len(data)
                row.add(ours, theirs)
                console.log(f"{size:,} cache {ours:.0f} B/key, tuples {theirs:.0f} B/key")
        rows.append(row)
        member = EtcdMember(
            work / f"etcd-mem-{size}", extra_args=["--quota-backend-bytes=8589934592"]
        )
        member.start()
        try:
            member.wait_ready()
            await load_etcd(member.endpoint, data)
            bolts = list((work / f"etcd-mem-{size}").rglob("member/snap/db"))
            rows.append(disk_row(size, "etcd", file_size(*bolts), data))
        finally:
            member.kill()
            shutil.rmtree(work / f"etcd-mem-{size}", ignore_errors=True)
    rows.append(zookeeper_row(rows_of(snapshot_of(min(args.sizes), work)), work, console))
    return rows


def java_heap_bytes(pid: int) -> int:
    """Live bytes on a JVM's heap: `jcmd GC.class_histogram` runs a full collection first."""
    out = subprocess.run(
        ["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True, check=True
    ).stdout
    total = next(line for line in out.splitlines() if line.startswith("Total"))
    return int(total.split()[2])


def zookeeper_row(data: list[Any], work: Path, console: Console) -> Row:
    """A standalone ZooKeeper's heap bytes per znode, with raw kazoo: every key of `data`
    created as a znode (its ancestors too, as ZooKeeper needs them), the live heap measured
    before and after. ZooKeeper keeps its whole tree in memory: the heap is what bounds it."""
    server = ZooKeeperServer(work / "zookeeper")
    server.start()
    client = KazooClient(hosts=server.hosts, timeout=30)
    try:
        server.wait_ready()
        assert server.process is not None
        client.start()
        before = java_heap_bytes(server.process.pid)
        parents = sorted(
            {key[:end] for key, *_ in data for end in _slashes(key)} - {key for key, *_ in data}
        )
        nodes = [(parent, b"") for parent in parents] + [(key, value) for key, value, *_ in data]
        nodes.sort(key=lambda node: (node[0].count("/"), node[0]))
        for start in range(0, len(nodes), 2_000):
            pending = [
                client.create_async(key, value) for key, value in nodes[start : start + 2_000]
            ]
            for result in pending:
                result.get(timeout=60)
        after = java_heap_bytes(server.process.pid)
    finally:
        client.stop()
        client.close()
        server.kill()
    row = Row("memory", len(data), "zookeeper", "heap bytes/znode", "raw key + value", unit="B/key")
    raw = sum(len(key.encode()) + len(value) for key, value, *_ in data)
    per_node = (after - before) / len(nodes)
    # The ratio is the heap of the whole tree (parents included) over the keys' raw bytes.
    row.ours, row.theirs, row.ratios = [per_node], [raw / len(data)], [(after - before) / raw]
    row.extra = {
        "znodes": len(nodes),
        "keys": len(data),
        "heap_before": before,
        "heap_after": after,
    }
    console.log(f"zookeeper: {len(nodes):,} znodes, {per_node:.0f} heap bytes each")
    return row


def _slashes(key: str) -> list[int]:
    """The ends of `key`'s ancestors (a znode's parents must exist before it)."""
    return [i for i, char in enumerate(key) if char == "/" and i > 0]


# -- the typed section -------------------------------------------------------------------

TYPED_TOPICS = 10_000
TYPED_READS = 200_000


async def typed_section(args: argparse.Namespace, work: Path, console: Console) -> list[Row]:
    """Seconds per million reads of cursors held by the cache: through the manager and
    through `Reader.get`, each beside the raw `LocalCache.get` of the same keys."""
    store = MemoryStore()
    topics = [TopicName(f"ns{i % 10}", f"t{i:05d}") for i in range(TYPED_TOPICS)]
    for start in range(0, len(topics), 128):
        puts = [
            Put(layout.cursor(t, "sub"), encode(i))
            for i, t in enumerate(topics[start : start + 128])
        ]
        await store.txn([], puts, [])
    cache = LocalCache(store, decoder=decode_value)
    await cache.start()
    manager = SubscriptionManager(store, cache)
    reader = Reader(store, cache)
    keys = [layout.cursor(topic, "sub") for topic in topics]
    order = [i % TYPED_TOPICS for i in range(TYPED_READS)]

    async def through_manager() -> None:
        for i in order:
            await manager.cursor(topics[i], "sub")

    async def through_reader() -> None:
        for i in order:
            await reader.get(keys[i], int)

    async def raw() -> None:
        get = cache.get
        for i in order:
            get(keys[i])

    await through_manager()  # every typed value made once, as a broker's first read does
    rows = []
    for case, typed in (
        ("SubscriptionManager.cursor", through_manager),
        ("Reader.get", through_reader),
    ):
        row = Row("typed", TYPED_TOPICS, "cache", f"{case} (s per 1M)", "LocalCache.get")
        for round_ in range(args.rounds):
            ours = theirs = 0.0
            for side in ("ours", "theirs") if round_ % 2 == 0 else ("theirs", "ours"):
                seconds = await timed(typed if side == "ours" else raw)
                per_million = seconds * 1_000_000 / TYPED_READS
                if side == "ours":
                    ours = per_million
                else:
                    theirs = per_million
            row.add(ours, theirs)
        per_second = 1_000_000 / statistics.median(row.ours)
        row.extra = {
            "typed_per_s": per_second,
            "raw_per_s": 1_000_000 / statistics.median(row.theirs),
        }
        console.log(f"{case}: {per_second:,.0f} typed reads/s")
        rows.append(row)
        target = Row("typed", TYPED_TOPICS, "cache", f"{case}: s per 1M vs 1 s", "target", unit="s")
        target.ours, target.ratios, target.target = list(row.ours), list(row.ours), 1.0
        rows.append(target)
    await cache.aclose()
    await store.aclose()
    return rows


# -- the follow section ------------------------------------------------------------------

TOPIC_ROOTS = ("/topics/", "/danube-data/storage/topics/")
"""Where a topic's keys lie: its own, and its storage's."""


def topic_prefixes(data: list[tuple[str, bytes, int, int, int, int]]) -> list[str]:
    """Every topic's two prefixes, as a broker follows a topic it is given."""
    found: dict[str, None] = {}
    for key, *_ in data:
        for root in TOPIC_ROOTS:
            if key.startswith(root):
                depth = root.count("/") + 1  # the namespace's and the topic's segments
                found["/".join(key.split("/", depth + 1)[: depth + 1])] = None
    return list(found)


async def read_topics(store: MetadataStore) -> int:
    """The backend's own read of every topic's keys: one request a root."""
    if isinstance(store, EtcdStore):
        member = store._members[store._active]
        count = 0
        for root in TOPIC_ROOTS:
            start = root.encode()
            end = start[:-1] + bytes([start[-1] + 1])
            response = await member.kv.Range(rpc.RangeRequest(key=start, range_end=end))
            count += len([entry_of(kv) for kv in response.kvs])
        return count
    return sum([len(await store.list(root.rstrip("/"))) for root in TOPIC_ROOTS])


async def timed_read_topics(store: MetadataStore) -> tuple[float, float, int]:
    """`read_topics`' wall and CPU seconds, and the keys it read."""
    keys = 0

    async def read() -> None:
        nonlocal keys
        keys = await read_topics(store)

    seconds, cpu = await timed_cpu(read)
    return seconds, cpu, keys


async def follow_topics(store: MetadataStore, prefixes: list[str]) -> tuple[float, float, int]:
    """A broker's cache (started on its cluster-wide keys, not timed) given every topic at
    once: the wall and CPU seconds until it serves them all, and the keys it then holds."""
    async with LocalCache(store, ["/cluster/register", "/cluster/leader"]) as cache:
        keys = 0

        async def follow() -> None:
            nonlocal keys
            await cache.wait_for(await cache.follow(prefixes, timeout=None), timeout=None)
            keys = len(cache)

        seconds, cpu = await timed_cpu(follow)
        return seconds, cpu, keys


def etcd_watchers(member: EtcdMember) -> int:
    with urllib.request.urlopen(f"{member.client_url}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("etcd_debugging_mvcc_watcher_total "):
                return int(float(line.split()[1]))
    return -1


async def follows(
    url: str, size: int, backend: str, rounds: int, prefixes: list[str], console: Console
) -> list[Row]:
    case = f"follow {len(prefixes) // 2:,} topics at once"
    wall = Row("follow", size, backend, case, "one read of their keys", target=2.0)
    cpu = Row("follow", size, backend, f"{case}, CPU", "the read's CPU", target=None)
    async with await connect_store(url) as store:
        for round_ in range(rounds):
            pair: dict[str, float] = {}
            used: dict[str, float] = {}
            keys: dict[str, int] = {}
            for name in ("peer", "follow") if round_ % 2 == 0 else ("follow", "peer"):
                if name == "peer":
                    pair[name], used[name], keys[name] = await timed_read_topics(store)
                else:
                    pair[name], used[name], keys[name] = await follow_topics(store, prefixes)
            wall.add(pair["follow"], pair["peer"])
            cpu.add(used["follow"], used["peer"])
            console.log(
                f"{backend} {size:,}: read of the topics' keys {pair['peer']:.2f}s "
                f"({keys['peer']:,} keys), follow {pair['follow']:.2f}s "
                f"({keys['follow']:,} keys in the cache)"
            )
    return [wall, cpu]


async def follow_section(args: argparse.Namespace, work: Path, console: Console) -> list[Row]:
    rows: list[Row] = []
    for size in args.sizes:
        data = rows_of(snapshot_of(size, work))
        prefixes = topic_prefixes(data)
        console.log(f"{len(data):,} keys, {len(prefixes) // 2:,} topics")
        db = work / f"store-{size}.db"
        if not db.exists():
            await load_sqlite(db, data)
        rows += await follows(f"sqlite://{db}", size, "sqlite", args.rounds, prefixes, console)
        member = EtcdMember(work / f"etcd-{size}", extra_args=["--quota-backend-bytes=8589934592"])
        member.start()
        try:
            member.wait_ready()
            pin_apart(member, console)
            await load_etcd(member.endpoint, data)
            before = etcd_watchers(member)
            async with (
                await connect_store(member.url) as store,
                LocalCache(store, ["/cluster/register"]) as cache,
            ):
                await cache.wait_for(await cache.follow(prefixes, timeout=None), timeout=None)
                held = etcd_watchers(member) - before
            console.log(f"etcd watchers of a cache following every topic: {held:,}")
            found = await follows(member.url, size, "etcd", args.rounds, prefixes, console)
            found[0].extra["etcd_watchers"] = held
            rows += found
        finally:
            member.kill()
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    return rows


SECTIONS: dict[str, Callable[[argparse.Namespace, Path, Console], Awaitable[list[Row]]]] = {
    "reads": reads_section,
    "memory": memory_section,
    "typed": typed_section,
    "follow": follow_section,
}
"""Each section measures its cases and returns its rows; more sections join here."""


# -- output ------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def render(rows: list[Row], console: Console) -> None:
    table = Table(title="scale: medians of paired rounds (spread: lowest–highest)")
    for column in ("size", "backend", "case", "ours", "peer", "peer's", "ratio", "spread"):
        table.add_column(column, justify="right" if column != "case" else "left")
    table.add_column("target")
    table.add_column("met")
    for row in rows:
        theirs = f"{statistics.median(row.theirs):.2f} {row.unit}" if row.theirs else "—"
        ours = statistics.median(row.ours)
        table.add_row(
            f"{row.size:,}",
            row.backend,
            row.case,
            (f"{ours:.2f}" if ours < 100 else f"{ours:.0f}") + f" {row.unit}",
            row.peer,
            theirs,
            f"{row.median:.2f}",
            spread(row.ratios),
            "—" if row.target is None else f"≤ {row.target}",
            "—" if row.met is None else ("yes" if row.met else "NO"),
        )
    console.print(table)


def pin_apart(member: EtcdMember, console: Console) -> None:
    """etcd on the last core, this process on the others, where there are two or more."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2 or member.process is None:
        console.log("one core: etcd and the benchmark share it")
        return
    os.sched_setaffinity(member.process.pid, {cores[-1]})
    os.sched_setaffinity(0, set(cores[:-1]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=sorted(SECTIONS), action="append")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds of each measure")
    parser.add_argument("--work", type=Path, help="a folder kept between runs (default: temp)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    console = Console(width=max(Console().width, 160))
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        rows: list[Row] = []
        for name in args.section or sorted(SECTIONS):
            rows += await SECTIONS[name](args, work, console)
    render(rows, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ran = {row.section for row in rows}
    kept = []
    if args.out.exists():  # the rows of the sections not run this time stay
        kept = [
            row for row in json.loads(args.out.read_text())["rows"] if row["section"] not in ran
        ]
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "scale",
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                "rounds": args.rounds,
                "rows": kept
                + [{**asdict(row), "median_ratio": row.median, "met": row.met} for row in rows],
            },
            indent=2,
        )
    )
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
