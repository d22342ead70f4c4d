"""A simulated cluster at scale: N topics created at once on one store, ten brokers (the real
BrokerNode, LeaderElection and LoadManager, as tasks of this process, with hosts that serve
no traffic) placing and following them — what a large cluster's first minutes cost.

    .venv/bin/python benchmarks/scale_sim.py [--topics 100000] [--brokers 10] [--store sqlite]
        [--create-in-flight 64]

It reports (from the moment the ten brokers have joined): the time to create the topics (bulk
transactions of the ownership layout) while the leader already places them, the time until
every topic is assigned (its batched fenced transactions) and until every broker has loaded
and followed its share (its cache holds each topic's keys), the leader's
cycle time at that size, each broker's cache (keys held, and the memory they take, measured
with tracemalloc on one broker's cache alone), and the process's peak memory. A table is
printed and JSON written to benchmarks/results/scale_sim.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from sortedcontainers import SortedList

from metaplane import layout
from metaplane.cluster import LoadManagerConfig, Node, NodeSettings, Ranking
from metaplane.layout import TopicName
from metaplane.resources import NULL, Delivery, NamespaceManager, OwnershipManager, encode
from metaplane.store import Entry, MetadataStore, Put, connect_store
from metaplane.testing import EtcdMember

RESULTS = Path("benchmarks/results/scale_sim.json")
NAMESPACES = 10
PER_TXN = 32  # four keys a topic: 128 operations a transaction


def topic_names(count: int) -> list[TopicName]:
    return [TopicName(f"ns{i % NAMESPACES}", f"t{i:07d}") for i in range(count)]


async def create_topics(
    store: MetadataStore, topics: list[TopicName], in_flight: int = 64
) -> float:
    """Every topic as `TopicManager.create` writes it (root, delivery, namespace entry, a
    null marker), in bulk transactions, `in_flight` at a time; the seconds it took."""
    started = time.perf_counter()
    for namespace in sorted({topic.namespace for topic in topics}):
        await NamespaceManager(store).create(namespace)
    root, delivery = encode(0), encode(Delivery.RELIABLE)
    pending: list[asyncio.Task[object]] = []
    for start in range(0, len(topics), PER_TXN):
        ops = []
        for topic in topics[start : start + PER_TXN]:
            ops += [
                Put(layout.topic_root(topic), root),
                Put(layout.topic_delivery(topic), delivery),
                Put(layout.namespace_topic(topic), NULL),
                Put(layout.unassigned(topic), NULL),
            ]
        pending.append(asyncio.ensure_future(store.txn([], ops, [])))
        if len(pending) >= in_flight:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)
    return time.perf_counter() - started


async def until(check: Any, timeout: float, every: float = 0.5) -> float:
    """Seconds until `check()` holds (polled: the state is spread over ten brokers)."""
    started = time.perf_counter()
    while not await check():
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"not reached within {timeout:g} s")
        await asyncio.sleep(every)
    return time.perf_counter() - started


def cache_bytes(node: Node) -> int:
    """The memory one broker's cache holds: its content rebuilt, key and value copied, in
    the cache's own structures (a dict of entries and a sorted list of keys) under
    tracemalloc — the live cache's allocations cannot be told apart from the process's."""
    cache = node.broker.cache
    entries = [cache.get(key) for prefix in cache.prefixes for key in _keys(cache, prefix)]
    gc.collect()
    tracemalloc.start()
    copied = {}
    for entry in entries:
        if entry is not None:
            key = entry.key.encode().decode()
            copied[key] = Entry(
                key,
                bytes(bytearray(entry.value)),
                entry.version,
                entry.create_revision,
                entry.mod_revision,
                entry.lease,
            )
    keys = SortedList(copied)
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del copied, keys
    return size


def _keys(cache: Any, prefix: str) -> list[str]:
    return [entry.key for entry in cache.list(prefix)]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="scale-sim-"))
    member: EtcdMember | None = None
    if args.store == "etcd":
        member = EtcdMember(folder / "etcd", extra_args=["--quota-backend-bytes=8589934592"])
        member.start()
        member.wait_ready()
        url = member.url
    else:
        url = f"sqlite://{folder / 'store.db'}?synchronous=normal"
    store = await connect_store(url)
    topics = topic_names(args.topics)
    result: dict[str, Any] = {
        "topics": args.topics,
        "brokers": args.brokers,
        "store": args.store,
        "create_in_flight": args.create_in_flight,
    }
    try:
        config = LoadManagerConfig(ranking=Ranking.FAIR, idle_every=1.0, rebalance_every=3600)
        nodes = [
            Node(store, NodeSettings(broker, broker, session_ttl=10, load_manager=config))
            for broker in range(1, args.brokers + 1)
        ]
        for node in nodes:
            await node.start()
        started = time.perf_counter()
        result["create_s"] = await create_topics(store, topics, args.create_in_flight)
        ownership = OwnershipManager(store)

        async def assigned() -> bool:
            return not await store.list(layout.unassigned_prefix(), keys_only=True, limit=1)

        await until(assigned, args.timeout)
        result["assigned_s"] = time.perf_counter() - started

        async def loaded() -> bool:
            return sum(len(node.broker.owned) for node in nodes) == len(topics)

        await until(loaded, args.timeout)
        result["loaded_and_followed_s"] = time.perf_counter() - started
        leader = next(node for node in nodes if node.election.is_leader)
        cycles_before, timed = leader.load_manager.cycles, time.perf_counter()
        await asyncio.sleep(5)  # a few idle cycles of the leader at this size
        cycles = max(leader.load_manager.cycles - cycles_before, 1)
        result["leader_cycle_s"] = (time.perf_counter() - timed) / cycles
        result["owned_per_broker"] = sorted(len(node.broker.owned) for node in nodes)
        result["cache_keys_per_broker"] = statistics.median(
            len(node.broker.cache) for node in nodes
        )
        follower = next(node for node in nodes if not node.election.is_leader)
        held = len(follower.broker.cache)
        measured = cache_bytes(follower)
        result["cache_bytes_one_broker"] = measured
        result["cache_bytes_per_key"] = measured / max(held, 1)
        result["assignments_of_one_broker"] = len(
            await ownership.assignments(follower.settings.broker_id)
        )
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        report(args, result)  # before the stop, which is not what is measured
        # All at once: stopped one after the other, each broker's hand-over of thousands
        # of topics to the others outlasts its deadline, and the run takes minutes more.
        await asyncio.gather(*(node.stop() for node in nodes))
    finally:
        await store.aclose()
        if member is not None:
            member.kill()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--create-in-flight",
        type=int,
        default=64,
        help="creation transactions sent at once (each 32 topics)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args))


def report(args: argparse.Namespace, result: dict[str, Any]) -> None:
    table = Table(title=f"scale_sim: {args.topics:,} topics, {args.brokers} brokers, {args.store}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, value in result.items():
        table.add_row(name, f"{value:,.2f}" if isinstance(value, float) else str(value))
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    existing.append({**result, "python": sys.version.split()[0], "at": time.time()})
    RESULTS.write_text(json.dumps(existing, indent=2))


if __name__ == "__main__":
    main()
