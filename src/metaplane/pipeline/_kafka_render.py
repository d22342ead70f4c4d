"""The rows of a Kafka import (`kafka_rows`) rendered on the driver into our keys and values,
by the layout's builders and the resources' encoders: the import plan, written by nothing
here (`_kafka_write` writes it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pyspark.sql import Row, SparkSession

from metaplane import layout
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.pipeline._kafka_read import KafkaNode
from metaplane.pipeline._kafka_transform import ROW_SCHEMA_FIELDS, kafka_rows, nodes_frame
from metaplane.resources import (
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    Delivery,
    NamespacePolicy,
    SubscriptionMetadata,
    SubscriptionType,
    UnassignedMarker,
    encode,
)

NULL = b"null"
IMPORT_REASON = "kafka-import"


@dataclass
class ImportPlan:
    """The keys an import writes, in order, how many of each kind, and what it skips."""

    entries: list[tuple[str, bytes]] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def add(self, kind: KeyKind, key: str, value: bytes) -> None:
        self.entries.append((key, value))
        self.kinds[kind.value] += 1


def plan_kafka_import(
    spark: SparkSession,
    nodes: Iterable[KafkaNode],
    namespace: str = "default",
    cluster_name: str | None = None,
) -> ImportPlan:
    """What importing `nodes` into `namespace` writes (nothing is written here)."""
    layout.check_namespace(namespace)
    rows = kafka_rows(nodes_frame(spark, nodes)).collect()
    plan = ImportPlan()
    if cluster_name is not None:
        plan.add(KeyKind.CLUSTER_NAME, layout.cluster_name(cluster_name), NULL)
    plan.add(
        KeyKind.NAMESPACE_POLICY, layout.namespace_policy(namespace), encode(NamespacePolicy())
    )
    order = {kind.value: index for index, kind in enumerate(KeyKind)}
    for row in sorted(
        rows,
        key=lambda r: (
            order[r["kind"]],
            r["topic"] or "",
            r["partition"] or 0,
            r["subscription"] or "",
            r["broker_id"] or 0,
        ),
    ):
        try:
            _render(plan, namespace, row)
        except LayoutError as error:
            plan.skipped.append((_describe(row), str(error)))
    return plan


def _describe(row: Row) -> str:
    parts = [f"{name}={row[name]}" for name in ROW_SCHEMA_FIELDS if row[name] is not None]
    return " ".join(parts)


def _topic(namespace: str, row: Row) -> TopicName:
    topic = TopicName(namespace, row["topic"])
    return topic if row["partition"] is None else topic.partition(row["partition"])


def _render(plan: ImportPlan, namespace: str, row: Row) -> None:
    kind = KeyKind(row["kind"])
    render = _RENDERERS[kind]
    key, value = render(namespace, row)
    plan.add(kind, key, value)


def _registration(namespace: str, row: Row) -> tuple[str, bytes]:
    address = f"{row['host']}:{row['port']}"
    value = BrokerRegistration(
        admin_addr="", advertised_addr=address, broker_addr=f"http://{address}"
    )
    return layout.broker_registration(int(row["broker_id"])), encode(value)


def _state(namespace: str, row: Row) -> tuple[str, bytes]:
    value = BrokerState(mode=BrokerMode.ACTIVE, reason=IMPORT_REASON)
    return layout.broker_state(int(row["broker_id"])), encode(value)


def _root(namespace: str, row: Row) -> tuple[str, bytes]:
    count = 0 if row["partition"] is not None else int(row["number"])
    return layout.topic_root(_topic(namespace, row)), encode(count)


def _listed(namespace: str, row: Row) -> tuple[str, bytes]:
    return layout.namespace_topic(_topic(namespace, row)), NULL


def _delivery(namespace: str, row: Row) -> tuple[str, bytes]:
    return layout.topic_delivery(_topic(namespace, row)), encode(Delivery.RELIABLE)


def _assignment(namespace: str, row: Row) -> tuple[str, bytes]:
    return layout.assignment(int(row["broker_id"]), _topic(namespace, row)), NULL


def _unassigned(namespace: str, row: Row) -> tuple[str, bytes]:
    key = layout.unassigned(_topic(namespace, row))
    if row["from_broker"] is None:
        return key, NULL
    return key, encode(UnassignedMarker(reason="broker_lost", from_broker=int(row["from_broker"])))


def _subscription(namespace: str, row: Row) -> tuple[str, bytes]:
    group = row["subscription"]
    # A Kafka group's members split the partitions; on one partition, one consumes at a time.
    value = SubscriptionMetadata(
        consumer_id=None,
        consumer_name=group,
        subscription_name=group,
        subscription_type=SubscriptionType.FAILOVER,
    )
    return layout.subscription(_topic(namespace, row), group), encode(value)


def _cursor(namespace: str, row: Row) -> tuple[str, bytes]:
    return layout.cursor(_topic(namespace, row), row["subscription"]), encode(int(row["number"]))


def _leader(namespace: str, row: Row) -> tuple[str, bytes]:
    return layout.leader(), encode(int(row["number"]))


def _epoch(namespace: str, row: Row) -> tuple[str, bytes]:
    return layout.leader_epoch(), encode(int(row["number"]))


_RENDERERS: dict[KeyKind, Callable[[str, Row], tuple[str, bytes]]] = {
    KeyKind.BROKER_REGISTRATION: _registration,
    KeyKind.BROKER_STATE: _state,
    KeyKind.TOPIC_ROOT: _root,
    KeyKind.NAMESPACE_TOPIC: _listed,
    KeyKind.TOPIC_DELIVERY: _delivery,
    KeyKind.ASSIGNMENT: _assignment,
    KeyKind.UNASSIGNED: _unassigned,
    KeyKind.SUBSCRIPTION: _subscription,
    KeyKind.CURSOR: _cursor,
    KeyKind.LEADER: _leader,
    KeyKind.LEADER_EPOCH: _epoch,
}
