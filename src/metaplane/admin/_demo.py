"""`metaplane demo`, the main job: a local cluster of broker processes on the embedded store and
a narrated scenario — topics created and spread, traffic, a broker killed and its topics
reassigned, a topic moved with its offsets continuing, a broker drained — then a snapshot of
the live cluster analysed with Spark (`metaplane analyze`: audit, backlog, storage, plans and
report.html). The demo uses a store of its own, a new one each run (never an existing one),
which stays on disk afterwards for `metaplane kv tree /` and `metaplane serve`; the admin
server shows the story live on the dashboard while it runs."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from metaplane import layout
from metaplane.admin._analyze import run_analysis, show_analysis
from metaplane.admin._brokers import brokers_of, brokers_table
from metaplane.admin._cluster_ops import brokers_document
from metaplane.admin._console import Output, console, data_home, fail, run
from metaplane.admin._progress import spinner, until
from metaplane.admin._runner import sqlite_path
from metaplane.admin._server import AdminServer, ServerSettings
from metaplane.admin._snapshot import guarded
from metaplane.admin._workload import SUBSCRIPTIONS, create_workload
from metaplane.cluster import LocalCluster, move_topic
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerState,
    ClusterManager,
    ObjectDescriptor,
    OwnershipManager,
    SealedState,
    decode,
)
from metaplane.store import ANY, EventType, MetadataStore, Watch, open_store

TIMEOUT = 60.0


class Scenario:
    """The demo's story, one step a method."""

    def __init__(self, store: MetadataStore, cluster: LocalCluster) -> None:
        self.store = store
        self.cluster = cluster
        self.ownership = OwnershipManager(store)
        self.topics: list[TopicName] = []

    async def owners(self) -> dict[TopicName, int]:
        found: dict[TopicName, int] = {}
        for broker in self.cluster.nodes:
            for topic in await self.ownership.assignments(broker):
                found[topic] = broker
        return found

    async def all_placed(self, brokers: set[int]) -> dict[TopicName, int] | None:
        owners = await self.owners()
        placed = set(owners) == set(self.topics) and set(owners.values()) <= brokers
        return owners if placed and not await self.ownership.unassigned() else None

    async def join(self, brokers: int) -> None:
        step(1, f"{brokers} brokers join the cluster and elect a leader")
        with spinner(f"starting {brokers} broker processes"):
            await self.cluster.start(brokers)
        await self.show_brokers()

    async def create(self) -> None:
        step(2, "namespaces, topics, subscriptions, producers and a schema")
        self.topics = await create_workload(self.store)
        table = Table("topic", "subscriptions", "schema")
        for topic in self.topics:
            schema = "orders-value (Avro)" if topic.namespace == "orders" else ""
            table.add_row(topic.path, ", ".join(SUBSCRIPTIONS), schema)
        console.print(table)
        await until(
            self.store,
            layout.cluster_prefix(),
            lambda: self.all_placed(set(self.cluster.running)),
            what="every topic assigned",
            timeout=TIMEOUT,
        )
        console.print("the leader spread the topics over the brokers:")
        await self.show_brokers()

    async def traffic(self) -> None:
        step(3, "traffic: offsets advance, objects reach storage, consumers acknowledge")
        with spinner("waiting for storage objects and cursors"):
            await until(
                self.store, "/", self.traffic_seen, what="traffic on every topic", timeout=TIMEOUT
            )
        table = Table("topic", "storage objects", "stored up to", "cursors")
        for topic in self.topics:
            objects = await self.objects(topic)
            cursors = await self.store.list(layout.subscriptions_prefix(topic))
            offsets = [
                f"{e.key.split('/')[-2]}={e.value.decode()}"
                for e in cursors
                if e.key.endswith("/cursor")
            ]
            table.add_row(
                topic.path, str(len(objects)), str(objects[-1].end_offset), " ".join(offsets)
            )
        console.print(table)

    async def traffic_seen(self) -> bool | None:
        for topic in self.topics:
            if not await self.objects(topic):
                return None
            cursors = await self.store.list(layout.subscriptions_prefix(topic), keys_only=True)
            if sum(e.key.endswith("/cursor") for e in cursors) < len(SUBSCRIPTIONS):
                return None
        return True

    async def objects(self, topic: TopicName) -> list[ObjectDescriptor]:
        listing = await self.store.list(
            layout.storage_objects_prefix(topic), end_before=layout.storage_cur(topic)
        )
        return [decode(ObjectDescriptor, entry.value) for entry in listing]

    async def kill(self) -> None:
        leader = (await ClusterManager(self.store).leadership()).broker_id
        step(4, f"SIGKILL broker {leader} — the leader — with its topics")
        owners = await self.owners()
        lost = sorted(t.path for t, b in owners.items() if b == leader)
        killed_at = await self.cluster.kill(leader, signal.SIGKILL)
        console.print(f"broker {leader} owned {len(lost)} topics: {', '.join(lost)}")
        survivors = set(self.cluster.running)
        after = await until(
            self.store,
            layout.cluster_prefix(),
            lambda: self.all_placed(survivors),
            what="the lost topics reassigned",
            timeout=TIMEOUT,
        )
        leadership = await ClusterManager(self.store).leadership()
        console.print(
            f"{time.monotonic() - killed_at:.1f} s later: broker {leadership.broker_id} leads "
            f"(epoch {leadership.epoch}); "
            + ", ".join(f"{path} → {after[TopicName.parse(path)]}" for path in lost)
        )

    async def move(self) -> None:
        owners = await self.owners()
        topic = self.topics[0]
        source = owners[topic]
        target = next(b for b in self.cluster.running if b != source)
        step(5, f"move {topic.path} from broker {source} to broker {target}")
        state = layout.storage_state(topic)
        start = await self.store.revision() + 1
        async with self.store.watch(
            layout.storage_topic_prefix(topic), start_revision=start
        ) as watch:
            await move_topic(self.store, topic, to_broker=target)
            sealed = await self.sealed(watch, state)
            console.print(
                f"broker {sealed.broker_id} sealed it at offset {sealed.last_committed_offset}"
            )
            resumed = await self.first_new_object(watch, topic, sealed.last_committed_offset)
        console.print(
            f"broker {target} resumed it: its first object starts at offset {resumed} "
            f"= {sealed.last_committed_offset} + 1 — no offset used twice, none skipped"
        )

    async def sealed(self, watch: Watch, key: str) -> SealedState:
        async with asyncio.timeout(TIMEOUT):
            async for batch in watch:
                for event in batch.events:
                    if event.key == key and event.type is EventType.PUT:
                        return decode(SealedState, event.entry.value)
        fail("the topic was not sealed")

    async def first_new_object(self, watch: Watch, topic: TopicName, sealed_at: int) -> int:
        async with asyncio.timeout(TIMEOUT):
            async for batch in watch:
                for event in batch.events:
                    offset = layout.parse(event.key).offset
                    if event.type is EventType.PUT and offset is not None and offset > sealed_at:
                        return offset
        fail("the moved topic published nothing")

    async def drain(self) -> None:
        broker = self.cluster.running[0]
        step(6, f"drain broker {broker}: its topics move away, then it is drained")
        cluster = ClusterManager(self.store)
        await cluster.set_state(broker, BrokerState(mode=BrokerMode.DRAINING, reason="demo"), ANY)

        async def drained() -> bool | None:
            state = await cluster.state(broker)
            return True if state.value.mode is BrokerMode.DRAINED else None

        await until(self.store, layout.cluster_prefix(), drained, what="drained", timeout=TIMEOUT)
        await self.show_brokers()

    async def snapshot(self, folder: Path) -> None:
        step(7, "snapshot the live cluster at one revision (metaplane snapshot export)")
        from metaplane.pipeline import export_snapshot

        shutil.rmtree(folder, ignore_errors=True)
        with spinner("reading every key"):
            taken = await export_snapshot(self.store, folder)
        console.print(f"{taken.keys:,} keys at revision {taken.revision} in {folder}")

    async def show_brokers(self) -> None:
        console.print(brokers_table(brokers_document(await brokers_of(self.store))))


def step(number: int, title: str) -> None:
    console.rule(f"[bold]{number}. {title}")


Brokers = Annotated[int, typer.Option("--brokers", "-n", min=3, max=16, help="Broker processes.")]


def own_store() -> tuple[str, Path]:
    """A new store and folder for this run of the demo, under the per-user data folder."""
    folder = data_home() / "demo" / time.strftime("%Y%m%d-%H%M%S")
    return f"sqlite://{folder / 'metaplane.db'}", folder


def fresh(url: str) -> None:
    """The demo's store must not exist yet: the demo never touches an existing one."""
    path = sqlite_path(url)
    if path is None:
        fail("the demo runs on a sqlite store of its own (sqlite:///new/file.db)")
    if path.exists():
        fail(f"{path} exists: the demo uses a new store of its own; name a file that does not")
    path.parent.mkdir(parents=True, exist_ok=True)


def demo(
    store: Annotated[
        str | None,
        typer.Option(
            "--store", help="A new sqlite store for the demo (default: a new per-user one)."
        ),
    ] = None,
    brokers: Brokers = 3,
    folder: Annotated[
        Path | None, typer.Option(help="The brokers' logs and the analysis (default: beside it).")
    ] = None,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="The dashboard's port while it runs (0: free).")
    ] = 0,
    analyze: Annotated[
        bool, typer.Option(help="End by analysing a snapshot of the cluster with Spark.")
    ] = True,
) -> None:
    """The main job: a local cluster and a narrated scenario on a new store of its own."""
    url, default_folder = own_store() if store is None else (store, None)
    fresh(url)
    path = sqlite_path(url)
    assert path is not None
    folder = folder or default_folder or path.parent
    from metaplane.pipeline import java_runtime

    snapshot = folder / "snapshot"
    run(play(url, brokers, folder, port, snapshot if analyze else None))
    out = folder / "analysis"
    if analyze and java_runtime() is None:
        step(9, "analyse the snapshot with Spark: skipped, no Java runtime")
        console.print(
            "Spark needs Java 17 or 21 (Debian/Ubuntu: apt-get install "
            "openjdk-17-jre-headless); then:\n"
            f"    .venv/bin/metaplane analyze --snapshot {snapshot} --out {out}"
        )
    elif analyze:
        step(9, "analyse the snapshot with Spark (metaplane analyze)")
        from metaplane.pipeline import AnalyzeSettings

        analysis = guarded(lambda: run_analysis(snapshot, out, AnalyzeSettings(), None, None))
        show_analysis(analysis, Output.TABLE)
        console.print(
            "The same for any store or snapshot:\n"
            f"    .venv/bin/metaplane analyze --store {url} --out {out}"
        )
    with_analysis = f" --analysis {out}" if analyze else ""
    console.print(
        "\nThe dashboard of this store (the API, the metrics and the last analysis) "
        f"at http://127.0.0.1:8080/ with\n    .venv/bin/metaplane serve --store {url}"
        f"{with_analysis}",
        highlight=False,
    )


async def play(url: str, brokers: int, folder: Path, port: int, snapshot: Path | None) -> None:
    async with open_store(url) as store:
        cluster = LocalCluster(url, folder, workload=True)
        admin = AdminServer(store, ServerSettings(port=port))
        scenario = Scenario(store, cluster)
        await admin.start()
        console.print(f"watch it live on the dashboard: [bold]{admin.url}[/]", highlight=False)
        try:
            await scenario.join(brokers)
            await scenario.create()
            await scenario.traffic()
            await scenario.kill()
            await scenario.move()
            await scenario.drain()
            if snapshot is not None:
                await scenario.snapshot(snapshot)
        finally:
            step(8, "stop: every broker seals its topics and leaves")
            with spinner("stopping the brokers"):
                await cluster.stop()
            await admin.stop()
    console.print(
        f"\nThe store stays at {url.removeprefix('sqlite://')}: see the whole layout with\n"
        f"    .venv/bin/metaplane kv tree / --store {url}\n"
        "and the brokers' logs in " + str(folder / "logs")
    )
