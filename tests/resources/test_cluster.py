"""ClusterManager on every backend: the cluster marker, registrations under a lease, broker
states and load reports with their typed errors, and the leader with its epoch."""

from __future__ import annotations

import pytest

from metaplane import layout
from metaplane.resources import (
    BrokerRegistered,
    ClusterExists,
    ClusterManager,
    Leadership,
    NoBroker,
    NoCluster,
    NoLeader,
    NoLoadReport,
)
from metaplane.store import ABSENT, AlreadyExists, BadVersion, MetadataStore
from tests.on_zookeeper import EVERY_BACKEND

from .samples import ACTIVE, BROKER, DRAINING, OTHER_BROKER, load_report, registration

pytestmark = EVERY_BACKEND


async def test_cluster_marker(store: MetadataStore) -> None:
    cluster = ClusterManager(store)
    with pytest.raises(NoCluster) as missing:
        await cluster.cluster("MY_CLUSTER")
    assert missing.value.cluster_name == "MY_CLUSTER"
    revision = await cluster.create_cluster("MY_CLUSTER")
    marker = await cluster.cluster("MY_CLUSTER")
    assert (marker.value, marker.create_revision) == (None, revision)
    with pytest.raises(ClusterExists):
        await cluster.create_cluster("MY_CLUSTER")


async def test_registration_under_a_lease(store: MetadataStore) -> None:
    cluster = ClusterManager(store)
    lease = await store.grant(60)
    await cluster.register(BROKER, registration(), lease)
    await cluster.register(OTHER_BROKER, registration(6651), lease.id)
    with pytest.raises(BrokerRegistered) as registered:
        await cluster.register(BROKER, registration(6652), lease)
    assert registered.value.broker_id == BROKER
    found = await cluster.registration(BROKER)
    assert found.value == registration()
    entry = await store.get(layout.broker_registration(BROKER))
    assert entry is not None and entry.lease == lease.id
    assert await cluster.brokers() == [OTHER_BROKER, BROKER]
    assert sorted(await cluster.registrations()) == [OTHER_BROKER, BROKER]
    await store.revoke(lease)
    assert await cluster.brokers() == []
    with pytest.raises(NoBroker) as gone:
        await cluster.registration(BROKER)
    assert gone.value.broker_id == BROKER


async def test_broker_state(store: MetadataStore) -> None:
    cluster = ClusterManager(store)
    with pytest.raises(NoBroker) as unknown:
        await cluster.state(BROKER)
    assert unknown.value.key == layout.broker_state(BROKER)
    with pytest.raises(NoBroker):
        await cluster.set_state(BROKER, DRAINING, 1)
    await cluster.set_state(BROKER, ACTIVE, ABSENT)
    with pytest.raises(AlreadyExists):
        await cluster.set_state(BROKER, ACTIVE, ABSENT)
    read = await cluster.state(BROKER)
    assert read.value == ACTIVE
    await cluster.set_state(BROKER, DRAINING, read.version)
    with pytest.raises(BadVersion):
        await cluster.set_state(BROKER, ACTIVE, read.version)
    assert (await cluster.state(BROKER)).value == DRAINING


async def test_load_reports(store: MetadataStore) -> None:
    cluster = ClusterManager(store)
    with pytest.raises(NoLoadReport) as missing:
        await cluster.load_report(BROKER)
    assert missing.value.broker_id == BROKER
    await cluster.write_load_report(BROKER, load_report(1))
    await cluster.write_load_report(BROKER, load_report(2))
    await cluster.write_load_report(OTHER_BROKER, load_report(0))
    read = await cluster.load_report(BROKER)
    assert (read.value.topics_len, read.version) == (2, 2)
    with pytest.raises(BadVersion):
        await cluster.write_load_report(BROKER, load_report(3), 1)
    reports = await cluster.load_reports()
    assert {broker: report.value.topics_len for broker, report in reports.items()} == {
        BROKER: 2,
        OTHER_BROKER: 0,
    }
    with pytest.raises(BadVersion):
        await cluster.delete_load_report(BROKER, 1)
    await cluster.delete_load_report(BROKER, 2)
    with pytest.raises(NoLoadReport):
        await cluster.delete_load_report(BROKER, 2)
    await cluster.delete_load_report(BROKER)  # ANY: a missing report is no error
    assert list(await cluster.load_reports()) == [OTHER_BROKER]


async def test_leadership(store: MetadataStore) -> None:
    cluster = ClusterManager(store)
    assert await cluster.leader_epoch() == 0
    with pytest.raises(NoLeader):
        await cluster.leadership()
    # The coordination layer's election writes these two keys in one transaction.
    await store.put(layout.leader_epoch(), b"3")
    revision = await store.put(layout.leader(), str(BROKER).encode())
    assert await cluster.leadership() == Leadership(BROKER, 3, revision)
    assert await cluster.leader_epoch() == 3
