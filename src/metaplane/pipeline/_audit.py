"""The audit, a metadata fsck: each check is a pure function from the typed tables to its
findings (check, severity, subject, the keys involved, one sentence). `CHECKS` lists them all;
docs/pipeline.md says what each means and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import reduce
from typing import Literal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane import layout
from metaplane.layout import KeyKind
from metaplane.pipeline._paths import Name, key_column, topic_path
from metaplane.pipeline._tables import Tables
from metaplane.pipeline._views import (
    TOPIC,
    broadcast_when_few,
    cursors,
    facts_where,
    last_committed,
    object_facts,
    objects,
    owners,
    ownership_facts,
    partitions,
    registered,
    subscriptions_and_cursors,
    topic_facts,
    topics,
)
from metaplane.resources import LOAD_REPORT_TOPICS

Severity = Literal["error", "warning", "info"]
ERROR: Severity = "error"
WARNING: Severity = "warning"
INFO: Severity = "info"
SEVERITIES: tuple[Severity, ...] = (ERROR, WARNING, INFO)

FINDING_SCHEMA = T.StructType(
    [
        T.StructField("check", T.StringType(), False),
        T.StructField("severity", T.StringType(), False),
        T.StructField("subject", T.StringType()),
        T.StructField("keys", T.ArrayType(T.StringType())),
        T.StructField("message", T.StringType()),
    ]
)

Find = Callable[[Tables], DataFrame]
"""A check's body: its findings as `subject`, `keys`, `message`."""


@dataclass(frozen=True)
class Check:
    """One audit check: its name, its severity and what it finds, in a sentence.

    A check `about_election` is about what metaplane's own leader election adds to the
    layout (the epoch key): it applies only where that election runs. Told nothing
    (`metaplane_election` None), the audit takes it to run where the snapshot holds keys of
    metaplane's own coordination (the leader epoch, fenced locks); a cluster written by
    Danube alone has none."""

    name: str
    severity: Severity
    summary: str
    find: Find
    about_election: bool = False

    def run(self, tables: Tables, metaplane_election: bool | None = None) -> DataFrame:
        found = self.find(tables)
        if self.about_election and metaplane_election is None:
            evidence = _coordination_keys(tables).where(F.col("coordination_keys") > 0)
            found = found.crossJoin(evidence)
        return found.select(
            F.lit(self.name).alias("check"),
            F.lit(self.severity).alias("severity"),
            F.col("subject").cast("string"),
            F.col("keys"),
            F.col("message"),
        )

    def applies(self, metaplane_election: bool | None) -> bool:
        """False for a check about metaplane's election where it is known not to run."""
        return not (self.about_election and metaplane_election is False)


CHECKS: list[Check] = []


def check(
    name: str, severity: Severity, summary: str, *, about_election: bool = False
) -> Callable[[Find], Find]:
    """Register a check."""

    def register(find: Find) -> Find:
        CHECKS.append(Check(name, severity, summary, find, about_election))
        return find

    return register


def audit(
    tables: Tables,
    checks: Iterable[Check] | None = None,
    *,
    metaplane_election: bool | None = None,
) -> DataFrame:
    """The findings of `checks` (every check by default), in one DataFrame; see `Check` for
    `metaplane_election`."""
    chosen = [c for c in (CHECKS if checks is None else checks) if c.applies(metaplane_election)]
    frames = [one.run(tables, metaplane_election) for one in chosen]
    if not frames:
        return tables.unknown.sparkSession.createDataFrame([], FINDING_SCHEMA)
    return reduce(DataFrame.unionByName, frames)


def checks_named(names: Iterable[str]) -> list[Check]:
    wanted = set(names)
    return [one for one in CHECKS if one.name in wanted]


def _coordination_keys(tables: Tables) -> DataFrame:
    """One row: how many keys of metaplane's own coordination the snapshot holds."""
    keys = (
        tables[KeyKind.LEADER_EPOCH].select("key").unionByName(tables[KeyKind.LOCK].select("key"))
    )
    return keys.agg(F.count(F.lit(1)).alias("coordination_keys"))


# Shorthands ---------------------------------------------------------------------------------


def _finding(frame: DataFrame, subject: Column, keys: Column, message: Column) -> DataFrame:
    return frame.select(subject.alias("subject"), keys.alias("keys"), message.alias("message"))


def _keys(*columns: Column | str) -> Column:
    return F.array_compact(F.array(*(F.col(c) if isinstance(c, str) else c for c in columns)))


def _no_keys() -> Column:
    return F.array().cast(T.ArrayType(T.StringType()))


def _say(template: str, *columns: Column | str) -> Column:
    return F.format_string(template, *(F.col(c) if isinstance(c, str) else c for c in columns))


def _missing(frame: DataFrame, other: DataFrame, on: list[str]) -> DataFrame:
    return frame.join(other.select(*on).distinct(), on, "left_anti")


def _about(frame: DataFrame, picked: DataFrame) -> DataFrame:
    """The rows of `frame` whose topic is one of `picked` (from `facts_where`)."""
    return frame.join(picked, TOPIC, "left_semi")


def _count(frame: DataFrame) -> DataFrame:
    return frame.agg(F.count(F.lit(1)).alias("n"))


# Ownership ----------------------------------------------------------------------------------


@check("topic-assigned-twice", ERROR, "a topic is assigned to two brokers or more")
def _assigned_twice(tables: Tables) -> DataFrame:
    twice = (
        _about(owners(tables), facts_where(ownership_facts(tables), F.col("owners") > 1))
        .groupBy(*TOPIC)
        .agg(F.sort_array(F.collect_list("assignment_key")).alias("keys"), F.count("*").alias("n"))
        .where(F.col("n") > 1)
    )
    return _finding(
        twice, topic_path(), F.col("keys"), _say("%s is assigned to %d brokers", topic_path(), "n")
    )


@check(
    "assigned-to-unregistered-broker",
    ERROR,
    "a topic is assigned to a broker that is not registered",
)
def _unregistered_owner(tables: Tables) -> DataFrame:
    lost = _missing(owners(tables), registered(tables), ["broker_id"])
    message = _say(
        "%s is assigned to broker %s, which is not registered", topic_path(), "broker_id"
    )
    return _finding(lost, topic_path(), _keys("assignment_key"), message)


@check("assigned-and-unassigned", ERROR, "a topic is both assigned and waiting for assignment")
def _assigned_and_unassigned(tables: Tables) -> DataFrame:
    picked = facts_where(ownership_facts(tables), (F.col("owners") > 0) & (F.col("waiting") > 0))
    waiting = tables[KeyKind.UNASSIGNED].select(*TOPIC, F.col("key").alias("marker_key"))
    both = _about(owners(tables), picked).join(_about(waiting, picked), TOPIC)
    message = _say(
        "%s is assigned to broker %s and also marked unassigned", topic_path(), "broker_id"
    )
    return _finding(both, topic_path(), _keys("assignment_key", "marker_key"), message)


@check(
    "topic-unowned",
    ERROR,
    "a topic is neither assigned nor waiting for assignment: no broker will serve it",
)
def _unowned(tables: Tables) -> DataFrame:
    lost = ownership_facts(tables).where(
        (F.col("partitions") == 0) & (F.col("owners") == 0) & (F.col("waiting") == 0)
    )
    message = _say("%s has no assignment and no unassigned marker", topic_path())
    return _finding(lost, topic_path(), _keys("root_key"), message)


@check(
    "assignment-of-missing-topic",
    ERROR,
    "an assignment or unassigned marker names a topic that does not exist",
)
def _assignment_of_missing(tables: Tables) -> DataFrame:
    markers = (
        owners(tables)
        .select(*TOPIC, F.col("assignment_key").alias("key"))
        .unionByName(tables[KeyKind.UNASSIGNED].select(*TOPIC, "key"))
    )
    picked = facts_where(
        ownership_facts(tables), (F.col("roots") == 0) & (F.col("owners") + F.col("waiting") > 0)
    )
    ghosts = _about(markers, picked)
    message = _say("%s is assigned (or waits for it) but has no topic key", topic_path())
    return _finding(ghosts, topic_path(), _keys("key"), message)


@check(
    "sealed-state-of-owned-topic",
    WARNING,
    "a topic has a sealed state (a move's) and an owner: the move did not finish",
)
def _sealed_while_owned(tables: Tables) -> DataFrame:
    sealed = tables[KeyKind.STORAGE_STATE].select(
        *TOPIC, F.col("key").alias("state_key"), F.col("value.broker_id").alias("sealed_by")
    )
    both = sealed.join(owners(tables), TOPIC)
    message = _say(
        "%s is owned by broker %s but still has the sealed state written by broker %s",
        topic_path(),
        "broker_id",
        "sealed_by",
    )
    return _finding(both, topic_path(), _keys("state_key", "assignment_key"), message)


# Brokers and leadership ---------------------------------------------------------------------


@check(
    "broker-without-state", WARNING, "a registered broker has no state key (it counts as active)"
)
def _broker_without_state(tables: Tables) -> DataFrame:
    stateless = _missing(registered(tables), tables[KeyKind.BROKER_STATE], ["broker_id"])
    message = _say("broker %s is registered but has no state", "broker_id")
    return _finding(stateless, F.col("broker_id"), _keys("registration_key"), message)


@check("drained-broker-has-topics", WARNING, "a broker marked drained still owns topics")
def _drained_with_topics(tables: Tables) -> DataFrame:
    drained = tables[KeyKind.BROKER_STATE].where(F.col("value.mode") == "drained")
    counts = owners(tables).groupBy("broker_id").agg(F.count("*").alias("n"))
    held = drained.join(counts, "broker_id")
    message = _say("broker %s is drained but owns %d topics", "broker_id", "n")
    return _finding(held, F.col("broker_id"), _keys("key"), message)


@check(
    "load-report-of-unregistered-broker",
    WARNING,
    "a load report belongs to a broker that is not registered",
)
def _report_of_unregistered(tables: Tables) -> DataFrame:
    stale = _missing(tables[KeyKind.LOAD_REPORT], registered(tables), ["broker_id"])
    message = _say("broker %s is not registered but its load report remains", "broker_id")
    return _finding(stale, F.col("broker_id"), _keys("key"), message)


@check("load-report-stale", WARNING, "a broker's load report disagrees with its assignments")
def _stale_report(tables: Tables) -> DataFrame:
    # An unregistered broker's report is the finding above, not a stale one.
    reports = (
        tables[KeyKind.LOAD_REPORT]
        .where(F.col("valid"))
        .join(registered(tables).select("broker_id"), "broker_id")
    )
    # Each path a report lists (`in_report`: how many times) or the broker owns (`owned`),
    # counted in one aggregation of both, not joined: a full outer join sorted both sides by
    # broker and path (at 10M keys, 2.2 s against 3.3 s; six alternated rounds).
    no = F.lit(None).cast("int")
    reported = reports.select(
        "broker_id",
        F.explode("value.topic_list").alias("path"),
        F.lit(1).alias("in_report"),
        no.alias("owned"),
    )
    owned = owners(tables).select(
        "broker_id", topic_path().alias("path"), no.alias("in_report"), F.lit(1).alias("owned")
    )
    diff = (
        reported.unionByName(owned)
        .groupBy("broker_id", "path")
        .agg(F.sum("in_report").alias("in_report"), F.max("owned").alias("owned"))
        .groupBy("broker_id")
        .agg(
            F.sum(F.when(F.col("owned").isNull(), F.col("in_report"))).alias("extra"),
            F.count(F.when(F.col("in_report").isNull(), 1)).alias("missing"),
        )
    )
    rows = reports.join(diff, "broker_id", "left").na.fill(0, ["extra", "missing"])
    length = F.size("value.topic_list")
    # A report lists every topic it owns (Danube), or the first LOAD_REPORT_TOPICS of them
    # (metaplane): then the others are missing from the list, and counted in topics_len.
    capped = length == LOAD_REPORT_TOPICS
    bad = rows.where(
        (F.col("extra") > 0)
        | ((F.col("missing") > 0) & ~capped)
        | (F.col("value.topics_len") != length + F.col("missing"))
    )
    message = _say(
        "broker %s reports %d topics it does not own and misses %d it owns (%s counted, %d listed)",
        "broker_id",
        "extra",
        "missing",
        "value.topics_len",
        length,
    )
    return _finding(bad, F.col("broker_id"), _keys("key"), message)


def _leader(tables: Tables) -> DataFrame:
    return tables[KeyKind.LEADER].select(
        F.col("key").alias("leader_key"), F.col("value").alias("broker_id"), "lease"
    )


@check("no-leader", WARNING, "brokers are registered but no leader is elected")
def _no_leader(tables: Tables) -> DataFrame:
    brokers_up = _count(registered(tables)).where(F.col("n") > 0)
    leaderless = brokers_up.crossJoin(_count(_leader(tables)).withColumnRenamed("n", "m")).where(
        F.col("m") == 0
    )
    message = _say("%d brokers are registered and none leads", "n")
    return _finding(leaderless, F.lit(layout.leader()), _no_keys(), message)


@check("leader-not-registered", ERROR, "the leader key names a broker that is not registered")
def _leader_unregistered(tables: Tables) -> DataFrame:
    stale = _missing(
        _leader(tables).where(F.col("broker_id").isNotNull()), registered(tables), ["broker_id"]
    )
    message = _say("the leader is broker %s, which is not registered", "broker_id")
    return _finding(stale, F.col("leader_key"), _keys("leader_key"), message)


@check(
    "leader-without-epoch",
    WARNING,
    "a leader is set but the leader epoch (its fencing token) is missing, where metaplane's "
    "election runs",
    about_election=True,
)
def _leader_without_epoch(tables: Tables) -> DataFrame:
    epochs = _count(tables[KeyKind.LEADER_EPOCH]).withColumnRenamed("n", "epochs")
    alone = _leader(tables).crossJoin(epochs).where(F.col("epochs") == 0)
    message = _say("broker %s leads but %s is missing", "broker_id", F.lit(layout.leader_epoch()))
    return _finding(alone, F.col("leader_key"), _keys("leader_key"), message)


@check(
    "ephemeral-key-without-lease",
    WARNING,
    "a registration or the leader key has no lease: it outlives its broker",
)
def _ephemeral_without_lease(tables: Tables) -> DataFrame:
    keys = (
        registered(tables)
        .select(F.col("registration_key").alias("key"), "lease")
        .unionByName(_leader(tables).select(F.col("leader_key").alias("key"), "lease"))
        .where(F.col("lease") == 0)
    )
    message = _say("%s is not attached to a lease and will never expire", "key")
    return _finding(keys, F.col("key"), _keys("key"), message)


# Namespaces and topics ----------------------------------------------------------------------


def _listed(tables: Tables) -> DataFrame:
    return tables[KeyKind.NAMESPACE_TOPIC].select(*TOPIC, F.col("key").alias("entry_key"))


@check("topic-without-namespace-entry", ERROR, "a topic is missing from its namespace's topic list")
def _unlisted(tables: Tables) -> DataFrame:
    unlisted = topic_facts(tables).where((F.col("roots") > 0) & (F.col("listed") == 0))
    message = _say("%s is not listed in namespace %s", topic_path(), "namespace")
    return _finding(unlisted, topic_path(), _keys("root_key"), message)


@check("namespace-entry-without-topic", WARNING, "a namespace lists a topic that does not exist")
def _listed_ghost(tables: Tables) -> DataFrame:
    ghosts = _about(
        _listed(tables),
        facts_where(topic_facts(tables), (F.col("roots") == 0) & (F.col("listed") > 0)),
    )
    message = _say("namespace %s lists %s, which has no topic key", "namespace", topic_path())
    return _finding(ghosts, topic_path(), _keys("entry_key"), message)


@check("namespace-without-policy", WARNING, "a namespace in use has no policy")
def _namespace_without_policy(tables: Tables) -> DataFrame:
    facts = topic_facts(tables)
    used = facts.where((F.col("roots") > 0) | (F.col("listed") > 0)).select("namespace").distinct()
    bare = _missing(used, tables[KeyKind.NAMESPACE_POLICY], ["namespace"])
    policy_key = key_column(layout.namespace_policy, Name(F.col("namespace")))
    message = _say("namespace %s has topics but no %s", "namespace", policy_key)
    return _finding(bare, F.col("namespace"), F.array(policy_key), message)


@check(
    "partition-count-mismatch",
    WARNING,
    "a partitioned topic's partitions do not match its partition count",
)
def _partition_mismatch(tables: Tables) -> DataFrame:
    parents = topics(tables).where(F.col("partitions") > 0)
    present = partitions(tables).select("namespace", F.col("parent").alias("topic"), "index")
    counted = (
        parents.join(present, TOPIC, "left")
        .groupBy(*TOPIC, "root_key", "partitions")
        .agg(
            F.count(F.when(F.col("index") < F.col("partitions"), 1)).alias("inside"),
            F.count(F.when(F.col("index") >= F.col("partitions"), 1)).alias("beyond"),
        )
    )
    bad = counted.where((F.col("inside") != F.col("partitions")) | (F.col("beyond") > 0))
    message = _say(
        "%s declares %s partitions; %d of them exist and %d more are beyond the count",
        topic_path(),
        "partitions",
        "inside",
        "beyond",
    )
    return _finding(bad, topic_path(), _keys("root_key"), message)


@check(
    "subscription-of-missing-topic",
    ERROR,
    "a subscription or cursor belongs to a topic that does not exist",
)
def _subscription_of_missing(tables: Tables) -> DataFrame:
    keys = (
        tables[KeyKind.SUBSCRIPTION]
        .select(*TOPIC, "key")
        .unionByName(tables[KeyKind.CURSOR].select(*TOPIC, "key"))
    )
    picked = facts_where(
        topic_facts(tables), (F.col("roots") == 0) & (F.col("subscriptions") + F.col("cursors") > 0)
    )
    orphans = _about(keys, picked)
    message = _say("%s belongs to %s, which has no topic key", "key", topic_path())
    return _finding(orphans, topic_path(), _keys("key"), message)


@check(
    "producer-of-missing-topic", WARNING, "a producer is registered on a topic that does not exist"
)
def _producer_of_missing(tables: Tables) -> DataFrame:
    picked = facts_where(topic_facts(tables), (F.col("roots") == 0) & (F.col("producers") > 0))
    orphans = _about(tables[KeyKind.PRODUCER], picked)
    message = _say(
        "producer %s is registered on %s, which has no topic key", "producer_id", topic_path()
    )
    return _finding(orphans, topic_path(), _keys("key"), message)


@check("cursor-without-subscription", WARNING, "a cursor's subscription key is missing")
def _cursor_without_subscription(tables: Tables) -> DataFrame:
    orphans = subscriptions_and_cursors(tables).where(F.col("subscription_key").isNull())
    message = _say(
        "subscription %s of %s has a cursor but no subscription key", "subscription", topic_path()
    )
    return _finding(orphans, topic_path(), _keys("any_cursor_key"), message)


@check(
    "cursor-beyond-last-committed",
    ERROR,
    "a cursor is past the last committed offset of a topic that no live broker serves",
)
def _cursor_beyond(tables: Tables) -> DataFrame:
    """Only topics without a registered owner: their next owner starts after the last
    committed offset the metadata holds (the sealed state's, or the last object's), so a
    cursor past it would skip what is published next. A served topic's cursor may be ahead
    of its uploaded objects: what is acknowledged but not uploaded yet is in its broker's
    write-ahead log, and the owner seals everything before it lets the topic go."""
    unserved = tables.shared("unserved_last_committed", _unserved_last_committed)
    picked = broadcast_when_few(unserved)
    ahead = (
        cursors(tables).join(picked, TOPIC).where(F.col("cursor") > F.col("last_committed_offset"))
    )
    message = _say(
        "subscription %s of %s acknowledged offset %s, past the last committed offset %s",
        "subscription",
        topic_path(),
        "cursor",
        "last_committed_offset",
    )
    return _finding(ahead, topic_path(), _keys("cursor_key"), message)


def _unserved_last_committed(tables: Tables) -> DataFrame:
    """The last committed offsets of the topics no registered broker owns: few where the
    cluster is healthy, so that the cursors are joined with them where they are read (sent
    whole to each task), not shuffled to meet every topic's offset."""
    served = owners(tables).join(registered(tables), "broker_id").select(*TOPIC)
    return last_committed(tables).join(served, TOPIC, "left_anti")


@check(
    "policy-limit-exceeded",
    WARNING,
    "a topic has more subscriptions or producers than its namespace allows",
)
def _policy_exceeded(tables: Tables) -> DataFrame:
    policy = (
        tables[KeyKind.NAMESPACE_POLICY]
        .where(F.col("valid"))
        .select(
            "namespace",
            F.col("value.max_subscriptions_per_topic").alias("max_subscriptions"),
            F.col("value.max_producers_per_topic").alias("max_producers"),
        )
    )
    counted = topic_facts(tables).where(F.col("roots") > 0).join(policy, "namespace")
    over_subs = (F.col("max_subscriptions") > 0) & (
        F.col("subscriptions") > F.col("max_subscriptions")
    )
    over_prods = (F.col("max_producers") > 0) & (F.col("producers") > F.col("max_producers"))
    message = _say(
        "%s has %d subscriptions (at most %s) and %d producers (at most %s; 0 is no limit)",
        topic_path(),
        "subscriptions",
        "max_subscriptions",
        "producers",
        "max_producers",
    )
    return _finding(counted.where(over_subs | over_prods), topic_path(), _keys("root_key"), message)


# Storage ------------------------------------------------------------------------------------


def _neighbours(tables: Tables) -> DataFrame:
    """Each object whose offsets do not follow on exactly from the one before it (by start
    offset) in its topic, with that one's end and key: a view the gap and the overlap
    checks share, kept small (the few pairs that are either, and the columns they read)."""
    return tables.shared("neighbours", _object_pairs)


def _object_pairs(tables: Tables) -> DataFrame:
    order = Window.partitionBy(*TOPIC).orderBy("start_offset", "key")
    return (
        objects(tables)
        .select(
            *TOPIC,
            "key",
            "start_offset",
            "end_offset",
            F.lag("end_offset").over(order).alias("previous_end"),
            F.lag("key").over(order).alias("previous_key"),
        )
        # A gap or an overlap; null (dropped) for a topic's first object.
        .where(F.col("start_offset") != F.col("previous_end") + 1)
    )


@check("storage-gap", ERROR, "offsets are missing between two consecutive storage objects")
def _storage_gap(tables: Tables) -> DataFrame:
    gaps = _neighbours(tables).where(F.col("start_offset") > F.col("previous_end") + 1)
    message = _say(
        "%s has no object for offsets %s to %s",
        topic_path(),
        F.col("previous_end") + 1,
        F.col("start_offset") - 1,
    )
    return _finding(gaps, topic_path(), _keys("previous_key", "key"), message)


@check("storage-overlap", ERROR, "two storage objects hold the same offsets")
def _storage_overlap(tables: Tables) -> DataFrame:
    overlaps = _neighbours(tables).where(F.col("start_offset") <= F.col("previous_end"))
    message = _say(
        "%s has offsets %s to %s in two objects",
        topic_path(),
        "start_offset",
        F.least("previous_end", "end_offset"),
    )
    return _finding(overlaps, topic_path(), _keys("previous_key", "key"), message)


@check(
    "storage-cur-mismatch",
    ERROR,
    "objects/cur is missing or does not point at the topic's last object",
)
def _cur_mismatch(tables: Tables) -> DataFrame:
    last = object_facts(tables).select(*TOPIC, "last_start", "last_key")
    cur = (
        tables[KeyKind.STORAGE_CUR]
        .where(F.col("valid"))
        .select(
            *TOPIC,
            F.col("key").alias("cur_key"),
            F.col("value.start").try_cast("decimal(20,0)").alias("cur_start"),
        )
    )
    both = last.join(cur, TOPIC, "full_outer")
    bad = both.where(
        F.col("cur_key").isNull()
        | F.col("last_key").isNull()
        | (F.col("cur_start") != F.col("last_start"))
    )
    message = F.when(
        F.col("cur_key").isNull(), _say("%s has objects but no objects/cur", topic_path())
    ).otherwise(
        _say(
            "objects/cur of %s points at offset %s; the last object starts at %s",
            topic_path(),
            "cur_start",
            F.coalesce(F.col("last_start").cast("string"), F.lit("(no object)")),
        )
    )
    return _finding(bad, topic_path(), _keys("cur_key", "last_key"), message)


@check(
    "upload-incomplete",
    WARNING,
    "an object upload was left incomplete (a later object exists, or the topic has no owner)",
)
def _upload_incomplete(tables: Tables) -> DataFrame:
    last = object_facts(tables).select(*TOPIC, "last_start")
    owned = owners(tables).select(*TOPIC).distinct().withColumn("owned", F.lit(True))
    pending = (
        objects(tables)
        .where(~F.col("completed"))
        .join(last, TOPIC)
        .join(owned, TOPIC, "left")
        .where((F.col("offset") < F.col("last_start")) | F.col("owned").isNull())
    )
    message = _say(
        "object %s of %s (offsets %s to %s) was never completed",
        "object_id",
        topic_path(),
        "start_offset",
        "end_offset",
    )
    return _finding(pending, topic_path(), _keys("key"), message)


@check("orphan-storage", WARNING, "storage metadata remains for a topic that does not exist")
def _orphan_storage(tables: Tables) -> DataFrame:
    keys = (
        tables[KeyKind.STORAGE_OBJECT]
        .select(*TOPIC, "key")
        .unionByName(tables[KeyKind.STORAGE_CUR].select(*TOPIC, "key"))
        .unionByName(tables[KeyKind.STORAGE_STATE].select(*TOPIC, "key"))
    )
    picked = facts_where(
        topic_facts(tables),
        (F.col("roots") == 0) & (F.col("objects") + F.col("curs") + F.col("states") > 0),
    )
    orphans = (
        _about(keys, picked).groupBy(*TOPIC).agg(F.sort_array(F.collect_list("key")).alias("keys"))
    )
    message = _say("%s has no topic key but %d storage keys remain", topic_path(), F.size("keys"))
    return _finding(orphans, topic_path(), F.col("keys"), message)


# Schema registry ----------------------------------------------------------------------------


def _schema_ids(tables: Tables) -> DataFrame:
    return (
        tables[KeyKind.SCHEMA_BY_ID]
        .where(F.col("valid"))
        .select(
            "schema_id", F.col("value.subject").alias("subject"), F.col("key").alias("index_key")
        )
    )


@check(
    "schema-index-missing-subject",
    ERROR,
    "a schema id index entry names a subject that does not exist",
)
def _index_of_missing(tables: Tables) -> DataFrame:
    orphans = _missing(_schema_ids(tables), tables[KeyKind.SCHEMA_METADATA], ["subject"])
    message = _say(
        "schema id %s points at subject %s, which has no metadata", "schema_id", "subject"
    )
    return _finding(orphans, F.col("subject"), _keys("index_key"), message)


@check(
    "schema-without-index", WARNING, "a subject's schema id has no index entry pointing back at it"
)
def _schema_without_index(tables: Tables) -> DataFrame:
    metadata = (
        tables[KeyKind.SCHEMA_METADATA]
        .where(F.col("valid"))
        .select("subject", F.col("value.id").alias("schema_id"), "key")
    )
    unindexed = _missing(metadata, _schema_ids(tables), ["schema_id", "subject"])
    message = _say("subject %s has schema id %s but no index entry for it", "subject", "schema_id")
    return _finding(unindexed, F.col("subject"), _keys("key"), message)


@check(
    "schema-version-missing",
    WARNING,
    "a subject's metadata lists a version that has no version key",
)
def _schema_version_missing(tables: Tables) -> DataFrame:
    listed = (
        tables[KeyKind.SCHEMA_METADATA]
        .where(F.col("valid"))
        .select(
            "subject",
            "key",
            F.explode(
                F.array_union("value.versions.version", F.array("value.latest_version"))
            ).alias("version"),
        )
    )
    stored = tables[KeyKind.SCHEMA_VERSION].select(
        "subject", F.col("version").cast("long").alias("version")
    )
    missing = (
        _missing(listed, stored, ["subject", "version"])
        .groupBy("subject", "key")
        .agg(F.sort_array(F.collect_set("version")).alias("versions"))
    )
    message = _say(
        "subject %s lists versions %s that have no version key",
        "subject",
        F.array_join("versions", ", "),
    )
    return _finding(missing, F.col("subject"), _keys("key"), message)


@check(
    "next-schema-id-not-above-max",
    ERROR,
    "the next schema id is not above every id in use: the next registration would reuse one",
)
def _next_id(tables: Tables) -> DataFrame:
    used = (
        _schema_ids(tables)
        .select("schema_id")
        .unionByName(
            tables[KeyKind.SCHEMA_METADATA]
            .where(F.col("valid"))
            .select(F.col("value.id").alias("schema_id"))
        )
        .agg(F.max("schema_id").alias("highest"))
    )
    counter = tables[KeyKind.NEXT_SCHEMA_ID].select(
        F.col("key").alias("counter_key"), F.col("value").alias("next_id")
    )
    rows = used.join(counter, how="left").where(
        F.col("highest").isNotNull()
        & (F.col("next_id").isNull() | (F.col("next_id") <= F.col("highest")))
    )
    message = _say(
        "the next schema id is %s but id %s is in use",
        F.coalesce(F.col("next_id").cast("string"), F.lit("missing")),
        "highest",
    )
    return _finding(rows, F.lit(layout.next_schema_id()), _keys("counter_key"), message)


# Keys and values ----------------------------------------------------------------------------


@check("unknown-key", WARNING, "a key that is no kind of key of the layout")
def _unknown(tables: Tables) -> DataFrame:
    message = _say("%s is not a key of the layout", "key")
    return _finding(tables.unknown, F.col("key"), _keys("key"), message)


@check("malformed-value", ERROR, "a value that does not have its key kind's format")
def _malformed(tables: Tables) -> DataFrame:
    frames = [
        tables[kind].where(~F.col("valid")).select("key", "raw", F.lit(kind.value).alias("kind"))
        for kind in tables.kinds
    ]
    bad = reduce(DataFrame.unionByName, frames)
    message = _say(
        "%s holds a malformed %s value: %s",
        "key",
        "kind",
        F.substring(F.coalesce("raw", F.lit("")), 1, 80),
    )
    return _finding(bad, F.col("key"), _keys("key"), message)


@check("value-disagrees-with-key", WARNING, "a value names another id, topic or name than its key")
def _disagrees(tables: Tables) -> DataFrame:
    value = F.col("value")
    pairs = [
        (
            KeyKind.PRODUCER,
            (value["producer_id"] != F.col("producer_id")) | (value["topic_name"] != topic_path()),
        ),
        (KeyKind.SUBSCRIPTION, value["subscription_name"] != F.col("subscription")),
        (KeyKind.SCHEMA_BY_ID, value["schema_id"] != F.col("schema_id")),
        (KeyKind.SCHEMA_VERSION, value["version"] != F.col("version")),
        (KeyKind.SCHEMA_METADATA, value["subject"] != F.col("subject")),
        (KeyKind.STORAGE_OBJECT, value["start_offset"] != F.col("offset")),
        (KeyKind.STORAGE_OBJECT, value["end_offset"] < value["start_offset"]),
    ]
    frames = [
        tables[kind]
        .where(F.col("valid") & condition)
        .select("key", F.lit(kind.value).alias("kind"))
        for kind, condition in pairs
    ]
    bad = reduce(DataFrame.unionByName, frames)
    message = _say("the %s value of %s disagrees with its key", "kind", "key")
    return _finding(bad, F.col("key"), _keys("key"), message)


@check("legacy-key", INFO, "a key of Danube's older layout, read but no longer written: migrate it")
def _legacy(tables: Tables) -> DataFrame:
    frames = [tables[kind].select("key") for kind in tables.kinds if kind.legacy]
    legacy = reduce(DataFrame.unionByName, frames)
    message = _say("%s belongs to Danube's older layout", "key")
    return _finding(legacy, F.col("key"), _keys("key"), message)
