"""`metaplane brokers list | drain` on sqlite, etcd, zk: ids above 2^63 as JSON numbers, the
leader with its epoch, draining and waiting for the leader to finish it."""

from __future__ import annotations

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerState,
    ClusterManager,
    OwnershipManager,
    encode,
)
from metaplane.store import ABSENT, MetadataStore
from tests.admin.conftest import BACKENDS_WITH_URL
from tests.admin.runner import Cli, add_broker, add_topic, leader_thread
from tests.resources.samples import BROKER, DRAINING, OTHER_BROKER, load_report

pytestmark = BACKENDS_WITH_URL

GONE = 7
"""A broker that left its state behind but is no longer registered."""

TOPICS = [TopicName("default", f"t{index}") for index in range(3)]


async def a_cluster(store: MetadataStore) -> None:
    """Two live brokers (one id above 2^63), one gone; three topics; a leader at epoch 4."""
    await add_broker(store, BROKER)
    await add_broker(store, OTHER_BROKER, DRAINING)
    await ClusterManager(store).set_state(GONE, DRAINING, ABSENT)
    for topic in TOPICS[:2]:
        await add_topic(store, topic, owner=BROKER)
    await add_topic(store, TOPICS[2])
    await ClusterManager(store).write_load_report(BROKER, load_report(topics=2))
    await store.put(layout.leader(), encode(BROKER))
    await store.put(layout.leader_epoch(), encode(4))


def test_list_every_broker_with_its_load_and_the_leader(cli: Cli) -> None:
    cli.do(a_cluster)
    listed = cli.json("brokers", "list")
    assert listed["leader"] == {"broker_id": BROKER, "epoch": 4}
    assert [broker["broker_id"] for broker in listed["brokers"]] == [
        GONE, OTHER_BROKER, BROKER,
    ]  # fmt: skip
    leader = listed["brokers"][2]
    assert leader == {
        "broker_id": 13308604176970018988,  # above 2^63: a JSON number, unchanged
        "live": True,
        "leader": True,
        "addresses": {
            "admin_addr": "http://0.0.0.0:50051", "advertised_addr": "0.0.0.0:6650",
            "broker_addr": "http://0.0.0.0:6650", "prom_exporter": "0.0.0.0:9040",
        },
        "state": {"mode": "active", "reason": "boot"},
        "topics_owned": 2,
        "load": {"cpu": 30, "memory": 30, "topics": 2},
    }  # fmt: skip
    gone = listed["brokers"][0]
    assert (gone["live"], gone["addresses"], gone["load"], gone["topics_owned"]) == (
        False, None, None, 0,
    )  # fmt: skip
    table = cli("brokers", "list").stdout
    assert "3 broker(s), ★ leader 13308604176970018988 (epoch 4)" in table
    assert f"{BROKER} ★" in table and "draining: maintenance" in table


def test_list_an_empty_cluster(cli: Cli) -> None:
    assert "0 broker(s), no leader" in cli("brokers", "list").stdout
    listed = cli.json("brokers", "list")
    assert (listed["leader"], listed["brokers"]) == (None, [])


def test_list_names_a_malformed_key(cli: Cli) -> None:
    cli("kv", "put", layout.broker_state(3), '{"mode":"asleep"}', "--raw")
    error = cli.error("brokers", "list")
    assert error.startswith("error: /cluster/brokers/3/state: malformed BrokerState value")


def test_drain_writes_draining_with_its_reason(cli: Cli) -> None:
    cli.do(lambda store: add_broker(store, BROKER))
    drained = cli("brokers", "drain", str(BROKER), "--reason", "kernel upgrade")
    assert f"broker {BROKER} set to draining" in drained.stdout
    state = cli.do(lambda store: ClusterManager(store).state(BROKER))
    assert state.value == BrokerState(mode=BrokerMode.DRAINING, reason="kernel upgrade")
    again = cli.json("brokers", "drain", str(BROKER))
    assert again == {"broker_id": BROKER, "was": "draining", "revision": None}
    assert cli.error("brokers", "drain", "9") == (
        "error: broker 9 is unknown (/cluster/brokers/9/state does not exist)"
    )
    assert cli("brokers", "drain", "-1", code=2).exit_code == 2


def test_drain_waits_for_the_leader_to_move_every_topic(cli: Cli) -> None:
    async def setup(store: MetadataStore) -> None:
        await add_broker(store, BROKER)
        for topic in TOPICS:
            await add_topic(store, topic, owner=BROKER)

    async def leader(store: MetadataStore) -> bool:
        """Move the topics away once the broker drains, then mark it drained."""
        cluster, ownership = ClusterManager(store), OwnershipManager(store)
        state = await cluster.state(BROKER)
        if state.value.mode is not BrokerMode.DRAINING:
            return False
        for topic in TOPICS:
            await ownership.unassign(topic)
        drained = BrokerState(mode=BrokerMode.DRAINED, reason=state.value.reason)
        await cluster.set_state(BROKER, drained, state.version)
        return True

    cli.do(setup)
    with leader_thread(cli.url, leader):
        waited = cli("brokers", "drain", str(BROKER), "--wait", "--timeout", "10")
    assert f"broker {BROKER} set to draining and drained" in waited.stdout
    assert cli.json("brokers", "list")["brokers"][0]["topics_owned"] == 0


def test_drain_gives_up_waiting_after_its_timeout(cli: Cli) -> None:
    cli.do(lambda store: add_broker(store, BROKER))
    refused = cli.error("brokers", "drain", str(BROKER), "--wait", "--timeout", "0.3", code=3)
    assert refused == f"error: gave up after 0.3 s waiting for broker {BROKER} to be drained"
