"""What the leader sees of the cluster at one revision: registered brokers and their states,
who owns which topic, which topics wait (and why), and the load reports — read from a
LocalCache of `/cluster`, each entry kept with its revisions for the compares of the writes
the leader then makes."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
    decode_value,
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


VIEW_CHUNK = 2_000
"""Entries a `ViewReader` reads between two hand-backs of the event loop."""


def read_view(cache: LocalCache) -> ClusterView:
    """The cluster as the cache has it, at its applied revision."""
    view = ClusterView(cache.applied_revision)
    for entry in cache.list(layout.cluster_prefix()):
        _add(view, _fact_or_log(cache, entry))
    return view


class ViewReader:
    """Reads the cluster from a cache of `/cluster` cycle after cycle, as `read_view` does,
    with two differences that matter at 100,000 topics: what an entry says (its kind,
    broker, topic, typed value) is worked out once per version of the entry and kept, not
    parsed again every cycle; and the event loop is handed back every `chunk` entries, so
    that the node's session keeps refreshing its lease while a view is built. The entries
    are listed first, in one go, so a view is of one revision whatever the cache applies
    meanwhile."""

    def __init__(self, cache: LocalCache, *, chunk: int = VIEW_CHUNK) -> None:
        self._cache = cache
        self._chunk = chunk
        self._known: dict[str, tuple[Entry, _Fact]] = {}

    async def read(self) -> ClusterView:
        view = ClusterView(self._cache.applied_revision)
        entries = self._cache.list(layout.cluster_prefix())
        known, self._known = self._known, {}
        for start in range(0, len(entries), self._chunk):
            if start:
                await asyncio.sleep(0)
            for entry in entries[start : start + self._chunk]:
                held = known.get(entry.key)
                fact = held[1] if held is not None and held[0] is entry else None
                if fact is None:
                    fact = _fact_or_log(self._cache, entry)
                self._known[entry.key] = (entry, fact)
                _add(view, fact)
        return view


class _Kind(enum.Enum):
    OWNER = 1
    WAITING = 2
    REGISTERED = 3
    STATE = 4
    REPORT = 5
    OTHER = 6


@dataclass(frozen=True, slots=True)
class _Fact:
    """What one entry of `/cluster` tells the view."""

    kind: _Kind
    broker_id: int = 0
    topic: TopicName | None = None
    versioned: Versioned[Any] | None = None


_OTHER = _Fact(_Kind.OTHER)


def _add(view: ClusterView, fact: _Fact) -> None:
    kind = fact.kind
    if kind is _Kind.OWNER:
        assert fact.topic is not None and fact.versioned is not None
        view.owners.setdefault(fact.topic, []).append(fact.versioned)
    elif kind is _Kind.WAITING:
        assert fact.topic is not None and fact.versioned is not None
        view.waiting[fact.topic] = fact.versioned
    elif kind is _Kind.REGISTERED:
        view.registered.add(fact.broker_id)
    elif kind is _Kind.STATE:
        assert fact.versioned is not None
        view.states[fact.broker_id] = fact.versioned
    elif kind is _Kind.REPORT:
        assert fact.versioned is not None
        view.reports[fact.broker_id] = fact.versioned


def _fact_or_log(cache: LocalCache, entry: Entry) -> _Fact:
    try:
        return _fact(cache, entry)
    except MalformedValue as error:
        log.error("ignoring %s: %s", entry.key, error)
        return _OTHER


def _fact(cache: LocalCache, entry: Entry) -> _Fact:
    # Assignments and markers, the many keys, by the layout's patterns (fast); the rest by
    # parse.
    assigned = assignment_of(entry.key)
    if assigned is not None:
        owner, topic = assigned
        return _Fact(_Kind.OWNER, owner, topic, _versioned(entry, owner))
    waiting = unassigned_of(entry.key)
    if waiting is not None:
        marker = None if entry.value == NULL else _typed(cache, entry)
        if marker is not None and not isinstance(marker, UnassignedMarker):
            raise MalformedValue(str(KeyKind.UNASSIGNED), f"{entry.key} is not a marker")
        return _Fact(_Kind.WAITING, 0, waiting, _versioned(entry, marker))
    parsed = layout.parse(entry.key)
    if parsed.broker_id is None:
        return _OTHER
    broker_id: int = parsed.broker_id
    if parsed.kind is KeyKind.BROKER_REGISTRATION:
        return _Fact(_Kind.REGISTERED, broker_id)
    if parsed.kind is KeyKind.BROKER_STATE:
        state = _typed(cache, entry)
        assert isinstance(state, BrokerState)
        return _Fact(_Kind.STATE, broker_id, None, _versioned(entry, state))
    if parsed.kind is KeyKind.LOAD_REPORT:
        report = _typed(cache, entry)
        assert isinstance(report, LoadReport)
        return _Fact(_Kind.REPORT, broker_id, None, _versioned(entry, report))
    return _OTHER


def _typed(cache: LocalCache, entry: Entry) -> object:
    """The typed value of `entry`: the cache's (decoded once and kept) while it holds this
    very entry; decoded here if the key changed since the view listed it."""
    if cache.get(entry.key) is entry:
        return cache.value(entry.key)
    return decode_value(entry.key, entry.value)


def _versioned(entry: Entry, value: T) -> Versioned[T]:
    return Versioned(value, entry.version, entry.mod_revision, entry.create_revision, entry.key)
