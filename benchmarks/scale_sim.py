"""A simulated cluster at scale: N topics created at once on one store, ten brokers (the real
BrokerNode, LeaderElection and LoadManager, with hosts that serve no traffic) placing and
following them — what a large cluster's first minutes cost.

    .venv/bin/python benchmarks/scale_sim.py [--topics 100000] [--brokers 10] [--store sqlite]
        [--create-in-flight 64] [--processes]

The brokers run as tasks of this process, or with `--processes` each as a process of its own
(`python -m metaplane.cluster`, as `metaplane standalone` starts them), watched through their
metrics endpoints. The topics are created as `TopicManager.create` creates them — each batch
one fenced transaction that requires the namespace and every topic's absence — through the
`Writer`, which sends a batch again while the store is unavailable and takes a batch it finds
in place as done.

It reports (from the moment the brokers have joined): the time to create the topics while
the leader already places them, the time until every topic is assigned (its batched fenced
transactions) and until every broker has loaded and followed its share (its cache holds each
topic's keys), the leader's cycle time at that size, each broker's cache (keys held, and the
memory they take) and the peak memory. With `--processes`, a broker's cache is set against
what its share needs: a LocalCache of exactly one broker's prefixes (the cluster-wide ones,
its assignments, its topics' and their namespaces' policies) started in this process under
tracemalloc, beside the keys the broker's cache holds and the growth of its process's
resident memory since it joined. A table is printed and JSON written to
benchmarks/results/scale_sim.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from sortedcontainers import SortedList

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.cluster import LoadManagerConfig, Node, NodeSettings, Ranking
from metaplane.cluster._broker import _cluster_wide, _topic_prefixes
from metaplane.cluster._node import registration
from metaplane.layout import TopicName
from metaplane.resources import (
    Change,
    NamespaceManager,
    ObjectDescriptor,
    OwnershipManager,
    TopicManager,
    Writer,
    decode_value,
    encode,
)
from metaplane.store import Entry, MetadataError, MetadataStore, Put, connect_store
from metaplane.testing import EtcdMember

log = logging.getLogger(__name__)

RESULTS = Path("benchmarks/results/scale_sim.json")
NAMESPACES = 10


def topic_names(count: int) -> list[TopicName]:
    return [TopicName(f"ns{i % NAMESPACES}", f"t{i:07d}") for i in range(count)]


async def create_topics(
    store: MetadataStore, topics: list[TopicName], in_flight: int = 64
) -> float:
    """Every topic as `TopicManager.create` writes it (root, delivery, namespace entry, a
    null marker, under the namespace's and the topic's conditions), as many topics a
    transaction as fit, `in_flight` transactions at a time through the `Writer` (sent again
    while the store is unavailable; found in place, done); the seconds it took."""
    started = time.perf_counter()
    for namespace in sorted({topic.namespace for topic in topics}):
        await NamespaceManager(store).create(namespace)
    manager, writer = TopicManager(store), Writer(store)
    per_txn = 1
    while Change.join([manager.create_change(t) for t in topics[: per_txn + 1]]).fits:
        per_txn += 1
    gate = asyncio.Semaphore(in_flight)

    async def create(batch: list[TopicName]) -> None:
        async with gate:
            await writer.apply(Change.join([manager.create_change(t) for t in batch]))

    await asyncio.gather(*(create(topics[i : i + per_txn]) for i in range(0, len(topics), per_txn)))
    return time.perf_counter() - started


PROGRESS_EVERY = 30.0
"""Seconds between two progress lines of a phase (a run at 1M topics takes most of an hour)."""


async def until(
    check: Any,
    timeout: float,
    every: float = 0.5,
    *,
    what: str = "waiting",
    progress: Callable[[], str] | None = None,
) -> float:
    """Seconds until `check()` holds (polled: the state is spread over ten brokers); a line
    on stderr every PROGRESS_EVERY seconds meanwhile (`what`, and `progress()` if given)."""
    started = shown = time.perf_counter()
    while not await check():
        now = time.perf_counter()
        if now - started > timeout:
            raise TimeoutError(f"{what}: not reached within {timeout:g} s")
        if now - shown >= PROGRESS_EVERY:
            shown = now
            detail = f"; {progress()}" if progress is not None else ""
            log.info("%s: %.0f s%s", what, now - started, detail)
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


class Broker:
    """One broker node as a process of its own (`python -m metaplane.cluster`), seen through
    its metrics endpoint and /proc."""

    def __init__(
        self, url: str, broker_id: int, folder: Path, session_ttl: int, niceness: int, base: int
    ) -> None:
        self.broker_id = broker_id
        self.index = base + broker_id
        self.log = folder / f"broker-{broker_id}.log"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    "nice", "-n", str(niceness),
                    sys.executable, "-m", "metaplane.cluster", "--store", url,
                    "--broker-id", str(broker_id), "--index", str(self.index),
                    "--session-ttl", str(session_ttl),
                    "--ranking", Ranking.FAIR.value, "--rebalance-every", "3600",
                ],
                stdout=subprocess.PIPE, stderr=log, start_new_session=True,
            )  # fmt: skip
        self.joined_rss = 0

    async def ready(self) -> None:
        assert self.process.stdout is not None
        line = await asyncio.to_thread(self.process.stdout.readline)
        if line.strip() != b"ready":
            raise RuntimeError(f"broker {self.broker_id} did not start: see {self.log}")
        self.joined_rss = self.memory()["VmRSS"]

    async def metrics(self) -> dict[str, float]:
        """The broker's metrics: by name with their labels as exposed, and by name alone
        (the values of its labels summed)."""
        address = registration(self.broker_id, self.index).prom_exporter
        text = await asyncio.to_thread(_fetch, f"http://{address}/metrics")
        found: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                labelled, _, value = line.rpartition(" ")
                found[labelled] = float(value)
                name = labelled.split("{", 1)[0]
                if name != labelled:
                    found[name] = found.get(name, 0.0) + float(value)
        return found

    def memory(self) -> dict[str, int]:
        """VmRSS and VmHWM of the process, in bytes."""
        return _memory(self.process.pid)

    def stop(self, timeout: float) -> bool:
        """SIGTERM, then SIGKILL after `timeout`; True if it stopped by itself."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            return False


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()  # type: ignore[no-any-return]


def _memory(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


async def share_caches(store: MetadataStore, broker_id: int) -> dict[str, float]:
    """What `broker_id`'s share takes in a LocalCache, measured here under tracemalloc (the
    broker's own cache lives in its process): a cache started at once on exactly its
    prefixes — the cluster-wide ones, its assignments, its topics' and their namespaces'
    policies — and closed (the keys and values, nothing of the watch): what the share
    needs; and a cache that follows the share as the broker does, started on the
    cluster-wide prefixes and given its topics in the leader's batches, with its watch open
    (the data and every structure of following)."""
    topics = await OwnershipManager(store).assignments(broker_id)
    namespaces = [layout.namespace_policy(ns) for ns in sorted({t.namespace for t in topics})]
    per_topic = [prefix for topic in topics for prefix in _topic_prefixes(topic)]
    found: dict[str, float] = {}
    prefixes = _cluster_wide(broker_id) + per_topic + namespaces
    async with LocalCache(store, prefixes, decoder=decode_value):
        pass  # once untraced: what the keys' first sight leaves behind (memos) is not counted
    gc.collect()
    tracemalloc.start()
    try:
        static = LocalCache(store, prefixes, decoder=decode_value)
        await static.start()
        await static.aclose()
        gc.collect()
        found["needed_keys"] = len(static)
        found["needed_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
    finally:
        tracemalloc.stop()  # a new count: what the first cache frees is not taken off it
    del static
    gc.collect()
    tracemalloc.start()
    try:
        following = LocalCache(store, _cluster_wide(broker_id), decoder=decode_value)
        await following.start()
        batch = LoadManagerConfig().batch_size
        for start in range(0, len(topics), batch):
            chosen = topics[start : start + batch]
            await following.follow(
                [prefix for topic in chosen for prefix in _topic_prefixes(topic)] + namespaces
            )
        await following.wait_for(await store.revision())
        gc.collect()
        found["following_keys"] = len(following)
        found["following_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
    finally:
        tracemalloc.stop()
    await following.aclose()
    return found


async def apply_rate(
    store: MetadataStore, brokers: list[Broker], topics: list[TopicName], writes: int
) -> dict[str, float]:
    """A burst of `writes` changes to the topics' keys (storage object descriptors, as a
    topic's offload writes them: a key the brokers follow and none acts on), 100 a
    transaction, 8 transactions at once; then the policy of a namespace every broker follows,
    so that its cache's applied revision passes it. The store's write rate, and how long
    until every broker's cache has applied the burst: on etcd each broker receives every
    change of the namespaces whose parent it watches, and keeps its own."""
    descriptor = encode(
        ObjectDescriptor(
            completed=True, created_at=1, end_offset=99, etag=None, object_id="o", size=1,
            start_offset=0,
        )
    )  # fmt: skip
    chosen = [topics[(i * 7919) % len(topics)] for i in range(writes)]
    gate = asyncio.Semaphore(8)

    async def put(batch: list[TopicName], offset: int) -> None:
        ops = [Put(layout.storage_object(t, offset + i), descriptor) for i, t in enumerate(batch)]
        async with gate:
            await store.txn([], ops, [])

    policy = layout.namespace_policy(topics[0].namespace)
    held = await store.get(policy)
    assert held is not None, policy
    started = time.perf_counter()
    await asyncio.gather(*(put(chosen[i : i + 100], i) for i in range(0, len(chosen), 100)))
    written = time.perf_counter() - started
    last = await store.put(policy, held.value)

    async def applied() -> bool:
        scraped = await asyncio.gather(*(broker.metrics() for broker in brokers))
        return all(m["metaplane_cache_applied_revision"] >= last for m in scraped)

    await until(applied, 600, every=0.2)
    caught_up = time.perf_counter() - started
    return {
        "apply_writes": writes,
        "apply_store_writes_per_s": writes / written,
        "apply_all_caught_up_s": caught_up,
        "apply_lag_after_last_write_s": caught_up - written,
        "apply_events_per_s_per_broker": writes / caught_up,
    }


async def run_processes(
    args: argparse.Namespace,
    url: str,
    store: MetadataStore,
    member: EtcdMember | None,
    result: dict[str, Any],
) -> None:
    """The brokers as processes; every figure from their metrics, /proc and the store."""
    folder = Path(tempfile.mkdtemp(prefix="scale-sim-brokers-"))
    result.update(brokers_as="processes", broker_niceness=args.nice, logs=str(folder))
    brokers = [
        Broker(url, broker, folder, args.session_ttl, args.nice, args.index_base)
        for broker in range(1, args.brokers + 1)
    ]
    try:
        await asyncio.gather(*(broker.ready() for broker in brokers))
        started = time.perf_counter()
        topics = topic_names(args.topics)
        creating = asyncio.ensure_future(create_topics(store, topics, args.create_in_flight))

        async def assigned() -> bool:
            if not creating.done():
                return False
            result["create_s"] = creating.result()
            return not await store.list(layout.unassigned_prefix(), keys_only=True, limit=1)

        await until(
            assigned,
            args.timeout,
            every=1.0,
            what="creating and assigning",
            progress=lambda: "created" if creating.done() else "creating",
        )
        result["assigned_s"] = time.perf_counter() - started
        scraped: list[dict[str, float]] = []

        def owned() -> int:
            return int(sum(m["metaplane_broker_topics_owned"] for m in scraped))

        async def loaded() -> bool:
            scraped[:] = await asyncio.gather(*(broker.metrics() for broker in brokers))
            return owned() == len(topics)

        await until(
            loaded,
            args.timeout,
            every=2.0,
            what="loading",
            progress=lambda: f"{owned():,} of {len(topics):,} topics loaded and followed",
        )
        result["loaded_and_followed_s"] = time.perf_counter() - started
        leader = next(b for b, m in zip(brokers, scraped, strict=True) if m["metaplane_leader"])
        before = (await leader.metrics())["metaplane_load_manager_cycles_total"]
        timed = time.perf_counter()
        await asyncio.sleep(5)  # a few idle cycles of the leader at this size
        cycles = (await leader.metrics())["metaplane_load_manager_cycles_total"] - before
        result["leader_cycle_s"] = (time.perf_counter() - timed) / max(cycles, 1)
        scraped[:] = await asyncio.gather(*(broker.metrics() for broker in brokers))
        result["owned_per_broker"] = sorted(
            int(m["metaplane_broker_topics_owned"]) for m in scraped
        )
        result["cache_keys_per_broker"] = statistics.median(
            m["metaplane_cache_keys"] for m in scraped
        )
        result["cache_prefixes_per_broker"] = statistics.median(
            m["metaplane_cache_prefixes"] for m in scraped
        )
        for state in ("suspended", "lost"):
            result[f"sessions_{state}"] = sum(
                m[f'metaplane_session_transitions_total{{state="{state}"}}'] for m in scraped
            )
        result["step_failures"] = sum(m["metaplane_broker_step_failures_total"] for m in scraped)
        followers = [b for b in brokers if b is not leader]
        grown = [b.memory()["VmRSS"] - b.joined_rss for b in followers]
        result["broker_rss_mb"] = statistics.median(b.memory()["VmRSS"] for b in followers) / 2**20
        result["broker_rss_grown_mb"] = statistics.median(grown) / 2**20
        result["broker_peak_rss_mb"] = max(b.memory()["VmHWM"] for b in followers) / 2**20
        result["leader_peak_rss_mb"] = leader.memory()["VmHWM"] / 2**20
        one = followers[0]
        mine = next(m for b, m in zip(brokers, scraped, strict=True) if b is one)
        share = await share_caches(store, one.broker_id)
        result["one_broker_cache_keys"] = int(mine["metaplane_cache_keys"])
        result["one_broker_needed_keys"] = int(share["needed_keys"])
        result["one_broker_following_keys"] = int(share["following_keys"])
        result["one_broker_needed_mb"] = share["needed_mb"]
        result["one_broker_following_mb"] = share["following_mb"]
        result["following_over_needed"] = share["following_mb"] / max(share["needed_mb"], 1e-9)
        result["one_broker_rss_grown_mb"] = (one.memory()["VmRSS"] - one.joined_rss) / 2**20
        if args.apply_writes:
            try:
                result.update(await apply_rate(store, brokers, topics, args.apply_writes))
            except (MetadataError, TimeoutError, OSError) as error:  # the rest still reported
                result["apply_error"] = repr(error)
        etcd_memory(member, result)
        report(args, result)  # before the stop, which is not what is measured
    finally:
        # All at once, as in one process: each broker's hand-over of its topics to the
        # others, one after the other, would take minutes.
        clean = await asyncio.gather(
            *(asyncio.to_thread(broker.stop, args.stop_timeout) for broker in brokers)
        )
        log.warning(
            "%d of %d brokers stopped within %g s", sum(clean), len(brokers), args.stop_timeout
        )


def etcd_memory(member: EtcdMember | None, result: dict[str, Any]) -> None:
    if member is not None and member.process is not None:
        result["etcd_peak_rss_mb"] = _memory(member.process.pid)["VmHWM"] / 2**20


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
    result: dict[str, Any] = {
        "topics": args.topics,
        "session_ttl": args.session_ttl,
        "brokers": args.brokers,
        "store": args.store,
        "create_in_flight": args.create_in_flight,
    }
    try:
        if args.processes:
            await run_processes(args, url, store, member, result)
        else:
            await run_tasks(args, store, member, result)
    finally:
        await store.aclose()
        if member is not None:
            member.kill()
    return result


async def run_tasks(
    args: argparse.Namespace,
    store: MetadataStore,
    member: EtcdMember | None,
    result: dict[str, Any],
) -> None:
    """The brokers as tasks of this process."""
    topics = topic_names(args.topics)
    result["brokers_as"] = "tasks"
    config = LoadManagerConfig(ranking=Ranking.FAIR, idle_every=1.0, rebalance_every=3600)
    nodes = [
        Node(store, NodeSettings(broker, broker, session_ttl=args.session_ttl, load_manager=config))
        for broker in range(1, args.brokers + 1)
    ]
    for node in nodes:
        await node.start()
    started = time.perf_counter()
    result["create_s"] = await create_topics(store, topics, args.create_in_flight)
    ownership = OwnershipManager(store)

    async def assigned() -> bool:
        return not await store.list(layout.unassigned_prefix(), keys_only=True, limit=1)

    await until(assigned, args.timeout, what="assigning")
    result["assigned_s"] = time.perf_counter() - started

    def owned() -> int:
        return sum(len(node.broker.owned) for node in nodes)

    async def loaded() -> bool:
        return owned() == len(topics)

    await until(
        loaded,
        args.timeout,
        what="loading",
        progress=lambda: f"{owned():,} of {len(topics):,} topics loaded and followed",
    )
    result["loaded_and_followed_s"] = time.perf_counter() - started
    leader = next(node for node in nodes if node.election.is_leader)
    cycles_before, timed = leader.load_manager.cycles, time.perf_counter()
    await asyncio.sleep(5)  # a few idle cycles of the leader at this size
    cycles = max(leader.load_manager.cycles - cycles_before, 1)
    result["leader_cycle_s"] = (time.perf_counter() - timed) / cycles
    result["owned_per_broker"] = sorted(len(node.broker.owned) for node in nodes)
    result["cache_keys_per_broker"] = statistics.median(len(node.broker.cache) for node in nodes)
    follower = next(node for node in nodes if not node.election.is_leader)
    held = len(follower.broker.cache)
    measured = cache_bytes(follower)
    result["cache_bytes_one_broker"] = measured
    result["cache_bytes_per_key"] = measured / max(held, 1)
    result["assignments_of_one_broker"] = len(
        await ownership.assignments(follower.settings.broker_id)
    )
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    etcd_memory(member, result)
    report(args, result)
    # All at once: stopped one after the other, each broker's hand-over of thousands
    # of topics to the others outlasts its deadline, and the run takes minutes more.
    await asyncio.gather(*(node.stop() for node in nodes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--processes", action="store_true", help="each broker a process of its own")
    parser.add_argument("--session-ttl", type=int, default=10)
    parser.add_argument(
        "--index-base",
        type=int,
        default=300,
        help="broker N's ports come from index base + N (metrics at 9040 + index): away from "
        "those of a `metaplane standalone`, or of another run, on the same machine",
    )
    parser.add_argument(
        "--apply-writes",
        type=int,
        default=50_000,
        help="with --processes: changes written at the end, to time the brokers' watches",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=10,
        help="the broker processes' niceness: on one machine the store gets the CPU first, "
        "as on a cluster where it has machines of its own",
    )
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=60,
        help="seconds a broker process has to hand over and stop before it is killed",
    )
    parser.add_argument(
        "--create-in-flight",
        type=int,
        default=64,
        help="creation transactions sent at once (each 32 topics)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    log.setLevel(logging.INFO)  # this run's progress
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
