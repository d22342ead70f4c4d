"""`metaplane topics …`: create topics (partitioned or not), list them with their owners,
describe one in full (owner, subscriptions with backlog, storage, bound schema), delete one,
and unload or move one through the cluster layer's topic moves.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from metaplane.admin._console import (
    DEFAULT_STORE,
    Create,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
    usage,
)
from metaplane.admin._errors import MAX_PARTITIONS
from metaplane.admin._operations import Operations
from metaplane.admin._progress import poll, spinner
from metaplane.admin._runner import execute
from metaplane.admin._topic_ops import topic_name
from metaplane.layout import TopicName
from metaplane.resources import Delivery, NoTopicOwnerInfo, OwnershipManager
from metaplane.store import InvalidRequest, MetadataStore

topics_app = typer.Typer(
    name="topics",
    help="Topics: create, list, describe, delete, and unload or move one to another broker.",
    no_args_is_help=True,
)

TopicPath = Annotated[str, typer.Argument(help="The topic: /namespace/topic.")]
Wait = Annotated[bool, typer.Option("--wait", help="Wait until the leader has assigned it again.")]
Timeout = Annotated[float, typer.Option(min=0, help="How long --wait waits (s).")]


class DeliveryChoice(enum.StrEnum):
    RELIABLE = "reliable"
    NON_RELIABLE = "non-reliable"

    @property
    def delivery(self) -> Delivery:
        return Delivery.RELIABLE if self is DeliveryChoice.RELIABLE else Delivery.NON_RELIABLE


def whereabouts(owner: int | None, live: bool | None, waiting: dict[str, Any] | None) -> str:
    """Where a topic is, in words: its owner (marked when that broker is not live), or why it
    waits."""
    if owner is not None:
        return f"broker {owner}" + ("" if live else " [red](not live)[/]")
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
    partitions: Annotated[
        int,
        typer.Option(min=0, max=MAX_PARTITIONS, help="Partitions (0: not partitioned)."),
    ] = 0,
    delivery: Annotated[
        DeliveryChoice, typer.Option(help="Reliable (stored) or non-reliable delivery.")
    ] = DeliveryChoice.RELIABLE,
    store: StoreURL = DEFAULT_STORE,
    create_store: Create = False,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Create a topic in an existing namespace; the leader then assigns it.

    With --partitions N, its N partitions are topics of their own, each waiting for
    assignment."""

    name = topic_name_or_usage(topic)

    async def creating(ops: Operations) -> dict[str, Any]:
        with spinner(f"creating {name}"):  # many partitions take several transactions
            return await ops.create_topic(name, partitions, delivery.delivery)

    document = execute(store, creating, create=create_store)
    if output is Output.JSON:
        print_json(document)
        return
    parts = f", {partitions} partition(s)" if partitions else ""
    console.print(
        f"created {document['topic']} ({delivery.delivery.value}{parts}) "
        f"at revision {document['revision']}",
        highlight=False,
    )


# list ---------------------------------------------------------------------------------------


@topics_app.command("list")
def list_topics(
    namespace: Annotated[str | None, typer.Argument(help="Only this namespace's.")] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """List topics with their partitions, delivery and owner (or why they wait); an owner
    whose registration is gone is marked not live."""
    rows = execute(store, lambda ops: ops.list_topics(namespace))
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
            whereabouts(row["owner"], row["owner_live"], row["waiting"]),
        )
    console.print(table)


# describe -----------------------------------------------------------------------------------


@topics_app.command()
def describe(
    topic: TopicPath, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE
) -> None:
    """Show a topic: owner, producers, subscriptions with cursors and backlog, storage,
    sealed state and bound schema."""
    name = topic_name_or_usage(topic)
    document = execute(store, lambda ops: ops.describe_topic(name))
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
    subject = document["schema_subject"]
    for name, value in (
        ("topic", escape(document["topic"])),
        ("partitions", f"{count}: " + ", ".join(document["partition_topics"]) if count else "no"),
        ("delivery", document["delivery"] or "?"),
        ("owner", whereabouts(document["owner"], document["owner_live"], document["waiting"])),
        ("producers", str(len(document["producers"]))),
        ("subscriptions", str(len(document["subscriptions"]))),
        ("backlog", f"{document['backlog']:,} message(s)"),
        ("schema", "none" if subject is None else escape(subject)),
        ("storage", storage_line(document["storage"])),
        ("sealed", sealed_line(document["storage"]["sealed"])),
        ("etag", document["etag"]),
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
    for column in ("subscription", "type", "consumer", "cursor", "backlog"):
        table.add_column(column)
    for subscription in subscriptions:
        consumer = escape(subscription["consumer_name"])
        if subscription["consumer_id"] is not None:
            consumer += f" ({subscription['consumer_id']})"
        cursor, backlog = subscription["cursor"], subscription["backlog"]
        table.add_row(
            escape(subscription["subscription"]),
            subscription["type"],
            consumer,
            "none yet" if cursor is None else str(cursor),
            "?" if backlog is None else f"{backlog:,}",
        )
    return table


# delete -------------------------------------------------------------------------------------


@topics_app.command()
def delete(
    topic: TopicPath,
    force: Annotated[
        bool, typer.Option("--force", help="Delete it with its subscriptions and cursors.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Delete a topic: its keys, its namespace entry, its marker or assignment (its storage
    metadata stays for the clean-up). Refused while it has subscriptions, unless --force."""
    name = topic_name_or_usage(topic)
    if not yes:
        with_subscriptions = " and its subscriptions" if force else ""
        typer.confirm(f"delete topic {name}{with_subscriptions}?", abort=True)
    document = execute(store, lambda ops: ops.delete_topic(name, force=force))
    if output is Output.JSON:
        print_json(document)
    else:
        console.print(f"deleted {name} at revision {document['revision']}", highlight=False)


def topic_name_or_usage(text: str) -> TopicName:
    """The topic an argument names; a malformed one is a usage error (exit 2)."""
    try:
        return topic_name(text)
    except InvalidRequest as error:
        usage(str(error))


# unload, move -------------------------------------------------------------------------------


async def wait_assigned(store: MetadataStore, name: TopicName, timeout: float) -> int:
    """The broker the leader assigns `name` to, once it has."""
    ownership = OwnershipManager(store)

    async def owner() -> int | None:
        try:
            return (await ownership.owner(name)).value
        except NoTopicOwnerInfo:
            return None

    with spinner(f"waiting for the leader to assign {name}"):
        return await poll(owner, what=f"{name} to be assigned", timeout=timeout)


def run_move(
    topic: str,
    to_broker: int | None,
    unload: bool,
    wait: bool,
    timeout: float,
    store: str,
    output: Output,
) -> None:
    """Move the topic, wait for its new owner if asked, and say what happened."""
    name = topic_name_or_usage(topic)

    async def moving(ops: Operations) -> dict[str, Any]:
        document = await ops.move_topic(name, to_broker=to_broker, unload=unload)
        owner = await wait_assigned(ops.store, name, timeout) if wait else None
        return {**document, "owner": owner}

    document = execute(store, moving)
    if output is Output.JSON:
        print_json(document)
        return
    target = "by its ranking" if to_broker is None else f"to broker {to_broker}"
    console.print(
        f"{name} unloaded at revision {document['revision']}; the leader assigns it {target}",
        highlight=False,
    )
    if document["owner"] is not None:
        console.print(f"{name} is now served by broker {document['owner']}", highlight=False)


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
    run_move(topic, None, True, wait, timeout, store, output)


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
    run_move(topic, to, False, wait, timeout, store, output)
