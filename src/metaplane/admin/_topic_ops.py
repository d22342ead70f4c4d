"""Topics as operations: list them with their owners (and whether the owner is live),
describe one in full (owner, producers, subscriptions with cursors and backlog, storage,
sealed state, bound schema) with its ETag, create, delete, unload and move — with If-Match
compared in the same transaction as the write.

A topic is several keys; its ETag is the highest mod_revision among the keys that say what
the topic is: its root, delivery, producers, subscriptions (not their cursors, which move
with every acknowledgement), namespace entry, unassigned marker and assignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import msgspec

from metaplane import layout
from metaplane.admin._cluster_ops import marker_document
from metaplane.admin._errors import (
    MAX_PARTITIONS,
    PreconditionFailed,
    SubscriptionsExist,
    TooManyPartitions,
)
from metaplane.cluster import move_topic, unload_topic
from metaplane.cluster._moves import move_change, target_of, target_reads
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.resources import (
    Condition,
    Delivery,
    NoTopic,
    ObjectDescriptor,
    OwnershipManager,
    ProducerRegistration,
    Reader,
    SealedState,
    SubscriptionMetadata,
    TopicManager,
    Versioned,
    View,
    assignment_of,
    unchanged,
)
from metaplane.store import Compare, Entry, Get, InvalidValue, List, MetadataStore

ASSIGNMENTS = List(layout.brokers_prefix(), keys_only=True)
REGISTRATIONS = List(layout.registrations_prefix(), keys_only=True)
READ_BATCH = 60
"""Topics whose root and delivery one read takes when listing: two keys each, within 128."""


def topic_name(text: str) -> TopicName:
    """A topic from its path "/namespace/topic": the leading slash is part of it."""
    if not isinstance(text, str) or not text.startswith("/"):
        raise InvalidValue(f"{text!r}: a topic is written /namespace/topic")
    return TopicName.parse(text)


def below(prefix: str, key: str) -> list[str]:
    """The segments of `key` below `prefix` (a key read under that prefix). Cheaper than
    parsing: the layout's patterns are for keys of unknown kind, these are known."""
    rest = key[len(prefix) :]
    return rest.lstrip("/").split("/") if rest else []


def subscription_keys(prefix: str, entries: Sequence[Entry]) -> tuple[list[Entry], list[Entry]]:
    """The subscriptions' metadata and their cursors among the keys under `prefix`
    (`/topics/{ns}/{topic}/subscriptions`)."""
    metadata, cursors = [], []
    for entry in entries:
        parts = below(prefix, entry.key)
        if len(parts) == 1:
            metadata.append(entry)
        elif len(parts) == 2 and parts[1] == "cursor":
            cursors.append(entry)
    return metadata, cursors


def broker_of(key: str) -> int | None:
    """The broker id a registration or a load report key ends with."""
    last = key.rsplit("/", 1)[-1]
    return int(last) if last.isdigit() else None


def etag(revision: int) -> str:
    """The ETag of a resource of several keys: its highest mod_revision."""
    return f'"r{revision}"'


LOADS = List(layout.load_reports_prefix(), keys_only=True)


@dataclass(frozen=True)
class TopicRead:
    """Every key of a topic that its description needs, read at one revision.

    Its owner is found by a read of its assignment under each broker that is registered or
    reports its load (a few keys), not by a scan of every assignment of the cluster; only a
    topic found neither assigned so nor waiting is looked for in the full scan (`scanned`).
    """

    name: TopicName
    view: View
    candidates: tuple[int, ...] = ()
    scanned: bool = False

    @classmethod
    def reads(cls, name: TopicName, candidates: Sequence[int], scan: bool) -> list[Get | List]:
        owners: list[Get | List] = [ASSIGNMENTS] if scan else []
        owners += [Get(layout.assignment(broker, name)) for broker in candidates]
        return [
            *owners,
            Get(layout.topic_root(name)),
            Get(layout.topic_delivery(name)),
            Get(layout.unassigned(name)),
            Get(layout.namespace_topic(name)),
            Get(layout.topic_schema_subject(name)),
            Get(layout.storage_state(name)),
            List(layout.producers_prefix(name)),
            List(layout.subscriptions_prefix(name)),
            List(layout.storage_objects_prefix(name)),
            REGISTRATIONS,
        ]

    def entry(self, key: str) -> Entry | None:
        return self.view.entry(key)

    def listed(self, prefix: str) -> Sequence[Entry]:
        return self.view.entries(List(prefix))

    @property
    def exists(self) -> bool:
        return self.entry(layout.topic_root(self.name)) is not None

    @cached_property
    def assignments(self) -> list[Entry]:
        if not self.scanned:
            keys = (layout.assignment(broker, self.name) for broker in self.candidates)
            return [entry for key in keys if (entry := self.entry(key)) is not None]
        path = self.name.path
        return [
            entry
            for entry in self.view.entries(ASSIGNMENTS)
            if entry.key.endswith(path) and (found := assignment_of(entry.key)) is not None
            if found[1] == self.name
        ]

    @property
    def placed(self) -> bool:
        """Assigned, waiting, or a partitioned parent (served through its partitions)."""
        root = self.entry(layout.topic_root(self.name))
        partitioned = root is not None and root.value not in (b"0", b"null")
        marker = self.entry(layout.unassigned(self.name))
        return bool(self.assignments) or marker is not None or partitioned

    @property
    def owner(self) -> int | None:
        found = self.assignments
        assigned = assignment_of(found[0].key) if found else None
        return None if assigned is None else assigned[0]

    def live(self, broker_id: int) -> bool:
        key = layout.broker_registration(broker_id)
        return any(entry.key == key for entry in self.view.entries(REGISTRATIONS))

    @cached_property
    def subscriptions(self) -> list[Entry]:
        """The subscriptions' metadata (not their cursors)."""
        prefix = layout.subscriptions_prefix(self.name)
        return subscription_keys(prefix, self.listed(prefix))[0]

    @cached_property
    def identity(self) -> list[Entry]:
        """The keys that say what the topic is (see the module's docstring)."""
        singles = (
            layout.topic_root(self.name),
            layout.topic_delivery(self.name),
            layout.unassigned(self.name),
            layout.namespace_topic(self.name),
        )
        found = [entry for key in singles if (entry := self.entry(key)) is not None]
        found += self.listed(layout.producers_prefix(self.name))
        return found + self.subscriptions + self.assignments

    @property
    def etag(self) -> str:
        return etag(max((entry.mod_revision for entry in self.identity), default=0))

    def unchanged(self, if_match: str | None) -> tuple[Condition, ...]:
        """The conditions of a write under `If-Match`: every key of the topic as read (the
        ETag checked first). Nothing without If-Match."""
        if if_match is None:
            return ()
        if if_match.strip() not in ("*", self.etag):
            raise PreconditionFailed(f"topic {self.name}", if_match, self.etag)
        return tuple(unchanged(entry.key, entry.mod_revision) for entry in self.identity)


async def read_topic(reader: Reader, name: TopicName, *, fresh: bool = False) -> TopicRead:
    """The topic's keys at one revision; `NoTopic`."""
    brokers = await reader.read(REGISTRATIONS, LOADS, fresh=fresh)
    candidates = tuple(
        sorted(
            {
                broker
                for read in (REGISTRATIONS, LOADS)
                for entry in brokers.entries(read)
                if (broker := broker_of(entry.key)) is not None
            }
        )
    )
    view = await reader.read(*TopicRead.reads(name, candidates, False), fresh=fresh)
    found = TopicRead(name, view, candidates)
    if not found.exists:
        raise NoTopic(name)
    if not found.placed:  # assigned to a broker gone without a trace: the full scan
        view = await reader.read(*TopicRead.reads(name, candidates, True), fresh=fresh)
        found = TopicRead(name, view, candidates, scanned=True)
    return found


# describe -----------------------------------------------------------------------------------


def describe(found: TopicRead) -> dict[str, Any]:
    """Everything the store holds about a topic, with its ETag."""
    view, name = found.view, found.name
    root = view.get(layout.topic_root(name), int)
    assert root is not None
    delivery = view.get(layout.topic_delivery(name), Delivery)
    marker = found.entry(layout.unassigned(name))
    owner = found.owner
    storage = storage_document(found)
    latest = latest_offset(storage)
    subject = view.get(layout.topic_schema_subject(name), str)
    producers = found.listed(layout.producers_prefix(name))
    subscriptions = subscriptions_of(found, latest)
    return {
        "topic": name.path,
        "etag": found.etag,
        "revision": view.revision,
        "partitions": root.value,
        "partition_topics": [partition.path for partition in name.partitions(root.value)],
        "delivery": None if delivery is None else delivery.value.value,
        "owner": owner,
        "owner_live": None if owner is None else found.live(owner),
        "waiting": None if marker is None else marker_document(view.typed(marker, object).value),
        "schema_subject": None if subject is None else subject.value,
        "producers": [producer_document(view.typed(p, ProducerRegistration)) for p in producers],
        "subscriptions": subscriptions,
        "backlog": sum(s["backlog"] or 0 for s in subscriptions),
        "storage": storage,
    }


def producer_document(found: Versioned[ProducerRegistration]) -> dict[str, Any]:
    producer = found.value
    return {
        "producer_id": producer.producer_id,
        "producer_name": producer.producer_name,
        "access_mode": producer.access_mode.name.lower(),
        "status": producer.status,
    }


def subscriptions_of(found: TopicRead, latest: int | None) -> list[dict[str, Any]]:
    """Each subscription with its cursor, version and backlog (messages after its cursor,
    up to the last offset the metadata knows of)."""
    view = found.view
    prefix = layout.subscriptions_prefix(found.name)
    metadata, cursor_entries = subscription_keys(prefix, found.listed(prefix))
    cursors = {
        below(prefix, entry.key)[0]: view.typed(entry, int).value for entry in cursor_entries
    }
    documents = []
    for entry in metadata:
        typed = view.typed(entry, SubscriptionMetadata)
        name = typed.value.subscription_name
        documents.append(subscription_document(typed, cursors.get(name), latest))
    return documents


def subscription_document(
    found: Versioned[SubscriptionMetadata], cursor: int | None, latest: int | None
) -> dict[str, Any]:
    metadata = found.value
    backlog = backlog_of(latest, cursor)
    return {
        "subscription": metadata.subscription_name,
        "type": metadata.subscription_type.name.lower(),
        "consumer_id": metadata.consumer_id,
        "consumer_name": metadata.consumer_name,
        "cursor": cursor,
        "backlog": backlog,
        "version": found.version,
    }


def storage_document(found: TopicRead) -> dict[str, Any]:
    """A summary of the topic's objects in tiered storage, and its sealed state."""
    view, name = found.view, found.name
    objects: list[ObjectDescriptor] = []
    current = None
    cur = layout.storage_cur(name)
    for entry in found.listed(layout.storage_objects_prefix(name)):
        if entry.key == cur:
            current = msgspec.to_builtins(view.typed(entry, object).value)
        elif entry.key != layout.storage_objects_prefix(name):
            objects.append(view.typed(entry, ObjectDescriptor).value)
    sealed = view.get(layout.storage_state(name), SealedState)
    return {
        "objects": len(objects),
        "uploading": sum(not descriptor.completed for descriptor in objects),
        "first_offset": min((d.start_offset for d in objects), default=None),
        "last_offset": max((d.end_offset for d in objects), default=None),
        "bytes": sum(descriptor.size for descriptor in objects),
        "current": None if current is None else int(current.get("start", 0)),
        "sealed": None if sealed is None else msgspec.to_builtins(sealed.value),
    }


def latest_offset(storage: dict[str, Any]) -> int | None:
    """The last offset the metadata knows the topic reached (stored, or sealed at)."""
    sealed = storage["sealed"]
    known = [storage["last_offset"], None if sealed is None else sealed["last_committed_offset"]]
    offsets = [offset for offset in known if offset is not None]
    return max(offsets) if offsets else None


# list ---------------------------------------------------------------------------------------


async def list_topics(reader: Reader, namespace: str | None) -> list[dict[str, Any]]:
    """Every topic (of `namespace`) with its partitions, delivery, owner (and whether that
    broker is live) or why it waits."""
    names = await TopicManager(reader.store, reader.cache).topics(namespace)
    context = await reader.read(ASSIGNMENTS, REGISTRATIONS, List(layout.unassigned_prefix()))
    owners: dict[TopicName, int] = {}
    for entry in context.entries(ASSIGNMENTS):
        assigned = assignment_of(entry.key)
        if assigned is not None:
            owners.setdefault(assigned[1], assigned[0])
    live = {layout.parse(entry.key).broker_id for entry in context.entries(REGISTRATIONS)}
    waiting = {
        layout.parse(entry.key).topic_name: marker_document(context.typed(entry, object).value)
        for entry in context.entries(List(layout.unassigned_prefix()))
    }
    rows: list[dict[str, Any]] = []
    for start in range(0, len(names), READ_BATCH):
        rows.extend(await topic_rows(reader, names[start : start + READ_BATCH]))
    for row, name in zip(rows, names, strict=True):
        owner = owners.get(name)
        row.update(
            owner=owner,
            owner_live=None if owner is None else owner in live,
            waiting=waiting.get(name),
        )
    return rows


async def topic_rows(reader: Reader, names: Sequence[TopicName]) -> list[dict[str, Any]]:
    """The roots and deliveries of `names`, in one read."""
    keys = [(layout.topic_root(t), layout.topic_delivery(t)) for t in names]
    view = await reader.read(*(Get(key) for pair in keys for key in pair))
    rows = []
    for name, (root_key, delivery_key) in zip(names, keys, strict=True):
        root, delivery = view.get(root_key, int), view.get(delivery_key, Delivery)
        rows.append(
            {
                "topic": name.path,
                "namespace": name.namespace,
                "partitions": None if root is None else root.value,
                "delivery": None if delivery is None else delivery.value.value,
            }
        )
    return rows


# create, delete -----------------------------------------------------------------------------


async def create(
    topics: TopicManager, name: TopicName, partitions: int, delivery: Delivery
) -> dict[str, Any]:
    """Create a topic (and its partitions); `NoNamespace`, `TopicExists`."""
    if partitions > MAX_PARTITIONS:
        raise TooManyPartitions(partitions)
    revision = await topics.create(name, partitions=partitions, delivery=delivery)
    return {
        "topic": name.path,
        "partitions": partitions,
        "delivery": delivery.value,
        "revision": revision,
    }


async def delete(
    topics: TopicManager, name: TopicName, *, force: bool = False, if_match: str | None = None
) -> dict[str, Any]:
    """Delete a topic; refused while it has subscriptions unless `force`. A topic that is
    not partitioned goes in one transaction that also holds the refusal and the If-Match;
    a partitioned one through the topic manager, after the same checks."""
    found = await read_topic(topics.reader, name, fresh=True)
    conditions = found.unchanged(if_match)
    subscriptions = [entry.key.rsplit("/", 1)[1] for entry in found.subscriptions]
    if subscriptions and not force:
        raise SubscriptionsExist(name, subscriptions)
    root = found.view.get(layout.topic_root(name), int)
    if root is not None and root.value > 0:
        revision = await topics.delete(name)
        return {"topic": name.path, "revision": revision}
    removal_view = await topics.reader.read(*topics.removal_reads([name]), fresh=True)
    # (the removal reads every assignment: a delete is rare, and must miss none)
    change = topics.delete_change(name, removal_view)
    if change is None:
        raise NoTopic(name)
    if not force:
        prefix = layout.subscriptions_prefix(name)
        refused = partial(SubscriptionsExist, name, subscriptions or ["(new)"])
        conditions += (Condition(Compare.empty(prefix), lambda _: refused()),)
    revision = await change.guarded(*conditions).apply(topics.store)
    return {"topic": name.path, "revision": revision}


# unload, move -------------------------------------------------------------------------------


async def move(
    store: MetadataStore,
    reader: Reader,
    name: TopicName,
    *,
    to_broker: int | None = None,
    unload: bool = False,
    if_match: str | None = None,
) -> dict[str, Any]:
    """Take the topic from its owner into a marker {"reason": "unload", "from_broker"[,
    "to_broker"]}: the owner seals it, the leader assigns it. With If-Match, the marker is
    written only while every key of the topic is as read."""
    if if_match is None:
        revision = await (
            unload_topic(store, name) if unload else move_topic(store, name, to_broker=to_broker)
        )
    else:
        revision = await guarded_move(store, reader, name, to_broker, if_match)
    return {"topic": name.path, "revision": revision, "to_broker": to_broker}


async def guarded_move(
    store: MetadataStore, reader: Reader, name: TopicName, to_broker: int | None, if_match: str
) -> int:
    """The cluster layer's one guarded move (`move_change`), guarded as well by every key of
    the topic as the client last saw it (its ETag)."""
    found = await read_topic(reader, name, fresh=True)
    conditions = found.unchanged(if_match)
    ownership = OwnershipManager(store)
    owner = await ownership.owner(name)
    target = None
    if to_broker is not None:
        view = await Reader(store).read(*target_reads(to_broker), fresh=True)
        target = target_of(view, to_broker)
    change = move_change(ownership, name, owner, target)
    return await change.guarded(*conditions).apply(store)


# overview (the dashboard) -------------------------------------------------------------------

TOPICS = List(layout.topics_prefix())
STORAGE = List(layout.storage_prefix())
CLUSTER = List(layout.cluster_prefix())


async def overview(reader: Reader) -> dict[str, Any]:
    """Every served topic with its owner (live or not), its subscriptions' backlogs and its
    total backlog, from one read of /topics, /cluster and the storage metadata: what the
    dashboard shows, in time linear in the number of keys."""
    view = await reader.read(TOPICS, STORAGE, CLUSTER)
    topics: dict[TopicName, dict[str, Any]] = {}
    cursors: dict[TopicName, dict[str, int | None]] = {}
    latest: dict[TopicName, int] = {}
    owners: dict[TopicName, int] = {}
    live: set[int] = set()
    for entry in (*view.entries(TOPICS), *view.entries(STORAGE), *view.entries(CLUSTER)):
        try:
            key = layout.parse(entry.key)
        except LayoutError:
            continue
        name = key.topic_name
        if key.kind is KeyKind.BROKER_REGISTRATION and key.broker_id is not None:
            live.add(key.broker_id)
        elif name is None:
            continue
        elif key.kind is KeyKind.TOPIC_ROOT:
            topics[name] = {"topic": name.path, "partitions": view.typed(entry, int).value}
        elif key.kind is KeyKind.SUBSCRIPTION and key.subscription is not None:
            cursors.setdefault(name, {}).setdefault(key.subscription, None)
        elif key.kind is KeyKind.CURSOR and key.subscription is not None:
            cursors.setdefault(name, {})[key.subscription] = view.typed(entry, int).value
        elif key.kind is KeyKind.STORAGE_OBJECT:
            stored = view.typed(entry, ObjectDescriptor).value.end_offset
            latest[name] = max(latest.get(name, -1), stored)
        elif key.kind is KeyKind.STORAGE_STATE:
            sealed = view.typed(entry, SealedState).value.last_committed_offset
            latest[name] = max(latest.get(name, -1), sealed)
        elif key.kind is KeyKind.ASSIGNMENT and key.broker_id is not None:
            owners.setdefault(name, key.broker_id)
    rows = []
    for name, row in sorted(topics.items()):
        end = latest.get(name)
        subscriptions: list[dict[str, Any]] = [
            {
                "subscription": sub,
                "cursor": cursor,
                "backlog": backlog_of(end, cursor),
            }
            for sub, cursor in sorted(cursors.get(name, {}).items())
        ]
        owner = owners.get(name)
        rows.append(
            {
                **row,
                "owner": owner,
                "owner_live": None if owner is None else owner in live,
                "subscriptions": subscriptions,
                "backlog": sum(s["backlog"] or 0 for s in subscriptions),
            }
        )
    return {"revision": view.revision, "topics": rows}


def backlog_of(latest: int | None, cursor: int | None) -> int | None:
    """Messages after `cursor` up to `latest` (None when no offset is known)."""
    if latest is None:
        return None
    return max(latest - (-1 if cursor is None else cursor), 0)
