"""`metaplane topics …`: create topics (partitioned or not), list them with their owners,
describe one in full, and unload or move one through the cluster layer's topic moves.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from metaplane import layout
from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
    run,
)
from metaplane.admin._progress import poll, progress_bar, spinner
from metaplane.cluster import move_topic, unload_topic
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.resources import (
    Delivery,
    Marker,
    NoObject,
    NoSealedState,
    NoTopicOwnerInfo,
    NoUnassignedMarker,
    ObjectDescriptor,
    OwnershipManager,
    ProducerRegistration,
    Reader,
    StorageManager,
    SubscriptionData,
    SubscriptionManager,
    TopicManager,
    Versioned,
)
from metaplane.store import Get, MetadataStore, open_store

topics_app = typer.Typer(
    name="topics",
    help="Topics: create, list, describe, and unload or move one to another broker.",
    no_args_is_help=True,
)

READ_BATCH = 60
"""Topics whose root and delivery one read takes when listing: two keys each, within 128."""

TopicPath = Annotated[str, typer.Argument(help="The topic: /namespace/topic.")]
Wait = Annotated[bool, typer.Option("--wait", help="Wait until the leader has assigned it again.")]
Timeout = Annotated[float, typer.Option(min=0, help="How long --wait waits (s).")]


class DeliveryChoice(enum.StrEnum):
    RELIABLE = "reliable"
    NON_RELIABLE = "non-reliable"

    @property
    def delivery(self) -> Delivery:
        return Delivery.RELIABLE if self is DeliveryChoice.RELIABLE else Delivery.NON_RELIABLE


def topic_name(text: str) -> TopicName:
    """A topic from "/namespace/topic" (or "namespace/topic")."""
    return TopicName.parse("/" + text.removeprefix("/"))


def marker_json(marker: Versioned[Marker] | None) -> dict[str, Any] | None:
    """Why a topic waits for assignment (all null for a new topic); None if it does not."""
    if marker is None:
        return None
    if marker.value is None:
        return {"reason": None, "from_broker": None, "to_broker": None}
    found: dict[str, Any] = {"to_broker": None, **msgspec.to_builtins(marker.value)}
    return {name: found.get(name) for name in ("reason", "from_broker", "to_broker")}


def whereabouts(owner: int | None, waiting: dict[str, Any] | None) -> str:
    """Where a topic is, in words: its owner, or why it waits."""
    if owner is not None:
        return f"broker {owner}"
    if waiting is None:
        return "—"
    if waiting["reason"] is None:
        return "[yellow]unassigned[/] (new)"
    target = "" if waiting["to_broker"] is None else f", to broker {waiting['to_broker']}"
    why = escape(str(waiting["reason"]))
    return f"[yellow]unassigned[/] ({why}, from broker {waiting['from_broker']}{target})"


# create -------------------------------------------------------------------------------------


@topics_app.command()
def create(
    topic: TopicPath,
    partitions: Annotated[int, typer.Option(min=0, help="Partitions (0: not partitioned).")] = 0,
    delivery: Annotated[
        DeliveryChoice, typer.Option(help="Reliable (stored) or non-reliable delivery.")
    ] = DeliveryChoice.RELIABLE,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Create a topic in an existing namespace, waiting for the leader to assign it.

    With --partitions N, its N partitions are topics of their own, each waiting for
    assignment."""

    async def go() -> tuple[TopicName, int]:
        name = topic_name(topic)
        async with open_store(store) as opened:
            # Many partitions take several transactions.
            with spinner(f"creating {name}"):
                revision = await TopicManager(opened).create(
                    name, partitions=partitions, delivery=delivery.delivery
                )
        return name, revision

    name, revision = run(go())
    if output is Output.JSON:
        print_json(
            {
                "topic": name.path,
                "partitions": partitions,
                "delivery": delivery.delivery.value,
                "revision": revision,
            }
        )
        return
    parts = f", {partitions} partition(s)" if partitions else ""
    console.print(
        f"created {name} ({delivery.delivery.value}{parts}) at revision {revision}",
        highlight=False,
    )


# list ---------------------------------------------------------------------------------------


async def read_topics(store: MetadataStore, namespace: str | None) -> list[dict[str, Any]]:
    """Every topic (of `namespace`) with its partitions, delivery, owner or marker."""
    names = await TopicManager(store).topics(namespace)
    owners = await assignment_owners(store)
    waiting = await OwnershipManager(store).unassigned()
    rows: list[dict[str, Any]] = []
    with progress_bar("reading topics", len(names)) as done:
        for start in range(0, len(names), READ_BATCH):
            rows.extend(await topic_rows(Reader(store), names[start : start + READ_BATCH]))
            done(len(rows))
    for row, name in zip(rows, names, strict=True):
        row.update(owner=owners.get(name), waiting=marker_json(waiting.get(name)))
    return rows


async def assignment_owners(store: MetadataStore) -> dict[TopicName, int]:
    """The broker each assigned topic is assigned to, from one keys-only read."""
    found: dict[TopicName, int] = {}
    for entry in await store.list(layout.brokers_prefix(), keys_only=True):
        try:
            key = layout.parse(entry.key)
        except LayoutError:
            continue
        if key.kind is KeyKind.ASSIGNMENT and key.topic_name and key.broker_id is not None:
            found.setdefault(key.topic_name, key.broker_id)
    return found


async def topic_rows(reader: Reader, names: Sequence[TopicName]) -> list[dict[str, Any]]:
    """The roots and deliveries of `names`, in one read."""
    keys = [(layout.topic_root(t), layout.topic_delivery(t)) for t in names]
    view = await reader.read(*(Get(key) for pair in keys for key in pair))
    rows = []
    for name, (root_key, delivery_key) in zip(names, keys, strict=True):
        root, delivery = view.get(root_key, int), view.get(delivery_key, Delivery)
        rows.append(
            {
                "topic": name.path,
                "namespace": name.namespace,
                "partitions": None if root is None else root.value,
                "delivery": None if delivery is None else delivery.value.value,
            }
        )
    return rows


@topics_app.command("list")
def list_topics(
    namespace: Annotated[str | None, typer.Argument(help="Only this namespace's.")] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """List topics with their partitions, delivery and owner (or why they wait)."""

    async def go() -> list[dict[str, Any]]:
        async with open_store(store) as opened:
            return await read_topics(opened, namespace)

    rows = run(go())
    if output is Output.JSON:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} topic(s)")
    for column in ("topic", "partitions", "delivery", "owner"):
        table.add_column(column)
    for row in rows:
        partitions = row["partitions"]
        table.add_row(
            escape(row["topic"]),
            "?" if partitions is None else str(partitions or "—"),
            row["delivery"] or "?",
            whereabouts(row["owner"], row["waiting"]),
        )
    console.print(table)


# describe -----------------------------------------------------------------------------------


async def describe_topic(store: MetadataStore, name: TopicName) -> dict[str, Any]:
    """Everything the store holds about a topic (`NoTopic` if it has no root)."""
    topics = TopicManager(store)
    info = await topics.read(name)
    ownership = OwnershipManager(store)
    subscriptions = await SubscriptionManager(store).read_subscriptions(name)
    return {
        "topic": name.path,
        "partitions": info.partition_count,
        "partition_topics": [partition.path for partition in info.partitions],
        "delivery": None if info.delivery is None else info.delivery.value.value,
        "owner": await found_or_none(ownership.owner(name), NoTopicOwnerInfo),
        "waiting": marker_json(
            await found_or_none(ownership.unassigned_marker(name), NoUnassignedMarker)
        ),
        "producers": [producer_json(p.value) for p in await topics.producers(name)],
        "subscriptions": [subscription_json(data) for data in subscriptions.values()],
        "storage": await storage_json(StorageManager(store), name),
    }


async def found_or_none(read: Awaitable[Versioned[Any]], missing: type[Exception]) -> Any:
    """The value `read` finds, or None when it raises `missing`."""
    try:
        return (await read).value
    except missing:
        return None


def producer_json(producer: ProducerRegistration) -> dict[str, Any]:
    return {
        "producer_id": producer.producer_id,
        "producer_name": producer.producer_name,
        "access_mode": producer.access_mode.name.lower(),
        "status": producer.status,
    }


def subscription_json(data: SubscriptionData) -> dict[str, Any]:
    metadata = data.metadata.value
    return {
        "subscription": data.name,
        "type": metadata.subscription_type.name.lower(),
        "consumer_id": metadata.consumer_id,
        "consumer_name": metadata.consumer_name,
        "cursor": None if data.cursor is None else data.cursor.value,
    }


async def storage_json(storage: StorageManager, name: TopicName) -> dict[str, Any]:
    """A summary of the topic's objects in tiered storage, and its sealed state."""
    objects = [found.value for found in await storage.objects(name)]
    current: ObjectDescriptor | None = await found_or_none(storage.current(name), NoObject)
    sealed = await found_or_none(storage.sealed_state(name), NoSealedState)
    return {
        "objects": len(objects),
        "uploading": sum(not descriptor.completed for descriptor in objects),
        "first_offset": min((d.start_offset for d in objects), default=None),
        "last_offset": max((d.end_offset for d in objects), default=None),
        "bytes": sum(descriptor.size for descriptor in objects),
        "current": None if current is None else current.start_offset,
        "sealed": None if sealed is None else msgspec.to_builtins(sealed),
    }


@topics_app.command()
def describe(
    topic: TopicPath, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE
) -> None:
    """Show a topic: owner, producers, subscriptions and cursors, storage, sealed state."""

    async def go() -> dict[str, Any]:
        name = topic_name(topic)
        async with open_store(store) as opened:
            return await describe_topic(opened, name)

    document = run(go())
    if output is Output.JSON:
        print_json(document)
        return
    console.print(facts_grid(document))
    if document["producers"]:
        console.print(producers_table(document["producers"]))
    if document["subscriptions"]:
        console.print(subscriptions_table(document["subscriptions"]))


def facts_grid(document: dict[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    count = document["partitions"]
    for name, value in (
        ("topic", escape(document["topic"])),
        ("partitions", f"{count}: " + ", ".join(document["partition_topics"]) if count else "no"),
        ("delivery", document["delivery"] or "?"),
        ("owner", whereabouts(document["owner"], document["waiting"])),
        ("producers", str(len(document["producers"]))),
        ("subscriptions", str(len(document["subscriptions"]))),
        ("storage", storage_line(document["storage"])),
        ("sealed", sealed_line(document["storage"]["sealed"])),
    ):
        grid.add_row(f"[bold]{name}[/]", value)
    return grid


def storage_line(storage: dict[str, Any]) -> str:
    if not storage["objects"]:
        return "no object"
    uploading = f" ({storage['uploading']} uploading)" if storage["uploading"] else ""
    return (
        f"{storage['objects']} object(s){uploading}, offsets {storage['first_offset']}–"
        f"{storage['last_offset']}, {storage['bytes']:,} bytes, current at {storage['current']}"
    )


def sealed_line(sealed: dict[str, Any] | None) -> str:
    if sealed is None:
        return "no"
    return (
        f"at offset {sealed['last_committed_offset']} by broker {sealed['broker_id']} "
        f"(timestamp {sealed['timestamp']})"
    )


def producers_table(producers: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(producers)} producer(s)")
    for column in ("id", "name", "access", "active"):
        table.add_column(column)
    for producer in producers:
        table.add_row(
            str(producer["producer_id"]),
            escape(producer["producer_name"]),
            producer["access_mode"],
            "yes" if producer["status"] else "no",
        )
    return table


def subscriptions_table(subscriptions: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(subscriptions)} subscription(s)")
    for column in ("subscription", "type", "consumer", "cursor"):
        table.add_column(column)
    for subscription in subscriptions:
        consumer = escape(subscription["consumer_name"])
        if subscription["consumer_id"] is not None:
            consumer += f" ({subscription['consumer_id']})"
        cursor = subscription["cursor"]
        table.add_row(
            escape(subscription["subscription"]),
            subscription["type"],
            consumer,
            "none yet" if cursor is None else str(cursor),
        )
    return table


# unload, move -------------------------------------------------------------------------------

Move = Callable[[MetadataStore, TopicName], Awaitable[int]]
"""A topic move of the cluster layer: it returns the revision of its transaction."""


async def wait_assigned(store: MetadataStore, name: TopicName, timeout: float) -> int:
    """The broker the leader assigns `name` to, once it has."""
    ownership = OwnershipManager(store)

    async def owner() -> int | None:
        found: int | None = await found_or_none(ownership.owner(name), NoTopicOwnerInfo)
        return found

    with spinner(f"waiting for the leader to assign {name}"):
        return await poll(owner, what=f"{name} to be assigned", timeout=timeout)


def run_move(
    move: Move,
    topic: str,
    to_broker: int | None,
    wait: bool,
    timeout: float,
    store: str,
    output: Output,
) -> None:
    """Run `move` on the topic, wait for its new owner if asked, and say what happened."""

    async def go() -> tuple[TopicName, int, int | None]:
        name = topic_name(topic)
        async with open_store(store) as opened:
            revision = await move(opened, name)
            owner = await wait_assigned(opened, name, timeout) if wait else None
        return name, revision, owner

    name, revision, owner = run(go())
    if output is Output.JSON:
        document = {"topic": name.path, "revision": revision, "to_broker": to_broker}
        print_json({**document, "owner": owner})
        return
    target = "by its ranking" if to_broker is None else f"to broker {to_broker}"
    console.print(
        f"{name} unloaded at revision {revision}; the leader assigns it {target}", highlight=False
    )
    if owner is not None:
        console.print(f"{name} is now served by broker {owner}", highlight=False)


@topics_app.command()
def unload(
    topic: TopicPath,
    wait: Wait = False,
    timeout: Timeout = 60.0,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Unload a topic from its owner, for the leader to assign it again.

    The owner seals it; the leader then assigns it to the broker its ranking chooses (which
    may be the same one)."""
    run_move(unload_topic, topic, None, wait, timeout, store, output)


@topics_app.command()
def move(
    topic: TopicPath,
    to: Annotated[
        int | None,
        typer.Option("--to", min=0, help="The broker to move it to (registered and active)."),
    ] = None,
    wait: Wait = False,
    timeout: Timeout = 60.0,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Move a topic away from its owner, to --to if given, else where the ranking says."""
    run_move(partial(move_topic, to_broker=to), topic, to, wait, timeout, store, output)
