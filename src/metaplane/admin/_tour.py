"""`metaplane demo`: a short tour of the store. It writes the example keys and values of
Danube's layout (seed 001) into the embedded store in one transaction, shows them as a tree,
and lets a watch receive a change."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated

import typer
from rich.panel import Panel

from metaplane import layout
from metaplane.admin._console import console, data_home, run
from metaplane.admin._tree import key_tree
from metaplane.layout import TopicName
from metaplane.resources import (
    Avro,
    AvroSchema,
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    CompatibilityMode,
    CurrentObject,
    Delivery,
    LoadReport,
    NamespacePolicy,
    ObjectDescriptor,
    ProducerAccessMode,
    ProducerRegistration,
    ResourceUsage,
    SchemaIdIndex,
    SchemaMetadata,
    SchemaVersion,
    SealedState,
    SubscriptionMetadata,
    SubscriptionType,
    UnassignedMarker,
    encode,
)
from metaplane.schema import SchemaType, parse_schema
from metaplane.store import MetadataStore, Put, open_store

BROKER = 625722408599041316
OWNER = 13308604176970018988
TOPIC = TopicName("default", "reliable_topic")
PRODUCER = 13940288943180594845

PRODUCT_V1 = {
    "type": "record",
    "name": "Product",
    "fields": [{"name": "id", "type": "string"}, {"name": "price", "type": "double"}],
}
TAGS = {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}
PRODUCT_V2 = {**PRODUCT_V1, "fields": [*PRODUCT_V1["fields"], TAGS]}


def seed_examples() -> list[tuple[str, bytes]]:
    """Seed 001's example of every key, as typed values. Where the seed abbreviates (the
    product-catalog schemas, the object `cur` points at) the gap is filled in consistently."""
    return [
        *cluster_examples(),
        *topic_examples(),
        *schema_examples(),
        *storage_examples(),
    ]


def cluster_examples() -> list[tuple[str, bytes]]:
    registration = BrokerRegistration(
        admin_addr="http://0.0.0.0:50051",
        advertised_addr="0.0.0.0:6650",
        broker_addr="http://0.0.0.0:6650",
        prom_exporter="0.0.0.0:9040",
    )
    load = LoadReport(
        resources_usage=[
            ResourceUsage(resource="CPU", usage=30),
            ResourceUsage(resource="Memory", usage=30),
        ],
        topic_list=[TOPIC.path],
        topics_len=1,
    )
    return [
        (layout.cluster_name("MY_CLUSTER"), b"null"),
        (layout.broker_registration(BROKER), encode(registration)),
        (layout.broker_state(BROKER), encode(BrokerState(mode=BrokerMode.ACTIVE, reason="boot"))),
        (layout.assignment(OWNER, TOPIC), b"null"),
        (
            layout.unassigned(TOPIC),
            encode(UnassignedMarker(reason="unload", from_broker=12549595323552083708)),
        ),
        (layout.load_report(OWNER), encode(load)),
        (layout.leader(), encode(BROKER)),
    ]


def topic_examples() -> list[tuple[str, bytes]]:
    producer = ProducerRegistration(
        access_mode=ProducerAccessMode.SHARED,
        producer_id=PRODUCER,
        producer_name="prod_json_reliable",
        status=True,
        topic_name=TOPIC.path,
    )
    subscription = SubscriptionMetadata(
        consumer_id=None,
        consumer_name="cons_reliable",
        subscription_name="subs_reliable",
        subscription_type=SubscriptionType.EXCLUSIVE,
    )
    policy = NamespacePolicy(max_message_size=10485760)
    return [
        (layout.namespace_policy("default"), encode(policy)),
        (layout.namespace_topic(TOPIC), b"null"),
        (layout.topic_root(TOPIC), encode(0)),
        (layout.topic_delivery(TOPIC), encode(Delivery.RELIABLE)),
        (layout.producer(TOPIC, PRODUCER), encode(producer)),
        (layout.subscription(TOPIC, "subs_reliable"), encode(subscription)),
        (layout.cursor(TOPIC, "subs_reliable"), encode(13)),
    ]


def schema_examples() -> list[tuple[str, bytes]]:
    versions = [
        schema_version(1, PRODUCT_V1, 1768728611),
        schema_version(2, PRODUCT_V2, 1768728613),
    ]
    metadata = SchemaMetadata(
        compatibility_mode=CompatibilityMode.BACKWARD,
        created_at=1768728611,
        created_by="danube-client",
        id=1,
        latest_version=2,
        subject="product-catalog",
        topics_using=[],
        updated_at=1768728613,
        versions=versions,
    )
    return [
        (layout.next_schema_id(), encode(2)),
        (layout.schema_metadata("product-catalog"), encode(metadata)),
        *((layout.schema_version("product-catalog", v.version), encode(v)) for v in versions),
        (layout.schema_by_id(1), encode(SchemaIdIndex(schema_id=1, subject="product-catalog"))),
    ]


def schema_version(number: int, document: object, created_at: int) -> SchemaVersion:
    raw = json.dumps(document, indent=2)
    fingerprint = parse_schema(SchemaType.AVRO, raw).fingerprint
    return SchemaVersion(
        created_at=created_at,
        created_by="danube-client",
        version=number,
        fingerprint=fingerprint,
        is_deprecated=False,
        schema_def=Avro(AvroSchema(fingerprint=fingerprint, raw_schema=raw)),
        tags=[],
    )


def storage_examples() -> list[tuple[str, bytes]]:
    first = ObjectDescriptor(
        completed=True,
        created_at=1768728599,
        end_offset=29,
        etag=None,
        object_id="data-0-29.dnb1",
        offset_index=[(0, 0)],
        size=7164,
        start_offset=0,
    )
    current = ObjectDescriptor(
        completed=True,
        created_at=1768728630,
        end_offset=41,
        etag=None,
        object_id="data-30-41.dnb1",
        offset_index=[(30, 0)],
        size=2866,
        start_offset=30,
    )
    sealed = SealedState(
        sealed=True,
        last_committed_offset=21,
        broker_id=10285063371164059634,
        timestamp=1768625254,
    )
    return [
        (layout.storage_object(TOPIC, 0), encode(first)),
        (layout.storage_object(TOPIC, 30), encode(current)),
        (layout.storage_cur(TOPIC), encode(CurrentObject.at(30))),
        (layout.storage_state(TOPIC), encode(sealed)),
    ]


async def tour(url: str) -> None:
    async with open_store(url) as store:
        console.rule("[bold]1. Danube's layout, written in one transaction")
        examples = seed_examples()
        result = await store.txn([], [Put(key, value) for key, value in examples])
        console.print(
            f"{len(examples)} keys, every example of seed 001, at revision {result.revision} "
            f"of {url}"
        )
        console.rule("[bold]2. the store as a tree")
        listing = await store.list("/")
        console.print(key_tree(listing, width=console.width))
        console.rule("[bold]3. a watch receiving a change")
        await watch_a_cursor(store, listing.revision)


async def watch_a_cursor(store: MetadataStore, seen: int) -> None:
    cursor = layout.cursor(TOPIC, "subs_reliable")
    async with store.watch(layout.subscriptions_prefix(TOPIC), start_revision=seen + 1) as watch:
        entry = await store.get(cursor)
        assert entry is not None
        console.print(f"watching {layout.subscriptions_prefix(TOPIC)} from revision {seen + 1}")
        console.print(
            f"a consumer acknowledges offset 14: put {cursor} = 14 "
            f"(expecting version {entry.version})"
        )
        await store.put(cursor, encode(14), expect=entry.version)
        async with asyncio.timeout(10):
            batch = await anext(watch)
    for event in batch.events:
        console.print(
            Panel(
                f"{event.type.value} {event.key}\nvalue {event.entry.value.decode()}  "
                f"version {event.entry.version}  revision {batch.revision}",
                title="the watch received",
                expand=False,
            )
        )


def demo(
    store: Annotated[
        str | None,
        typer.Option("--store", help="A new sqlite store for the tour (default: a new one)."),
    ] = None,
) -> None:
    """A short tour of the store: Danube's layout written into a new store of its own, shown
    as a tree, and a watch."""
    from metaplane.admin._demo import fresh

    url = store or f"sqlite://{data_home() / 'tour' / time.strftime('%Y%m%d-%H%M%S.db')}"
    fresh(url)
    run(tour(url))
