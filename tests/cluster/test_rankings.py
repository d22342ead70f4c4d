"""The rankings and the choice of targets for waiting topics, on hand-computed examples
(Danube's own cases where they apply)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from metaplane.cluster._rankings import (
    Balance,
    BrokerLoad,
    Placement,
    Ranking,
    choose_targets,
    imbalance,
    rank,
)
from metaplane.layout import TopicName
from metaplane.resources import BrokerMode

ACTIVE = BrokerMode.ACTIVE
DRAINING = BrokerMode.DRAINING
DRAINED = BrokerMode.DRAINED


def topics(prefix: str, count: int) -> list[TopicName]:
    return [TopicName("ns", f"{prefix}{index:04d}") for index in range(count)]


def broker(
    broker_id: int,
    owned: list[TopicName] | int = 0,
    *,
    mode: str = ACTIVE,
    cpu: float | None = None,
    memory: float | None = None,
) -> BrokerLoad:
    """A broker owning `owned` topics (or that many topics named after it)."""
    if isinstance(owned, int):
        owned = topics(f"b{broker_id}-", owned)
    return BrokerLoad(broker_id, mode, frozenset(owned), cpu, memory)


def loads(ranked: list[tuple[int, float]]) -> dict[int, float]:
    return dict(ranked)


# -- fair ----------------------------------------------------------------------------------


def test_fair_ranks_by_topic_count_least_first() -> None:
    brokers = [broker(1, 3), broker(2, 1), broker(3, 2)]
    assert rank(brokers, Ranking.FAIR) == [(2, 1.0), (3, 2.0), (1, 3.0)]


def test_fair_ignores_weights_cpu_and_memory() -> None:
    heavy = topics("h", 2)
    brokers = [broker(1, heavy, cpu=99, memory=99), broker(2, 3, cpu=1, memory=1)]
    assert rank(brokers, Ranking.FAIR, topic_weight={t: 50.0 for t in heavy}) == [
        (1, 2.0),
        (2, 3.0),
    ]


def test_ties_go_to_the_lower_broker_id() -> None:
    brokers = [broker(7, 2), broker(3, 2), broker(5, 2)]
    assert rank(brokers, Ranking.FAIR) == [(3, 2.0), (5, 2.0), (7, 2.0)]


# -- weighted ------------------------------------------------------------------------------


def test_weighted_sums_topic_weights_unknown_topics_weigh_one() -> None:
    a, b, c, d = topics("t", 4)
    weights = {a: 3.0, b: 0.5, c: 2.0}  # d is not listed: 1.0
    brokers = [broker(1, [a, b]), broker(2, [c, d]), broker(3, [])]
    assert rank(brokers, Ranking.WEIGHTED, topic_weight=weights) == [
        (3, 0.0),
        (2, 3.0),
        (1, 3.5),
    ]


def test_a_negative_or_infinite_weight_is_refused() -> None:
    (a,) = topics("t", 1)
    for weight in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="weight"):
            rank([broker(1, [a])], Ranking.WEIGHTED, topic_weight={a: weight})


# -- balanced ------------------------------------------------------------------------------


def test_balanced_single_broker_danube_case() -> None:
    """Danube's test_single_broker: cpu 50, memory 30, 10 topics. Danube: 28 (raw percents,
    truncated); here 0.3 · 10/10 + 0.35 · 0.5 + 0.35 · 0.3."""
    ((broker_id, load),) = rank([broker(1, 10, cpu=50, memory=30)], Ranking.BALANCED)
    assert broker_id == 1
    assert load == pytest.approx(0.58)


def test_balanced_multiple_brokers_danube_case() -> None:
    """Danube's test_multiple_brokers: the same order (3, 2, 1); Danube's loads 7, 14, 28."""
    brokers = [
        broker(1, 10, cpu=50, memory=30),
        broker(2, 5, cpu=20, memory=20),
        broker(3, 2, cpu=10, memory=10),
    ]
    ranked = rank(brokers, Ranking.BALANCED)
    assert [broker_id for broker_id, _ in ranked] == [3, 2, 1]
    # 0.3 · 2/10 + 0.35 · 0.1 + 0.35 · 0.1; 0.3 · 5/10 + 0.07 + 0.07; 0.3 + 0.175 + 0.105
    assert [load for _, load in ranked] == pytest.approx([0.13, 0.29, 0.58])


def test_balanced_same_load_danube_case() -> None:
    """Danube's test_same_load_brokers: equal loads; here the order is by broker id."""
    brokers = [broker(b, 5, cpu=10, memory=10) for b in (3, 1, 2)]
    ranked = rank(brokers, Ranking.BALANCED)
    assert [broker_id for broker_id, _ in ranked] == [1, 2, 3]
    assert [load for _, load in ranked] == pytest.approx([0.37] * 3)


def test_balanced_empty_danube_case() -> None:
    assert rank([], Ranking.BALANCED) == []


def test_balanced_normalises_the_topic_part_by_the_largest_weighted_load() -> None:
    a, b = topics("t", 2)
    weights = {a: 4.0, b: 1.0}
    brokers = [broker(1, [a], cpu=0, memory=0), broker(2, [b], cpu=0, memory=0)]
    ranked = loads(rank(brokers, Ranking.BALANCED, topic_weight=weights))
    assert ranked == pytest.approx({1: 0.3, 2: 0.3 * 1 / 4})


def test_balanced_unreported_cpu_or_memory_counts_as_the_mean_of_the_others() -> None:
    brokers = [
        broker(1, 1, cpu=20, memory=40),
        broker(2, 1, cpu=60, memory=None),
        broker(3, 1, cpu=None, memory=80),
    ]
    ranked = loads(rank(brokers, Ranking.BALANCED))
    # cpu of 3 = mean(20, 60) = 40; memory of 2 = mean(40, 80) = 60
    assert ranked == pytest.approx(
        {
            1: 0.3 + 0.35 * 0.2 + 0.35 * 0.4,
            2: 0.3 + 0.35 * 0.6 + 0.35 * 0.6,
            3: 0.3 + 0.35 * 0.4 + 0.35 * 0.8,
        }
    )


def test_balanced_without_any_report_ranks_by_the_topic_part_alone() -> None:
    """Danube falls back to the topic count; here to the (weighted) topic part."""
    brokers = [broker(1, 4), broker(2, 2), broker(3, 0)]
    assert loads(rank(brokers, Ranking.BALANCED)) == pytest.approx({1: 0.3, 2: 0.15, 3: 0.0})


def test_balanced_ignores_the_reports_of_brokers_that_are_not_active() -> None:
    """A draining broker's CPU does not shift the mean given to brokers without a report."""
    brokers = [
        broker(1, 1, cpu=10, memory=10),
        broker(2, 1),
        broker(3, 1, mode=DRAINING, cpu=90, memory=90),
    ]
    assert loads(rank(brokers, Ranking.BALANCED)) == pytest.approx({1: 0.37, 2: 0.37})


# -- every ranking -------------------------------------------------------------------------


@pytest.mark.parametrize("ranking", list(Ranking))
def test_only_active_brokers_are_ranked(ranking: Ranking) -> None:
    brokers = [broker(1, 5), broker(2, 0, mode=DRAINING), broker(3, 0, mode=DRAINED)]
    assert [broker_id for broker_id, _ in rank(brokers, ranking)] == [1]


@pytest.mark.parametrize("ranking", list(Ranking))
def test_a_broker_in_a_custom_state_is_not_ranked(ranking: Ranking) -> None:
    """Seed 001's "custom states for maintenance/upgrades": such a broker gets nothing."""
    brokers = [broker(1, 5), broker(2, 0, mode="maintenance")]
    assert [broker_id for broker_id, _ in rank(brokers, ranking)] == [1]


def test_a_known_mode_given_as_a_string_is_that_mode() -> None:
    assert broker(1, mode="active").mode is ACTIVE and broker(1, mode="active").active
    assert broker(1, mode="maintenance").mode == "maintenance"
    assert not broker(1, mode="maintenance").active


@pytest.mark.parametrize("ranking", list(Ranking))
def test_no_active_broker_ranks_nothing(ranking: Ranking) -> None:
    assert rank([broker(1, 3, mode=DRAINING), broker(2, mode=DRAINED)], ranking) == []


@pytest.mark.parametrize("ranking", list(Ranking))
def test_in_flight_topics_count_on_their_target_once(ranking: Ranking) -> None:
    owned = topics("o", 2)
    coming = topics("c", 3)
    brokers = [broker(1, owned), broker(2, 2), broker(3, 1)]
    in_flight = {1: [*coming, owned[0]], 9: topics("x", 5)}  # broker 9 is not listed
    expected = rank([broker(1, owned + coming), broker(2, 2), broker(3, 1)], ranking)
    assert rank(brokers, ranking, in_flight=in_flight) == expected
    assert expected[-1][0] == 1


def test_a_ranking_may_be_given_by_name() -> None:
    assert rank([broker(1, 2)], "fair") == [(1, 2.0)]
    with pytest.raises(ValueError, match="nope"):
        rank([broker(1, 2)], "nope")


def test_a_broker_is_listed_once() -> None:
    with pytest.raises(ValueError, match=r"listed twice: \[2\]"):
        rank([broker(1), broker(2), broker(2)], Ranking.FAIR)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"broker_id": -1}, ValueError),
        ({"broker_id": 2**64}, ValueError),
        ({"broker_id": True}, ValueError),
        ({"mode": ""}, TypeError),
        ({"mode": 3}, TypeError),
        ({"topics": set()}, TypeError),
        ({"cpu": -0.5}, ValueError),
        ({"cpu": math.nan}, ValueError),
        ({"memory": "40"}, TypeError),
        ({"registered": 1}, TypeError),
        ({"counted": -1}, ValueError),
        ({"counted": 2, "topics": frozenset({TopicName("ns", "t")})}, ValueError),
    ],
)
def test_a_broker_load_is_validated(fields: dict[str, object], error: type[Exception]) -> None:
    values: dict[str, object] = {
        "broker_id": 1,
        "mode": ACTIVE,
        "topics": frozenset(),
        "cpu": 10.0,
        "memory": 10.0,
    }
    with pytest.raises(error):
        BrokerLoad(**{**values, **fields})  # type: ignore[arg-type]


# -- imbalance -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], 0.0),
        ([5.0], 0.0),
        ([0.0, 0.0, 0.0], 0.0),
        ([4.0, 4.0], 0.0),
        ([2.0, 0.0], 1.0),
        ([3.0, 1.0, 2.0], math.sqrt(2 / 3) / 2),
        ([300.0, 0.0, 0.0], math.sqrt(2)),
    ],
)
def test_imbalance_is_the_coefficient_of_variation(values: list[float], expected: float) -> None:
    assert imbalance(values) == pytest.approx(expected)
    assert Balance.of(values).cv == imbalance(values)


def test_the_balance_score_also_gives_the_mean_and_the_busiest_over_it() -> None:
    balance = Balance.of([0, 20])
    assert (balance.brokers, balance.mean, balance.cv, balance.max_over_mean) == (2, 10, 1, 2)
    assert Balance.of([]) == Balance(0, 0.0, 0.0, 0.0)
    assert Balance.of([0, 0]).as_dict() == {"brokers": 2, "mean": 0, "cv": 0, "max_over_mean": 0}


# -- counted loads -------------------------------------------------------------------------


@pytest.mark.parametrize("ranking", list(Ranking))
def test_counted_topics_rank_as_listed_topics_of_weight_one(ranking: Ranking) -> None:
    listed = [broker(1, 3, cpu=20, memory=10), broker(2, 5, cpu=40, memory=30)]
    counted = [
        BrokerLoad(1, ACTIVE, cpu=20, memory=10, counted=3),
        BrokerLoad(2, ACTIVE, cpu=40, memory=30, counted=5),
    ]
    assert loads(rank(counted, ranking)) == pytest.approx(loads(rank(listed, ranking)))
    assert [b for b, _ in rank(counted, ranking)] == [b for b, _ in rank(listed, ranking)]


def test_a_counted_topic_shifts_between_brokers() -> None:
    placement = Placement([BrokerLoad(1, ACTIVE, counted=2), BrokerLoad(2, ACTIVE, counted=0)])
    placement.shift(1, 2)
    assert placement.loads(Ranking.FAIR) == {1: 1.0, 2: 1.0}
    placement.shift(1, 2)
    with pytest.raises(ValueError, match="no counted topic"):
        placement.shift(1, 2)


def test_an_unregistered_broker_is_neither_ranked_nor_emptied() -> None:
    gone = BrokerLoad(3, DRAINING, registered=False, counted=4)
    placement = Placement([broker(1, 1), gone])
    assert placement.active == [1] and placement.emptied == []
    assert not gone.active and not gone.emptied and gone.topic_count == 4


# -- choose_targets ------------------------------------------------------------------------


@pytest.mark.parametrize("ranking", list(Ranking))
def test_300_topics_spread_100_each_over_3_equal_brokers(ranking: Ranking) -> None:
    brokers = [broker(b, cpu=30, memory=40) for b in (1, 2, 3)]
    targets = choose_targets(topics("t", 300), brokers, ranking)
    assert len(targets) == 300
    assert Counter(targets.values()) == {1: 100, 2: 100, 3: 100}


@pytest.mark.parametrize("ranking", list(Ranking))
def test_the_emptier_broker_is_filled_first(ranking: Ranking) -> None:
    brokers = [broker(1, 50), broker(2, 0), broker(3, 20)]
    waiting = topics("t", 30)
    targets = choose_targets(waiting, brokers, ranking)
    assert {targets[topic] for topic in waiting[:20]} == {2}
    assert Counter(targets.values()) == {2: 25, 3: 5}


def test_weighted_targets_place_the_heaviest_topics_first() -> None:
    """By name, 1 -> broker 1, 1 -> broker 2, 2 -> broker 1: (3, 1). Heaviest first: (2, 2)."""
    waiting = topics("t", 3)
    weights = dict(zip(waiting, [1.0, 1.0, 2.0], strict=True))
    brokers = [broker(1), broker(2)]
    targets = choose_targets(waiting, brokers, Ranking.WEIGHTED, topic_weight=weights)
    assert targets == {waiting[2]: 1, waiting[0]: 2, waiting[1]: 2}


def test_in_flight_topics_count_when_choosing() -> None:
    brokers = [broker(1, 2), broker(2, 0), broker(3, 2)]
    targets = choose_targets(topics("t", 2), brokers, Ranking.FAIR, in_flight={2: topics("x", 3)})
    assert set(targets.values()) == {1, 3}


def test_a_preferred_active_target_is_honoured_and_counted_first() -> None:
    """Its name comes last, yet it is placed first: then 2 holds one topic like 1, and the
    other topic goes to 1 (the lower id), not to the empty-looking 2."""
    other, moved = topics("t", 2)
    brokers = [broker(1, 1), broker(2, 0)]
    targets = choose_targets([other, moved], brokers, Ranking.FAIR, preferred={moved: 2})
    assert targets == {moved: 2, other: 1}


@pytest.mark.parametrize("mode", [DRAINING, DRAINED])
def test_a_preferred_target_that_is_not_active_falls_back_to_the_ranking(mode: BrokerMode) -> None:
    (moved,) = topics("t", 1)
    brokers = [broker(1, 3), broker(2, 1), broker(3, 0, mode=mode)]
    assert choose_targets([moved], brokers, Ranking.FAIR, preferred={moved: 3}) == {moved: 2}
    assert choose_targets([moved], brokers, Ranking.FAIR, preferred={moved: 99}) == {moved: 2}


@pytest.mark.parametrize("ranking", list(Ranking))
def test_draining_and_drained_brokers_are_never_chosen(ranking: Ranking) -> None:
    brokers = [
        broker(1, 40, cpu=90, memory=90),
        broker(2, 0, mode=DRAINING, cpu=0, memory=0),
        broker(3, 0, mode=DRAINED, cpu=0, memory=0),
    ]
    targets = choose_targets(topics("t", 50), brokers, ranking)
    assert set(targets.values()) == {1}


def test_no_active_broker_chooses_nothing() -> None:
    brokers = [broker(1, mode=DRAINING), broker(2, mode=DRAINED)]
    assert choose_targets(topics("t", 3), brokers, Ranking.FAIR) == {}
    assert choose_targets(topics("t", 3), [], Ranking.BALANCED) == {}


def test_an_avoided_broker_is_chosen_only_when_it_is_the_only_one() -> None:
    (unloaded,) = topics("t", 1)
    brokers = [broker(1, 0), broker(2, 5)]
    avoid = {unloaded: 1}
    assert choose_targets([unloaded], brokers, Ranking.FAIR, avoid=avoid) == {unloaded: 2}
    assert choose_targets([unloaded], brokers[:1], Ranking.FAIR, avoid=avoid) == {unloaded: 1}


def test_a_topic_listed_twice_is_placed_once() -> None:
    (topic,) = topics("t", 1)
    assert choose_targets([topic, topic], [broker(1), broker(2)], Ranking.FAIR) == {topic: 1}
