"""The cluster and load report: per broker its mode, topics and reported load; the leader and
its epoch. Pure functions of the tables; the job collects them into summary.json.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from metaplane.layout import KeyKind
from metaplane.pipeline._tables import Tables
from metaplane.pipeline._views import brokers


def _usage(resource: str) -> Column:
    usages = F.filter("value.resources_usage", lambda item: item["resource"] == resource)
    return F.try_element_at(usages, F.lit(1))["usage"]


def broker_summary(tables: Tables) -> DataFrame:
    """Every broker: id, registered, mode, topics owned, address, and from its load report
    the CPU and memory usage and the number of topics it reports."""
    reports = (
        tables[KeyKind.LOAD_REPORT]
        .where(F.col("valid"))
        .select(
            "broker_id",
            _usage("CPU").alias("cpu"),
            _usage("Memory").alias("memory"),
            F.col("value.topics_len").alias("reported_topics"),
        )
    )
    return brokers(tables).join(reports, "broker_id", "left").orderBy("broker_id")


def leadership(tables: Tables) -> DataFrame:
    """One row: the leader's broker id and the leader epoch (each null when missing)."""
    leader = tables[KeyKind.LEADER].select(F.max("value").alias("leader"))
    epoch = tables[KeyKind.LEADER_EPOCH].select(F.max("value").alias("epoch"))
    return leader.crossJoin(epoch)
