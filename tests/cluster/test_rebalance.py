"""Rebalancing that does not flap, simulated on pure data: each cycle's moves are applied to
the brokers (CPU and memory stay as reported) before the next cycle. And the one-shot plan of
`metaplane analyze` (`plan_quotas`), on the same loads, rankings and balance score."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaplane import layout
from metaplane.cluster._moves import move_change, move_topic, target_of, target_reads
from metaplane.cluster._rankings import Balance, BrokerLoad, Ranking, imbalance, rank
from metaplane.cluster._rebalance import (
    Move,
    MoveReason,
    RebalanceConfig,
    RebalancePlan,
    Rebalancer,
    balance_after,
    balance_before,
    plan_quotas,
)
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerNotActive,
    BrokerState,
    ChangedSinceRead,
    NoBroker,
    OwnershipManager,
    UnassignedMarker,
    decode,
    encode,
)
from metaplane.store import MemoryStore, Put, Txn, TxnResult

ACTIVE = BrokerMode.ACTIVE
DRAINING = BrokerMode.DRAINING
DRAINED = BrokerMode.DRAINED
CYCLE = 5.0
"""Seconds between two cycles of the simulation."""


def topics(prefix: str, count: int) -> list[TopicName]:
    return [TopicName("ns", f"{prefix}{index:04d}") for index in range(count)]


def broker(
    broker_id: int,
    owned: Iterable[TopicName] = (),
    *,
    mode: str = ACTIVE,
    cpu: float | None = None,
    memory: float | None = None,
) -> BrokerLoad:
    return BrokerLoad(broker_id, mode, frozenset(owned), cpu, memory)


def apply(brokers: Sequence[BrokerLoad], moves: Iterable[Move]) -> list[BrokerLoad]:
    """The brokers once `moves` have landed: each topic leaves its source for its target."""
    owned = {b.broker_id: set(b.topics) for b in brokers}
    for move in moves:
        assert move.topic in owned[move.from_broker], move
        owned[move.from_broker].remove(move.topic)
        owned[move.to_broker].add(move.topic)
    return [
        BrokerLoad(b.broker_id, b.mode, frozenset(owned[b.broker_id]), b.cpu, b.memory)
        for b in brokers
    ]


def spread(
    brokers: Sequence[BrokerLoad], ranking: Ranking, weights: Mapping[TopicName, float] | None
) -> float:
    return imbalance(load for _, load in rank(brokers, ranking, topic_weight=weights))


def simulate(
    rebalancer: Rebalancer,
    brokers: list[BrokerLoad],
    ranking: Ranking,
    cycles: int,
    *,
    start: float = 0.0,
    weights: Mapping[TopicName, float] | None = None,
) -> tuple[list[BrokerLoad], list[RebalancePlan]]:
    """Run `cycles` cycles, applying each cycle's moves before the next."""
    plans = []
    for cycle in range(cycles):
        plan = rebalancer.plan(brokers, ranking, start + cycle * CYCLE, topic_weight=weights)
        brokers = apply(brokers, plan.moves)
        plans.append(plan)
    return brokers, plans


def counts(brokers: Iterable[BrokerLoad]) -> dict[int, int]:
    return {b.broker_id: len(b.topics) for b in brokers}


# -- from one broker to three, then quiet ----------------------------------------------------


@pytest.mark.parametrize("ranking", list(Ranking))
def test_300_topics_on_one_broker_even_out_then_nothing_moves_for_20_cycles(
    ranking: Ranking,
) -> None:
    every = topics("t", 300)
    weights = {topic: 1.0 + index % 3 for index, topic in enumerate(every)}
    brokers = [
        broker(1, every, cpu=50, memory=40),
        broker(2, cpu=30, memory=40),
        broker(3, cpu=20, memory=40),
    ]
    config = RebalanceConfig()
    rebalancer = Rebalancer(config)
    history = [spread(brokers, ranking, weights)]
    now = 0.0
    for _ in range(200):
        plan = rebalancer.plan(brokers, ranking, now, topic_weight=weights)
        assert len(plan.moves) <= config.max_moves_per_cycle
        assert len({m.topic for m in plan.moves}) == len(plan.moves)
        brokers = apply(brokers, plan.moves)
        history.append(spread(brokers, ranking, weights))
        now += CYCLE
        if history[-1] <= config.threshold:
            break
    assert history[-1] <= config.threshold < history[0]
    assert all(later <= earlier + 1e-9 for earlier, later in pairwise(history))
    settled = counts(brokers)
    brokers, plans = simulate(rebalancer, brokers, ranking, 20, start=now, weights=weights)
    assert [plan.moves for plan in plans] == [()] * 20
    assert counts(brokers) == settled
    assert sum(settled.values()) == 300


def test_the_first_moves_wait_for_the_sustained_cycles() -> None:
    brokers = [broker(1, topics("t", 30)), broker(2), broker(3)]
    config = RebalanceConfig(sustained_cycles=3)
    _, plans = simulate(Rebalancer(config), brokers, Ranking.FAIR, 4)
    assert [len(plan.moves) for plan in plans] == [0, 0, 5, 5]
    assert [plan.cycles_over for plan in plans] == [1, 2, 3, 4]


def test_the_cap_per_cycle_holds() -> None:
    brokers = [broker(1, topics("t", 300)), broker(2), broker(3)]
    config = RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=3)
    _, plans = simulate(Rebalancer(config), brokers, Ranking.FAIR, 30)
    assert [len(plan.moves) for plan in plans] == [3] * 30


def test_each_move_goes_from_the_most_to_the_least_loaded_broker() -> None:
    brokers = [broker(1, topics("a", 10)), broker(2, topics("b", 6)), broker(3, topics("c", 2))]
    config = RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=1)
    _, (plan,) = simulate(Rebalancer(config), brokers, Ranking.FAIR, 1)
    (move,) = plan.moves
    assert (move.from_broker, move.to_broker, move.reason) == (1, 3, MoveReason.IMBALANCE)


def test_when_the_most_loaded_broker_cannot_give_the_next_one_does() -> None:
    """(10, 6, 0): broker 1's one topic would swap it with any target; 2 gives to 3."""
    (heavy,) = topics("h", 1)
    brokers = [broker(1, [heavy]), broker(2, topics("b", 6)), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=1))
    plan = rebalancer.plan(brokers, Ranking.WEIGHTED, 0.0, topic_weight={heavy: 10.0})
    assert [(move.from_broker, move.to_broker) for move in plan.moves] == [(2, 3)]


def test_the_moves_stop_once_under_the_threshold() -> None:
    brokers = [broker(1, topics("a", 14)), broker(2, topics("b", 8)), broker(3, topics("c", 8))]
    config = RebalanceConfig(threshold=0.2, sustained_cycles=1, max_moves_per_cycle=50)
    rebalancer = Rebalancer(config)
    plan = rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    # (14, 8, 8): CV 0.28; one move gives (13, 9, 8): CV 0.21; two give (12, 9, 9): CV 0.14
    assert len(plan.moves) == 2
    assert plan.imbalance_after == pytest.approx(math.sqrt(6 / 3) / 10)


# -- no flapping -----------------------------------------------------------------------------


def test_a_brief_spike_moves_nothing() -> None:
    uneven = [broker(1, topics("t", 30)), broker(2), broker(3)]
    even = [broker(1, topics("t", 10)), broker(2, topics("u", 10)), broker(3, topics("v", 10))]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=3))
    cycles = [uneven, uneven, even, uneven, uneven, even, uneven, uneven]
    plans = [rebalancer.plan(b, Ranking.FAIR, i * CYCLE) for i, b in enumerate(cycles)]
    assert [plan.moves for plan in plans] == [()] * len(cycles)
    assert [plan.cycles_over for plan in plans] == [1, 2, 0, 1, 2, 0, 1, 2]
    assert rebalancer.plan(uneven, Ranking.FAIR, 100.0).moves != ()


def test_no_move_swaps_two_brokers() -> None:
    """(2, 1) topics is uneven (CV 0.33), but moving one gives (1, 2): the same, swapped."""
    brokers = [broker(1, topics("a", 2)), broker(2, topics("b", 1))]
    config = RebalanceConfig(sustained_cycles=1)
    _, plans = simulate(Rebalancer(config), brokers, Ranking.FAIR, 10)
    assert all(plan.moves == () for plan in plans)
    assert plans[-1].imbalance > config.threshold


def test_a_move_that_changes_nothing_or_swaps_roles_is_not_made() -> None:
    """The heavy topic would leave its broker lighter than its target; the weightless one
    would leave the loads as uneven as before."""
    heavy, weightless = topics("h", 2)
    brokers = [broker(1, [heavy, weightless]), broker(2), broker(3)]
    weights = {heavy: 9.0, weightless: 0.0}
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1))
    _, plans = simulate(rebalancer, brokers, Ranking.WEIGHTED, 5, weights=weights)
    assert all(plan.moves == () for plan in plans)


def test_the_move_that_lowers_the_imbalance_most_is_refused_if_it_swaps_roles() -> None:
    """(10, 0): moving the 7 gives (3, 7), better than (8, 2), but 1 and 2 swap roles."""
    seven, two, one = topics("w", 3)
    weights = {seven: 7.0, two: 2.0, one: 1.0}
    brokers = [broker(1, [seven, two, one]), broker(2)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1))
    brokers, plans = simulate(rebalancer, brokers, Ranking.WEIGHTED, 5, weights=weights)
    # (10, 0) -> (8, 2) -> (7, 3); then only the 7 is left on 1, and it would swap them
    assert [move.topic for plan in plans for move in plan.moves] == [two, one]
    assert counts(brokers) == {1: 1, 2: 2}


def test_the_cooldown_keeps_a_moved_topic_in_place() -> None:
    a0, *others = topics("a", 4)
    config = RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=1, cooldown=60.0)
    rebalancer = Rebalancer(config)
    brokers = [broker(1, [a0, *others]), broker(2, topics("b", 2)), broker(3)]
    (move,) = rebalancer.plan(brokers, Ranking.WEIGHTED, 0.0).moves
    assert (move.topic, move.from_broker, move.to_broker) == (a0, 1, 3)
    # Then a heavy topic lands on 3: moving a0 back off 3 is the only move that helps
    (heavy,) = topics("h", 1)
    weights = {heavy: 10.0}
    brokers = [broker(1, others), broker(2, topics("b", 2)), broker(3, [a0, heavy])]
    for now in (5.0, 30.0, 59.0):
        assert rebalancer.plan(brokers, Ranking.WEIGHTED, now, topic_weight=weights).moves == ()
    (move,) = rebalancer.plan(brokers, Ranking.WEIGHTED, 60.0, topic_weight=weights).moves
    assert (move.topic, move.from_broker, move.to_broker) == (a0, 3, 2)


def test_a_topic_an_operator_moved_cools_down_too() -> None:
    """An operator moved a0 from 1 to 3 (to a named broker): the rebalancer was told, and
    evens the loads out with other topics, not by moving a0 straight back."""
    a0, a1 = topics("a", 2)
    config = RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=1, cooldown=60.0)
    rebalancer = Rebalancer(config)
    brokers = [broker(1), broker(2, topics("b", 1)), broker(3, [a0, a1])]
    rebalancer.moved([a0], 0.0)
    (move,) = rebalancer.plan(brokers, Ranking.FAIR, 1.0).moves
    assert (move.topic, move.from_broker, move.to_broker) == (a1, 3, 1)
    untold = Rebalancer(config)
    (move,) = untold.plan(brokers, Ranking.FAIR, 1.0).moves
    assert (move.topic, move.from_broker, move.to_broker) == (a0, 3, 1)  # what it would do


# -- moves in flight -------------------------------------------------------------------------


def in_transit(brokers: Sequence[BrokerLoad], moves: Iterable[Move]) -> list[BrokerLoad]:
    """The brokers once `moves` have left their sources but not reached their targets."""
    leaving = {(move.from_broker, move.topic) for move in moves}
    return [
        broker(
            b.broker_id,
            (t for t in b.topics if (b.broker_id, t) not in leaving),
            mode=b.mode,
            cpu=b.cpu,
            memory=b.memory,
        )
        for b in brokers
    ]


def test_moves_in_flight_count_on_their_target() -> None:
    """Moves that never land: the rebalancer counts them on their targets and stops once they
    would even out, instead of emptying broker 1 into targets whose reports lag."""
    brokers = [broker(1, topics("t", 30)), broker(2), broker(3)]
    config = RebalanceConfig(sustained_cycles=1, in_flight_timeout=1000.0)
    rebalancer = Rebalancer(config)
    targets = Counter[int]()
    for cycle in range(20):
        plan = rebalancer.plan(brokers, Ranking.FAIR, cycle * CYCLE)
        targets.update(move.to_broker for move in plan.moves)
        brokers = in_transit(brokers, plan.moves)
    assert len(brokers[0].topics) >= 10
    assert max(targets.values()) <= 10
    assert plan.moves == ()
    assert plan.imbalance <= config.threshold


def test_without_the_in_flight_count_the_same_moves_would_pile_up() -> None:
    """The control of the case above: forgetting each started move empties broker 1 (but for
    its last topic, whose move would only swap it with its target)."""
    brokers = [broker(1, topics("t", 30)), broker(2), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1))
    for cycle in range(20):
        plan = rebalancer.plan(brokers, Ranking.FAIR, cycle * CYCLE)
        for move in plan.moves:
            rebalancer.cancel(move.topic)
        brokers = in_transit(brokers, plan.moves)
    assert len(brokers[0].topics) <= 1


def test_a_move_in_flight_times_out() -> None:
    brokers = [broker(1, topics("t", 12)), broker(2), broker(3)]
    config = RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=20, in_flight_timeout=30.0)
    rebalancer = Rebalancer(config)
    first = rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    brokers = in_transit(brokers, first.moves)
    assert rebalancer.plan(brokers, Ranking.FAIR, 30.0).moves == ()
    assert rebalancer.plan(brokers, Ranking.FAIR, 31.0).moves != ()


def test_a_move_still_at_its_source_counts_on_its_target() -> None:
    """The LoadManager has not started the move yet: the store still has the topic at 1."""
    brokers = [broker(1, topics("t", 12)), broker(2), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=20))
    first = rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    assert first.moves != ()
    second = rebalancer.plan(brokers, Ranking.FAIR, CYCLE)
    assert second.moves == ()
    assert second.imbalance == pytest.approx(first.imbalance_after)


def test_a_cancelled_move_no_longer_counts() -> None:
    brokers = [broker(1, topics("t", 12)), broker(2), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=20))
    first = rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    for move in first.moves:
        rebalancer.cancel(move.topic)
    again = rebalancer.plan(brokers, Ranking.FAIR, CYCLE)
    assert again.moves == first.moves


def test_topics_in_flight_from_the_caller_count_on_their_target() -> None:
    brokers = [broker(1, topics("t", 12)), broker(2), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=1))
    plan = rebalancer.plan(brokers, Ranking.FAIR, 0.0, in_flight={2: topics("x", 6)})
    assert [move.to_broker for move in plan.moves] == [3]


def test_a_topic_owned_twice_is_not_moved() -> None:
    both = topics("t", 6)
    brokers = [broker(1, both), broker(2, both[:1]), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=20))
    plan = rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    assert plan.moves != ()
    assert both[0] not in {move.topic for move in plan.moves}


def test_reset_forgets_the_cycles_and_the_moves() -> None:
    brokers = [broker(1, topics("t", 12)), broker(2), broker(3)]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=2))
    rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    rebalancer.reset()
    assert rebalancer.plan(brokers, Ranking.FAIR, CYCLE).moves == ()
    assert rebalancer.cycles_over == 1


# -- draining --------------------------------------------------------------------------------


def test_a_draining_broker_is_emptied_within_the_cap_then_reported_drained() -> None:
    draining = topics("d", 12)
    brokers = [
        broker(1, topics("a", 10)),
        broker(2, topics("b", 10)),
        broker(3, topics("c", 10)),
        broker(4, draining, mode=DRAINING),
    ]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=3, max_moves_per_cycle=5))
    brokers, plans = simulate(rebalancer, brokers, Ranking.FAIR, 4)
    assert [len(plan.moves) for plan in plans] == [5, 5, 2, 0]
    moves = [move for plan in plans for move in plan.moves]
    assert {move.topic for move in moves} == set(draining)
    assert {move.reason for move in moves} == {MoveReason.DRAINING}
    assert {move.from_broker for move in moves} == {4}
    assert Counter(move.to_broker for move in moves) == {1: 4, 2: 4, 3: 4}
    assert [plan.drained for plan in plans] == [(), (), (), (4,)]
    assert counts(brokers) == {1: 14, 2: 14, 3: 14, 4: 0}


def test_draining_goes_before_evening_out_and_shares_the_cap() -> None:
    brokers = [
        broker(1, topics("a", 30)),
        broker(2),
        broker(3, topics("d", 3), mode=DRAINING),
    ]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=5))
    plan = rebalancer.plan(brokers, Ranking.FAIR, 0.0)
    assert [move.reason for move in plan.moves] == [MoveReason.DRAINING] * 3 + [
        MoveReason.IMBALANCE
    ] * 2
    assert {move.to_broker for move in plan.moves} == {2}


def test_a_draining_broker_with_a_topic_on_its_way_is_not_drained_yet() -> None:
    brokers = [broker(1), broker(2, mode=DRAINING)]
    plan = Rebalancer().plan(brokers, Ranking.FAIR, 0.0, in_flight={2: topics("x", 1)})
    assert plan.drained == ()
    assert Rebalancer().plan(brokers, Ranking.FAIR, 0.0).drained == (2,)


def test_a_drained_broker_still_holding_topics_is_emptied_but_not_reported() -> None:
    brokers = [broker(1), broker(2, topics("d", 2), mode=DRAINED)]
    plan = Rebalancer().plan(brokers, Ranking.FAIR, 0.0)
    assert [(m.from_broker, m.to_broker) for m in plan.moves] == [(2, 1), (2, 1)]
    assert plan.drained == ()


@pytest.mark.parametrize("ranking", list(Ranking))
def test_draining_and_drained_brokers_never_receive_a_topic(ranking: Ranking) -> None:
    brokers = [
        broker(1, topics("a", 40), cpu=90, memory=90),
        broker(2, topics("b", 2), cpu=10, memory=10),
        broker(3, mode=DRAINING, cpu=0, memory=0),
        broker(4, mode=DRAINED, cpu=0, memory=0),
    ]
    _, plans = simulate(Rebalancer(RebalanceConfig(sustained_cycles=1)), brokers, ranking, 20)
    targets = {move.to_broker for plan in plans for move in plan.moves}
    assert targets == {2}


@pytest.mark.parametrize("ranking", list(Ranking))
def test_a_broker_in_a_custom_state_keeps_its_topics_and_receives_none(ranking: Ranking) -> None:
    """A broker in maintenance (seed 001's custom states) is neither emptied nor filled."""
    held = topics("m", 10)
    brokers = [
        broker(1, topics("a", 40), cpu=90, memory=90),
        broker(2, topics("b", 2), cpu=10, memory=10),
        broker(3, held, mode="maintenance", cpu=0, memory=0),
    ]
    rebalancer = Rebalancer(RebalanceConfig(sustained_cycles=1))
    after, plans = simulate(rebalancer, brokers, ranking, 20)
    moves = [move for plan in plans for move in plan.moves]
    assert moves, "brokers 1 and 2 even out"
    assert {move.to_broker for move in moves} == {2}
    assert {move.from_broker for move in moves} == {1}
    assert all(3 not in plan.drained for plan in plans)
    assert next(b for b in after if b.broker_id == 3).topics == frozenset(held)


def test_no_active_broker_moves_nothing() -> None:
    brokers = [broker(1, topics("d", 3), mode=DRAINING), broker(2, mode=DRAINED)]
    plan = Rebalancer().plan(brokers, Ranking.FAIR, 0.0)
    assert (plan.moves, plan.drained, plan.imbalance) == ((), (), 0.0)


@pytest.mark.parametrize("count", [0, 1])
def test_no_broker_or_one_is_balanced(count: int) -> None:
    brokers = [broker(1, topics("t", 50))][:count]
    _, plans = simulate(Rebalancer(RebalanceConfig(sustained_cycles=1)), brokers, Ranking.FAIR, 3)
    assert all((plan.moves, plan.imbalance) == ((), 0.0) for plan in plans)


# -- the configuration -----------------------------------------------------------------------


def test_the_defaults() -> None:
    config = RebalanceConfig()
    assert (config.threshold, config.sustained_cycles, config.max_moves_per_cycle) == (0.2, 3, 5)
    assert (config.cooldown, config.in_flight_timeout) == (60.0, 120.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("threshold", 0),
        ("threshold", -0.1),
        ("threshold", math.nan),
        ("threshold", math.inf),
        ("threshold", "0.2"),
        ("threshold", True),
        ("sustained_cycles", 0),
        ("sustained_cycles", 2.0),
        ("sustained_cycles", True),
        ("max_moves_per_cycle", 0),
        ("max_moves_per_cycle", -3),
        ("cooldown", -1.0),
        ("cooldown", math.inf),
        ("in_flight_timeout", 0.0),
    ],
)
def test_nonsense_settings_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"RebalanceConfig.{field} must be"):
        RebalanceConfig(**{field: value})  # type: ignore[arg-type]


def test_a_zero_cooldown_is_allowed() -> None:
    assert RebalanceConfig(cooldown=0).cooldown == 0


# -- properties ------------------------------------------------------------------------------

WEIGHTS = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5])
PERCENT = st.one_of(st.none(), st.integers(0, 100).map(float))


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[BrokerLoad], dict[TopicName, float]]:
    """2 to 5 brokers (some maybe draining or drained), 0 to 60 topics spread at random."""
    ids = draw(st.lists(st.integers(1, 50), min_size=2, max_size=5, unique=True))
    modes = draw(
        st.lists(
            st.sampled_from([ACTIVE] * 4 + [DRAINING, DRAINED]),
            min_size=len(ids),
            max_size=len(ids),
        )
    )
    every = topics("t", draw(st.integers(0, 60)))
    owner = draw(st.lists(st.sampled_from(ids), min_size=len(every), max_size=len(every)))
    brokers = [
        broker(
            broker_id,
            (t for t, o in zip(every, owner, strict=True) if o == broker_id),
            mode=mode,
            cpu=draw(PERCENT),
            memory=draw(PERCENT),
        )
        for broker_id, mode in zip(ids, modes, strict=True)
    ]
    weights = {topic: draw(WEIGHTS) for topic in every}
    return brokers, weights


@settings(max_examples=300, deadline=None)
@given(
    cluster=clusters(),
    ranking=st.sampled_from(list(Ranking)),
    cycles=st.integers(1, 6),
    cooldown=st.sampled_from([0.0, 7.0]),
)
def test_moves_never_raise_the_imbalance_and_keep_every_topic_once(
    cluster: tuple[list[BrokerLoad], dict[TopicName, float]],
    ranking: Ranking,
    cycles: int,
    cooldown: float,
) -> None:
    brokers, weights = cluster
    every = sorted(t for b in brokers for t in b.topics)
    active = {b.broker_id for b in brokers if b.mode is ACTIVE}
    config = RebalanceConfig(sustained_cycles=1, max_moves_per_cycle=7, cooldown=cooldown)
    rebalancer = Rebalancer(config)
    for cycle in range(cycles):
        plan = rebalancer.plan(brokers, ranking, cycle * CYCLE, topic_weight=weights)
        draining = [m for m in plan.moves if m.reason is MoveReason.DRAINING]
        evening = [m for m in plan.moves if m.reason is MoveReason.IMBALANCE]
        assert plan.moves == (*draining, *evening)
        assert len(plan.moves) <= config.max_moves_per_cycle
        assert all(m.to_broker in active and m.to_broker != m.from_broker for m in plan.moves)
        brokers = apply(brokers, draining)
        before = spread(brokers, ranking, weights)
        for move in evening:
            brokers = apply(brokers, [move])
            after = spread(brokers, ranking, weights)
            assert after < before
            before = after
        assert before == pytest.approx(plan.imbalance_after)
        assert sorted(t for b in brokers for t in b.topics) == every


# -- the one-shot plan (metaplane analyze) ----------------------------------------------------


def counted(
    broker_id: int, count: int, mode: str = ACTIVE, *, registered: bool = True
) -> BrokerLoad:
    """A broker whose topics are counted (as Spark counts them), not listed."""
    return BrokerLoad(broker_id, mode, registered=registered, counted=count)


def test_quotas_drain_the_draining_broker_onto_the_least_loaded() -> None:
    quotas = plan_quotas([counted(1, 10), counted(2, 4), counted(3, 6, DRAINING)], 0.0)
    assert quotas.after[3] == 0
    assert quotas.after[1] + quotas.after[2] == 20
    assert {t.reason for t in quotas.transfers if t.source == 3} == {"drain"}
    # The fair ranking chooses each drain target: broker 2 until it passes broker 1.
    assert [(t.target, t.count) for t in quotas.transfers if t.reason == "drain"] == [(2, 6)]


def test_quotas_give_nothing_to_unregistered_drained_or_custom_brokers() -> None:
    loads = [
        counted(1, 30),
        counted(2, 0, registered=False),
        counted(3, 0, DRAINED),
        counted(4, 0),
        counted(5, 3, "maintenance"),
        counted(6, 5, DRAINING, registered=False),
    ]
    quotas = plan_quotas(loads, threshold=0.05)
    assert quotas.after[2] == quotas.after[3] == 0
    assert quotas.after[1] == quotas.after[4] == 15
    assert quotas.after[5] == 3  # keeps its topics, receives none
    assert quotas.after[6] == 5  # unregistered: the leader reassigns a lost broker's topics


def test_quotas_cap_balance_moves_only() -> None:
    quotas = plan_quotas([counted(1, 100), counted(2, 0), counted(3, 7, DRAINING)], 0.0, 5)
    balance = sum(t.count for t in quotas.transfers if t.reason == "balance")
    assert balance == 5
    assert quotas.after[3] == 0
    assert any("max-moves" in note for note in quotas.notes)


def test_quotas_without_an_active_broker_plan_nothing() -> None:
    quotas = plan_quotas([counted(1, 5, DRAINING)], 0.1)
    assert quotas.transfers == [] and quotas.notes


@pytest.mark.parametrize(("threshold", "moves"), [(-0.1, None), (math.nan, None), (0.1, -1)])
def test_quotas_refuse_nonsense_settings(threshold: float, moves: int | None) -> None:
    with pytest.raises(ValueError, match="must be at least 0"):
        plan_quotas([counted(1, 1)], threshold, moves)


def test_listed_and_counted_loads_plan_alike() -> None:
    listed = [broker(1, topics("a", 9)), broker(2, topics("b", 1)), broker(3, (), mode=DRAINING)]
    same = [counted(1, 9), counted(2, 1), counted(3, 0, DRAINING)]
    assert plan_quotas(listed, 0.0) == plan_quotas(same, 0.0)


@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=12),
    st.lists(st.integers(0, 50), max_size=3),
    st.floats(0.0, 0.5),
)
def test_quotas_reach_the_threshold_or_the_best_spread(
    active: list[int], draining: list[int], threshold: float
) -> None:
    loads = [counted(index, count) for index, count in enumerate(active)]
    loads += [counted(100 + index, n, DRAINING) for index, n in enumerate(draining)]
    quotas = plan_quotas(loads, threshold)
    after = [quotas.after[index] for index in range(len(active))]
    assert sum(after) == sum(active) + sum(draining)
    assert all(quotas.after[100 + index] == 0 for index in range(len(draining)))
    # The same balance score as the LoadManager's imbalance (the fair ranking's loads).
    assert balance_after(loads, quotas.after).cv == pytest.approx(imbalance(after))
    assert balance_after(loads, quotas.after).cv <= threshold + 1e-9 or max(after) - min(after) <= 1
    # Few moves: never more than what taking every broker to the mean would need.
    mean = sum(after) / len(after)
    balance_moves = quotas.moves - sum(draining)
    assert balance_moves <= sum(max(count - mean, 0) for count in active) + sum(draining) + 1


@given(st.lists(st.integers(0, 60), min_size=2, max_size=6), st.floats(0.0, 0.5))
def test_the_balance_moves_are_the_fair_rankings_last_to_first(
    counts: list[int], threshold: float
) -> None:
    """The planner's heaps keep the fair ranking's order: its quotas are those of moving one
    topic at a time from `rank`'s last broker to its first, re-ranking after each move."""
    loads = [counted(index + 1, count) for index, count in enumerate(counts)]
    now = {load.broker_id: load.topic_count for load in loads}
    expected: Counter[tuple[int, int]] = Counter()
    while imbalance(now.values()) > threshold:
        ranked = rank([counted(b, n) for b, n in now.items()], Ranking.FAIR)
        (target, least), (source, most) = ranked[0], ranked[-1]
        if most - least <= 1:
            break
        now[source] -= 1
        now[target] += 1
        expected[source, target] += 1
    quotas = plan_quotas(loads, threshold)
    assert {(t.source, t.target): t.count for t in quotas.transfers} == dict(expected)
    assert quotas.after == now


def test_the_balance_before_counts_every_broker_still_serving() -> None:
    loads = [counted(1, 10), counted(2, 20, DRAINING), counted(3, 5, DRAINED)]
    loads += [counted(4, 30, "maintenance"), counted(5, 40, registered=False)]
    assert balance_before(loads) == Balance.of([10, 20, 30])


# -- the guarded move ------------------------------------------------------------------------

TOPIC = TopicName("ns", "moved")
REGISTRATION = b'{"admin_addr":"a","advertised_addr":"b","broker_addr":"c"}'


async def two_brokers(store: MemoryStore) -> None:
    """Brokers 1 and 2, registered and active; TOPIC on broker 1."""
    for broker_id in (1, 2):
        await store.put(layout.broker_registration(broker_id), REGISTRATION)
        await state(store, broker_id, ACTIVE)
    await store.put(layout.assignment(1, TOPIC), b"null")


async def state(store: MemoryStore, broker_id: int, mode: BrokerMode) -> None:
    await store.put(layout.broker_state(broker_id), encode(BrokerState(mode=mode, reason="t")))


async def test_a_guarded_move_is_refused_once_its_target_changed_and_writes_nothing() -> None:
    store = MemoryStore()
    await two_brokers(store)
    ownership = OwnershipManager(store)
    owner = await ownership.owner(TOPIC)
    view = await ownership.reader.read(*target_reads(2))
    change = move_change(ownership, TOPIC, owner, target_of(view, 2))
    await state(store, 2, DRAINING)  # between the read and the write
    with pytest.raises(ChangedSinceRead):
        await change.apply(store)
    assert await store.get(layout.assignment(1, TOPIC)) is not None
    assert await store.get(layout.unassigned(TOPIC)) is None
    await store.delete(layout.broker_registration(2))
    with pytest.raises(NoBroker):
        await move_change(ownership, TOPIC, owner, target_of(view, 2)).apply(store)


class StateFlipsBeforeTheWrite(MemoryStore):
    """Makes broker 2 draining just before the first transaction that writes a marker: the
    window in which a move that checks, then acts, would send a topic to a draining broker."""

    flipped = False

    async def execute(self, txn: Txn) -> TxnResult:
        writes_marker = any(
            isinstance(op, Put) and op.key == layout.unassigned(TOPIC) for op in txn.on_success
        )
        if not self.flipped and writes_marker:
            self.flipped = True
            await state(self, 2, DRAINING)
        return await super().execute(txn)


async def test_move_topic_reads_again_when_its_target_changes_in_between() -> None:
    store = StateFlipsBeforeTheWrite()
    await two_brokers(store)
    with pytest.raises(BrokerNotActive):
        await move_topic(store, TOPIC, to_broker=2)
    assert store.flipped
    assert await store.get(layout.unassigned(TOPIC)) is None
    await state(store, 2, ACTIVE)
    await move_topic(store, TOPIC, to_broker=2)
    marker = await store.get(layout.unassigned(TOPIC))
    assert marker is not None
    value = decode(UnassignedMarker, marker.value)
    assert (value.reason, value.from_broker, value.to_broker) == ("unload", 1, 2)
    assert await store.get(layout.assignment(1, TOPIC)) is None


async def test_a_move_to_a_target_read_inactive_is_refused_before_any_write() -> None:
    store = MemoryStore()
    await two_brokers(store)
    await state(store, 2, DRAINED)
    before = await store.revision()
    with pytest.raises(BrokerNotActive):
        await move_topic(store, TOPIC, to_broker=2)
    with pytest.raises(NoBroker):
        await move_topic(store, TOPIC, to_broker=3)
    assert await store.revision() == before
