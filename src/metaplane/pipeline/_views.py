"""Views of the typed tables that several transforms share: topics and their partitions,
brokers and their modes, owners, the topic and ownership facts, subscriptions with cursors,
and each topic's last committed offset. Pure functions of `Tables`; the ones that join or
aggregate are built once per set of tables (`Tables.shared`), and kept in memory when the
tables keep their views (`analyze` does).
"""

from __future__ import annotations

import re
from functools import partial, reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from metaplane import layout
from metaplane.layout import OFFSET_DIGITS, KeyKind, TopicName
from metaplane.pipeline._paths import Topic, key_column
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


# What the topic facts count of each topic: the keys of each kind that name it.
_COUNTED: dict[str, KeyKind] = {
    "roots": KeyKind.TOPIC_ROOT,
    "listed": KeyKind.NAMESPACE_TOPIC,
    "owners": KeyKind.ASSIGNMENT,
    "waiting": KeyKind.UNASSIGNED,
    "subscriptions": KeyKind.SUBSCRIPTION,
    "cursors": KeyKind.CURSOR,
    "producers": KeyKind.PRODUCER,
    "objects": KeyKind.STORAGE_OBJECT,
    "curs": KeyKind.STORAGE_CUR,
    "states": KeyKind.STORAGE_STATE,
}

BROADCAST_TOPICS = 100_000
"""Up to this many topics, a set of topics picked from the facts is sent whole to every task
that joins it (no shuffle of the keys it is joined with)."""


def topic_facts(tables: Tables) -> DataFrame:
    """Every topic any key names (its root, a namespace entry, an assignment or marker, a
    subscription, cursor or producer, storage metadata): namespace, topic, `root_key` and
    `partitions` (null without a root, or a malformed one), and how many keys of each kind
    name it (`roots`, `listed`, `owners`, `waiting`, `subscriptions`, `cursors`, `producers`,
    `objects`, `curs`, `states`).

    One aggregation over the keys of every topic-scoped kind, shared by the audit's topic
    checks: each picks the topics it is about from it (a filter) instead of joining whole
    tables with the topic roots, a shuffle of every key each time."""
    return tables.shared("topic_facts", partial(_facts, counted=_COUNTED))


_OWNERSHIP = ("roots", "owners", "waiting")


def ownership_facts(tables: Tables) -> DataFrame:
    """The topic facts of ownership alone, for every topic a root, an assignment or an
    unassigned marker names: namespace, topic, `root_key`, `partitions`, `roots`, `owners`,
    `waiting`. The ownership checks read these: they need none of the other kinds, which a
    job that reads only ownership (and keeps its tables) would otherwise parse whole.

    Where the topic facts are asked for first (`analyze` does, before its audit), the
    ownership facts are picked from them: one aggregation of the roots and assignments, not
    two."""
    if tables.has_view("topic_facts"):
        return tables.shared("ownership_facts", _ownership_of_topic_facts)
    counted = {name: _COUNTED[name] for name in _OWNERSHIP}
    return tables.shared("ownership_facts", partial(_facts, counted=counted))


def _ownership_of_topic_facts(tables: Tables) -> DataFrame:
    named = reduce(Column.__add__, (F.col(name) for name in _OWNERSHIP)) > 0
    return topic_facts(tables).where(named).select(*TOPIC, "root_key", "partitions", *_OWNERSHIP)


def _facts(tables: Tables, counted: dict[str, KeyKind]) -> DataFrame:
    names = list(counted)
    root_type = tables[KeyKind.TOPIC_ROOT].schema["value"].dataType

    def named(name: str, kind: KeyKind) -> DataFrame:
        root = kind is KeyKind.TOPIC_ROOT
        return tables[kind].select(
            *TOPIC,
            (F.col("value") if root else F.lit(None).cast(root_type)).alias("partitions"),
            F.lit(names.index(name)).alias("what"),
        )

    keys = reduce(DataFrame.unionByName, (named(n, k) for n, k in counted.items()))
    what = F.col("what")
    facts = keys.groupBy(*TOPIC).agg(
        F.max("partitions").alias("partitions"),
        *(F.count(F.when(what == i, 1)).alias(name) for i, name in enumerate(names)),
    )
    # A topic's root key is rendered from its name, not carried through the aggregation: a
    # string in it makes Spark sort every key by topic on both sides of the shuffle instead
    # of hashing them (SortAggregate). A topic has at most one root key, the layout's one.
    root_key = key_column(layout.topic_root, Topic(F.col("namespace"), F.col("topic")))
    return facts.select(
        *TOPIC,
        F.when(F.col("roots") > 0, root_key).alias("root_key"),
        "partitions",
        *names,
    )


def facts_where(facts: DataFrame, condition: Column) -> DataFrame:
    """The topics (namespace, topic) whose `facts` (the topic facts, or the ownership facts)
    meet `condition`, to join keys with: marked to be broadcast when they are few (a job on
    the kept facts counts them), as the audit's findings usually are."""
    return broadcast_when_few(facts.where(condition).select(*TOPIC))


def broadcast_when_few(frame: DataFrame) -> DataFrame:
    """`frame`, marked to be sent whole to every task that joins it when it has at most
    BROADCAST_TOPICS rows (a job counts them)."""
    return F.broadcast(frame) if frame.count() <= BROADCAST_TOPICS else frame


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


def object_facts(tables: Tables) -> DataFrame:
    """Per topic with well-formed storage objects: `last_start` (the highest start offset
    among their keys: the object being written to), `last_key` (its key) and `uploaded_end`
    (the highest end offset of a completed one; null when none is). One aggregation of the
    objects that the audit, the last committed offsets and the retention plan share."""
    return tables.shared("object_facts", _object_facts)


def _object_facts(tables: Tables) -> DataFrame:
    # The last object's key is rendered from its offset (a topic's object keys differ by
    # their offset alone), not aggregated with `max_by`: a string in the aggregation makes
    # Spark sort the objects by topic on both sides of the shuffle instead of hashing them.
    return (
        objects(tables)
        .groupBy(*TOPIC)
        .agg(
            F.max("offset").alias("last_start"),
            F.max(F.when(F.col("completed"), F.col("end_offset"))).alias("uploaded_end"),
        )
        .select(
            *TOPIC, "last_start", _object_key(F.col("last_start")).alias("last_key"), "uploaded_end"
        )
    )


def _object_key(offset: Column) -> Column:
    """The key of the storage object of the row's topic that starts at `offset`."""
    prefix = key_column(layout.storage_objects_prefix, Topic(F.col("namespace"), F.col("topic")))
    return F.concat(prefix, F.lit("/"), F.lpad(offset.cast("string"), OFFSET_DIGITS, "0"))


def last_committed(tables: Tables) -> DataFrame:
    """Each topic's last committed offset as the metadata knows it: the highest end of its
    completed objects, or its sealed state's, whichever is higher."""
    return tables.shared("last_committed", _last_committed)


def _last_committed(tables: Tables) -> DataFrame:
    uploaded = (
        object_facts(tables)
        .where(F.col("uploaded_end").isNotNull())
        .select(*TOPIC, F.col("uploaded_end").alias("offset"))
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
    return (
        subscriptions_and_cursors(tables)
        .where(F.col("subscription_key").isNotNull())
        .select(
            *TOPIC, "subscription", "subscription_key", "subscription_type", "cursor", "cursor_key"
        )
    )


def subscriptions_and_cursors(tables: Tables) -> DataFrame:
    """Every subscription and every cursor, matched by topic and subscription:
    `subscription_key` and `subscription_type` (null for a cursor without subscription),
    `cursor` and `cursor_key` (null without a cursor or with a malformed one) and
    `any_cursor_key` (the cursor's key, malformed or not). One join that the backlog, the
    storage's slowest cursors and the audit share."""
    return tables.shared("subscriptions_and_cursors", _subscriptions_and_cursors)


def _subscriptions_and_cursors(tables: Tables) -> DataFrame:
    valid = F.col("valid")
    every_cursor = tables[KeyKind.CURSOR].select(
        *TOPIC,
        "subscription",
        F.when(valid, F.col("value")).alias("cursor"),
        F.when(valid, F.col("key")).alias("cursor_key"),
        F.col("key").alias("any_cursor_key"),
    )
    return (
        tables[KeyKind.SUBSCRIPTION]
        .select(
            *TOPIC,
            "subscription",
            F.col("key").alias("subscription_key"),
            F.col("value.subscription_type").alias("subscription_type"),
        )
        .join(every_cursor, [*TOPIC, "subscription"], "full_outer")
    )
