"""The topic manager: a topic is its root (its number of partitions), its delivery, its entry
in its namespace and its place in the cluster (waiting or assigned); and its producers.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.resources._change import (
    NULL,
    Change,
    Condition,
    at_version,
    key_absent,
    key_exists,
    mod_revision_of,
    unchanged,
)
from metaplane.resources._errors import (
    NoNamespace,
    NoProducer,
    NoTopic,
    ProducerExists,
    TopicExists,
)
from metaplane.resources._namespaces import namespace_topics
from metaplane.resources._ownership import ALL_ASSIGNMENTS, owners
from metaplane.resources._reader import Manager, Versioned, View
from metaplane.resources._values import Delivery, ProducerRegistration, encode
from metaplane.store import (
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Get,
    InvalidValue,
    List,
    MetadataError,
    Put,
)

log = logging.getLogger(__name__)

READ_BATCH = 40
"""Topics whose state one read takes, when deleting: two keys each, within 128 operations."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic's root (its number of partitions; 0: not partitioned) and its delivery."""

    name: TopicName
    root: Versioned[int]
    delivery: Versioned[Delivery] | None

    @property
    def partition_count(self) -> int:
        return self.root.value

    @property
    def partitions(self) -> tuple[TopicName, ...]:
        return self.name.partitions(self.root.value)


class TopicManager(Manager):
    """Create, read and delete topics (partitioned or not), change their delivery, register
    their producers.

    Every write of a single transaction has a `…_change` form that returns it unapplied.
    """

    def create_change(
        self, topic: TopicName, *, partitions: int = 0, delivery: Delivery = Delivery.RELIABLE
    ) -> Change:
        """The creation of `topic` as one change; `TxnTooLarge` when its partitions do not
        fit in one transaction (`create` then writes it in chunks)."""
        parts = [_parent_creation(topic, partitions, delivery)]
        parts.extend(_creation(partition, delivery) for partition in topic.partitions(partitions))
        return Change.join(parts)

    async def create(
        self, topic: TopicName, *, partitions: int = 0, delivery: Delivery = Delivery.RELIABLE
    ) -> int:
        """Create `topic` in its namespace: its root, delivery, namespace entry and
        unassigned marker (null), in one transaction that requires the namespace and the
        topic's absence. `NoNamespace`, `TopicExists`.

        With `partitions` = N > 0 the root holds N, and the topics `{topic}-part-{i}` are
        created as well, each with its own root, delivery, namespace entry and marker (the
        parent has no marker: no broker serves it, its partitions are served). All in one
        transaction while it fits in 128 operations (31 partitions); above that, the parent
        and the first partitions first, then the others in chunks, each refused unless the
        parent's root is the one the first chunk created. A chunk that fails removes what
        the earlier ones created, then raises; in between, readers may see the parent with
        only some of its partitions.
        """
        whole = self.create_change(topic, partitions=partitions, delivery=delivery)
        if whole.fits:
            return await self.writer.apply(whole)
        return await self._create_in_chunks(topic, partitions, delivery)

    async def _create_in_chunks(self, topic: TopicName, partitions: int, delivery: Delivery) -> int:
        pending = deque((p, _creation(p, delivery)) for p in topic.partitions(partitions))
        first, created = _fill(_parent_creation(topic, partitions, delivery), pending)
        revision = await self.writer.apply(first)
        ours = Change((_created_at(topic, revision),))
        done = [*created, topic]
        try:
            while pending:
                chunk, created = _fill(ours, pending)
                revision = await self.writer.apply(chunk)
                done[:0] = created
        except MetadataError:
            await self._remove_after_failure(done, ours)
            raise
        return revision

    async def _remove_after_failure(self, created: Sequence[TopicName], ours: Change) -> None:
        try:
            await self._apply_in_chunks(await self._removals(created, fresh=True), ours)
        except MetadataError as error:
            log.error("left the partly created topic %s as it is: %s", created[-1], error)

    async def read(self, topic: TopicName) -> TopicInfo:
        """The topic's root and delivery, read at one revision; `NoTopic`."""
        root, delivery = layout.topic_root(topic), layout.topic_delivery(topic)
        view = await self.reader.read(Get(root), Get(delivery))
        found = view.get(root, int)
        if found is None:
            raise NoTopic(topic)
        return TopicInfo(topic, found, view.get(delivery, Delivery))

    async def topics(self, namespace: str | None = None) -> list[TopicName]:
        """The topics of `namespace` (`NoNamespace`), or of every namespace, sorted."""
        if namespace is not None:
            return await namespace_topics(self.reader, namespace)
        keys = await self.reader.keys(layout.namespaces_prefix())
        return sorted(_listed_topics(keys))

    def set_delivery_change(self, topic: TopicName, delivery: Delivery, version: int) -> Change:
        key = layout.topic_delivery(topic)
        return Change(
            (at_version(key, version, partial(NoTopic, topic)),), (Put(key, encode(delivery)),)
        )

    async def set_delivery(self, topic: TopicName, delivery: Delivery, version: int) -> int:
        """Change the delivery read at `version`; `BadVersion`, `NoTopic`."""
        return await self.writer.apply(self.set_delivery_change(topic, delivery, version))

    async def delete(self, topic: TopicName) -> int:
        """Delete the topic: everything under its root (delivery, producers, subscriptions
        and their cursors), its namespace entry, its unassigned marker and its assignment,
        in one transaction that compares the root, the marker and the assignment as read
        (read again and retried when a topic move raced it). `NoTopic`.

        A partitioned topic goes with its partitions, in one transaction while it fits,
        else in chunks with the parent last. Its storage metadata (/danube-data/storage/…)
        stays: the storage clean-up removes the objects first, then their descriptors.
        """
        return await self.writer.run(partial(self._delete, topic), f"delete {topic}")

    async def _delete(self, topic: TopicName, fresh: bool) -> int:
        root = layout.topic_root(topic)
        view = await self.reader.read(*_removal_reads([topic]), ALL_ASSIGNMENTS, fresh=fresh)
        count = view.get(root, int)
        if count is None:
            raise NoTopic(topic)
        pending = await self._removals(topic.partitions(count.value), fresh=fresh)
        pending.extend(_removals([topic], view))
        return await self._apply_in_chunks(pending)

    @staticmethod
    def removal_reads(topics: Iterable[TopicName]) -> list[Get | List]:
        """The reads a deletion of `topics` is built from (`delete_change`)."""
        return [*_removal_reads(topics), ALL_ASSIGNMENTS]

    @staticmethod
    def delete_change(topic: TopicName, view: View) -> Change | None:
        """The deletion of one (non-partitioned) topic as read in `view` (of
        `removal_reads`): everything under its root, its namespace entry, its marker and its
        assignments, refused unless each is as read. None if the topic is already gone. A
        caller may guard it with conditions of its own (an ETag, say)."""
        assigned = owners(view.entries(ALL_ASSIGNMENTS)).get(topic, [])
        return _removal(topic, view, assigned)

    async def _removals(
        self, members: Sequence[TopicName], *, fresh: bool
    ) -> deque[tuple[TopicName, Change]]:
        pending: deque[tuple[TopicName, Change]] = deque()
        for start in range(0, len(members), READ_BATCH):
            batch = members[start : start + READ_BATCH]
            view = await self.reader.read(*_removal_reads(batch), ALL_ASSIGNMENTS, fresh=fresh)
            pending.extend(_removals(batch, view))
        return pending

    async def _apply_in_chunks(
        self, pending: deque[tuple[TopicName, Change]], base: Change | None = None
    ) -> int:
        """Apply the pending changes in order, as many a transaction as fit with `base`."""
        revision = 0
        while pending:
            chunk, _ = _fill(base or Change(), pending)
            revision = await self.writer.apply(chunk)
        return revision

    # -- producers ---------------------------------------------------------------------

    def register_producer_change(
        self, topic: TopicName, registration: ProducerRegistration
    ) -> Change:
        if registration.topic_name != topic.path:
            raise InvalidValue(f"producer of topic {registration.topic_name!r} is not of {topic}")
        key = layout.producer(topic, registration.producer_id)
        conditions = (
            key_exists(layout.topic_root(topic), partial(NoTopic, topic)),
            key_absent(key, partial(ProducerExists, topic, registration.producer_id)),
        )
        return Change(conditions, (Put(key, encode(registration)),))

    async def register_producer(self, topic: TopicName, registration: ProducerRegistration) -> int:
        """Register a producer of an existing topic; `NoTopic`, `ProducerExists`."""
        return await self.writer.apply(self.register_producer_change(topic, registration))

    async def producer(self, topic: TopicName, producer_id: int) -> Versioned[ProducerRegistration]:
        """A producer's registration; `NoProducer`."""
        found = await self.reader.get(layout.producer(topic, producer_id), ProducerRegistration)
        if found is None:
            raise NoProducer(topic, producer_id)
        return found

    def delete_producer_change(self, topic: TopicName, producer_id: int, version: int) -> Change:
        key = layout.producer(topic, producer_id)
        return Change(
            (at_version(key, version, partial(NoProducer, topic, producer_id)),), (Delete(key),)
        )

    async def delete_producer(self, topic: TopicName, producer_id: int, version: int) -> int:
        """Remove a producer's registration read at `version`; `BadVersion`, `NoProducer`."""
        return await self.writer.apply(self.delete_producer_change(topic, producer_id, version))

    async def producers(self, topic: TopicName) -> list[Versioned[ProducerRegistration]]:
        """The producers of `topic`, by id, read with its root at one revision; `NoTopic`."""
        root, listed = layout.topic_root(topic), List(layout.producers_prefix(topic))
        view = await self.reader.read(Get(root), listed)
        if view.entry(root) is None:
            raise NoTopic(topic)
        return [view.typed(entry, ProducerRegistration) for entry in view.entries(listed)]


# Creation -----------------------------------------------------------------------------------


def _parent_creation(topic: TopicName, partitions: int, delivery: Delivery) -> Change:
    """The topic itself: served (with a marker) unless partitioned."""
    policy = layout.namespace_policy(topic.namespace)
    conditions = (
        key_exists(policy, partial(NoNamespace, topic.namespace)),
        key_absent(layout.topic_root(topic), partial(TopicExists, topic)),
    )
    ops = _topic_writes(topic, partitions, delivery)
    if partitions == 0:
        ops += (Put(layout.unassigned(topic), NULL),)
    return Change(conditions, ops)


def _creation(partition: TopicName, delivery: Delivery) -> Change:
    """One partition: a topic of its own, waiting for assignment."""
    return Change(
        (key_absent(layout.topic_root(partition), partial(TopicExists, partition)),),
        (*_topic_writes(partition, 0, delivery), Put(layout.unassigned(partition), NULL)),
    )


def _topic_writes(topic: TopicName, partitions: int, delivery: Delivery) -> tuple[Put, ...]:
    return (
        Put(layout.topic_root(topic), encode(partitions)),
        Put(layout.topic_delivery(topic), encode(delivery)),
        Put(layout.namespace_topic(topic), NULL),
    )


def _created_at(topic: TopicName, revision: int) -> Condition:
    """The parent's root is the one created at `revision` (not deleted, nor created again)."""
    key = layout.topic_root(topic)
    return Condition(
        Compare.create_revision(key, "==", revision),
        lambda now: NoTopic(topic) if now is None else TopicExists(topic),
    )


def _fill(base: Change, pending: deque[tuple[TopicName, Change]]) -> tuple[Change, list[TopicName]]:
    """`base` and as many of the pending changes as fit with it in one transaction."""
    change, taken = base, []
    while pending and (change + pending[0][1]).fits:
        topic, more = pending.popleft()
        change += more
        taken.append(topic)
    if pending and not taken:
        raise AssertionError(f"the change of {pending[0][0]} does not fit in a transaction")
    return change, taken


# Deletion -----------------------------------------------------------------------------------


def _removal_reads(topics: Iterable[TopicName]) -> list[Get]:
    return [Get(key) for t in topics for key in (layout.topic_root(t), layout.unassigned(t))]


def _removals(topics: Iterable[TopicName], view: View) -> list[tuple[TopicName, Change]]:
    assigned = owners(view.entries(ALL_ASSIGNMENTS))
    removals = ((topic, _removal(topic, view, assigned.get(topic, []))) for topic in topics)
    return [(topic, change) for topic, change in removals if change is not None]


def _removal(topic: TopicName, view: View, assignments: list[Entry]) -> Change | None:
    """The deletion of one topic as read in `view`; None if it is already gone."""
    root, marker = layout.topic_root(topic), layout.unassigned(topic)
    read_root, read_marker = view.entry(root), view.entry(marker)
    if read_root is None:
        return None
    conditions = (
        unchanged(root, read_root.mod_revision, partial(NoTopic, topic)),
        unchanged(marker, mod_revision_of(read_marker)),
        *(unchanged(entry.key, entry.mod_revision) for entry in assignments),
    )
    ops = (
        DeletePrefix(root),
        Delete(layout.namespace_topic(topic)),
        *((Delete(marker),) if read_marker is not None else ()),
        *(Delete(entry.key) for entry in assignments),
    )
    return Change(conditions, ops)


def _listed_topics(keys: Iterable[str]) -> list[TopicName]:
    parsed = (layout.parse(key) for key in keys)
    return [
        key.topic_name
        for key in parsed
        if key.kind is layout.KeyKind.NAMESPACE_TOPIC and key.topic_name is not None
    ]
