"""Chaos for the cluster, in the manner of etcd's robustness tests: broker processes serving
simulated traffic while a driver creates and deletes topics and subscriptions, moves topics
and drains brokers, and a nemesis kills (SIGKILL) and pauses (SIGSTOP past the session TTL)
brokers, injects single transient errors and latency into the running brokers' stores (a
control file their `FaultyStore` reads), and — on etcd — pauses store members. Every broker
keeps a journal of what it did (each fenced commit with its revision), the nemesis and the
driver keep theirs, and a checker replays them with the store's own history afterwards:

- at quiescence every topic is on exactly one live broker or has one unassigned marker;
- no fenced write commits from a broker that was not the topic's owner at that revision (or,
  for a hand-over, the broker the unassigned marker named);
- no acknowledged cursor is lost: what a broker acknowledged before it handed a topic over
  is at most the cursor it wrote; a topic unloaded without a seal drops its acks only where
  the store's history shows that no seal could come (deleted, or taken from a broker the
  leader found gone);
- no offset is published twice: a new owner starts after every offset stored or
  acknowledged before it loaded the topic, and storage objects never overlap;
- no cursor exists without its subscription, at any revision;
- no broker process exits on its own, whatever the faults (a store away included).

    python -m metaplane.testing.chaos --backend sqlite --seconds 600
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import random
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaplane import layout
from metaplane.cluster import LocalCluster, move_topic
from metaplane.cluster._journal import read_journal
from metaplane.cluster._moves import BROKER_LOST
from metaplane.layout import KeyKind, TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerState,
    ClusterManager,
    Delivery,
    NamespaceManager,
    ObjectDescriptor,
    OwnershipManager,
    SubscriptionManager,
    SubscriptionMetadata,
    SubscriptionType,
    TopicManager,
    UnassignedMarker,
    decode,
    decode_value,
)
from metaplane.store import ANY, EventType, MetadataError, MetadataStore, connect_store
from metaplane.testing.etcd import EtcdCluster
from metaplane.testing.faults import write_control

log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
SESSION_TTL = 3
NAMESPACE = "chaos"
SUBSCRIPTIONS = ("audit", "billing")


@dataclass
class Settings:
    backend: str = "sqlite"
    seconds: float = 60.0
    seed: int = 0
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="chaos-")))
    initial_topics: int = 12
    rate: float = 20.0
    outage: str | None = None
    """Instead of random faults, one outage of the store in the middle of the run:
    "hang" (every etcd member paused; sqlite: another process holds the write lock) or
    "down" (etcd: every member stopped, then started again)."""
    outage_seconds: float = 30.0


@dataclass
class Report:
    """What a chaos run did and what the checker found."""

    operations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    checked: Counter[str] = field(default_factory=Counter)
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def violation(self, invariant: str, what: str) -> None:
        self.violations[invariant].append(what)

    def table(self) -> str:
        lines = ["operations:"]
        lines += [f"  {name:<28} {count:>8}" for name, count in sorted(self.operations.items())]
        lines.append("faults injected:")
        lines += [f"  {name:<28} {count:>8}" for name, count in sorted(self.faults.items())]
        lines.append("checked:")
        lines += [f"  {name:<28} {count:>8}" for name, count in sorted(self.checked.items())]
        lines.append("invariant violations:")
        for invariant in INVARIANTS:
            found = self.violations.get(invariant, [])
            lines.append(f"  {invariant:<28} {len(found):>8}")
            lines += [f"      {text}" for text in found[:10]]
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "operations": dict(self.operations),
            "faults": dict(self.faults),
            "checked": dict(self.checked),
            "violations": {name: self.violations.get(name, []) for name in INVARIANTS},
        }


INVARIANTS = (
    "no-broker-exits",
    "one-owner-at-quiescence",
    "fenced-writes-by-owners",
    "no-acked-cursor-lost",
    "no-offset-twice",
    "no-cursor-without-subscription",
)


# -- running -------------------------------------------------------------------------------


class Chaos:
    """One chaos run: the store, the brokers, the driver and the nemesis."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.random = random.Random(settings.seed)
        self.folder = settings.folder
        self.journals = self.folder / "journals"
        self.controls = self.folder / "faults"
        self.report = Report()
        self.etcd: EtcdCluster | None = None
        self.url = ""
        self.topics: set[TopicName] = set()
        self.deleted: set[TopicName] = set()
        self.serial = 0
        self._events = (self.folder / "nemesis.jsonl").open("a", buffering=1)

    def record(self, event: str, **fields: object) -> None:
        line = {"t": time.time(), "event": event, **fields}
        self._events.write(json.dumps(line, default=str) + "\n")

    async def run(self) -> Report:
        self.journals.mkdir(parents=True, exist_ok=True)
        self.controls.mkdir(parents=True, exist_ok=True)
        with self._store_servers():
            store = await connect_store(self.url)
            try:
                cluster = LocalCluster(
                    self.url, self.folder, workload=True, node_args=self._node_args
                )
                try:
                    await self._play(store, cluster)
                finally:
                    await self._quiesce_servers(cluster)
                    await cluster.stop()
                await check(store, self.journals, self.report)
            finally:
                await store.aclose()
        self._events.close()
        return self.report

    @contextlib.contextmanager
    def _store_servers(self) -> Iterator[None]:
        if self.settings.backend == "sqlite":
            # History kept for the checker's replay of every revision.
            self.url = f"sqlite://{self.folder / 'store.db'}?history=100000000&history_age=1e9"
            yield
            return
        with EtcdCluster(self.folder / "etcd", 3) as etcd:
            self.etcd = etcd
            self.url = etcd.url
            yield

    def _node_args(self, broker_id: int) -> list[str]:
        return [
            "--session-ttl",
            str(SESSION_TTL),
            "--rate",
            str(self.settings.rate),
            "--journal",
            str(self.journals / f"broker-{broker_id}.jsonl"),
            "--faults",
            str(self.controls / f"broker-{broker_id}.json"),
        ]

    async def _play(self, store: MetadataStore, cluster: LocalCluster) -> None:
        await NamespaceManager(store).create(NAMESPACE)
        await cluster.start(len(BROKERS))
        for _ in range(self.settings.initial_topics):
            await self._create_topic(store)
        deadline = time.monotonic() + self.settings.seconds
        driver = asyncio.create_task(self._drive(store, deadline))
        nemesis = asyncio.create_task(self._nemesis(cluster, deadline))
        await asyncio.gather(driver, nemesis)
        for broker, node in sorted(cluster.nodes.items()):
            self.report.checked["brokers-at-the-end"] += 1
            if not node.running:  # the nemesis restarts what it kills: this one gave up
                self.report.violation(
                    "no-broker-exits",
                    f"broker {broker} exited ({node.process.returncode}); see {node.log_path}",
                )
        await self._quiesce_servers(cluster)
        await self._until_quiet(store, cluster)
        await one_owner_each(store, await _topics(store), self.report)

    # -- the driver ----------------------------------------------------------------------

    async def _drive(self, store: MetadataStore, deadline: float) -> None:
        actions = (
            (self._create_topic, 3),
            (self._delete_topic, 1),
            (self._delete_subscription, 1),
            (self._move_topic, 4),
            (self._drain, 1),
        )
        functions = [function for function, _ in actions]
        weights = [weight for _, weight in actions]
        while time.monotonic() < deadline:
            action = self.random.choices(functions, weights)[0]
            try:
                await action(store)
            except MetadataError as error:  # refused (raced the cluster), or the store away
                self.report.operations[f"refused:{type(error).__name__}"] += 1
            await asyncio.sleep(self.random.uniform(0.2, 0.8))

    async def _create_topic(self, store: MetadataStore) -> None:
        self.serial += 1
        topic = TopicName(NAMESPACE, f"t{self.serial:04d}")
        await TopicManager(store).create(topic, delivery=Delivery.RELIABLE)
        for name in SUBSCRIPTIONS:
            await SubscriptionManager(store).create(topic, _subscription(name))
        self.topics.add(topic)
        self.report.operations["create-topic"] += 1
        self.record("create-topic", topic=topic.path)

    async def _delete_topic(self, store: MetadataStore) -> None:
        if len(self.topics) <= 4:
            return
        topic = self.random.choice(sorted(self.topics))
        await TopicManager(store).delete(topic)
        self.topics.discard(topic)
        self.deleted.add(topic)
        self.report.operations["delete-topic"] += 1
        self.record("delete-topic", topic=topic.path)

    async def _delete_subscription(self, store: MetadataStore) -> None:
        if not self.topics:
            return
        topic = self.random.choice(sorted(self.topics))
        subscriptions = SubscriptionManager(store)
        name = self.random.choice(SUBSCRIPTIONS)
        current = await subscriptions.read(topic, name)
        await subscriptions.delete(topic, name, current.version)
        await subscriptions.create(topic, _subscription(name))  # a new one, from scratch
        self.report.operations["recreate-subscription"] += 1
        self.record("recreate-subscription", topic=topic.path, subscription=name)

    async def _move_topic(self, store: MetadataStore) -> None:
        if not self.topics:
            return
        topic = self.random.choice(sorted(self.topics))
        await move_topic(store, topic)
        self.report.operations["move-topic"] += 1
        self.record("move-topic", topic=topic.path)

    async def _drain(self, store: MetadataStore) -> None:
        broker = self.random.choice(BROKERS)
        cluster = ClusterManager(store)
        await cluster.set_state(broker, BrokerState(mode=BrokerMode.DRAINING, reason="chaos"), ANY)
        self.report.operations["drain"] += 1
        self.record("drain", broker=broker)
        await asyncio.sleep(self.random.uniform(1.0, 3.0))
        await cluster.set_state(broker, BrokerState(mode=BrokerMode.ACTIVE, reason="chaos"), ANY)
        self.record("undrain", broker=broker)

    # -- the nemesis -----------------------------------------------------------------------

    async def _nemesis(self, cluster: LocalCluster, deadline: float) -> None:
        if self.settings.outage is not None:
            await asyncio.sleep(
                max(deadline - time.monotonic() - self.settings.outage_seconds, 0) / 2
            )
            await self._outage(self.settings.outage, self.settings.outage_seconds)
            return
        faults = [self._kill, self._pause, self._transient_error, self._latency]
        if self.etcd is not None:
            faults.append(self._pause_member)
        while time.monotonic() < deadline:
            await asyncio.sleep(self.random.uniform(1.0, 4.0))
            fault = self.random.choice(faults)
            await fault(cluster)

    async def _kill(self, cluster: LocalCluster) -> None:
        broker = self.random.choice(BROKERS)
        await cluster.kill(broker, signal.SIGKILL)
        self.report.faults["sigkill-broker"] += 1
        self.record("sigkill", broker=broker)
        await asyncio.sleep(self.random.uniform(0.5, 2.0))
        await cluster.start_node(broker, broker - 1)
        self.record("restarted", broker=broker)

    async def _pause(self, cluster: LocalCluster) -> None:
        broker = self.random.choice(BROKERS)
        if broker not in cluster.running:
            return
        await cluster.kill(broker, signal.SIGSTOP)
        self.report.faults["sigstop-broker-past-ttl"] += 1
        self.record("sigstop", broker=broker)
        await asyncio.sleep(SESSION_TTL + self.random.uniform(1.0, 3.0))
        await cluster.kill(broker, signal.SIGCONT)
        self.record("sigcont", broker=broker)

    async def _transient_error(self, cluster: LocalCluster) -> None:
        broker = self.random.choice(BROKERS)
        operation = self.random.choice(("txn", "txn", "get", "list", "refresh", "watch"))
        after = operation == "txn" and self.random.random() < 0.5
        self.serial += 1
        spec = {
            "id": f"e{self.serial}",
            "operation": operation,
            "kind": "error",
            "times": 1,
            "after": after,
        }
        write_control(self.controls / f"broker-{broker}.json", [spec])
        self.report.faults[f"error-{operation}{'-after' if after else ''}"] += 1
        self.record("transient-error", broker=broker, spec=spec)

    async def _latency(self, cluster: LocalCluster) -> None:
        broker = self.random.choice(BROKERS)
        self.serial += 1
        spec = {
            "id": f"l{self.serial}",
            "operation": "*",
            "kind": "latency",
            "seconds": 0.3,
            "times": None,
        }
        path = self.controls / f"broker-{broker}.json"
        write_control(path, [spec])
        self.report.faults["latency-0.3s"] += 1
        self.record("latency", broker=broker, spec=spec)
        await asyncio.sleep(self.random.uniform(2.0, 5.0))
        write_control(path, [])
        self.record("latency-end", broker=broker)

    async def _pause_member(self, cluster: LocalCluster) -> None:
        assert self.etcd is not None
        member = self.random.choice(self.etcd.members)
        self.etcd.pause(member)
        self.report.faults["sigstop-etcd-member"] += 1
        self.record("pause-member", member=member.name)
        await asyncio.sleep(self.random.uniform(2.0, 5.0))
        self.etcd.resume(member)
        self.record("resume-member", member=member.name)

    async def _outage(self, kind: str, seconds: float) -> None:
        """The whole store away for `seconds`: hung, or down."""
        self.report.faults[f"store-{kind}-{seconds:g}s"] += 1
        self.record("outage", kind=kind, seconds=seconds)
        if self.etcd is None:
            if kind != "hang":
                raise ValueError("a sqlite store can only hang (its lock held elsewhere)")
            await hold_write_lock(self.folder / "store.db", seconds)
        elif kind == "hang":
            for member in self.etcd.members:
                self.etcd.pause(member)
            await asyncio.sleep(seconds)
            for member in self.etcd.members:
                self.etcd.resume(member)
        else:
            for member in self.etcd.members:
                member.stop()
            await asyncio.sleep(seconds)
            for member in self.etcd.members:
                member.start()
            for member in self.etcd.members:
                await asyncio.to_thread(member.wait_ready)
        self.record("outage-end", kind=kind)

    # -- quiescence --------------------------------------------------------------------

    async def _quiesce_servers(self, cluster: LocalCluster) -> None:
        """Every fault lifted: brokers continued and restarted, members resumed."""
        if self.etcd is not None:
            for member in self.etcd.members:
                self.etcd.resume(member)
        for broker in BROKERS:
            write_control(self.controls / f"broker-{broker}.json", [])
            node = cluster.nodes.get(broker)
            if node is not None and node.running:
                with contextlib.suppress(ProcessLookupError):
                    node.process.send_signal(signal.SIGCONT)
            elif node is not None:
                await cluster.start_node(broker, broker - 1)

    async def _until_quiet(self, store: MetadataStore, cluster: LocalCluster) -> None:
        """Wait (up to a minute and a half) until every topic is assigned once to a live
        broker, and stays so for longer than a session's TTL.

        One look is not enough: a fault's effect can come after it is lifted. In one run on
        a 3-member etcd, every broker's registration was gone from the store 0.1 s after
        the cluster had looked quiet, as a member paused for 4.4 s was resumed; the brokers
        whose leases had expired re-established their sessions at once, but the check had
        already seen no live broker."""
        deadline = time.monotonic() + 90
        settled = SESSION_TTL + 1.0
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            try:
                quiet = not await one_owner_each(store, self.topics, Report())
            except MetadataError:
                quiet = False
            now = time.monotonic()
            if not quiet:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= settled:
                self.record("quiet")
                return
            await asyncio.sleep(0.5)
        log.warning("the cluster did not settle within a minute and a half")


async def hold_write_lock(path: Path, seconds: float) -> None:
    """Another process holds the SQLite file's write lock for `seconds` (as a writer stuck on
    a full disk would): every write of every other process waits, then fails."""
    script = (
        "import sqlite3, sys, time\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
        "conn.execute('ROLLBACK')\n"
    )
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(path), str(seconds), stdout=asyncio.subprocess.PIPE
    )
    assert holder.stdout is not None
    if await holder.stdout.readline() != b"locked\n":
        raise RuntimeError("the lock holder could not take the write lock")
    await holder.wait()


def _subscription(name: str) -> SubscriptionMetadata:
    return SubscriptionMetadata(
        consumer_id=1,
        consumer_name=f"{name}-consumer",
        subscription_name=name,
        subscription_type=SubscriptionType.SHARED,
    )


# -- checking ------------------------------------------------------------------------------


async def one_owner_each(store: MetadataStore, topics: set[TopicName], report: Report) -> int:
    """Count (and report) the topics not on exactly one live broker or one marker."""
    registered = set(await ClusterManager(store).brokers())
    assignments = (await store.list(layout.brokers_prefix(), keys_only=True)).keys()
    owners: defaultdict[TopicName, list[int]] = defaultdict(list)
    for key in assignments:
        parsed = layout.parse(key)
        if parsed.kind is KeyKind.ASSIGNMENT and parsed.topic_name is not None:
            assert parsed.broker_id is not None
            owners[parsed.topic_name].append(parsed.broker_id)
    waiting = set(await OwnershipManager(store).unassigned())
    wrong = 0
    for topic in sorted(topics):
        places = owners.get(topic, [])
        live = [broker for broker in places if broker in registered]
        marked = topic in waiting
        if not ((len(places) == 1 and len(live) == 1 and not marked) or (not places and marked)):
            wrong += 1
            report.violation(
                "one-owner-at-quiescence",
                f"{topic.path}: assigned to {places} (live {sorted(registered)}), marker {marked}",
            )
        report.checked["topics-at-quiescence"] += 1
    return wrong


@dataclass
class _Interval:
    start: int
    end: int | None = None  # the revision that ended it (deleted), None: still there
    value: object = None  # the last value written while it lived
    first: object = None  # the value it was created with


class History:
    """The store's history of some keys, replayed from revision 1: for each key, the
    intervals of revisions during which it existed."""

    def __init__(self) -> None:
        self.intervals: defaultdict[str, list[_Interval]] = defaultdict(list)

    def put(self, key: str, revision: int, value: object) -> None:
        spans = self.intervals[key]
        if spans and spans[-1].end is None:
            spans[-1].value = value  # a write to an existing key: it lives on
            return
        spans.append(_Interval(revision, None, value, value))

    def delete(self, key: str, revision: int) -> None:
        spans = self.intervals.get(key)
        if spans and spans[-1].end is None:
            spans[-1].end = revision

    def at(self, key: str, revision: int) -> _Interval | None:
        """The interval of `key` that holds at `revision` (after its transaction)."""
        for span in self.intervals.get(key, []):
            if span.start <= revision and (span.end is None or revision < span.end):
                return span
        return None

    def existed_before(self, key: str, revision: int) -> bool:
        """True if `key` existed in the state just before `revision`'s transaction."""
        for span in self.intervals.get(key, []):
            if span.start < revision and (span.end is None or revision <= span.end):
                return True
        return False


async def replay(store: MetadataStore, report: Report) -> tuple[History, int]:
    """The history of every key from revision 1 to now; cursor writes are checked against
    their subscriptions on the way (in the state just before each transaction)."""
    history = History()
    now = await store.revision()
    if now <= 1:
        return history, now
    async with store.watch("/", start_revision=1) as watch:
        async for batch in watch:
            for event in batch.events:
                parsed = layout.parse(event.key)
                if event.type is EventType.DELETE:
                    history.delete(event.key, batch.revision)
                    continue
                value: object = None
                if parsed.kind in (KeyKind.UNASSIGNED,):
                    value = decode_value(event.key, event.entry.value)
                history.put(event.key, batch.revision, value)
                if parsed.kind is KeyKind.CURSOR:
                    _check_cursor_write(history, event.key, batch, report)
            if batch.revision >= now:
                break
    return history, now


def _check_cursor_write(history: History, key: str, batch: Any, report: Report) -> None:
    subscription = key.rsplit("/", 1)[0]
    created_with_it = any(
        event.key == subscription and event.type is EventType.PUT for event in batch.events
    )
    report.checked["cursor-writes"] += 1
    if not (history.existed_before(subscription, batch.revision) or created_with_it):
        report.violation(
            "no-cursor-without-subscription",
            f"{key} written at revision {batch.revision} without its subscription",
        )


async def _topics(store: MetadataStore) -> set[TopicName]:
    listed = await store.list(layout.namespace_topics_prefix(NAMESPACE), keys_only=True)
    return {topic for entry in listed if (topic := layout.parse(entry.key).topic_name) is not None}


async def check(store: MetadataStore, journals: Path, report: Report) -> Report:
    """Replay the journals against the store's history: every invariant of the module but
    the one at quiescence, which is checked while the cluster still runs."""
    history, _ = await replay(store, report)
    lines = _journal_lines(journals)
    _check_fenced_writes(lines, history, report)
    _check_cursors(lines, history, report)
    _check_offsets(lines, report)
    await _check_objects(store, report)
    await _check_orphan_cursors(store, report)
    return report


def _journal_lines(journals: Path) -> list[dict[str, Any]]:
    """Every journal's lines, in time order (one process's in the order it wrote them)."""
    lines = [line for path in sorted(journals.glob("*.jsonl")) for line in read_journal(path)]
    lines.sort(key=lambda line: float(line["t"]))  # type: ignore[arg-type]
    return lines


def _owner_at(history: History, broker: int, topic: TopicName, revision: int) -> bool:
    return history.at(layout.assignment(broker, topic), revision) is not None


def _handing_over_at(history: History, broker: int, topic: TopicName, revision: int) -> bool:
    span = history.at(layout.unassigned(topic), revision)
    return (
        span is not None
        and isinstance(span.value, UnassignedMarker)
        and span.value.from_broker == broker
    )


def _check_fenced_writes(lines: list[dict[str, Any]], history: History, report: Report) -> None:
    for line in lines:
        event = line["event"]
        if event not in ("cursors", "sealed", "upload", "seal-cleared", "cursor-reset"):
            continue
        revision = int(line.get("revision") or 0)
        if revision == 0:
            continue  # nothing written (the seal was gone already)
        broker, topic = int(line["broker"]), TopicName.parse(str(line["topic"]))
        report.checked["fenced-commits"] += 1
        if _owner_at(history, broker, topic, revision):
            continue
        if event in ("sealed", "upload") and _handing_over_at(history, broker, topic, revision):
            continue
        report.violation(
            "fenced-writes-by-owners",
            f"broker {broker} wrote {event} of {topic.path} at revision {revision} "
            "without owning it",
        )


def _check_cursors(lines: list[dict[str, Any]], history: History, report: Report) -> None:
    """What a broker acknowledged while serving a topic is at most the cursor its hand-over
    (or a flush before it) wrote, unless the subscription was deleted meanwhile. Acks a
    broker process had not written yet when it was killed die with it (docs/cluster.md:
    those messages are delivered again): a new process of that broker (its first
    registration) starts with none — it may well seal a topic its predecessor served, with
    the cursors the store has.

    A broker that unloads a topic without a seal (an abandon) drops its pending acks. That
    is no loss where the store shows why no seal could be: the leader took the topic from a
    broker it found gone (`_taken_without_seal`), as it takes a killed broker's, or the topic
    was deleted. Any other abandon that drops an ack is a loss; and a seal, whatever befell
    the broker's session, carries every ack."""
    acked: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    written: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    tokens: dict[tuple[int, str], int] = {}
    for line in lines:
        event = line["event"]
        if event == "registered" and int(line.get("generation") or 0) == 1:
            broker = int(line["broker"])
            for place in [p for p in (*acked, *written) if p[0] == broker]:
                acked.pop(place, None)
                written.pop(place, None)
        elif event == "load":
            place = (int(line["broker"]), str(line["topic"]))
            acked.pop(place, None)
            written.pop(place, None)
            tokens[place] = int(line["token"])
        elif event == "ack":
            place = (int(line["broker"]), str(line["topic"]))
            subscription = str(line["subscription"])
            acked[place][subscription] = max(
                acked[place].get(subscription, -1), int(line["offset"])
            )
            report.checked["acks"] += 1
        elif event in ("cursors", "sealed"):
            place = (int(line["broker"]), str(line["topic"]))
            for name, offset in dict(line.get("cursors") or {}).items():
                written[place][name] = max(written[place].get(name, -1), int(offset))
            if event == "sealed":
                _compare_cursors(place, acked.pop(place, {}), written.pop(place, {}), report)
        elif event == "abandon":
            place = (int(line["broker"]), str(line["topic"]))
            dropped, done = acked.pop(place, {}), written.pop(place, {})
            why = _taken_without_seal(history, place, tokens.get(place))
            if why is not None:
                report.checked[f"abandons: {why}"] += 1
                continue
            _compare_cursors(place, dropped, done, report, "abandoned it, having written")
        elif event == "cursor-dropped":
            place = (int(line["broker"]), str(line["topic"]))
            acked[place].pop(str(line["subscription"]), None)


def _taken_without_seal(history: History, place: tuple[int, str], token: int | None) -> str | None:
    """Why, by the store's history, the topic a broker loaded under the assignment created
    at `token` went on without its seal: the topic was deleted (at the assignment's end,
    or at the end of the marker that took it); the broker was not registered when its
    assignment ended or that marker was consumed (the leader waits for no seal then); or
    the marker says the broker was lost (`broker_lost`: the leader found its registration
    gone). None: no such reason — the broker was there to seal it."""
    broker, path = place
    topic = TopicName.parse(path)
    span = None if token is None else history.at(layout.assignment(broker, topic), token)
    if span is None or span.end is None:
        return None
    ended = span.end
    root, registration = layout.topic_root(topic), layout.broker_registration(broker)
    if history.at(root, ended) is None:
        return "the topic was deleted"
    if history.at(registration, ended) is None:
        return "taken while the broker was not registered"
    marker = history.at(layout.unassigned(topic), ended)
    if marker is None or marker.start != ended:
        return None
    if isinstance(marker.first, UnassignedMarker) and marker.first.reason == BROKER_LOST:
        return "the broker was lost"
    if marker.end is None:
        return None
    if history.at(root, marker.end) is None:
        return "the topic was deleted"
    if history.at(registration, marker.end) is None:
        return "taken while the broker was not registered"
    return None


def _compare_cursors(
    place: tuple[int, str],
    acked: dict[str, int],
    written: dict[str, int],
    report: Report,
    outcome: str = "handed over",
) -> None:
    broker, topic = place
    report.checked["hand-overs-with-cursors"] += 1
    for name, offset in acked.items():
        if written.get(name, -1) < offset:
            report.violation(
                "no-acked-cursor-lost",
                f"broker {broker} acked {topic}/{name} at {offset} but {outcome} "
                f"{written.get(name)}",
            )


def _check_offsets(lines: list[dict[str, Any]], report: Report) -> None:
    """A load starts after every offset the store showed as published (stored, sealed or
    acknowledged in a committed cursor) at the revision it read them at. Offsets a broker
    published and never got into the store — a crashed or paused owner's — are what no
    owner can see (docs/cluster.md)."""
    commits: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in lines:
        event, topic = line["event"], str(line.get("topic", ""))
        revision = int(line.get("revision") or 0)
        if event == "upload":
            commits[topic].append((revision, int(line["end"])))
        elif event in ("cursors", "sealed", "cursor-reset"):
            offsets = [int(offset) for offset in dict(line.get("cursors") or {}).values()]
            if event == "sealed":
                offsets.append(int(line["last"]))
            commits[topic].extend((revision, offset) for offset in offsets)
    for line in lines:
        if line["event"] != "load":
            continue
        report.checked["loads"] += 1
        topic, start, read = str(line["topic"]), int(line["start"]), int(line["read"])
        seen = max((offset for at, offset in commits[topic] if at <= read), default=-1)
        if start <= seen:
            report.violation(
                "no-offset-twice",
                f"broker {line['broker']} loaded {topic} at {start}, but offset {seen} was "
                f"stored or acknowledged by revision {read}",
            )


async def _check_objects(store: MetadataStore, report: Report) -> None:
    """The storage objects of each topic never overlap."""
    listing = await store.list(layout.storage_prefix(), keys_only=False)
    by_topic: defaultdict[TopicName, list[ObjectDescriptor]] = defaultdict(list)
    for entry in listing:
        parsed = layout.parse(entry.key)
        if parsed.kind is KeyKind.STORAGE_OBJECT and parsed.topic_name is not None:
            by_topic[parsed.topic_name].append(decode(ObjectDescriptor, entry.value))
    for topic, objects in by_topic.items():
        objects.sort(key=lambda descriptor: descriptor.start_offset)
        for before, after in itertools.pairwise(objects):
            report.checked["storage-objects"] += 1
            if after.start_offset <= before.end_offset:
                report.violation(
                    "no-offset-twice",
                    f"{topic.path}: objects {before.start_offset}..{before.end_offset} and "
                    f"{after.start_offset}..{after.end_offset} overlap",
                )


async def _check_orphan_cursors(store: MetadataStore, report: Report) -> None:
    keys = set((await store.list(layout.topics_prefix(), keys_only=True)).keys())
    for key in keys:
        if layout.parse(key).kind is KeyKind.CURSOR and key.rsplit("/", 1)[0] not in keys:
            report.violation("no-cursor-without-subscription", f"{key} has no subscription")


# -- the command ---------------------------------------------------------------------------


async def run_chaos(settings: Settings) -> Report:
    return await Chaos(settings).run()


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="Chaos for a local metaplane cluster.")
    parser.add_argument("--backend", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--json", type=Path, help="write the report here too")
    parser.add_argument("--outage", choices=("hang", "down"), help="one store outage instead")
    parser.add_argument("--outage-seconds", type=float, default=30.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    settings = Settings(
        backend=args.backend,
        seconds=args.seconds,
        seed=args.seed,
        outage=args.outage,
        outage_seconds=args.outage_seconds,
    )
    if args.folder is not None:
        settings.folder = args.folder
    settings.folder.mkdir(parents=True, exist_ok=True)
    say(f"chaos on {args.backend} for {args.seconds:g} s (seed {args.seed}) in {settings.folder}")
    report = asyncio.run(run_chaos(settings))
    say(report.table())
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.as_json(), indent=2))
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
