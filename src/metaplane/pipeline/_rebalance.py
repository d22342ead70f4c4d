"""The rebalance plan: the topics to move so that draining brokers end empty and the active
brokers' topic counts spread evenly (coefficient of variation under a threshold), with few
moves. Counts are planned in Python (a row per broker); Spark picks the topics.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from metaplane.layout import KeyKind
from metaplane.pipeline._errors import InvalidSetting
from metaplane.pipeline._tables import Tables
from metaplane.pipeline._values import U64_TYPE
from metaplane.pipeline._views import TOPIC, brokers, owners

DRAIN = "drain"
BALANCE = "balance"
EMPTIED_MODES = ("draining", "drained")


@dataclass(frozen=True)
class BrokerLoad:
    """A broker as the plan sees it: its topic count, mode and whether it is registered."""

    broker_id: int
    mode: str
    registered: bool
    topics: int

    @property
    def eligible(self) -> bool:
        """May receive topics."""
        return self.registered and self.mode == "active"

    @property
    def emptied(self) -> bool:
        """Must give all its topics away."""
        return self.registered and self.mode in EMPTIED_MODES


@dataclass(frozen=True)
class Balance:
    """How evenly topics spread over brokers: coefficient of variation (population standard
    deviation over mean) and the busiest broker's count over the mean."""

    brokers: int
    mean: float
    cv: float
    max_over_mean: float

    @classmethod
    def of(cls, counts: Iterable[int]) -> Balance:
        values = list(counts)
        if not values or sum(values) == 0:
            return cls(len(values), 0.0, 0.0, 0.0)
        mean = sum(values) / len(values)
        variance = sum((value - mean) ** 2 for value in values) / len(values)
        return cls(len(values), mean, math.sqrt(variance) / mean, max(values) / mean)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "brokers": self.brokers,
            "mean": round(self.mean, 3),
            "cv": round(self.cv, 4),
            "max_over_mean": round(self.max_over_mean, 4),
        }


@dataclass(frozen=True)
class Transfer:
    """`count` topics to move from one broker to another, for one reason."""

    source: int
    target: int
    reason: str
    count: int


@dataclass
class Quotas:
    """How many topics each pair of brokers exchanges, and the counts before and after."""

    transfers: list[Transfer]
    before: dict[int, int]
    after: dict[int, int]
    notes: list[str] = field(default_factory=list)

    @property
    def moves(self) -> int:
        return sum(transfer.count for transfer in self.transfers)


def balance_before(loads: Sequence[BrokerLoad]) -> Balance:
    """The spread today, over every registered broker that still serves (active, draining)."""
    return Balance.of(load.topics for load in loads if load.registered and load.mode != "drained")


def balance_after(loads: Sequence[BrokerLoad], after: Mapping[int, int]) -> Balance:
    """The spread after the plan, over the active brokers (the others end empty)."""
    return Balance.of(after[load.broker_id] for load in loads if load.eligible)


def plan_quotas(
    loads: Sequence[BrokerLoad], threshold: float, max_moves: int | None = None
) -> Quotas:
    """Empty the draining brokers onto the least loaded active ones, then move one topic at a
    time from the busiest to the least busy active broker (the move that lowers the variance
    most) until the coefficient of variation is at most `threshold`, the counts differ by at
    most one, or `max_moves` balance moves are planned. Drain moves are never capped."""
    if threshold < 0:
        raise InvalidSetting(f"the balance threshold must be at least 0, not {threshold}")
    if max_moves is not None and max_moves < 0:
        raise InvalidSetting(f"max moves must be at least 0, not {max_moves}")
    counts = {load.broker_id: load.topics for load in loads}
    before = dict(counts)
    active = [load.broker_id for load in loads if load.eligible]
    transfers: Counter[tuple[int, int, str]] = Counter()
    notes: list[str] = []
    if not active:
        notes.append("no active registered broker can receive topics: nothing is planned")
        return Quotas([], before, counts, notes)
    _drain(loads, active, counts, transfers)
    _balance(active, counts, transfers, threshold, max_moves, notes)
    planned = [Transfer(s, t, reason, n) for (s, t, reason), n in sorted(transfers.items())]
    return Quotas(planned, before, counts, notes)


def _drain(
    loads: Sequence[BrokerLoad],
    active: list[int],
    counts: dict[int, int],
    transfers: Counter[tuple[int, int, str]],
) -> None:
    lightest = [(counts[broker], broker) for broker in active]
    heapq.heapify(lightest)
    for load in loads:
        if not load.emptied:
            continue
        for _ in range(counts[load.broker_id]):
            count, target = heapq.heappop(lightest)
            transfers[load.broker_id, target, DRAIN] += 1
            counts[target] = count + 1
            heapq.heappush(lightest, (count + 1, target))
        counts[load.broker_id] = 0


def _balance(
    active: list[int],
    counts: dict[int, int],
    transfers: Counter[tuple[int, int, str]],
    threshold: float,
    max_moves: int | None,
    notes: list[str],
) -> None:
    total = sum(counts[broker] for broker in active)
    if total == 0:
        return
    size = len(active)
    mean = total / size
    squares = sum(counts[broker] ** 2 for broker in active)
    lightest = [(counts[b], b) for b in active]
    heaviest = [(-counts[b], b) for b in active]
    heapq.heapify(lightest)
    heapq.heapify(heaviest)
    moved = 0
    while math.sqrt(max(squares / size - mean**2, 0.0)) / mean > threshold:
        if max_moves is not None and moved >= max_moves:
            notes.append(f"stopped at --max-moves {max_moves} above the threshold")
            return
        source, target = _top(heaviest, counts, -1), _top(lightest, counts, 1)
        if counts[source] - counts[target] <= 1:
            notes.append("topic counts differ by at most one: no move can lower the spread")
            return
        squares += 2 * (counts[target] - counts[source] + 1)
        counts[source] -= 1
        counts[target] += 1
        heapq.heappush(heaviest, (-counts[source], source))
        heapq.heappush(lightest, (counts[target], target))
        transfers[source, target, BALANCE] += 1
        moved += 1


def _top(heap: list[tuple[int, int]], counts: Mapping[int, int], sign: int) -> int:
    """The broker at the top of a lazily updated heap (stale entries are dropped)."""
    while True:
        value, broker = heap[0]
        if value * sign == counts[broker]:
            return broker
        heapq.heappop(heap)


# Spark: loads, and the topics that move -----------------------------------------------------


def broker_loads(tables: Tables) -> DataFrame:
    """Every broker with its mode, whether it is registered, and its topic count."""
    return brokers(tables).select("broker_id", "mode", "registered", "topics")


def movable_topics(tables: Tables) -> DataFrame:
    """Assignments a plan may move: the topic has exactly one owner and no unassigned
    marker (the audit reports the others), ranked per broker cheapest first (fewest
    subscriptions, then by name): `rank` from 0."""
    single = (
        owners(tables).groupBy(*TOPIC).agg(F.count("*").alias("owners")).where(F.col("owners") == 1)
    )
    waiting = tables[KeyKind.UNASSIGNED].select(*TOPIC)
    subscriptions = (
        tables[KeyKind.SUBSCRIPTION].groupBy(*TOPIC).agg(F.count("*").alias("subscriptions"))
    )
    order = Window.partitionBy("broker_id").orderBy("subscriptions", *TOPIC)
    return (
        owners(tables)
        .join(single.select(*TOPIC), TOPIC)
        .join(waiting, TOPIC, "left_anti")
        .join(subscriptions, TOPIC, "left")
        .na.fill(0, ["subscriptions"])
        .withColumn("rank", F.row_number().over(order) - 1)
    )


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
