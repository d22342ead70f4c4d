"""Topic moves, the first step: take a topic from its owner into an unassigned marker that
says where it comes from (and where it should go). The owner seals it; the leader assigns it
once sealed; the new owner resumes at the sealed offset + 1."""

from __future__ import annotations

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerNotActive,
    ClusterManager,
    NoBroker,
    OwnershipManager,
)
from metaplane.store import MetadataStore

UNLOAD = "unload"
"""The marker reason of a move (Danube's)."""

BROKER_LOST = "broker_lost"
"""The marker reason of a topic whose broker vanished (ours)."""


async def unload_topic(store: MetadataStore, topic: TopicName) -> int:
    """Unload `topic` from its owner: one transaction deletes the assignment and writes the
    marker {"reason": "unload", "from_broker": owner}. The leader then assigns it by its
    ranking once the owner has sealed it. Returns the revision of that transaction."""
    return await OwnershipManager(store).unassign(topic, reason=UNLOAD)


async def move_topic(
    store: MetadataStore, topic: TopicName, *, to_broker: int | None = None
) -> int:
    """Move `topic` away from its owner, to `to_broker` when given (which must be registered
    and active, else `NoBroker` / `BrokerNotActive`), else where the ranking says."""
    if to_broker is not None:
        await _require_active(store, to_broker)
    return await OwnershipManager(store).unassign(topic, reason=UNLOAD, to_broker=to_broker)


async def _require_active(store: MetadataStore, broker_id: int) -> None:
    cluster = ClusterManager(store)
    if await store.get(layout.broker_registration(broker_id)) is None:
        raise NoBroker(broker_id)
    state = await cluster.state(broker_id)
    if state.value.mode is not BrokerMode.ACTIVE:
        raise BrokerNotActive(broker_id, state.value.mode)
