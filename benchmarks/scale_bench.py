"""Scale: what a broker and an operator pay at 100k and 1M keys shaped like the layout
(`metaplane.pipeline.synth_snapshot`), each beside its peer in the same run.

    .venv/bin/python benchmarks/scale_bench.py [--section reads] [--sizes 100000 1000000]

Sections (run one or all; each adds its rows and targets to one table and one JSON file):

- reads: a LocalCache start and `metaplane snapshot export` (a process of its own, with its
  peak memory) beside the backend's own single-request read — sqlite's one SELECT in one
  transaction, etcd's one Range over the whole keyspace with no deadline — on sqlite quiet
  and under a writer (a key every 50 ms, from another process), and on etcd. Targets
  (issue 13): a cache start ≤ 1.5× the read; a snapshot ≤ 1.5× the read plus a process
  start (`metaplane --help`); its peak memory ≤ 500 MB.

Every measure is a round of paired runs in alternating order (the peer first in even
rounds, last in odd ones); the table gives the median of each ratio over the rounds and
its spread (lowest–highest), never the best round. etcd runs on a core of its own where
there are two.
"""

from __future__ import annotations

import argparse
import asyncio
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
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
from aetcd import rpc
from rich.console import Console
from rich.table import Table

from metaplane.cache import LocalCache
from metaplane.pipeline import SynthSpec, read_snapshot, synth_snapshot, topics_for_keys
from metaplane.store import EtcdStore, MetadataStore, SqliteStore, connect_store
from metaplane.store._etcd_wire import entry_of
from metaplane.testing import EtcdMember

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
    snap = Row(
        "reads", size, backend, "snapshot export", "single-request read + process start", target=1.5
    )
    peaks: list[int] = []
    async with await connect_store(url) as store:
        for round_ in range(rounds):
            peer_first = round_ % 2 == 0
            pair: dict[str, float] = {}
            for name in ("peer", "cache") if peer_first else ("cache", "peer"):
                action = single_read if name == "peer" else cache_start
                pair[name] = await timed(lambda action=action: action(store))  # type: ignore[misc]
            cache.ours.append(pair["cache"])
            cache.theirs.append(pair["peer"])
            cache.ratios.append(pair["cache"] / pair["peer"])
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
            snap.ours.append(steps["snapshot"])
            snap.theirs.append(steps["peer"] + steps["start"])
            snap.ratios.append(steps["snapshot"] / (steps["peer"] + steps["start"]))
            console.log(
                f"{backend} {size:,}: read {pair['peer']:.2f}s, cache start {pair['cache']:.2f}s,"
                f" snapshot {steps['snapshot']:.2f}s (start {steps['start']:.2f}s,"
                f" peak {peaks[-1]} MB)"
            )
    snap.extra["peak_mb"] = peaks
    memory = Row("reads", size, backend, "snapshot peak memory (MB)", "500 MB", target=1.0)
    memory.ours = [float(p) for p in peaks]
    memory.ratios = [p / 500 for p in peaks]
    return [cache, snap, memory]


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


SECTIONS: dict[str, Callable[[argparse.Namespace, Path, Console], Awaitable[list[Row]]]] = {
    "reads": reads_section,
}
"""Each section measures its cases and returns its rows; more sections join here."""


# -- output ------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def render(rows: list[Row], console: Console) -> None:
    table = Table(title="scale: medians of paired rounds (spread: lowest–highest)")
    for column in ("size", "backend", "case", "ours (s)", "peer", "peer (s)", "ratio", "spread"):
        table.add_column(column, justify="right" if column != "case" else "left")
    table.add_column("target")
    table.add_column("met")
    for row in rows:
        theirs = f"{statistics.median(row.theirs):.2f}" if row.theirs else "—"
        ours = statistics.median(row.ours)
        table.add_row(
            f"{row.size:,}",
            row.backend,
            row.case,
            f"{ours:.2f}" if ours < 100 else f"{ours:.0f}",
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
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "scale",
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                "rounds": args.rounds,
                "rows": [
                    {**asdict(row), "median_ratio": row.median, "met": row.met} for row in rows
                ],
            },
            indent=2,
        )
    )
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
