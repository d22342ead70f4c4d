"""What the leader sees of the cluster at one revision: registered brokers and their states,
who owns which topic, which topics wait (and why), and the load reports — read from a
LocalCache of `/cluster`, each entry kept with its revisions for the compares of the writes
the leader then makes."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TypeVar

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.layout import KeyKind, TopicName
from metaplane.resources import (
    NULL,
    BrokerMode,
    BrokerState,
    LoadReport,
    MalformedValue,
    Marker,
    UnassignedMarker,
    Versioned,
    assignment_of,
    unassigned_of,
)
from metaplane.store import Entry

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class ClusterView:
    revision: int
    registered: set[int] = field(default_factory=set)
    states: dict[int, Versioned[BrokerState]] = field(default_factory=dict)
    owners: dict[TopicName, list[Versioned[int]]] = field(default_factory=dict)
    waiting: dict[TopicName, Versioned[Marker]] = field(default_factory=dict)
    reports: dict[int, Versioned[LoadReport]] = field(default_factory=dict)

    def assigned_to(self, broker_id: int) -> set[TopicName]:
        return {
            topic
            for topic, owners in self.owners.items()
            if any(owner.value == broker_id for owner in owners)
        }

    def by_broker(self) -> dict[int, set[TopicName]]:
        found: defaultdict[int, set[TopicName]] = defaultdict(set)
        for topic, owners in self.owners.items():
            for owner in owners:
                found[owner.value].add(topic)
        return found

    def mode(self, broker_id: int) -> str | None:
        state = self.states.get(broker_id)
        return None if state is None else state.value.mode

    def lost(self) -> set[int]:
        """Brokers that own topics or left a load report, but are no longer registered."""
        holders = {owner.value for owners in self.owners.values() for owner in owners}
        return (holders | set(self.reports)) - self.registered

    def active(self) -> set[int]:
        return {b for b in self.registered if self.mode(b) is BrokerMode.ACTIVE}


def read_view(cache: LocalCache) -> ClusterView:
    """The cluster as the cache has it, at its applied revision."""
    view = ClusterView(cache.applied_revision)
    for entry in cache.list(layout.cluster_prefix()):
        try:
            _add(view, cache, entry)
        except MalformedValue as error:
            log.error("ignoring %s: %s", entry.key, error)
    return view


def _add(view: ClusterView, cache: LocalCache, entry: Entry) -> None:
    # Assignments and markers, the many keys, by the layout's patterns (fast); the rest by
    # parse.
    assigned = assignment_of(entry.key)
    if assigned is not None:
        broker_id, topic = assigned
        view.owners.setdefault(topic, []).append(_versioned(entry, broker_id))
        return
    waiting = unassigned_of(entry.key)
    if waiting is not None:
        marker = None if entry.value == NULL else cache.value(entry.key)
        if marker is not None and not isinstance(marker, UnassignedMarker):
            raise MalformedValue(str(KeyKind.UNASSIGNED), f"{entry.key} is not a marker")
        view.waiting[waiting] = _versioned(entry, marker)
        return
    parsed = layout.parse(entry.key)
    if parsed.kind is KeyKind.BROKER_REGISTRATION and parsed.broker_id is not None:
        view.registered.add(parsed.broker_id)
    elif parsed.kind is KeyKind.BROKER_STATE and parsed.broker_id is not None:
        state = cache.value(entry.key)
        assert isinstance(state, BrokerState)
        view.states[parsed.broker_id] = _versioned(entry, state)
    elif parsed.kind is KeyKind.LOAD_REPORT and parsed.broker_id is not None:
        report = cache.value(entry.key)
        assert isinstance(report, LoadReport)
        view.reports[parsed.broker_id] = _versioned(entry, report)


def _versioned(entry: Entry, value: T) -> Versioned[T]:
    return Versioned(value, entry.version, entry.mod_revision, entry.create_revision, entry.key)
