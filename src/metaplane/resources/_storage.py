"""The storage manager (Hedwig's TopicPersistenceManager): the descriptors of a topic's objects
in tiered storage, keyed by their 20-digit start offset, the `cur` pointer to the newest, and
the sealed state a topic move leaves for the next owner.
"""

from __future__ import annotations

from functools import partial

from metaplane import layout
from metaplane.layout import U64_MAX, TopicName
from metaplane.resources._change import (
    Change,
    at_version,
    key_absent,
    unchanged,
)
from metaplane.resources._errors import NoObject, NoSealedState, ObjectExists, SealedStateExists
from metaplane.resources._reader import Manager, Versioned
from metaplane.resources._values import CurrentObject, ObjectDescriptor, SealedState, encode
from metaplane.store import Delete, Get, InvalidValue, List, Put


class StorageManager(Manager):
    """Add, complete and find a topic's storage objects; write, read and delete its sealed
    state.

    Every write has a `…_change` form that returns it unapplied (the owner of a topic writes
    fenced on still owning it).
    """

    def add_object_change(
        self,
        topic: TopicName,
        descriptor: ObjectDescriptor,
        current: Versioned[CurrentObject] | None,
    ) -> Change:
        """Add `descriptor`, and point `objects/cur` at it if it starts after `current` (as
        read; None: there is none), refused if `cur` changed since."""
        _check(descriptor)
        key = layout.storage_object(topic, descriptor.start_offset)
        change = Change(
            (key_absent(key, partial(ObjectExists, topic, descriptor.start_offset)),),
            (Put(key, encode(descriptor)),),
        )
        if not _newest(descriptor, current):
            return change
        cur = layout.storage_cur(topic)
        moved = CurrentObject.at(descriptor.start_offset)
        return change + Change(
            (unchanged(cur, 0 if current is None else current.mod_revision),),
            (Put(cur, encode(moved)),),
        )

    async def add_object(self, topic: TopicName, descriptor: ObjectDescriptor) -> int:
        """Add an object's descriptor (`ObjectExists`); if it is the newest, move
        `objects/cur` to it in the same transaction."""
        return await self.writer.run(
            partial(self._add_object, topic, descriptor), f"add an object to {topic}"
        )

    async def _add_object(self, topic: TopicName, descriptor: ObjectDescriptor, fresh: bool) -> int:
        cur = layout.storage_cur(topic)
        current = (await self.reader.read(Get(cur), fresh=fresh)).get(cur, CurrentObject)
        return await self.writer.apply(self.add_object_change(topic, descriptor, current))

    def replace_object_change(
        self, topic: TopicName, descriptor: ObjectDescriptor, version: int
    ) -> Change:
        _check(descriptor)
        offset = descriptor.start_offset
        key = layout.storage_object(topic, offset)
        return Change(
            (at_version(key, version, partial(NoObject, topic, offset)),),
            (Put(key, encode(descriptor)),),
        )

    async def replace_object(
        self, topic: TopicName, descriptor: ObjectDescriptor, version: int
    ) -> int:
        """Replace the descriptor read at `version` (completing an upload: `completed`,
        `etag`, `size`, `end_offset`); `BadVersion`, `NoObject`."""
        return await self.writer.apply(self.replace_object_change(topic, descriptor, version))

    async def object(self, topic: TopicName, start_offset: int) -> Versioned[ObjectDescriptor]:
        """The descriptor of the object starting at `start_offset`; `NoObject`."""
        key = layout.storage_object(topic, start_offset)
        found = await self.reader.get(key, ObjectDescriptor)
        if found is None:
            raise NoObject(topic, start_offset)
        return found

    async def find_object(self, topic: TopicName, offset: int) -> Versioned[ObjectDescriptor]:
        """The descriptor of the object holding `offset`: the last one starting at or before
        it (one floor look-up on the 20-digit keys), if it ends at or after it. `NoObject`
        when no object holds it (before the first, in a gap, after the last). An upload in
        progress (`completed` false) is returned as it is: check `completed`."""
        floor = List(
            layout.storage_objects_prefix(topic),
            end_before=_after(topic, offset),
            reverse=True,
            limit=1,
        )
        view = await self.reader.read(floor)
        found = [view.typed(entry, ObjectDescriptor) for entry in view.entries(floor)]
        if not found or found[0].value.end_offset < offset:
            raise NoObject(topic, offset, f"no object of topic {topic} holds offset {offset}")
        return found[0]

    async def objects(self, topic: TopicName) -> list[Versioned[ObjectDescriptor]]:
        """The topic's object descriptors, by start offset."""
        listed = List(layout.storage_objects_prefix(topic), end_before=layout.storage_cur(topic))
        view = await self.reader.read(listed)
        return [view.typed(entry, ObjectDescriptor) for entry in view.entries(listed)]

    async def current(self, topic: TopicName) -> Versioned[ObjectDescriptor]:
        """The descriptor `objects/cur` points at, the newest; `NoObject`."""
        pointer = await self.reader.get(layout.storage_cur(topic), CurrentObject)
        if pointer is None:
            raise NoObject(topic, None)
        return await self.object(topic, pointer.value.offset)

    # -- sealed state ------------------------------------------------------------------

    def seal_change(self, topic: TopicName, state: SealedState) -> Change:
        key = layout.storage_state(topic)
        return Change(
            (key_absent(key, partial(SealedStateExists, topic)),), (Put(key, encode(state)),)
        )

    async def seal(self, topic: TopicName, state: SealedState) -> int:
        """Write the sealed state of a topic leaving its broker; `SealedStateExists`."""
        return await self.writer.apply(self.seal_change(topic, state))

    async def sealed_state(self, topic: TopicName) -> Versioned[SealedState]:
        """The sealed state the new owner starts from; `NoSealedState`."""
        found = await self.reader.get(layout.storage_state(topic), SealedState)
        if found is None:
            raise NoSealedState(topic)
        return found

    def delete_sealed_state_change(self, topic: TopicName, version: int) -> Change:
        key = layout.storage_state(topic)
        return Change((at_version(key, version, partial(NoSealedState, topic)),), (Delete(key),))

    async def delete_sealed_state(self, topic: TopicName, version: int) -> int:
        """Delete the sealed state read at `version`, once loaded; `BadVersion`,
        `NoSealedState`."""
        return await self.writer.apply(self.delete_sealed_state_change(topic, version))


def _check(descriptor: ObjectDescriptor) -> None:
    if descriptor.end_offset < descriptor.start_offset:
        raise InvalidValue(
            f"object {descriptor.object_id!r} ends ({descriptor.end_offset}) before it starts "
            f"({descriptor.start_offset})"
        )


def _newest(descriptor: ObjectDescriptor, current: Versioned[CurrentObject] | None) -> bool:
    return current is None or descriptor.start_offset > current.value.offset


def _after(topic: TopicName, offset: int) -> str:
    """The first key after the descriptor key of `offset`: `cur` sorts after every offset."""
    layout.padded_offset(offset)  # refuses an offset outside 0..U64_MAX
    if offset == U64_MAX:
        return layout.storage_cur(topic)
    return layout.storage_object(topic, offset + 1)
