"""`metaplane topics create | list | describe` on sqlite, etcd, zk: partitions, delivery,
owners and markers, and everything a topic holds, ids above 2^63 included."""

from __future__ import annotations

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    Delivery,
    StorageManager,
    SubscriptionManager,
    TopicInfo,
    TopicManager,
    UnassignedMarker,
    encode,
)
from metaplane.store import MetadataStore
from tests.admin.conftest import BACKENDS_WITH_URL
from tests.admin.runner import Cli, add_broker, add_topic
from tests.resources.samples import (
    BROKER,
    PRODUCER,
    SEALED,
    TOPIC,
    descriptor,
    producer,
    subscription,
)

pytestmark = BACKENDS_WITH_URL


def read_topic(cli: Cli, topic: TopicName) -> TopicInfo:
    info: TopicInfo = cli.do(lambda store: TopicManager(store).read(topic))
    return info


def test_create_plain_partitioned_and_non_reliable_topics(cli: Cli) -> None:
    cli("namespaces", "create", "default")
    created = cli("topics", "create", "/default/orders", "--partitions", "40")
    assert "created /default/orders (Reliable, 40 partition(s)) at revision" in created.stdout
    assert read_topic(cli, TopicName("default", "orders-part-39")).partition_count == 0
    document = cli.json("topics", "create", "/default/logs", "--delivery", "non-reliable")
    assert (document["topic"], document["partitions"], document["delivery"]) == (
        "/default/logs", 0, "NonReliable",
    )  # fmt: skip
    info = read_topic(cli, TopicName("default", "logs"))
    assert info.delivery is not None and info.delivery.value is Delivery.NON_RELIABLE


def test_create_refusals(cli: Cli) -> None:
    assert cli.error("topics", "create", "/nowhere/orders") == (
        "error: namespace 'nowhere' does not exist"
    )
    assert "a topic path is '/namespace/topic'" in cli.error("topics", "create", "/a/b/c", code=2)
    assert "invalid topic name 'no way'" in cli.error("topics", "create", "/default/no way", code=2)
    # The leading slash is part of a topic's path: "default/t2" is no topic.
    assert "a topic is written /namespace/topic" in cli.error(
        "topics", "create", "default/t2", code=2
    )
    cli("namespaces", "create", "default")
    cli("topics", "create", "/default/orders")
    assert cli.error("topics", "create", "/default/orders") == (
        "error: topic /default/orders already exists"
    )
    cli("topics", "create", "/default/x", "--delivery", "sometimes", code=2)


async def a_cluster(store: MetadataStore) -> None:
    """An assigned topic, a new one, and one unloaded from BROKER."""
    await add_broker(store, BROKER)
    await add_topic(store, TOPIC, owner=BROKER)
    await add_topic(store, TopicName("default", "fresh"))
    moved = TopicName("billing", "moved")
    await add_topic(store, moved)
    marker = UnassignedMarker(reason="unload", from_broker=BROKER, to_broker=5)
    await store.put(layout.unassigned(moved), encode(marker))


def test_list_topics_with_their_owners_and_markers(cli: Cli) -> None:
    cli.do(a_cluster)
    listed = cli.json("topics", "list")
    assert [(row["topic"], row["owner"], row["waiting"]) for row in listed] == [
        ("/billing/moved", None, {"reason": "unload", "from_broker": BROKER, "to_broker": 5}),
        ("/default/fresh", None, {"reason": None, "from_broker": None, "to_broker": None}),
        ("/default/reliable_topic", BROKER, None),
    ]  # fmt: skip
    assert set(listed[0]) == {
        "topic", "namespace", "partitions", "delivery", "owner", "owner_live", "waiting",
    }  # fmt: skip
    assert listed[2]["owner_live"] is True
    assert [row["topic"] for row in cli.json("topics", "list", "billing")] == ["/billing/moved"]
    table = cli("topics", "list").stdout
    assert "3 topic(s)" in table and f"broker {BROKER}" in table
    assert f"unassigned (unload, from broker {BROKER}, to broker 5)" in table
    assert cli.error("topics", "list", "nope") == "error: namespace 'nope' does not exist"


async def a_busy_topic(store: MetadataStore) -> None:
    """TOPIC with a producer, two subscriptions (one with a cursor), objects, a sealed state."""
    await add_broker(store, BROKER)
    await add_topic(store, TOPIC, owner=BROKER)
    await TopicManager(store).register_producer(TOPIC, producer())
    subscriptions = SubscriptionManager(store)
    await subscriptions.create(TOPIC, subscription("billing", consumer=PRODUCER))
    await subscriptions.create(TOPIC, subscription("audit"))
    await subscriptions.write_cursor(TOPIC, "billing", 41)
    storage = StorageManager(store)
    await storage.add_object(TOPIC, descriptor(0, 29))
    await storage.add_object(TOPIC, descriptor(30, 41, completed=False))
    await storage.seal(TOPIC, SEALED)


def test_describe_a_topic_in_full(cli: Cli) -> None:
    cli.do(a_busy_topic)
    described = cli.json("topics", "describe", TOPIC.path)
    assert {key: described[key] for key in ("topic", "partitions", "delivery", "owner")} == {
        "topic": TOPIC.path, "partitions": 0, "delivery": "Reliable", "owner": BROKER,
    }  # fmt: skip
    assert described["producers"] == [
        {"producer_id": PRODUCER, "producer_name": "prod_json_reliable",
         "access_mode": "shared", "status": True},
    ]  # fmt: skip
    assert described["subscriptions"] == [
        {"subscription": "audit", "type": "exclusive", "consumer_id": None,
         "consumer_name": "cons_reliable", "cursor": None, "backlog": 42, "version": 1},
        {"subscription": "billing", "type": "exclusive", "consumer_id": PRODUCER,
         "consumer_name": "cons_reliable", "cursor": 41, "backlog": 0, "version": 1},
    ]  # fmt: skip
    # Backlog: messages after each cursor up to the last offset stored (41).
    assert described["backlog"] == 42
    assert described["storage"] == {
        "objects": 2, "uploading": 1, "first_offset": 0, "last_offset": 41,
        "bytes": 2 * 7164, "current": 30,
        "sealed": {"sealed": True, "last_committed_offset": 21,
                   "broker_id": 10285063371164059634, "timestamp": 1768625254},
    }  # fmt: skip
    table = cli("topics", "describe", TOPIC.path).stdout
    for part in (
        f"broker {BROKER}",
        "2 object(s) (1 uploading), offsets 0–41",
        "at offset 21 by broker 10285063371164059634",
        f"cons_reliable ({PRODUCER})",
        "none yet",
    ):
        assert part in table


def test_describe_an_unknown_topic(cli: Cli) -> None:
    assert cli.error("topics", "describe", "/default/nope") == (
        "error: topic /default/nope does not exist"
    )
    assert "a topic is written /namespace/topic" in cli.error("topics", "describe", "nope", code=2)
