"""Topic moves, the first step: take a topic from its owner into an unassigned marker that
says where it comes from (and where it should go). The owner seals it; the leader assigns it
once sealed; the new owner resumes at the sealed offset + 1.

`move_change` is the one guarded move: the LoadManager's rebalancing (fenced), an operator's
move and `metaplane rebalance apply` all write a move through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerNotActive,
    BrokerState,
    Change,
    Condition,
    NoBroker,
    OwnershipManager,
    Versioned,
    View,
    unchanged,
)
from metaplane.store import Compare, Get, MetadataStore

UNLOAD = "unload"
"""The marker reason of a move (Danube's)."""

BROKER_LOST = "broker_lost"
"""The marker reason of a topic whose broker vanished (ours)."""


@dataclass(frozen=True, slots=True)
class Target:
    """The broker a move asks for, with its state as read (the move holds only while that
    state is unchanged: still registered, still active)."""

    broker_id: int
    state: Versioned[BrokerState]


def move_change(
    ownership: OwnershipManager,
    topic: TopicName,
    owner: Versioned[int],
    target: Target | None = None,
) -> Change:
    """The guarded move: `topic` leaves `owner` (its assignment as read) for a marker
    {"reason": "unload", "from_broker"[, "to_broker"]}. It holds only while the assignment is
    as read and no marker exists (`NoTopicOwnerInfo`, `AlreadyUnassigned`) and, with a
    `target`, while the target is registered and its state is as read (`NoBroker`, or
    `ChangedSinceRead` for a state written since). `BrokerNotActive` at once when the target
    was not read active. Applied by the one runner: `change.apply(store)`, or guarded by the
    leader's fence."""
    if target is None:
        return ownership.unassign_change(topic, owner, reason=UNLOAD)
    broker_id, state = target.broker_id, target.state
    if state.value.mode is not BrokerMode.ACTIVE:
        raise BrokerNotActive(broker_id, state.value.mode)
    change = ownership.unassign_change(topic, owner, reason=UNLOAD, to_broker=broker_id)
    registered = Condition(
        Compare.exists(layout.broker_registration(broker_id)), lambda _: NoBroker(broker_id)
    )
    return change.guarded(
        registered,
        unchanged(state.key, state.mod_revision, partial(NoBroker, broker_id, state.key)),
    )


def target_of(view: View, broker_id: int) -> Target:
    """The target `broker_id` as `view` read it (its registration and its state key);
    `NoBroker` when either is missing."""
    state = view.get(layout.broker_state(broker_id), BrokerState)
    if view.entry(layout.broker_registration(broker_id)) is None or state is None:
        raise NoBroker(broker_id)
    return Target(broker_id, state)


def target_reads(broker_id: int) -> tuple[Get, Get]:
    """The reads `target_of` needs."""
    return Get(layout.broker_registration(broker_id)), Get(layout.broker_state(broker_id))


async def unload_topic(store: MetadataStore, topic: TopicName) -> int:
    """Unload `topic` from its owner: one transaction deletes the assignment and writes the
    marker {"reason": "unload", "from_broker": owner}. The leader then assigns it by its
    ranking once the owner has sealed it. Returns the revision of that transaction."""
    return await move_topic(store, topic)


async def move_topic(
    store: MetadataStore, topic: TopicName, *, to_broker: int | None = None
) -> int:
    """Move `topic` away from its owner, to `to_broker` when given (which must be registered
    and active, else `NoBroker` / `BrokerNotActive`), else where the ranking says. The owner
    and the target are read, then written with `move_change`: a target that leaves or stops
    being active in between refuses the move, which is read and decided again."""
    ownership = OwnershipManager(store)

    async def attempt(fresh: bool) -> int:
        owner = await ownership.owner(topic)
        target = None
        if to_broker is not None:
            view = await ownership.reader.read(*target_reads(to_broker), fresh=fresh)
            target = target_of(view, to_broker)
        return await move_change(ownership, topic, owner, target).apply(store)

    return await ownership.writer.run(attempt, f"move {topic}")
