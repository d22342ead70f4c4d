"""Rebalancing as pure logic, on the rankings and balance score of `_rankings`: the moves one
LoadManager cycle starts so that draining brokers empty and the active brokers' loads even out
(each move lowering the imbalance, gated in time: sustained imbalance, a cap per cycle, a
cooldown per topic), and the one-shot plan `metaplane analyze` writes for a whole snapshot
(`plan_quotas`: how many topics go from which broker to which, by the fair ranking).
"""

from __future__ import annotations

import heapq
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from metaplane.cluster._rankings import (
    Balance,
    BrokerLoad,
    InFlight,
    Placement,
    Ranking,
    TopicWeights,
    imbalance,
)
from metaplane.layout import TopicName
from metaplane.resources import BrokerMode

log = logging.getLogger(__name__)

TOLERANCE = 1e-9
"""Loads and imbalances closer than this are equal: float noise must never justify a move."""


class MoveReason(StrEnum):
    IMBALANCE = "imbalance"
    """The active brokers' loads were uneven for `sustained_cycles` cycles."""
    DRAINING = "draining"
    """The source is draining (or drained, yet still holds the topic)."""


@dataclass(frozen=True, slots=True)
class Move:
    """Move `topic` from the broker that owns it to another (an unload with a target)."""

    topic: TopicName
    from_broker: int
    to_broker: int
    reason: MoveReason


@dataclass(frozen=True, slots=True)
class RebalanceConfig:
    """How eagerly the rebalancer moves topics. Danube's defaults for comparison: threshold
    0.30 ("balanced"; 0.20 is its "aggressive"), 3 moves a cycle, 60 s between moves, no
    sustained-cycles gate."""

    threshold: float = 0.20
    """Imbalance (coefficient of variation of the loads) above which the loads are uneven."""
    sustained_cycles: int = 3
    """Consecutive cycles the imbalance must stay above `threshold` before any move."""
    max_moves_per_cycle: int = 5
    """Moves one `plan` returns at most, draining moves included."""
    cooldown: float = 60.0
    """Seconds (on the `now` clock) before a moved topic may be moved again to even loads."""
    in_flight_timeout: float = 120.0
    """Seconds a started move counts on its target while the store does not show it there."""

    def __post_init__(self) -> None:
        _check_number("threshold", self.threshold, "> 0", lambda value: value > 0)
        _check_count("sustained_cycles", self.sustained_cycles)
        _check_count("max_moves_per_cycle", self.max_moves_per_cycle)
        _check_number("cooldown", self.cooldown, ">= 0", lambda value: value >= 0)
        _check_number("in_flight_timeout", self.in_flight_timeout, "> 0", lambda value: value > 0)


def _check_count(name: str, value: object) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"RebalanceConfig.{name} must be an int >= 1, not {value!r}")


def _check_number(name: str, value: object, rule: str, holds: Callable[[float], bool]) -> None:
    valid = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and holds(value)
    )
    if not valid:
        raise ValueError(f"RebalanceConfig.{name} must be a finite number {rule}, not {value!r}")


@dataclass(frozen=True, slots=True)
class RebalancePlan:
    """What one cycle should do: start `moves` (draining moves first), and mark `drained`
    the draining brokers that own nothing any more. `imbalance` is the active brokers' at
    the start of the cycle (moves in flight counted on their targets), `imbalance_after`
    once `moves` are done; `cycles_over` counts the consecutive cycles above the threshold."""

    moves: tuple[Move, ...]
    drained: tuple[int, ...]
    imbalance: float
    imbalance_after: float
    cycles_over: int


@dataclass(frozen=True, slots=True)
class _Started:
    move: Move
    at: float


class Rebalancer:
    """Plans the moves of each LoadManager cycle, remembering between cycles what it started.

    `plan` is called once a cycle with the brokers as the store has them now:
    - draining brokers are emptied first: each of their topics goes to the least loaded
      active broker (each choice counting for the next), within the cap per cycle, whatever
      the imbalance and the cooldown (a drained broker never takes a topic back, so it cannot
      flap); a draining broker that owns nothing is reported in `drained`;
    - imbalance moves start only once the imbalance has stayed above the threshold for
      `sustained_cycles` consecutive cycles; each goes from the most loaded active broker to
      the least loaded one (else the next pair in that order), and takes the topic that
      lowers the imbalance most, never one in its cooldown, in flight or owned twice, never
      one whose move leaves the imbalance as it is or makes it worse, or leaves the source
      less loaded than the target (the two would swap roles: that is flapping); they stop at
      the cap, or once the imbalance is back under the threshold.
    Each move lowers the imbalance, so from a given state the moves end; after them the
    threshold is not crossed again without a change from outside.

    A started move counts on its target (and no longer on its source) until the store shows
    the topic at its target or at another broker, or `in_flight_timeout` passes: the next
    cycles do not pile onto a target whose assignment has not landed yet. CPU and memory are
    taken as reported: a move changes the topic part of the loads until the next reports.

    Where this departs from Danube (`danube_service/load_manager.rs` and `rebalancing.rs`):
    Danube moves the lightest topics of each broker above mean + 1 standard deviation to the
    least loaded active broker whenever the imbalance is at or over its threshold, with no
    check that a move helps, a pause between moves instead of a cooldown per topic, a cap per
    hour, and no accounting of moves in flight (the target's next report shows them).
    """

    def __init__(self, config: RebalanceConfig | None = None) -> None:
        self.config = config or RebalanceConfig()
        self.cycles_over = 0
        self._started: dict[TopicName, _Started] = {}
        self._moved_at: dict[TopicName, float] = {}

    def moved(self, topics: Iterable[TopicName], now: float) -> None:
        """`topics` were just moved by someone else (an operator's move to a named broker):
        they cool down too, so that the next plan does not undo the move."""
        for topic in topics:
            self._moved_at[topic] = now

    def reset(self) -> None:
        """Forget every cycle and move (e.g. when this node becomes the leader again)."""
        self.cycles_over = 0
        self._started.clear()
        self._moved_at.clear()

    def cancel(self, topic: TopicName) -> None:
        """Forget a planned move of `topic` that the LoadManager did not start: it no longer
        counts on its target, and the topic is not cooling down."""
        self._started.pop(topic, None)
        self._moved_at.pop(topic, None)

    def plan(
        self,
        brokers: Iterable[BrokerLoad],
        ranking: Ranking | str,
        now: float,
        *,
        in_flight: InFlight | None = None,
        topic_weight: TopicWeights | None = None,
    ) -> RebalancePlan:
        """This cycle's moves (see the class). `in_flight` adds topics on their way to a
        broker that the rebalancer did not start itself (e.g. a move from the CLI)."""
        listed = list(brokers)
        chosen = Ranking(ranking)
        self._settle(listed, now)
        placement = Placement(listed, in_flight=in_flight, topic_weight=topic_weight)
        self._project(placement)
        before = placement.imbalance(chosen)
        self.cycles_over = self.cycles_over + 1 if before > self.config.threshold else 0
        moves = self._drain(placement, chosen, now, self.config.max_moves_per_cycle)
        if self.cycles_over >= self.config.sustained_cycles:
            budget = self.config.max_moves_per_cycle - len(moves)
            moves += self._balance(placement, chosen, now, budget)
        drained = _drained(listed, in_flight or {})
        after = placement.imbalance(chosen)
        log.debug("rebalance plan: imbalance %.3f -> %.3f, %d moves", before, after, len(moves))
        return RebalancePlan(tuple(moves), drained, before, after, self.cycles_over)

    # -- moves in flight -------------------------------------------------------------------

    def _settle(self, brokers: list[BrokerLoad], now: float) -> None:
        """Forget the started moves that landed (or timed out) and the cooled-down topics."""
        holders: dict[TopicName, set[int]] = {}
        for broker in brokers:
            for topic in broker.topics:
                holders.setdefault(topic, set()).add(broker.broker_id)
        for topic, started in list(self._started.items()):
            seen = holders.get(topic, set())
            landed = started.move.to_broker in seen or bool(seen - {started.move.from_broker})
            if landed or now - started.at > self.config.in_flight_timeout:
                del self._started[topic]
        cooldown = self.config.cooldown
        self._moved_at = {t: at for t, at in self._moved_at.items() if now - at < cooldown}

    def _project(self, placement: Placement) -> None:
        """Count each move in flight on its target, and no longer where the store has it."""
        for topic, started in self._started.items():
            target = started.move.to_broker
            if target not in placement.active:
                continue  # the LoadManager will choose another target: where, nobody knows yet
            for holder in placement.holders(topic):
                placement.remove(topic, holder)
            placement.place(topic, target)

    def _start(self, placement: Placement, move: Move, now: float) -> Move:
        """Count `move` as made: in the placement, in flight, and cooling down."""
        placement.move(move.topic, move.from_broker, move.to_broker)
        self._started[move.topic] = _Started(move, now)
        self._moved_at[move.topic] = now
        return move

    # -- draining --------------------------------------------------------------------------

    def _drain(self, placement: Placement, ranking: Ranking, now: float, budget: int) -> list[Move]:
        moves: list[Move] = []
        twice = _owned_twice(placement)
        for source in placement.emptied:
            for topic in sorted(placement.topics[source] - twice):
                if len(moves) >= budget:
                    return moves
                target = placement.least_loaded(ranking)
                if target is None:
                    log.warning("broker %d cannot be emptied: no broker is active", source)
                    return moves
                move = Move(topic, source, target, MoveReason.DRAINING)
                moves.append(self._start(placement, move, now))
        return moves

    # -- evening out -----------------------------------------------------------------------

    def _balance(
        self, placement: Placement, ranking: Ranking, now: float, budget: int
    ) -> list[Move]:
        moves: list[Move] = []
        current = placement.imbalance(ranking)
        while len(moves) < budget and current > self.config.threshold:
            best = _best_move(placement, ranking, self._movable(placement, now), current)
            if best is None:
                break
            move, current = best
            moves.append(self._start(placement, move, now))
        return moves

    def _movable(self, placement: Placement, now: float) -> set[TopicName]:
        """Topics of active brokers that may move to even loads: owned once, not in flight,
        not cooling down."""
        held = {topic for broker_id in placement.active for topic in placement.topics[broker_id]}
        cooling = {t for t, at in self._moved_at.items() if now - at < self.config.cooldown}
        return held - _owned_twice(placement) - set(self._started) - cooling


def _best_move(
    placement: Placement, ranking: Ranking, movable: set[TopicName], current: float
) -> tuple[Move, float] | None:
    """The first pair (most loaded source, least loaded target first) with a move that
    lowers the imbalance, and that pair's best move with the imbalance after it."""
    loads = placement.loads(ranking)
    order = sorted(loads, key=lambda broker_id: (loads[broker_id], broker_id))
    candidates: dict[int, list[TopicName]] = {}
    for source in reversed(order):
        for target in order:
            if loads[target] >= loads[source] - TOLERANCE:
                break
            if source not in candidates:
                candidates[source] = _one_per_weight(placement, movable, source)
            found = _best_topic(placement, ranking, candidates[source], source, target, current)
            if found is not None:
                return found
    return None


def _one_per_weight(placement: Placement, movable: set[TopicName], source: int) -> list[TopicName]:
    """The source's movable topics, one per weight (topics of one weight move the loads alike),
    lightest first: the first by name of each weight."""
    first: dict[float, TopicName] = {}
    for topic in sorted(placement.topics[source] & movable):
        first.setdefault(placement.weight(topic), topic)
    return [first[weight] for weight in sorted(first)]


def _best_topic(
    placement: Placement,
    ranking: Ranking,
    topics: list[TopicName],
    source: int,
    target: int,
    current: float,
) -> tuple[Move, float] | None:
    """The move from source to target that lowers the imbalance most without swapping their
    roles (the lighter topic on a tie)."""
    best: tuple[Move, float] | None = None
    for topic in topics:
        after = placement.loads_if_moved(ranking, topic, source, target)
        if after[source] < after[target] - TOLERANCE:
            continue
        spread = imbalance(after.values())
        bar = current if best is None else best[1]
        if spread < bar - TOLERANCE:
            best = (Move(topic, source, target, MoveReason.IMBALANCE), spread)
    return best


def _owned_twice(placement: Placement) -> set[TopicName]:
    """Topics the store has at two brokers at once: the LoadManager must settle those, not
    a move."""
    counts = Counter(topic for topics in placement.topics.values() for topic in topics)
    return {topic for topic, count in counts.items() if count > 1}


def _drained(brokers: list[BrokerLoad], in_flight: InFlight) -> tuple[int, ...]:
    """Draining brokers that own nothing and have nothing on its way to them."""
    return tuple(
        sorted(
            broker.broker_id
            for broker in brokers
            if broker.mode is BrokerMode.DRAINING
            and not broker.topics
            and not in_flight.get(broker.broker_id)
        )
    )


# The offline plan ---------------------------------------------------------------------------

DRAIN = "drain"
BALANCE = "balance"
"""The reasons of a planned transfer: emptying a draining broker, evening out the others."""


@dataclass(frozen=True, slots=True)
class Transfer:
    """`count` topics to move from one broker to another, for one reason."""

    source: int
    target: int
    reason: str
    count: int


@dataclass
class Quotas:
    """How many topics each pair of brokers exchanges, and the topic counts before and after
    (every broker listed, by id)."""

    transfers: list[Transfer]
    before: dict[int, int]
    after: dict[int, int]
    notes: list[str] = field(default_factory=list)

    @property
    def moves(self) -> int:
        return sum(transfer.count for transfer in self.transfers)


def balance_before(loads: Sequence[BrokerLoad]) -> Balance:
    """The spread of topics today, over every registered broker that still serves (active,
    draining, or in a custom state)."""
    return Balance.of(
        load.topic_count
        for load in loads
        if load.registered and load.mode is not BrokerMode.DRAINED
    )


def balance_after(loads: Sequence[BrokerLoad], after: Mapping[int, int]) -> Balance:
    """The spread after a plan, over the active brokers (the emptied ones end with none)."""
    return Balance.of(after[load.broker_id] for load in loads if load.active)


def plan_quotas(
    loads: Sequence[BrokerLoad], threshold: float, max_moves: int | None = None
) -> Quotas:
    """The one-shot plan of a whole cluster by the fair ranking (topics per broker), in
    counts; which topics move is the caller's to choose (`metaplane analyze` takes each
    source's cheapest).

    Every draining (or drained) registered broker is emptied, each topic onto the least
    loaded active broker by the ranking (each choice counting for the next). Then one topic
    at a time goes from the most to the least loaded active broker — the move that lowers
    the variance most — until the imbalance is at most `threshold`, the counts differ by at
    most one, or `max_moves` such moves are planned (drains are never capped). Unregistered
    brokers receive nothing and give nothing; nor does a broker in a custom state give any.
    """
    if not math.isfinite(threshold) or threshold < 0:
        raise ValueError(f"the balance threshold must be at least 0, not {threshold}")
    if max_moves is not None and max_moves < 0:
        raise ValueError(f"max moves must be at least 0, not {max_moves}")
    counted = [replace(load, topics=frozenset(), counted=load.topic_count) for load in loads]
    placement = Placement(counted)
    before = {load.broker_id: load.topic_count for load in loads}
    transfers: Counter[tuple[int, int, str]] = Counter()
    notes: list[str] = []
    if not placement.active:
        notes.append("no active registered broker can receive topics: nothing is planned")
        return Quotas([], before, dict(before), notes)
    _drain_counts(placement, before, transfers)
    counts = {broker_id: placement.totals(broker_id).topic_count for broker_id in before}
    _even_counts(placement.active, counts, transfers, threshold, max_moves, notes)
    planned = [Transfer(s, t, reason, n) for (s, t, reason), n in sorted(transfers.items())]
    return Quotas(planned, before, counts, notes)


def _drain_counts(
    placement: Placement, before: Mapping[int, int], transfers: Counter[tuple[int, int, str]]
) -> None:
    for source in placement.emptied:
        for _ in range(before[source]):
            target = placement.least_loaded(Ranking.FAIR)
            assert target is not None  # the caller saw an active broker
            placement.shift(source, target)
            transfers[source, target, DRAIN] += 1


def _even_counts(
    active: list[int],
    counts: dict[int, int],
    transfers: Counter[tuple[int, int, str]],
    threshold: float,
    max_moves: int | None,
    notes: list[str],
) -> None:
    """The balance moves of `plan_quotas`. The heaps keep the fair ranking's order (count,
    then broker id) as counts change, so that each move costs a logarithm, not a sort: a
    plan over a cluster of a million topics makes tens of thousands of them."""
    total = sum(counts[broker] for broker in active)
    if total == 0:
        return
    size = len(active)
    mean = total / size
    squares = sum(counts[broker] ** 2 for broker in active)
    lightest = [(counts[b], b) for b in active]
    heaviest = [(-counts[b], -b) for b in active]
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
        heapq.heappush(heaviest, (-counts[source], -source))
        heapq.heappush(lightest, (counts[target], target))
        transfers[source, target, BALANCE] += 1
        moved += 1


def _top(heap: list[tuple[int, int]], counts: Mapping[int, int], sign: int) -> int:
    """The broker at the top of a lazily updated heap (stale entries are dropped)."""
    while True:
        value, key = heap[0]
        broker = key * sign
        if value * sign == counts[broker]:
            return broker
        heapq.heappop(heap)
