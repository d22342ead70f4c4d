"""Backlog per subscription: its topic's last committed offset minus its cursor, the messages
stored and not yet acknowledged; and their distribution for the report.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from metaplane.pipeline._tables import Tables
from metaplane.pipeline._values import U64_TYPE
from metaplane.pipeline._views import TOPIC, last_committed, subscriptions


def backlog(tables: Tables) -> DataFrame:
    """One row per subscription: namespace, topic, subscription, subscription_type, cursor,
    last_committed_offset, backlog.

    No cursor means nothing acknowledged yet: every stored offset counts. The backlog is null
    when the topic's last committed offset is unknown (no storage objects, no sealed state),
    and never below zero (a cursor past the end is an audit finding, not a negative backlog).
    """
    last = F.col("last_committed_offset")
    cursor = F.col("cursor")
    unacked = (
        F.when(last.isNull(), None)
        .when(cursor.isNull(), last + 1)
        .otherwise(F.greatest(last - cursor, F.lit(0)))
    )
    return (
        subscriptions(tables)
        .join(last_committed(tables), TOPIC, "left")
        .select(
            *TOPIC,
            "subscription",
            "subscription_type",
            "cursor",
            "last_committed_offset",
            unacked.try_cast(U64_TYPE).alias("backlog"),
        )
    )


def backlog_histogram(backlog_rows: DataFrame) -> DataFrame:
    """Subscriptions per order of magnitude of backlog: `digits` 0 for an empty backlog, else
    the number of decimal digits (1: 1–9, 2: 10–99…); unknown backlogs are left out."""
    value = F.col("backlog")
    digits = F.when(value == 0, 0).otherwise(F.length(value.cast("string")))
    return (
        backlog_rows.where(value.isNotNull())
        .groupBy(digits.alias("digits"))
        .agg(F.count(F.lit(1)).alias("subscriptions"), F.sum(value).alias("messages"))
        .orderBy("digits")
    )


def largest_backlogs(backlog_rows: DataFrame, count: int) -> DataFrame:
    """The `count` subscriptions furthest behind."""
    return (
        backlog_rows.where(F.col("backlog") > 0)
        .orderBy(F.col("backlog").desc(), *TOPIC, "subscription")
        .limit(count)
    )
