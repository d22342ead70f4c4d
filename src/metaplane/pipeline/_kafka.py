"""Kafka 0.8's ZooKeeper layout (seed 002) brought into ours: znodes read from a dump file
(JSON Lines, see `read_kafka_dump`) or a live ZooKeeper, turned by Spark into metaplane's keys,
then written with the store's transactions. The mapping is in docs/pipeline.md.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import KazooException, NoNodeError  # type: ignore[import-untyped]
from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane import layout
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.pipeline._errors import ImportConflict, KafkaDumpError
from metaplane.pipeline._values import U64_TYPE
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
from metaplane.store import Compare, Get, MetadataStore, Put, Unavailable

NULL = b"null"
IMPORT_REASON = "kafka-import"
BATCH = 64
"""Keys per transaction (each with a compare that it is still absent)."""

# The Kafka roots that matter; the rest of its tree (admin, config, owners) is not read.
KAFKA_ROOTS = ("/brokers/ids", "/brokers/topics", "/controller", "/controller_epoch", "/consumers")

_ID = r"(0|[1-9][0-9]{0,9})"
_NAME = r"([^/]+)"
BROKER = rf"^/brokers/ids/{_ID}$"
TOPIC = rf"^/brokers/topics/{_NAME}$"
PARTITION_STATE = rf"^/brokers/topics/{_NAME}/partitions/{_ID}/state$"
CONTROLLER = r"^/controller$"
CONTROLLER_EPOCH = r"^/controller_epoch$"
OFFSET = rf"^/consumers/{_NAME}/offsets/{_NAME}/{_ID}$"


@dataclass(frozen=True)
class KafkaNode:
    """One znode: its path and its data (None when it holds none)."""

    path: str
    data: bytes | None


# Reading ------------------------------------------------------------------------------------


def read_kafka_dump(path: Path) -> list[KafkaNode]:
    """The znodes of a dump file: JSON Lines, one znode a line, {"path": "/brokers/ids/0",
    "data": "<UTF-8 text>"} (`data` null for a znode without data; "data_base64" instead of
    "data" for bytes that are not UTF-8). Blank lines and lines starting with # are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise KafkaDumpError(f"{path}: cannot read the dump: {error}") from None
    nodes = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            nodes.append(_dump_line(path, number, text))
    if not nodes:
        raise KafkaDumpError(f"{path}: the dump holds no znode")
    return nodes


def _dump_line(path: Path, number: int, text: str) -> KafkaNode:
    where = f"{path}:{number}"
    try:
        item = json.loads(text)
    except json.JSONDecodeError as error:
        raise KafkaDumpError(f"{where}: not JSON: {error.msg}") from None
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        raise KafkaDumpError(f'{where}: each line is an object with a "path" string')
    if not item["path"].startswith("/"):
        raise KafkaDumpError(f"{where}: {item['path']!r} is not an absolute znode path")
    return KafkaNode(item["path"], _dump_data(where, item))


def _dump_data(where: str, item: dict[str, Any]) -> bytes | None:
    if "data_base64" in item:
        try:
            return base64.b64decode(item["data_base64"], validate=True)
        except (ValueError, TypeError):
            raise KafkaDumpError(f'{where}: "data_base64" is not base64') from None
    data = item.get("data")
    if data is not None and not isinstance(data, str):
        raise KafkaDumpError(f'{where}: "data" is a string or null')
    return None if data is None else data.encode("utf-8")


def write_kafka_dump(nodes: Iterable[KafkaNode], path: Path) -> int:
    """Write `nodes` as a dump file; the number of lines."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for node in nodes:
            out.write(json.dumps(_dump_item(node)) + "\n")
            count += 1
    return count


def _dump_item(node: KafkaNode) -> dict[str, str | None]:
    if node.data is None:
        return {"path": node.path, "data": None}
    try:
        return {"path": node.path, "data": node.data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"path": node.path, "data_base64": base64.b64encode(node.data).decode()}


def read_kafka_zookeeper(hosts: str, timeout: float = 10.0) -> list[KafkaNode]:
    """The znodes under Kafka's roots in a live ZooKeeper (`host:port[,…][/chroot]`);
    consumers only as far as their offsets."""
    client = KazooClient(hosts=hosts, timeout=timeout, read_only=True)
    try:
        client.start(timeout=timeout)
    except (KazooTimeoutError, KazooException) as error:
        client.close()
        raise Unavailable(f"ZooKeeper at {hosts} is not reachable: {error}") from None
    try:
        return list(_walk_kafka(client))
    except KazooException as error:
        raise KafkaDumpError(
            f"ZooKeeper at {hosts}: reading Kafka's tree failed: {error}"
        ) from None
    finally:
        client.stop()
        client.close()


def _walk_kafka(client: KazooClient) -> Iterator[KafkaNode]:
    for root in KAFKA_ROOTS:
        if root == "/consumers":
            for group in _children(client, root):
                yield from _walk(client, f"{root}/{group}/offsets")
        else:
            yield from _walk(client, root)


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def _walk(client: KazooClient, path: str) -> Iterator[KafkaNode]:
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return
    yield KafkaNode(path, data or None)
    for child in _children(client, path):
        yield from _walk(client, f"{path}/{child}")


# The transformation, in Spark ---------------------------------------------------------------

_NODES = T.StructType(
    [T.StructField("path", T.StringType()), T.StructField("data", T.StringType())]
)

_BROKER_JSON = T.StructType(
    [T.StructField("host", T.StringType()), T.StructField("port", T.LongType())]
)
_TOPIC_JSON = T.StructType(
    [T.StructField("partitions", T.MapType(T.StringType(), T.ArrayType(T.LongType())))]
)
_STATE_JSON = T.StructType(
    [T.StructField("leader", T.LongType()), T.StructField("leader_epoch", T.LongType())]
)
_CONTROLLER_JSON = T.StructType([T.StructField("brokerid", T.LongType())])

ROW_SCHEMA_FIELDS = (
    "kind",
    "topic",
    "partition",
    "broker_id",
    "subscription",
    "number",
    "host",
    "port",
    "from_broker",
)


def nodes_frame(spark: SparkSession, nodes: Iterable[KafkaNode]) -> DataFrame:
    """The znodes as a DataFrame (path, data as text; null when not UTF-8)."""
    rows = [(node.path, _text(node.data)) for node in nodes]
    return spark.createDataFrame(rows, _NODES)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _match(nodes: DataFrame, regex: str, *groups: str) -> DataFrame:
    path = F.col("path")
    picked = [
        F.regexp_extract(path, regex, index + 1).alias(name) for index, name in enumerate(groups)
    ]
    return nodes.where(path.rlike(regex)).select(*picked, "data")


def _number(text: Column) -> Column:
    return F.trim(text).try_cast(U64_TYPE)


def kafka_rows(nodes: DataFrame) -> DataFrame:
    """One row per key to write: its `kind` (a KeyKind value) and fields: topic (Kafka's),
    partition, broker_id, subscription, number, host, port, from_broker."""
    brokers = _match(nodes, BROKER, "broker_id").select(
        F.col("broker_id").try_cast(U64_TYPE).alias("broker_id"),
        F.from_json("data", _BROKER_JSON).alias("json"),
    )
    registered = brokers.select("broker_id").withColumn("registered", F.lit(True))
    partitions = _partitions(nodes)
    owned = partitions.join(registered, F.col("leader") == registered["broker_id"], "left")
    frames = [
        brokers.select(
            F.lit(KeyKind.BROKER_REGISTRATION.value).alias("kind"),
            "broker_id",
            F.col("json.host").alias("host"),
            F.col("json.port").alias("port"),
        ),
        brokers.select(F.lit(KeyKind.BROKER_STATE.value).alias("kind"), "broker_id"),
        _topic_rows(partitions),
        _ownership_rows(owned),
        _offset_rows(nodes, partitions),
        _controller_rows(nodes),
    ]
    return _aligned(frames)


def _partitions(nodes: DataFrame) -> DataFrame:
    """Every (topic, partition) Kafka knows, from the topic's replica map or a state znode,
    with the partition's leader (null when unknown) and the topic's partition count."""
    declared = _match(nodes, TOPIC, "topic").select(
        "topic", F.explode(F.map_keys(F.from_json("data", _TOPIC_JSON)["partitions"])).alias("p")
    )
    declared = declared.select("topic", F.col("p").try_cast("long").alias("partition"))
    states = _match(nodes, PARTITION_STATE, "topic", "partition").select(
        "topic",
        F.col("partition").try_cast("long").alias("partition"),
        F.from_json("data", _STATE_JSON)["leader"].alias("leader"),
    )
    known = (
        declared.unionByName(states.select("topic", "partition"))
        .where(F.col("partition").isNotNull())
        .distinct()
    )
    counts = known.groupBy("topic").agg((F.max("partition") + 1).alias("partitions"))
    return known.join(states, ["topic", "partition"], "left").join(counts, "topic")


def _topic_rows(partitions: DataFrame) -> DataFrame:
    parents = partitions.select("topic", "partitions").distinct()
    return _aligned(
        [
            parents.select(
                F.lit(KeyKind.TOPIC_ROOT.value).alias("kind"),
                "topic",
                F.col("partitions").cast(U64_TYPE).alias("number"),
            ),
            parents.select(F.lit(KeyKind.NAMESPACE_TOPIC.value).alias("kind"), "topic"),
            *(
                partitions.select(F.lit(kind.value).alias("kind"), "topic", "partition")
                for kind in (KeyKind.TOPIC_ROOT, KeyKind.NAMESPACE_TOPIC, KeyKind.TOPIC_DELIVERY)
            ),
        ]
    )


def _ownership_rows(owned: DataFrame) -> DataFrame:
    """A partition led by a registered broker is assigned to it; one without a leader waits
    for one; one led by a broker that is gone waits too, marked as that broker's loss."""
    leader = F.col("leader").cast(U64_TYPE)
    assigned = owned.where(F.col("registered"))
    waiting = owned.where(F.col("registered").isNull())
    lost = F.when(F.col("leader") >= 0, leader)
    return _aligned(
        [
            assigned.select(
                F.lit(KeyKind.ASSIGNMENT.value).alias("kind"),
                "topic",
                "partition",
                leader.alias("broker_id"),
            ),
            waiting.select(
                F.lit(KeyKind.UNASSIGNED.value).alias("kind"),
                "topic",
                "partition",
                lost.alias("from_broker"),
            ),
        ]
    )


def _offset_rows(nodes: DataFrame, partitions: DataFrame) -> DataFrame:
    """Each consumer group with an offset on a partition is a subscription of it; Kafka's
    offset is the next to consume, so the cursor (last acknowledged) is one less."""
    offsets = _match(nodes, OFFSET, "subscription", "topic", "partition").select(
        "subscription",
        "topic",
        F.col("partition").try_cast("long").alias("partition"),
        _number(F.col("data")).alias("offset"),
    )
    known = offsets.join(partitions.select("topic", "partition"), ["topic", "partition"])
    cursor = (F.col("offset") - 1).cast(U64_TYPE)
    return _aligned(
        [
            known.select(
                F.lit(KeyKind.SUBSCRIPTION.value).alias("kind"),
                "topic",
                "partition",
                "subscription",
            ),
            known.where(F.col("offset") > 0).select(
                F.lit(KeyKind.CURSOR.value).alias("kind"),
                "topic",
                "partition",
                "subscription",
                cursor.alias("number"),
            ),
        ]
    )


def _controller_rows(nodes: DataFrame) -> DataFrame:
    controller = _match(nodes, CONTROLLER).select(
        F.from_json("data", _CONTROLLER_JSON)["brokerid"].cast(U64_TYPE).alias("number")
    )
    epoch = _match(nodes, CONTROLLER_EPOCH).select(_number(F.col("data")).alias("number"))
    return _aligned(
        [
            controller.where(F.col("number").isNotNull()).select(
                F.lit(KeyKind.LEADER.value).alias("kind"), "number"
            ),
            epoch.where(F.col("number").isNotNull()).select(
                F.lit(KeyKind.LEADER_EPOCH.value).alias("kind"), "number"
            ),
        ]
    )


_TYPES = {
    "kind": T.StringType(),
    "topic": T.StringType(),
    "partition": T.LongType(),
    "broker_id": U64_TYPE,
    "subscription": T.StringType(),
    "number": U64_TYPE,
    "host": T.StringType(),
    "port": T.LongType(),
    "from_broker": U64_TYPE,
}


def _aligned(frames: list[DataFrame]) -> DataFrame:
    """The frames with every row column (null where a kind has no such field), unioned."""

    def align(frame: DataFrame) -> DataFrame:
        return frame.select(
            *(
                (F.col(name) if name in frame.columns else F.lit(None)).cast(kind).alias(name)
                for name, kind in _TYPES.items()
            )
        )

    aligned = [align(frame) for frame in frames]
    result = aligned[0]
    for frame in aligned[1:]:
        result = result.unionByName(frame)
    return result


# Rendering on the driver: our keys and values -----------------------------------------------


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


# Writing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportResult:
    """Keys written, and keys that already held the same value (a re-run writes nothing)."""

    written: int
    unchanged: int


async def apply_import(
    store: MetadataStore,
    plan: ImportPlan,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Write the plan: nothing if any key holds another value already (`ImportConflict`);
    else the missing keys, in transactions of `BATCH` that each insist the keys are still
    absent. A batch that loses that race fails with `ImportConflict`; the batches before it
    stay written, and running the import again completes it."""
    existing = await _existing(store, [key for key, _ in plan.entries])
    conflicts = [key for key, value in plan.entries if key in existing and existing[key] != value]
    if conflicts:
        raise ImportConflict(conflicts)
    missing = [(key, value) for key, value in plan.entries if key not in existing]
    written = 0
    for start in range(0, len(missing), BATCH):
        batch = missing[start : start + BATCH]
        result = await store.txn(
            [Compare.absent(key) for key, _ in batch], [Put(key, value) for key, value in batch], []
        )
        if not result.succeeded:
            raise ImportConflict([key for key, _ in batch])
        written += len(batch)
        if progress is not None:
            progress(written)
    return ImportResult(written, len(plan.entries) - len(missing))


async def _existing(store: MetadataStore, keys: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for start in range(0, len(keys), BATCH):
        result = await store.txn([], [Get(key) for key in keys[start : start + BATCH]], [])
        for index in range(len(result.results)):
            entry = result.entry(index)
            if entry is not None:
                found[entry.key] = entry.value
    return found
