"""What the leader sees of the cluster at one revision: registered brokers and their states,
who owns which topic, which topics wait (and why), and the load reports — read from a
LocalCache of `/cluster`, each entry kept with its revisions for the compares of the writes
the leader then makes."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import enum
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, TypeVar

from metaplane import layout
from metaplane.cache import CacheLagged, LocalCache, Subscription
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
    owned_count: dict[int, int] = field(default_factory=dict)
    """How many topics each broker owns (its assignments), kept as `owners` changes: a
    cycle's rankings and its search for lost brokers need no walk of every owner."""

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
        return (set(self.owned_count) | set(self.reports)) - self.registered

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
    at a cost that follows what changed, not the cluster's size (at 100,000 topics a whole
    read took the leader's loop about 0.2 s, each cycle, and a cycle follows each change).

    The first read is whole: each entry's meaning (its kind, broker, topic, typed value) is
    worked out and kept, and the event loop is handed back every `chunk` entries, so that
    the node's session keeps refreshing its lease. From then on the reader is subscribed to
    the cache's changes under `/cluster`: a read takes the batches applied since, works out
    again only the keys they name (from the cache as it is now: the view is of the cache's
    applied revision, in one go, with no hand-back), and hands out a view that shares its
    dicts with the reader's until a change touches one: that one is copied first (what an
    earlier read handed out never changes). A cycle that follows only load reports copies
    the reports, not every topic's owners: copying (and freeing) the owners of 1M topics
    at each cycle took most of the leader's loop. More changes than `chunk` times
    `_REBUILD_CHUNKS`, or a subscription that fell behind or ended, and the read is whole
    again."""

    def __init__(self, cache: LocalCache, *, chunk: int = VIEW_CHUNK) -> None:
        self._cache = cache
        self._chunk = chunk
        self._known: dict[str, tuple[Entry, _Fact]] = {}
        self._view: ClusterView | None = None
        self._lent: set[str] = set()
        """The fields of `_view` whose objects a view handed out shares."""
        self._changes: Subscription | None = None
        self.whole_reads = 0
        """Reads that read the whole of /cluster (the first, and after a lag)."""

    async def read(self) -> ClusterView:
        changed = self._changed_keys()
        if self._view is None or changed is None:
            await self._read_whole()
        else:
            self._apply(changed)
        assert self._view is not None
        self._lent = set(_FIELDS)
        return dataclasses.replace(self._view)

    def close(self) -> None:
        if self._changes is not None:
            self._changes.close()
            self._changes = None

    def _changed_keys(self) -> set[str] | None:
        """The keys changed since the last read; None when only a whole read will do."""
        if self._changes is None:
            return None
        try:
            batches = self._changes.take()
        except CacheLagged:
            return None
        if batches is None:
            return None
        changed = {event.key for batch in batches for event in batch.events}
        return None if len(changed) > self._chunk * _REBUILD_CHUNKS else changed

    async def _read_whole(self) -> None:
        self.close()
        self.whole_reads += 1
        # Subscribed before the listing: a change applied after it is in both, and taken
        # again by the next read (which works a key out from the cache as it is then).
        self._changes = self._cache.subscribe(layout.cluster_prefix())
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
        self._view = view
        self._lent = set()

    def _apply(self, changed: set[str]) -> None:
        view = self._view
        assert view is not None
        updates: list[tuple[str, Entry | None, _Fact | None, _Fact | None]] = []
        touched: set[_Kind] = set()
        for key in changed:
            entry = self._cache.get(key)
            held = self._known.get(key)
            if held is not None and held[0] is entry:
                continue  # changed and changed back, or already read whole
            old = None if held is None else held[1]
            fact = None if entry is None else _fact_or_log(self._cache, entry)
            updates.append((key, entry, old, fact))
            touched.update(known.kind for known in (old, fact) if known is not None)
        for kind in touched:
            for name in _FIELDS_OF[kind]:
                if name in self._lent:  # a view handed out has this one: change a copy
                    self._lent.discard(name)
                    setattr(view, name, copy.copy(getattr(view, name)))
        for key, entry, old, fact in updates:
            if old is not None:
                _remove(view, old)
                del self._known[key]
            if entry is not None and fact is not None:
                self._known[key] = (entry, fact)
                _add_shared(view, fact)
        view.revision = self._cache.applied_revision


_REBUILD_CHUNKS = 25
"""Changes (in chunks) past which a `ViewReader` reads the whole of /cluster again: a whole
read hands the loop back between chunks, the changes are applied in one go."""


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

_FIELDS_OF: dict[_Kind, tuple[str, ...]] = {
    _Kind.OWNER: ("owners", "owned_count"),
    _Kind.WAITING: ("waiting",),
    _Kind.REGISTERED: ("registered",),
    _Kind.STATE: ("states",),
    _Kind.REPORT: ("reports",),
    _Kind.OTHER: (),
}
"""The fields of a view that a fact of each kind changes."""

_FIELDS = frozenset(name for names in _FIELDS_OF.values() for name in names)


def _add(view: ClusterView, fact: _Fact) -> None:
    kind = fact.kind
    if kind is _Kind.OWNER:
        assert fact.topic is not None and fact.versioned is not None
        view.owners.setdefault(fact.topic, []).append(fact.versioned)
        view.owned_count[fact.broker_id] = view.owned_count.get(fact.broker_id, 0) + 1
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


def _add_shared(view: ClusterView, fact: _Fact) -> None:
    """`_add` to a view whose copies are out: a topic's list of owners is replaced."""
    if fact.kind is _Kind.OWNER:
        assert fact.topic is not None and fact.versioned is not None
        view.owners[fact.topic] = [*view.owners.get(fact.topic, ()), fact.versioned]
        view.owned_count[fact.broker_id] = view.owned_count.get(fact.broker_id, 0) + 1
    else:
        _add(view, fact)


def _remove(view: ClusterView, fact: _Fact) -> None:
    """Undo `_add` of `fact` (the fact of a key that changed or went)."""
    kind = fact.kind
    if kind is _Kind.OWNER:
        assert fact.topic is not None and fact.versioned is not None
        key = fact.versioned.key
        held = view.owners.get(fact.topic, ())
        rest = [owner for owner in held if owner.key != key]
        if rest:
            view.owners[fact.topic] = rest
        else:
            view.owners.pop(fact.topic, None)
        if len(rest) < len(held):
            count = view.owned_count[fact.broker_id] - 1
            if count:
                view.owned_count[fact.broker_id] = count
            else:
                del view.owned_count[fact.broker_id]
    elif kind is _Kind.WAITING:
        assert fact.topic is not None
        view.waiting.pop(fact.topic, None)
    elif kind is _Kind.REGISTERED:
        view.registered.discard(fact.broker_id)
    elif kind is _Kind.STATE:
        view.states.pop(fact.broker_id, None)
    elif kind is _Kind.REPORT:
        view.reports.pop(fact.broker_id, None)


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
