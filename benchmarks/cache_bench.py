"""LocalCache speed: `get` per second from the cache (raw entries and typed values) against a
direct etcd `get` in the same run, and the watch-to-cache latency on etcd — a put in one
process, visible in another process's cache.

    .venv/bin/python benchmarks/cache_bench.py [--keys 10000] [--writes 2000]

Prints a table and writes JSON. Targets (issue 3): ≥ 1,000,000 raw gets/s; ratio to a direct
etcd get ≥ 500×; watch-to-cache p99 ≤ 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.layout import TopicName
from metaplane.resources import SubscriptionMetadata, SubscriptionType, decode, encode
from metaplane.store import MetadataStore, connect_store
from metaplane.testing import EtcdMember


def subscription_keys(count: int) -> list[str]:
    return [
        layout.subscription(TopicName("bench", f"topic-{i // 4:05d}"), f"sub-{i % 4}")
        for i in range(count)
    ]


def subscription_value(key: str) -> bytes:
    name = key.rsplit("/", 1)[-1]
    return encode(
        SubscriptionMetadata(
            consumer_id=13940288943180594845,
            consumer_name=f"consumer-{name}",
            subscription_name=name,
            subscription_type=SubscriptionType.SHARED,
        )
    )


def typed(key: str, data: bytes) -> object:
    return decode(layout.parse(key).kind, data)


async def fill(store: MetadataStore, keys: list[str]) -> None:
    for start in range(0, len(keys), 100):
        chunk = keys[start : start + 100]
        await asyncio.gather(*(store.put(key, subscription_value(key)) for key in chunk))


def rate_of(call: Any, keys: list[str], seconds: float) -> float:
    """Calls per second of a synchronous `call(key)` over the keys, for about `seconds`."""
    done = 0
    stop_at = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < stop_at:
        for key in keys:
            call(key)
        done += len(keys)
    return done / (time.perf_counter() - start)


async def store_rate(store: MetadataStore, keys: list[str], seconds: float) -> float:
    done = 0
    stop_at = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < stop_at:
        await store.get(keys[done % len(keys)])
        done += 1
    return done / (time.perf_counter() - start)


async def get_rates(url: str, keys: list[str], seconds: float) -> dict[str, float]:
    async with await connect_store(url) as store:
        await fill(store, keys)
        async with LocalCache(store, [layout.topics_prefix("bench")], decoder=typed) as cache:
            assert cache.get(keys[0]) is not None
            for key in keys:
                cache.value(key)  # the first typed read decodes; the benchmark measures after
            return {
                "cache get (raw)": rate_of(cache.get, keys, seconds),
                "cache get (typed)": rate_of(cache.value, keys, seconds),
                "etcd get (direct)": await store_rate(store, keys, seconds),
            }


async def latencies(url: str, writes: int) -> dict[str, list[float]]:
    """Milliseconds from a put (issued / acknowledged) in a child process to its arrival in
    this process's cache."""
    prefix = "/bench-latency"
    async with await connect_store(url) as store:
        await store.delete_prefix(prefix)
        async with LocalCache(store, [prefix]) as cache:
            subscription = cache.subscribe(prefix)
            writer = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--writer",
                url,
                str(writes),
                stdout=asyncio.subprocess.PIPE,
            )
            assert writer.stdout is not None
            # Read the child's lines as they come: a full pipe would stop it writing.
            lines = asyncio.create_task(writer.stdout.read())
            arrived: dict[str, int] = {}
            async with asyncio.timeout(120):
                async for batch in subscription:
                    now = time.monotonic_ns()
                    for event in batch.events:
                        arrived[event.key] = now
                    if len(arrived) == writes:
                        break
            out = (await lines).decode()
            await writer.wait()
    issued, acked = [], []
    for line in out.splitlines():
        key, sent, acknowledged = line.split()
        issued.append((arrived[key] - int(sent)) / 1e6)
        acked.append((arrived[key] - int(acknowledged)) / 1e6)
    return {"from put issued": issued, "from put acknowledged": acked}


async def write_for_latency(url: str, writes: int) -> None:
    """The child: put one key every 5 ms; print key, issue time, acknowledgement time."""
    async with await connect_store(url) as store:
        for i in range(writes):
            key = f"/bench-latency/{i:06d}"
            sent = time.monotonic_ns()  # CLOCK_MONOTONIC: one clock for every process
            await store.put(key, b"x")
            print(key, sent, time.monotonic_ns(), flush=True)
            await asyncio.sleep(0.005)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(rates: dict[str, float], delays: dict[str, list[float]], console: Console) -> dict:
    ratio = rates["cache get (raw)"] / rates["etcd get (direct)"]
    table = Table(title="LocalCache")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    for name, value in rates.items():
        target = "≥ 1,000,000/s" if name == "cache get (raw)" else ""
        table.add_row(name, f"{value:,.0f}/s", target)
    table.add_row("cache raw / etcd direct", f"{ratio:,.0f}×", "≥ 500×")
    summary: dict[str, Any] = {"rates": rates, "ratio": ratio, "latency_ms": {}}
    for name, values in delays.items():
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        table.add_row(f"watch-to-cache p50, {name}", f"{p50:.2f} ms", "")
        table.add_row(f"watch-to-cache p99, {name}", f"{p99:.2f} ms", "≤ 10 ms")
        summary["latency_ms"][name] = {
            "p50": p50,
            "p99": p99,
            "max": max(values),
            "samples": len(values),
        }
    console.print(table)
    summary["targets"] = {
        "raw gets/s ≥ 1,000,000": rates["cache get (raw)"] >= 1_000_000,
        "ratio ≥ 500": ratio >= 500,
        "p99 ≤ 10 ms (from put issued)": summary["latency_ms"]["from put issued"]["p99"] <= 10,
    }
    return summary


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cache_bench.json"))
    parser.add_argument("--writer", nargs=2, metavar=("URL", "WRITES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        await write_for_latency(args.writer[0], int(args.writer[1]))
        return
    console = Console()
    with tempfile.TemporaryDirectory() as folder, EtcdMember(Path(folder)) as member:
        keys = subscription_keys(args.keys)
        console.log(f"etcd at {member.endpoint}; {len(keys)} subscription keys")
        rates = await get_rates(member.url, keys, args.seconds)
        console.log("measuring watch-to-cache latency")
        delays = await latencies(member.url, args.writes)
    summary = report(rates, delays, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "cache", "keys": args.keys, **summary}, indent=2))
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
