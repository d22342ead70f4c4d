"""`metaplane subscriptions …`: a topic's subscriptions — list them with cursors and backlog,
create, delete, and move a cursor on an operator's word (reset to an offset, skip messages)
through the broker that serves the topic.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
    said,
    usage,
)
from metaplane.admin._runner import execute
from metaplane.admin._subscription_ops import subscription_type
from metaplane.admin._topics import subscriptions_table, topic_name_or_usage
from metaplane.resources import SubscriptionType
from metaplane.store import InvalidRequest

subscriptions_app = typer.Typer(
    name="subscriptions",
    help="A topic's subscriptions: list, create, delete, reset a cursor, skip messages.",
    no_args_is_help=True,
)

TopicPath = Annotated[str, typer.Argument(help="The topic: /namespace/topic.")]
Name = Annotated[str, typer.Argument(help="The subscription's name.")]
Expect = Annotated[
    int | None,
    typer.Option("--expect", min=1, help="Only if the subscription is still at this version."),
]


def kind_or_usage(text: str) -> SubscriptionType:
    try:
        return subscription_type(text)
    except InvalidRequest as error:
        usage(str(error))


@subscriptions_app.command("list")
def list_subscriptions(
    topic: TopicPath, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE
) -> None:
    """List a topic's subscriptions with their type, consumer, cursor and backlog."""
    name = topic_name_or_usage(topic)
    rows = execute(store, lambda ops: ops.list_subscriptions(name))
    if output is Output.JSON:
        print_json(rows)
    else:
        console.print(subscriptions_table(rows))


@subscriptions_app.command()
def create(
    topic: TopicPath,
    subscription: Name,
    kind: Annotated[
        str, typer.Option("--type", help="exclusive, shared or failover.")
    ] = "exclusive",
    consumer_name: Annotated[
        str | None, typer.Option(help="The consumer's name (default: NAME-consumer).")
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Create a subscription of an existing topic (no cursor until the first one is
    written)."""
    name, chosen = topic_name_or_usage(topic), kind_or_usage(kind)
    document = execute(
        store, lambda ops: ops.create_subscription(name, subscription, chosen, consumer_name)
    )
    text = f"created subscription {subscription} ({chosen.name.lower()}) of {name}"
    said(output, document, f"{text} at revision {document['revision']}")


@subscriptions_app.command()
def delete(
    topic: TopicPath,
    subscription: Name,
    expect: Expect = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Delete a subscription and its cursor."""
    name = topic_name_or_usage(topic)
    if not yes:
        typer.confirm(f"delete subscription {subscription} of {name}?", abort=True)
    document = execute(store, lambda ops: ops.delete_subscription(name, subscription, expect))
    text = f"deleted subscription {subscription} of {name} at revision {document['revision']}"
    said(output, document, text)


def show_reset(output: Output, document: dict[str, Any]) -> None:
    broker = document["through_broker"]
    how = "no broker serves it: written guarded" if broker is None else f"by broker {broker}"
    text = (
        f"cursor of {document['subscription']} on {document['topic']} set to "
        f"{document['cursor']} at revision {document['revision']} ({how})"
    )
    said(output, document, text)


@subscriptions_app.command()
def reset(
    topic: TopicPath,
    subscription: Name,
    offset: Annotated[
        int, typer.Option("--to", min=-1, help="The last acknowledged offset (-1: none yet).")
    ],
    expect: Expect = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Set a subscription's cursor (the last acknowledged offset).

    The broker serving the topic writes it, fenced on owning the topic, and drops its own
    pending acknowledgement of that subscription so that none overwrites the reset. A topic
    no broker serves is written directly, refused if a broker took it in between."""
    name = topic_name_or_usage(topic)
    document = execute(store, lambda ops: ops.reset_cursor(name, subscription, offset, expect))
    show_reset(output, document)


@subscriptions_app.command()
def skip(
    topic: TopicPath,
    subscription: Name,
    count: Annotated[int, typer.Argument(min=1, help="How many messages to skip.")],
    expect: Expect = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Skip messages: the stored cursor moves COUNT on, in the same way as a reset."""
    name = topic_name_or_usage(topic)
    document = execute(store, lambda ops: ops.skip(name, subscription, count, expect))
    show_reset(output, document)
