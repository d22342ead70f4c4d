"""Writes `danube-seed001.etcdctl.json`: a consistent cluster built from seed 001's examples
(the seed's own keys, ids and values, in its formats only: nothing metaplane adds, no
`/cluster/leader_epoch`), put into a real etcd by etcdctl as Danube writes it (each broker's
registration, and the leader key, under that broker's lease), then read back with
`etcdctl get / --prefix -w json`.

Seed 001's examples are not one cluster as they stand: `reliable_topic` is shown both
assigned and unassigned, a load report belongs to a broker with no registration, the sealed
state names a third broker. Here each example has a place of its own: broker 625722408599041316
(the seed's registration) leads and has just unloaded `moving_topic`, which it sealed at the
seed's offset 21 and which waits for its next owner; broker 13308604176970018988 (the seed's
assignment and load report) serves `reliable_topic`; `new_topic` was just created and waits
for its first owner (the seed's "new topic" marker).

    .venv/bin/python tests/pipeline/data/danube_seed001.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from metaplane.testing import EtcdMember, etcd_binary

OUT = Path(__file__).with_name("danube-seed001.etcdctl.json")
LEADER = 625722408599041316
OWNER = 13308604176970018988
PRODUCER = 13940288943180594845
FINGERPRINT_1 = "sha256:270e3390980bc143" + "5a6e" * 12
FINGERPRINT_2 = "sha256:d6c3da8912fe0a77" + "c1d2" * 12
PRODUCT_V1 = {
    "type": "record",
    "name": "Product",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
PRODUCT_V2 = {
    "type": "record",
    "name": "Product",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "price", "type": ["null", "double"], "default": None},
    ],
}


def text(value: object) -> str:
    """A value as Danube writes it: serde_json, compact."""
    return json.dumps(value, separators=(",", ":"))


def registration(admin: int, client: int, metrics: int) -> str:
    return text(
        {
            "admin_addr": f"http://0.0.0.0:{admin}",
            "advertised_addr": f"0.0.0.0:{client}",
            "broker_addr": f"http://0.0.0.0:{client}",
            "prom_exporter": f"0.0.0.0:{metrics}",
        }
    )


def load_report(cpu: int, memory: int, topics: list[str]) -> str:
    usage = [{"resource": "CPU", "usage": cpu}, {"resource": "Memory", "usage": memory}]
    return text({"resources_usage": usage, "topic_list": topics, "topics_len": len(topics)})


def version(number: int, created_at: int, fingerprint: str, schema: object) -> dict[str, object]:
    return {
        "created_at": created_at,
        "created_by": "danube-client",
        "version": number,
        "fingerprint": fingerprint,
        "is_deprecated": False,
        "schema_def": {"Avro": {"fingerprint": fingerprint, "raw_schema": json.dumps(schema)}},
        "tags": [],
    }


def storage_object(start: int, end: int, created_at: int, size: int) -> str:
    return text(
        {
            "completed": True,
            "created_at": created_at,
            "end_offset": end,
            "etag": None,
            "object_id": f"data-{start}-{end}.dnb1",
            "offset_index": [[start, 0]],
            "size": size,
            "start_offset": start,
        }
    )


def topic_keys(topic: str, delivery: str) -> list[tuple[str, str]]:
    return [
        (f"/namespaces/default/topics/default/{topic}", "null"),
        (f"/topics/default/{topic}", "0"),
        (f"/topics/default/{topic}/delivery", text(delivery)),
    ]


def subscription(topic: str, name: str, consumer: str, cursor: int) -> list[tuple[str, str]]:
    value = {
        "consumer_id": None,
        "consumer_name": consumer,
        "subscription_name": name,
        "subscription_type": 0,
    }
    key = f"/topics/default/{topic}/subscriptions/{name}"
    return [(key, text(value)), (f"{key}/cursor", str(cursor))]


def cluster() -> list[tuple[str, str]]:
    return [
        ("/cluster/MY_CLUSTER", "null"),
        (f"/cluster/brokers/{LEADER}/state", text({"mode": "active", "reason": "boot"})),
        (f"/cluster/brokers/{OWNER}/state", text({"mode": "active", "reason": "boot"})),
        (f"/cluster/brokers/{OWNER}/default/reliable_topic", "null"),
        ("/cluster/unassigned/default/moving_topic", text({"reason": "unload", "from_broker": LEADER})),  # noqa: E501
        ("/cluster/unassigned/default/new_topic", "null"),
        (f"/cluster/load/{OWNER}", load_report(30, 30, ["/default/reliable_topic"])),
        (f"/cluster/load/{LEADER}", load_report(5, 12, [])),
    ]  # fmt: skip


def namespaces_and_topics() -> list[tuple[str, str]]:
    policy = {
        "max_consumers_per_subscription": 0,
        "max_consumers_per_topic": 0,
        "max_message_size": 10485760,
        "max_producers_per_topic": 0,
        "max_publish_rate": 0,
        "max_subscription_dispatch_rate": 0,
        "max_subscriptions_per_topic": 0,
    }
    producer = {
        "access_mode": 0,
        "producer_id": PRODUCER,
        "producer_name": "prod_json_reliable",
        "status": True,
        "topic_name": "/default/reliable_topic",
    }
    return [
        ("/namespaces/default/policy", text(policy)),
        *topic_keys("reliable_topic", "Reliable"),
        (f"/topics/default/reliable_topic/producers/{PRODUCER}", text(producer)),
        *subscription("reliable_topic", "subs_reliable", "cons_reliable", 13),
        *topic_keys("moving_topic", "Reliable"),
        *subscription("moving_topic", "subs_moving", "cons_moving", 21),
        *topic_keys("new_topic", "Reliable"),
    ]


def schemas() -> list[tuple[str, str]]:
    versions = [
        version(1, 1768728611, FINGERPRINT_1, PRODUCT_V1),
        version(2, 1768728613, FINGERPRINT_2, PRODUCT_V2),
    ]
    metadata = {
        "compatibility_mode": "Backward",
        "created_at": 1768728611,
        "created_by": "danube-client",
        "id": 1,
        "latest_version": 2,
        "subject": "product-catalog",
        "topics_using": [],
        "updated_at": 1768728613,
        "versions": versions,
    }
    return [
        ("/schemas/_global/next_schema_id", "2"),
        ("/schemas/product-catalog/metadata", text(metadata)),
        ("/schemas/product-catalog/versions/1", text(versions[0])),
        ("/schemas/product-catalog/versions/2", text(versions[1])),
        ("/schemas/_index/by_id/1", text({"schema_id": 1, "subject": "product-catalog"})),
    ]


def storage() -> list[tuple[str, str]]:
    reliable = "/danube-data/storage/topics/default/reliable_topic"
    moving = "/danube-data/storage/topics/default/moving_topic"
    sealed = {
        "sealed": True,
        "last_committed_offset": 21,
        "broker_id": LEADER,
        "timestamp": 1768625254,
    }
    return [
        (f"{reliable}/objects/00000000000000000000", storage_object(0, 29, 1768728599, 7164)),
        (f"{reliable}/objects/00000000000000000030", storage_object(30, 41, 1768728630, 2866)),
        (f"{reliable}/objects/cur", text({"start": "00000000000000000030"})),
        (f"{moving}/objects/00000000000000000000", storage_object(0, 21, 1768625250, 5012)),
        (f"{moving}/objects/cur", text({"start": "00000000000000000000"})),
        (f"{moving}/state", text(sealed)),
    ]


def main() -> None:
    etcd_binary()
    with tempfile.TemporaryDirectory() as folder, EtcdMember(Path(folder)) as etcd:
        leases = {}
        for broker in (LEADER, OWNER):
            granted = etcd.etcdctl("lease", "grant", "30").split()
            leases[broker] = granted[1]  # "lease 694d… granted with TTL(30s)"
        for key, value in [*cluster(), *namespaces_and_topics(), *schemas(), *storage()]:
            etcd.etcdctl("put", key, value)
        etcd.etcdctl("put", f"/cluster/register/{OWNER}", registration(50052, 6651, 9041),
                     f"--lease={leases[OWNER]}")  # fmt: skip
        etcd.etcdctl("put", f"/cluster/register/{LEADER}", registration(50051, 6650, 9040),
                     f"--lease={leases[LEADER]}")  # fmt: skip
        etcd.etcdctl("put", "/cluster/leader", str(LEADER), f"--lease={leases[LEADER]}")
        OUT.write_text(etcd.etcdctl("get", "/", "--prefix", "-w", "json"))
    sys.stdout.write(f"wrote {OUT}\n")


if __name__ == "__main__":
    main()
