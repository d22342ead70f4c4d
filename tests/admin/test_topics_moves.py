"""`metaplane topics unload | move` on sqlite, etcd, zk, through the cluster layer's topic moves:
the marker they leave, their refusals, and waiting for the leader to assign the topic again."""

from __future__ import annotations

from metaplane import layout
from metaplane.layout import KeyKind, TopicName
from metaplane.resources import OwnershipManager, UnassignedMarker, decode
from metaplane.store import MetadataStore
from tests.admin.conftest import BACKENDS_WITH_URL
from tests.admin.runner import Cli, add_broker, add_topic, leader_thread
from tests.resources.samples import BROKER, OTHER_BROKER, TOPIC

pytestmark = BACKENDS_WITH_URL


async def two_brokers(store: MetadataStore) -> None:
    """TOPIC served by BROKER; OTHER_BROKER live and active."""
    await add_broker(store, BROKER)
    await add_broker(store, OTHER_BROKER)
    await add_topic(store, TOPIC, owner=BROKER)


def marker(cli: Cli, topic: TopicName) -> UnassignedMarker | None:
    entry = cli.get(layout.unassigned(topic))
    assert entry is not None, f"{topic} does not wait for assignment"
    found: UnassignedMarker | None = decode(KeyKind.UNASSIGNED, entry.value)  # type: ignore[assignment]
    return found


def test_unload_leaves_the_topic_waiting_with_its_origin(cli: Cli) -> None:
    cli.do(two_brokers)
    unloaded = cli("topics", "unload", TOPIC.path)
    assert f"{TOPIC} unloaded at revision" in unloaded.stdout
    assert marker(cli, TOPIC) == UnassignedMarker(reason="unload", from_broker=BROKER)
    assert cli.get(layout.assignment(BROKER, TOPIC)) is None
    assert cli.error("topics", "unload", TOPIC.path) == (
        f"error: topic {TOPIC} is assigned to no broker"
    )
    assert "a topic path is" in cli.error("topics", "unload", "/a/b/c", code=2)


def test_move_to_a_broker(cli: Cli) -> None:
    cli.do(two_brokers)
    assert cli.error("topics", "move", TOPIC.path, "--to", "9").startswith(
        "error: broker 9 is unknown"
    )
    moved = cli.json("topics", "move", TOPIC.path, "--to", str(OTHER_BROKER))
    assert (moved["topic"], moved["to_broker"], moved["owner"]) == (TOPIC.path, OTHER_BROKER, None)
    assert marker(cli, TOPIC) == UnassignedMarker(
        reason="unload", from_broker=BROKER, to_broker=OTHER_BROKER
    )
    assert "is assigned to no broker" in cli.error("topics", "move", TOPIC.path)


def test_move_waits_for_the_leader_to_assign_the_topic(cli: Cli) -> None:
    async def leader(store: MetadataStore) -> bool:
        """Assign TOPIC to OTHER_BROKER once it waits (the seal is the broker's business)."""
        if await store.get(layout.unassigned(TOPIC)) is None:
            return False
        await OwnershipManager(store).assign(TOPIC, OTHER_BROKER)
        return True

    cli.do(two_brokers)
    with leader_thread(cli.url, leader):
        moved = cli("topics", "move", TOPIC.path, "--wait", "--timeout", "10")
    assert f"{TOPIC} is now served by broker {OTHER_BROKER}" in moved.stdout
    assert cli.json("topics", "describe", TOPIC.path)["owner"] == OTHER_BROKER
