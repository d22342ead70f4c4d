"""Load, rankings and the balance score as pure logic, for the LoadManager and for the offline
plan of `metaplane analyze` alike: how loaded each active broker is by Danube's three rankings
(fair, balanced, weighted), how evenly the load spreads (the coefficient of variation), and
which broker each of a batch of waiting topics goes to. No I/O: callers read the store (or a
snapshot) and pass what they saw.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, TypeAlias

from metaplane.layout import U64_MAX, TopicName
from metaplane.resources import BrokerMode, broker_mode

DEFAULT_TOPIC_WEIGHT = 1.0
"""The weight of a topic that `topic_weight` does not list."""

TOPIC_SHARE = 0.3
CPU_SHARE = 0.35
MEMORY_SHARE = 0.35
"""The balanced ranking's mix (Danube's): weighted topic load, CPU, memory."""

InFlight: TypeAlias = Mapping[int, Collection[TopicName]]
"""Topics on their way to a broker (by broker id) that its `topics` do not show yet."""

TopicWeights: TypeAlias = Mapping[TopicName, float]
"""Each topic's weight in the weighted and balanced rankings (DEFAULT_TOPIC_WEIGHT if absent)."""


class Ranking(StrEnum):
    """How loaded a broker is; lower is less loaded. Only active brokers are ranked.

    - fair: its topic count.
    - weighted: its weighted topic load, the sum of its topics' weights.
    - balanced: 0.3 · topic part + 0.35 · CPU part + 0.35 · memory part, each part in [0, 1]:
      the topic part is the weighted topic load over the largest weighted topic load among
      the active brokers (0 when no broker holds any), CPU and memory are the reported percent
      over 100. A broker that has not reported CPU (or memory) yet counts as the mean of the
      active brokers that have (0 when none has): unknown is neither busy nor idle.

    A broker's topics are the store's assignments plus the topics in flight to it (a topic in
    both counts once). In-flight topics add to the topic part only: CPU and memory are taken
    as reported, until the next report shows what the new topics cost.

    Where this departs from Danube (`danube_service/load_manager/rankings.rs`):
    - Danube's balanced ranking adds raw percents to an unnormalised topic score
      (count · 0.2 + MB/s · 0.3 + connections · 0.3 + backlog / 10^4 · 0.2) and truncates the
      sum to an integer; here every part is normalised to [0, 1] and loads stay floats, so
      that the mix means what its weights say and close brokers are still told apart.
    - Danube falls back to the topic count when no broker reports CPU or memory; here such a
      cluster is ranked by the topic part alone (weighted, not counted), as DESIGN.md's
      "weighted topic load" asks.
    - Danube's "weighted_load" detects a bottleneck among CPU, memory, disk, network,
      throughput and topics; DESIGN.md defines weighted as the weighted topic load, which the
      LoadManager computes from metadata (e.g. 1 + producers + subscriptions).
    - Danube ranks whatever sent a load report and sorts by load alone (ties in hash order);
      here only active brokers are ranked, ties go to the lower broker id.
    """

    FAIR = "fair"
    BALANCED = "balanced"
    WEIGHTED = "weighted"


EMPTIED = frozenset({BrokerMode.DRAINING, BrokerMode.DRAINED})
"""The modes whose brokers give every topic away."""


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    """A broker as a planner sees it: its mode (a BrokerMode, or a custom state's name: such
    a broker receives nothing and keeps what it has), the topics the store says it owns
    (authoritative), the CPU and memory percent of its last load report (None when it has
    not reported yet), and whether it is registered (an unregistered broker still holding
    topics receives nothing and gives nothing: the leader reassigns a lost broker's topics).

    A plan over millions of topics counts them where they are (in Spark) instead of listing
    them here: `counted` is then the number of topics and `topics` stays empty. Such a load
    ranks like a listed one whose topics weigh `DEFAULT_TOPIC_WEIGHT` each."""

    broker_id: int
    mode: str
    topics: frozenset[TopicName] = frozenset()
    cpu: float | None = None
    memory: float | None = None
    registered: bool = True
    counted: int | None = None

    def __post_init__(self) -> None:
        if type(self.broker_id) is not int or not 0 <= self.broker_id <= U64_MAX:
            raise ValueError(f"a broker id is an int in [0, 2**64 - 1], not {self.broker_id!r}")
        if not isinstance(self.mode, str) or not self.mode:
            message = f"a BrokerMode or a custom state's name, not {self.mode!r}"
            raise TypeError(f"broker {self.broker_id}: mode is {message}")
        object.__setattr__(self, "mode", broker_mode(self.mode))  # "active" is ACTIVE
        if not isinstance(self.topics, frozenset):
            kind = type(self.topics).__name__
            raise TypeError(f"broker {self.broker_id}: topics is a frozenset, not a {kind}")
        if type(self.registered) is not bool:
            raise TypeError(f"broker {self.broker_id}: registered is a bool")
        _check_counted(self.broker_id, self.counted, self.topics)
        _check_percent(self.broker_id, "cpu", self.cpu)
        _check_percent(self.broker_id, "memory", self.memory)

    @property
    def topic_count(self) -> int:
        """How many topics it owns, listed or counted."""
        return len(self.topics) if self.counted is None else self.counted

    @property
    def active(self) -> bool:
        """May receive topics: registered and active."""
        return self.registered and self.mode is BrokerMode.ACTIVE

    @property
    def emptied(self) -> bool:
        """Must give every topic away: registered, and draining or drained. A broker in a
        custom state (maintenance) keeps its topics: it only receives none."""
        return self.registered and self.mode in EMPTIED


def _check_counted(broker_id: int, counted: int | None, topics: frozenset[TopicName]) -> None:
    if counted is None:
        return
    if type(counted) is not int or counted < 0:
        raise ValueError(f"broker {broker_id}: counted is an int >= 0 or None, not {counted!r}")
    if topics:
        raise ValueError(f"broker {broker_id}: topics are either listed or counted, not both")


def _check_percent(broker_id: int, name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"broker {broker_id}: {name} is a float or None, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"broker {broker_id}: {name} is a finite percent >= 0, not {value!r}")


class TopicTotals(NamedTuple):
    """What the rankings need of a broker's topics."""

    topic_count: int
    topic_load: float


class Placement:
    """Which topics each broker holds, as a planner projects it: the store's assignments plus
    the topics in flight to each broker, with the running sums the rankings need. Drained
    and draining brokers are kept (they must give their topics away) but never ranked;
    in-flight topics for a broker not listed are ignored. Counted topics (see `BrokerLoad`)
    are moved with `shift`, listed ones with `move`."""

    def __init__(
        self,
        brokers: Iterable[BrokerLoad],
        *,
        in_flight: InFlight | None = None,
        topic_weight: TopicWeights | None = None,
    ) -> None:
        listed = _unique(brokers)
        self._weights: TopicWeights = topic_weight if topic_weight is not None else {}
        self.active = sorted(broker.broker_id for broker in listed if broker.active)
        self.emptied = sorted(broker.broker_id for broker in listed if broker.emptied)
        """Brokers that must give every topic away (draining or drained), by id."""
        self.topics = {broker.broker_id: set(broker.topics) for broker in listed}
        self._counted = {broker.broker_id: broker.counted or 0 for broker in listed}
        for broker_id, topics in (in_flight or {}).items():
            if broker_id in self.topics:
                self.topics[broker_id].update(topics)
        self._load = {
            broker_id: math.fsum(self.weight(topic) for topic in topics)
            + self._counted[broker_id] * DEFAULT_TOPIC_WEIGHT
            for broker_id, topics in self.topics.items()
        }
        self._resource = _resource_loads([broker for broker in listed if broker.active])

    def weight(self, topic: TopicName) -> float:
        """The topic's weight; a negative or non-finite weight is refused."""
        weight = self._weights.get(topic, DEFAULT_TOPIC_WEIGHT)
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"{topic}: a topic weight is finite and >= 0, not {weight!r}")
        return weight

    def totals(self, broker_id: int) -> TopicTotals:
        count = len(self.topics[broker_id]) + self._counted[broker_id]
        return TopicTotals(count, self._load[broker_id])

    def loads(self, ranking: Ranking) -> dict[int, float]:
        """The load of each active broker by `ranking`."""
        return self.score(ranking, {broker_id: self.totals(broker_id) for broker_id in self.active})

    def loads_if_moved(
        self, ranking: Ranking, topic: TopicName, source: int, target: int
    ) -> dict[int, float]:
        """The loads of the active brokers if `topic` went from `source` to `target`."""
        weight = self.weight(topic)
        totals = {broker_id: self.totals(broker_id) for broker_id in self.active}
        count, load = totals[source]
        totals[source] = TopicTotals(count - 1, load - weight)
        count, load = totals[target]
        totals[target] = TopicTotals(count + 1, load + weight)
        return self.score(ranking, totals)

    def score(self, ranking: Ranking, totals: Mapping[int, TopicTotals]) -> dict[int, float]:
        """The loads by `ranking` of active brokers holding `totals`."""
        if ranking is Ranking.FAIR:
            return {broker_id: float(count) for broker_id, (count, _) in totals.items()}
        if ranking is Ranking.WEIGHTED:
            return {broker_id: load for broker_id, (_, load) in totals.items()}
        peak = max((load for _, load in totals.values()), default=0.0)
        return {
            broker_id: TOPIC_SHARE * (load / peak if peak > 0 else 0.0) + self._resource[broker_id]
            for broker_id, (_, load) in totals.items()
        }

    def ranked(self, ranking: Ranking) -> list[tuple[int, float]]:
        """(broker id, load) of each active broker, least loaded first, ties by broker id."""
        return sorted(self.loads(ranking).items(), key=lambda item: (item[1], item[0]))

    def least_loaded(self, ranking: Ranking, avoid: int | None = None) -> int | None:
        """The least loaded active broker other than `avoid` (unless it is the only one);
        None when no broker is active."""
        ranked = [broker_id for broker_id, _ in self.ranked(ranking)]
        return next((b for b in ranked if b != avoid), ranked[0] if ranked else None)

    def imbalance(self, ranking: Ranking) -> float:
        """The coefficient of variation of the active brokers' loads (see `imbalance`)."""
        return imbalance(self.loads(ranking).values())

    def place(self, topic: TopicName, broker_id: int) -> None:
        if topic not in self.topics[broker_id]:
            self.topics[broker_id].add(topic)
            self._load[broker_id] += self.weight(topic)

    def remove(self, topic: TopicName, broker_id: int) -> None:
        if topic in self.topics[broker_id]:
            self.topics[broker_id].remove(topic)
            self._load[broker_id] -= self.weight(topic)

    def move(self, topic: TopicName, source: int, target: int) -> None:
        self.remove(topic, source)
        self.place(topic, target)

    def shift(self, source: int, target: int) -> None:
        """Move one of `source`'s counted topics to `target` (where it is counted too)."""
        if self._counted[source] < 1:
            raise ValueError(f"broker {source} has no counted topic left to move")
        self._counted[source] -= 1
        self._counted[target] += 1
        self._load[source] -= DEFAULT_TOPIC_WEIGHT
        self._load[target] += DEFAULT_TOPIC_WEIGHT

    def holders(self, topic: TopicName) -> list[int]:
        """The brokers that hold `topic` (one, unless the store is inconsistent), by id."""
        return sorted(b for b, topics in self.topics.items() if topic in topics)


def _unique(brokers: Iterable[BrokerLoad]) -> list[BrokerLoad]:
    listed = list(brokers)
    ids = [broker.broker_id for broker in listed]
    if len(set(ids)) != len(ids):
        repeated = sorted({b for b in ids if ids.count(b) > 1})
        raise ValueError(f"a broker is listed once; listed twice: {repeated}")
    return listed


def _resource_loads(active: list[BrokerLoad]) -> dict[int, float]:
    """The CPU and memory parts of the balanced ranking, per active broker."""
    cpus = _known_or_mean([broker.cpu for broker in active])
    memories = _known_or_mean([broker.memory for broker in active])
    return {
        broker.broker_id: CPU_SHARE * cpu / 100 + MEMORY_SHARE * memory / 100
        for broker, cpu, memory in zip(active, cpus, memories, strict=True)
    }


def _known_or_mean(values: list[float | None]) -> list[float]:
    """Each value, or the mean of the known ones where it is unknown (0 when none is known)."""
    known = [value for value in values if value is not None]
    mean = math.fsum(known) / len(known) if known else 0.0
    return [mean if value is None else float(value) for value in values]


@dataclass(frozen=True, slots=True)
class Balance:
    """The balance score: how evenly load spreads over brokers. `cv` is the coefficient of
    variation (population standard deviation over mean), `max_over_mean` the busiest
    broker's load over the mean. All 0 for no broker, and when every load is 0 (nothing to
    even out); `cv` is 0 for one broker."""

    brokers: int
    mean: float
    cv: float
    max_over_mean: float

    @classmethod
    def of(cls, loads: Iterable[float]) -> Balance:
        values = [float(value) for value in loads]
        if not values:
            return cls(0, 0.0, 0.0, 0.0)
        mean = math.fsum(values) / len(values)
        if mean <= 0:
            return cls(len(values), 0.0, 0.0, 0.0)
        variance = math.fsum((value - mean) ** 2 for value in values) / len(values)
        return cls(len(values), mean, math.sqrt(variance) / mean, max(values) / mean)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "brokers": self.brokers,
            "mean": round(self.mean, 3),
            "cv": round(self.cv, 4),
            "max_over_mean": round(self.max_over_mean, 4),
        }


def imbalance(loads: Iterable[float]) -> float:
    """The coefficient of variation of `loads` (`Balance.cv`): population standard deviation
    over mean; 0 for no broker or one, and when the mean is 0 (nothing to even out)."""
    return Balance.of(loads).cv


def rank(
    brokers: Iterable[BrokerLoad],
    ranking: Ranking | str,
    *,
    in_flight: InFlight | None = None,
    topic_weight: TopicWeights | None = None,
) -> list[tuple[int, float]]:
    """(broker id, load) of each active broker by `ranking`, least loaded first, ties by
    broker id. Empty when no broker is active (never an error: there is nothing to rank)."""
    placement = Placement(brokers, in_flight=in_flight, topic_weight=topic_weight)
    return placement.ranked(Ranking(ranking))


def choose_targets(
    topics: Iterable[TopicName],
    brokers: Iterable[BrokerLoad],
    ranking: Ranking | str,
    *,
    in_flight: InFlight | None = None,
    topic_weight: TopicWeights | None = None,
    preferred: Mapping[TopicName, int] | None = None,
    avoid: Mapping[TopicName, int] | None = None,
) -> dict[TopicName, int]:
    """The active broker each waiting topic goes to.

    A topic goes to its `preferred` broker when that broker is active (a move "to X");
    otherwise to the least loaded active broker, other than its `avoid` broker (the source of
    an unload) unless that is the only one. Each choice counts as in-flight load for the
    next, so a batch spreads: topics going to their preferred broker are placed first, then
    the others heaviest first (ties by name), the greedy order that spreads weights best.
    Empty when no broker is active: the topics stay waiting.
    """
    placement = Placement(brokers, in_flight=in_flight, topic_weight=topic_weight)
    chosen = Ranking(ranking)
    honoured = {
        topic: broker_id
        for topic, broker_id in (preferred or {}).items()
        if broker_id in placement.active
    }
    targets: dict[TopicName, int] = {}
    for topic in _placing_order(topics, placement, honoured):
        target = honoured.get(topic)
        if target is None:
            target = placement.least_loaded(chosen, avoid=(avoid or {}).get(topic))
        if target is None:
            return {}
        placement.place(topic, target)
        targets[topic] = target
    return targets


def _placing_order(
    topics: Iterable[TopicName], placement: Placement, honoured: Mapping[TopicName, int]
) -> list[TopicName]:
    unique = dict.fromkeys(topics)
    return sorted(unique, key=lambda t: (t not in honoured, -placement.weight(t), t))
