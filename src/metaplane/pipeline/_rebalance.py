"""The rebalance plan's Spark side: the brokers' loads counted in the tables, and the topics
that move. The counts are planned by the cluster's own planner (`metaplane.cluster`:
`plan_quotas`, by the fair ranking, the same `BrokerLoad` and balance score the LoadManager
uses; imported from its modules, as the cluster package does not re-export them); Spark
then picks, for each transfer, the source's topics cheapest to move.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.cluster._rankings import BrokerLoad
from metaplane.cluster._rebalance import Quotas
from metaplane.pipeline._tables import Tables
from metaplane.pipeline._values import U64_TYPE
from metaplane.pipeline._views import TOPIC, brokers, owners, topic_facts

# Spark: loads, and the topics that move -----------------------------------------------------


def broker_loads(tables: Tables) -> DataFrame:
    """Every broker with its mode, whether it is registered, and its topic count."""
    return brokers(tables).select("broker_id", "mode", "registered", "topics")


def broker_load(row: Row) -> BrokerLoad:
    """A row of `broker_loads` as the planner's load: its topics counted, not listed."""
    return BrokerLoad(
        int(row["broker_id"]), row["mode"], registered=row["registered"], counted=row["topics"]
    )


def movable_topics(tables: Tables) -> DataFrame:
    """Assignments a plan may move: the topic has exactly one owner and no unassigned
    marker (the audit reports the others), ranked per broker cheapest first (fewest
    subscriptions, then by name): `rank` from 0. Read from the topic facts the audit
    shares."""
    alone = (F.col("owners") == 1) & (F.col("waiting") == 0)
    movable = topic_facts(tables).where(alone).select(*TOPIC, "subscriptions")
    order = Window.partitionBy("broker_id").orderBy("subscriptions", *TOPIC)
    return owners(tables).join(movable, TOPIC).withColumn("rank", F.row_number().over(order) - 1)


_TRANSFER_SCHEMA = T.StructType(
    [
        T.StructField("source", U64_TYPE),
        T.StructField("target", U64_TYPE),
        T.StructField("reason", T.StringType()),
        T.StructField("low", T.LongType()),
        T.StructField("high", T.LongType()),
    ]
)


def chosen_moves(spark: SparkSession, tables: Tables, quotas: Quotas) -> DataFrame:
    """The topics that move: each transfer takes the next `count` ranks of its source."""
    ranges = []
    taken: Counter[int] = Counter()
    for transfer in quotas.transfers:
        low = taken[transfer.source]
        taken[transfer.source] += transfer.count
        ranges.append(
            (transfer.source, transfer.target, transfer.reason, low, low + transfer.count)
        )
    spans = spark.createDataFrame(
        [(Decimal(s), Decimal(t), reason, low, high) for s, t, reason, low, high in ranges],
        _TRANSFER_SCHEMA,
    )
    candidates = movable_topics(tables)
    joined = candidates.join(
        F.broadcast(spans),
        (candidates["broker_id"] == spans["source"])
        & (candidates["rank"] >= spans["low"])
        & (candidates["rank"] < spans["high"]),
    )
    return joined.select(
        *TOPIC,
        F.col("source"),
        F.col("target"),
        "reason",
        "assignment_key",
        F.col("mod_revision").alias("assignment_mod_revision"),
        "subscriptions",
    )
