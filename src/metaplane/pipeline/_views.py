"""Views of the typed tables that several transforms share: topics and their partitions,
brokers and their modes, owners, subscriptions with cursors, and each topic's last committed
offset. Pure functions of `Tables`; the ones that join or aggregate are built once per set of
tables (`Tables.shared`), and kept in memory with them.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from metaplane.layout import KeyKind, TopicName
from metaplane.pipeline._tables import Tables
from metaplane.pipeline._values import U64_TYPE

TOPIC = ["namespace", "topic"]
"""How every table names a topic."""

# A partition is the topic "{topic}-part-{i}" (seed 003); the suffix comes from the layout.
_SUFFIX = TopicName("n", "t").partition(0).topic[1:-1]
PARTITION_REGEX = rf"^(.+){re.escape(_SUFFIX)}(0|[1-9][0-9]{{0,9}})$"


def topics(tables: Tables) -> DataFrame:
    """Every topic root: namespace, topic, `partitions` (null when malformed), `root_key`."""
    return tables[KeyKind.TOPIC_ROOT].select(
        *TOPIC, F.col("value").alias("partitions"), F.col("key").alias("root_key")
    )


def served_topics(tables: Tables) -> DataFrame:
    """The topics a broker serves: every topic that is not a partitioned parent."""
    return topics(tables).where(F.col("partitions") == 0)


def partitions(tables: Tables) -> DataFrame:
    """The topics named as partitions: namespace, topic, `parent`, `index`."""
    name = F.col("topic")
    return (
        topics(tables)
        .select(
            *TOPIC,
            F.regexp_extract(name, PARTITION_REGEX, 1).alias("parent"),
            F.regexp_extract(name, PARTITION_REGEX, 2).alias("index"),
        )
        .where(F.col("parent") != "")
        .withColumn("index", F.col("index").try_cast("long"))
    )


def registered(tables: Tables) -> DataFrame:
    """Registered brokers: broker_id, `registration_key`, `lease`, `address`."""
    return tables[KeyKind.BROKER_REGISTRATION].select(
        "broker_id",
        F.col("key").alias("registration_key"),
        "lease",
        F.col("value.broker_addr").alias("address"),
    )


def broker_modes(tables: Tables) -> DataFrame:
    """Each broker with a state key: broker_id, `mode` (null when malformed), `state_key`."""
    return tables[KeyKind.BROKER_STATE].select(
        "broker_id", F.col("value.mode").alias("mode"), F.col("key").alias("state_key")
    )


def brokers(tables: Tables) -> DataFrame:
    """Every broker the snapshot knows of (registered, with a state, an assignment or a load
    report): broker_id, registered, mode (active when it has no state key), topics."""
    return tables.shared("brokers", _brokers)


def _brokers(tables: Tables) -> DataFrame:
    ids = (
        tables[KeyKind.BROKER_REGISTRATION]
        .select("broker_id")
        .union(tables[KeyKind.BROKER_STATE].select("broker_id"))
        .union(tables[KeyKind.ASSIGNMENT].select("broker_id"))
        .union(tables[KeyKind.LOAD_REPORT].select("broker_id"))
        .distinct()
    )
    owned = tables[KeyKind.ASSIGNMENT].groupBy("broker_id").agg(F.count("*").alias("topics"))
    return (
        ids.join(registered(tables), "broker_id", "left")
        .join(broker_modes(tables), "broker_id", "left")
        .join(owned, "broker_id", "left")
        .select(
            "broker_id",
            F.col("registration_key").isNotNull().alias("registered"),
            F.coalesce(F.col("mode"), F.lit("active")).alias("mode"),
            F.coalesce(F.col("topics"), F.lit(0)).alias("topics"),
            "address",
        )
    )


def owners(tables: Tables) -> DataFrame:
    """Every assignment: namespace, topic, `broker_id`, `assignment_key`, `mod_revision`."""
    return tables[KeyKind.ASSIGNMENT].select(
        *TOPIC, "broker_id", F.col("key").alias("assignment_key"), "mod_revision"
    )


def objects(tables: Tables) -> DataFrame:
    """Well-formed storage object descriptors, flattened."""
    value = F.col("value")
    return (
        tables[KeyKind.STORAGE_OBJECT]
        .where(F.col("valid"))
        .select(
            *TOPIC,
            "key",
            "offset",
            "mod_revision",
            value["start_offset"].alias("start_offset"),
            value["end_offset"].alias("end_offset"),
            value["size"].alias("size"),
            value["completed"].alias("completed"),
            value["created_at"].alias("created_at"),
            value["object_id"].alias("object_id"),
        )
    )


def last_committed(tables: Tables) -> DataFrame:
    """Each topic's last committed offset as the metadata knows it: the highest end of its
    completed objects, or its sealed state's, whichever is higher."""
    return tables.shared("last_committed", _last_committed)


def _last_committed(tables: Tables) -> DataFrame:
    uploaded = (
        objects(tables)
        .where(F.col("completed"))
        .groupBy(*TOPIC)
        .agg(F.max("end_offset").alias("offset"))
    )
    sealed = (
        tables[KeyKind.STORAGE_STATE]
        .where(F.col("valid"))
        .select(*TOPIC, F.col("value.last_committed_offset").alias("offset"))
    )
    return (
        uploaded.unionByName(sealed)
        .groupBy(*TOPIC)
        .agg(F.max("offset").cast(U64_TYPE).alias("last_committed_offset"))
    )


def cursors(tables: Tables) -> DataFrame:
    """Well-formed cursors: namespace, topic, subscription, `cursor`, `cursor_key`."""
    return (
        tables[KeyKind.CURSOR]
        .where(F.col("valid"))
        .select(
            *TOPIC,
            "subscription",
            F.col("value").alias("cursor"),
            F.col("key").alias("cursor_key"),
        )
    )


def subscriptions(tables: Tables) -> DataFrame:
    """Every subscription with its cursor (null when it has none or it is malformed)."""
    return tables.shared("subscriptions", _subscriptions)


def _subscriptions(tables: Tables) -> DataFrame:
    return (
        tables[KeyKind.SUBSCRIPTION]
        .select(
            *TOPIC,
            "subscription",
            F.col("key").alias("subscription_key"),
            F.col("value.subscription_type").alias("subscription_type"),
        )
        .join(cursors(tables), [*TOPIC, "subscription"], "left")
    )
