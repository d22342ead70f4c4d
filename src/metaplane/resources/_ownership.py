"""The ownership manager (Hedwig's TopicOwnershipManager): which broker serves a topic. A topic
is either assigned (`/cluster/brokers/{id}/{ns}/{topic}`) or waiting for assignment
(`/cluster/unassigned/{ns}/{topic}`), and every move between the two is one transaction.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import partial
from types import NoneType

from metaplane import layout
from metaplane.layout import PATTERNS, KeyKind, TopicName, parse
from metaplane.resources._change import (
    NULL,
    Change,
    Condition,
    key_absent,
    key_exists,
    unchanged,
)
from metaplane.resources._errors import (
    AlreadyUnassigned,
    BrokerNotActive,
    MalformedValue,
    NoBroker,
    NoTopicOwnerInfo,
    NoUnassignedMarker,
    TopicAssigned,
    TopicNotOwned,
)
from metaplane.resources._reader import Manager, Versioned, View
from metaplane.resources._values import BrokerMode, BrokerState, UnassignedMarker, encode
from metaplane.store import Compare, Delete, Entry, Get, List, Put

log = logging.getLogger(__name__)

Marker = UnassignedMarker | None
"""An unassigned marker's value: null for a new topic, or why the topic left its broker."""

_ASSIGNMENT = re.compile(PATTERNS[KeyKind.ASSIGNMENT].regex)
_ASSIGNMENT_FIELDS = PATTERNS[KeyKind.ASSIGNMENT].groups
_UNASSIGNED = re.compile(PATTERNS[KeyKind.UNASSIGNED].regex)
_UNASSIGNED_FIELDS = PATTERNS[KeyKind.UNASSIGNED].groups

ALL_ASSIGNMENTS = List(layout.brokers_prefix(), keys_only=True)
"""The read that finds a topic's owner: keys only, as the assignment's value is null."""


class OwnershipManager(Manager):
    """Owners, assignments and unassigned markers; assigning and unassigning topics.

    Assigning and unassigning are the leader's writes: the coordination layer runs their
    `…_change` forms guarded by its fence (`change.guarded(fence).apply(store)`), as a
    leader's write is only safe when it fails once the writer has lost the leadership.
    """

    async def owner(self, topic: TopicName) -> Versioned[int]:
        """The broker the topic is assigned to (the value), and its assignment key;
        `NoTopicOwnerInfo` when it is assigned to none.

        A scan of the assignment keys (keys only), from the cache when it covers
        /cluster/brokers.
        """
        view = await self.reader.read(ALL_ASSIGNMENTS)
        # An assignment key ends with the topic's path: the cheap test first.
        ending = (
            entry for entry in view.entries(ALL_ASSIGNMENTS) if entry.key.endswith(topic.path)
        )
        found = owners(ending).get(topic)
        if not found:
            raise NoTopicOwnerInfo(topic)
        if len(found) > 1:
            log.warning("topic %s is assigned to several brokers: %s", topic, found)
        return _owner(found[0])

    async def assignments(self, broker_id: int) -> list[TopicName]:
        """The topics assigned to `broker_id`, sorted."""
        keys = await self.reader.keys(layout.broker_prefix(broker_id))
        return sorted(owners_of(keys))

    async def unassigned_marker(self, topic: TopicName) -> Versioned[Marker]:
        """The topic's unassigned marker; `NoUnassignedMarker` when it does not wait."""
        marker = await self.reader.get(layout.unassigned(topic), object)
        if marker is None:
            raise NoUnassignedMarker(topic)
        return as_marker(marker)

    async def unassigned(self) -> dict[TopicName, Versioned[Marker]]:
        """Every topic waiting for assignment, with its marker (null, or its reason)."""
        markers = await self.reader.list(layout.unassigned_prefix(), object)
        return {_marker_topic(marker.key): as_marker(marker) for marker in markers}

    def assign_change(
        self,
        topic: TopicName,
        broker_id: int,
        *,
        marker: Versioned[Marker],
        state: Versioned[BrokerState],
    ) -> Change:
        """Move `topic` from its unassigned `marker` to `broker_id`, whose `state` was read
        active: refused unless the marker and the state are unchanged and the broker is
        still registered. `BrokerNotActive` at once if `state` is not active."""
        if state.value.mode is not BrokerMode.ACTIVE:
            raise BrokerNotActive(broker_id, state.value.mode)
        assignment = layout.assignment(broker_id, topic)
        conditions = (
            unchanged(marker.key, marker.mod_revision, partial(NoUnassignedMarker, topic)),
            key_absent(assignment, partial(TopicAssigned, topic, broker_id)),
            key_exists(layout.broker_registration(broker_id), partial(NoBroker, broker_id)),
            unchanged(state.key, state.mod_revision, partial(NoBroker, broker_id, state.key)),
        )
        return Change(conditions, (Delete(marker.key), Put(assignment, NULL)))

    def assign_many_change(
        self,
        broker_id: int,
        waiting: Sequence[tuple[TopicName, Versioned[Marker]]],
        *,
        state: Versioned[BrokerState],
    ) -> Change:
        """`assign_change` for several topics going to one broker: the broker's compares
        (registered, state unchanged) are made once. Keep it within one transaction: each
        topic adds two compares and two writes."""
        if state.value.mode is not BrokerMode.ACTIVE:
            raise BrokerNotActive(broker_id, state.value.mode)
        conditions = [
            key_exists(layout.broker_registration(broker_id), partial(NoBroker, broker_id)),
            unchanged(state.key, state.mod_revision, partial(NoBroker, broker_id, state.key)),
        ]
        ops: list[Put | Delete] = []
        for topic, marker in waiting:
            assignment = layout.assignment(broker_id, topic)
            conditions.append(
                unchanged(marker.key, marker.mod_revision, partial(NoUnassignedMarker, topic))
            )
            conditions.append(key_absent(assignment, partial(TopicAssigned, topic, broker_id)))
            ops.extend((Delete(marker.key), Put(assignment, NULL)))
        return Change(tuple(conditions), tuple(ops))

    async def assign(self, topic: TopicName, broker_id: int) -> int:
        """Assign a waiting topic to an active, registered broker; `NoUnassignedMarker`,
        `NoBroker`, `BrokerNotActive`, `ChangedSinceRead`. The leader's write: see above."""
        marker, state = layout.unassigned(topic), layout.broker_state(broker_id)
        registration = layout.broker_registration(broker_id)
        view = await self.reader.read(Get(marker), Get(registration), Get(state))
        waiting = _waiting(view, topic)
        if view.entry(registration) is None:
            raise NoBroker(broker_id)
        change = self.assign_change(topic, broker_id, marker=waiting, state=_state(view, broker_id))
        return await self.writer.apply(change)

    def unassign_change(
        self,
        topic: TopicName,
        owner: Versioned[int],
        *,
        reason: str = "unload",
        to_broker: int | None = None,
    ) -> Change:
        """Take `topic` from its `owner` (as read by `owner()`) and leave it waiting with a
        marker {"reason", "from_broker"[, "to_broker"]}: "unload" for a move, "broker_lost"
        when the broker vanished; `to_broker` asks for a target."""
        marker = layout.unassigned(topic)
        conditions = (
            unchanged(owner.key, owner.mod_revision, partial(NoTopicOwnerInfo, topic, owner.value)),
            key_absent(marker, partial(AlreadyUnassigned, topic)),
        )
        value = UnassignedMarker(reason=reason, from_broker=owner.value)
        if to_broker is not None:
            value = UnassignedMarker(reason=reason, from_broker=owner.value, to_broker=to_broker)
        return Change(conditions, (Delete(owner.key), Put(marker, encode(value))))

    async def unassign(
        self, topic: TopicName, *, reason: str = "unload", to_broker: int | None = None
    ) -> int:
        """Unassign `topic` from its owner; `NoTopicOwnerInfo`, `AlreadyUnassigned`."""
        owner = await self.owner(topic)
        change = self.unassign_change(topic, owner, reason=reason, to_broker=to_broker)
        return await self.writer.apply(change)


def owned(broker_id: int, topic: TopicName, token: int) -> Condition:
    """The fence of a broker's writes about a topic it serves: the topic is still assigned to
    `broker_id` by the very assignment it loaded it under (created at revision `token`), not
    merely assigned to it again since. Else `TopicNotOwned`."""
    key = layout.assignment(broker_id, topic)
    return Condition(
        Compare.create_revision(key, "==", token),
        lambda _: TopicNotOwned(topic, broker_id),
    )


def owners(entries: Iterable[Entry]) -> dict[TopicName, list[Entry]]:
    """The assignment entries among `entries` (keys under /cluster/brokers), by topic."""
    found: defaultdict[TopicName, list[Entry]] = defaultdict(list)
    for entry in entries:
        assigned = assignment_of(entry.key)
        if assigned is not None:
            found[assigned[1]].append(entry)
    return found


def owners_of(keys: Iterable[str]) -> list[TopicName]:
    """The topics of the assignment keys among `keys`."""
    assigned = (assignment_of(key) for key in keys)
    return [topic for _, topic in filter(None, assigned)]


def unassigned_of(key: str) -> TopicName | None:
    """The topic of an unassigned marker's key; None for another key (by the layout's own
    pattern, like `assignment_of`)."""
    match = _UNASSIGNED.match(key)
    if match is None:
        return None
    fields = dict(zip(_UNASSIGNED_FIELDS, match.groups(), strict=True))
    return TopicName(fields["namespace"], fields["topic"])


def assignment_of(key: str) -> tuple[int, TopicName] | None:
    """The broker and the topic of an assignment key; None for another key.

    By the layout's own pattern: many times faster than `parse`, for scans of every
    assignment of the cluster.
    """
    match = _ASSIGNMENT.match(key)
    if match is None:
        return None
    fields = dict(zip(_ASSIGNMENT_FIELDS, match.groups(), strict=True))
    return int(fields["broker_id"]), TopicName(fields["namespace"], fields["topic"])


def as_marker(marker: Versioned[object]) -> Versioned[Marker]:
    """A marker read untyped (its value is null or an object), typed."""
    value = marker.value
    if not isinstance(value, UnassignedMarker | NoneType):
        reason = f"{marker.key} holds a {type(value).__name__}, not a marker"
        raise MalformedValue(str(KeyKind.UNASSIGNED), reason)
    return Versioned(value, marker.version, marker.mod_revision, marker.create_revision, marker.key)


def _owner(assignment: Entry) -> Versioned[int]:
    assigned = assignment_of(assignment.key)
    assert assigned is not None
    broker_id = assigned[0]
    return Versioned(
        broker_id,
        assignment.version,
        assignment.mod_revision,
        assignment.create_revision,
        assignment.key,
    )


def _marker_topic(key: str) -> TopicName:
    topic = parse(key).topic_name
    assert topic is not None
    return topic


def _waiting(view: View, topic: TopicName) -> Versioned[Marker]:
    marker = view.get(layout.unassigned(topic), object)
    if marker is None:
        raise NoUnassignedMarker(topic)
    return as_marker(marker)


def _state(view: View, broker_id: int) -> Versioned[BrokerState]:
    state = view.get(layout.broker_state(broker_id), BrokerState)
    if state is None:
        raise NoBroker(broker_id, layout.broker_state(broker_id))
    return state
