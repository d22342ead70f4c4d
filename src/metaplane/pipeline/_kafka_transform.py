"""Kafka 0.8's znodes turned into rows of our layout, in Spark: a pure transform from the
znodes (path, data) to one row per key to write (its kind and fields). The mapping is in
docs/pipeline.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.layout import KeyKind
from metaplane.pipeline._kafka_read import KafkaNode
from metaplane.pipeline._values import U64_TYPE

_ID = r"(0|[1-9][0-9]{0,9})"
_NAME = r"([^/]+)"
BROKER = rf"^/brokers/ids/{_ID}$"
TOPIC = rf"^/brokers/topics/{_NAME}$"
PARTITION_STATE = rf"^/brokers/topics/{_NAME}/partitions/{_ID}/state$"
CONTROLLER = r"^/controller$"
CONTROLLER_EPOCH = r"^/controller_epoch$"
OFFSET = rf"^/consumers/{_NAME}/offsets/{_NAME}/{_ID}$"

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
