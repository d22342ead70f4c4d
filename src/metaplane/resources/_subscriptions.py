"""The subscription manager (Hedwig's SubscriptionDataManager): a subscription's metadata and
its cursor, the last offset it acknowledged, kept together under the topic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import msgspec

from metaplane import layout
from metaplane.layout import KeyKind, TopicName, parse
from metaplane.resources._change import (
    Change,
    at_version,
    expecting,
    key_absent,
    key_exists,
)
from metaplane.resources._errors import NoCursor, NoSubscription, NoTopic, SubscriptionExists
from metaplane.resources._reader import Manager, Versioned, View
from metaplane.resources._values import SubscriptionMetadata, encode
from metaplane.store import (
    ANY,
    AlreadyExists,
    BadVersion,
    DeletePrefix,
    Entry,
    Expect,
    Get,
    InvalidValue,
    List,
    Put,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A subscription: its metadata (Hedwig's preferences) and its cursor (its state; None
    until the first cursor is written)."""

    name: str
    metadata: Versioned[SubscriptionMetadata]
    cursor: Versioned[int] | None


class SubscriptionManager(Manager):
    """Create, read, update and delete subscriptions; read all of a topic's at once; read
    and write their cursors.

    Every write has a `…_change` form that returns it unapplied: a broker writes cursors
    fenced on still owning the topic (`cursor_change(...).guarded(fence)`).
    """

    def create_change(self, topic: TopicName, metadata: SubscriptionMetadata) -> Change:
        name = metadata.subscription_name
        key = layout.subscription(topic, name)
        conditions = (
            key_exists(layout.topic_root(topic), partial(NoTopic, topic)),
            key_absent(key, partial(SubscriptionExists, topic, name)),
        )
        return Change(conditions, (Put(key, encode(metadata)),))

    async def create(self, topic: TopicName, metadata: SubscriptionMetadata) -> int:
        """Create the subscription named in `metadata`; `NoTopic`, `SubscriptionExists`."""
        return await self.writer.apply(self.create_change(topic, metadata))

    async def read(self, topic: TopicName, name: str) -> Versioned[SubscriptionMetadata]:
        """A subscription's metadata and version; `NoSubscription`."""
        found = await self.reader.get(layout.subscription(topic, name), SubscriptionMetadata)
        if found is None:
            raise NoSubscription(topic, name)
        return found

    def replace_change(
        self, topic: TopicName, metadata: SubscriptionMetadata, version: int
    ) -> Change:
        name = metadata.subscription_name
        key = layout.subscription(topic, name)
        return Change(
            (at_version(key, version, partial(NoSubscription, topic, name)),),
            (Put(key, encode(metadata)),),
        )

    async def replace(self, topic: TopicName, metadata: SubscriptionMetadata, version: int) -> int:
        """Replace the metadata of the subscription it names, read at `version`;
        `BadVersion`, `NoSubscription`."""
        return await self.writer.apply(self.replace_change(topic, metadata, version))

    async def update(self, topic: TopicName, name: str, version: int, **fields: object) -> int:
        """Change some fields of the metadata read at `version` (e.g. `consumer_id=…`), the
        others as they are; `BadVersion`, `NoSubscription`. The name cannot change."""
        key = layout.subscription(topic, name)
        # The value at `version` is merged: a late cache could not give it.
        current = (await self.reader.read(Get(key), fresh=True)).get(key, SubscriptionMetadata)
        if current is None:
            raise NoSubscription(topic, name)
        if current.version != version:
            raise BadVersion(current.key, version, current.version)
        if fields.get("subscription_name", name) != name:
            raise InvalidValue(f"subscription {name!r} cannot be renamed")
        metadata = msgspec.structs.replace(current.value, **fields)
        return await self.replace(topic, metadata, version)

    def delete_change(self, topic: TopicName, name: str, version: int) -> Change:
        key = layout.subscription(topic, name)
        return Change(
            (at_version(key, version, partial(NoSubscription, topic, name)),),
            (DeletePrefix(key),),
        )

    async def delete(self, topic: TopicName, name: str, version: int) -> int:
        """Delete the subscription read at `version`, and its cursor with it; `BadVersion`,
        `NoSubscription`."""
        return await self.writer.apply(self.delete_change(topic, name, version))

    async def read_subscriptions(self, topic: TopicName) -> dict[str, SubscriptionData]:
        """Every subscription of `topic` with its cursor, by name, in one range read (empty
        when there are none, or no topic)."""
        listed = List(layout.subscriptions_prefix(topic))
        view = await self.reader.read(listed)
        return _subscriptions(view, view.entries(listed))

    # -- cursors -----------------------------------------------------------------------

    async def cursor(self, topic: TopicName, name: str) -> Versioned[int]:
        """The subscription's last acknowledged offset; `NoCursor` before the first."""
        found = await self.reader.get(layout.cursor(topic, name), int)
        if found is None:
            raise NoCursor(topic, name)
        return found

    def cursor_change(
        self, topic: TopicName, name: str, offset: int, version: int | Expect = ANY
    ) -> Change:
        key = layout.cursor(topic, name)
        conditions = (
            key_exists(layout.subscription(topic, name), partial(NoSubscription, topic, name)),
            *expecting(
                key,
                version,
                missing=partial(NoCursor, topic, name),
                taken=partial(AlreadyExists, key),
            ),
        )
        return Change(conditions, (Put(key, encode(offset)),))

    async def write_cursor(
        self, topic: TopicName, name: str, offset: int, version: int | Expect = ANY
    ) -> int:
        """Write the cursor of an existing subscription, over `version` if given;
        `NoSubscription`, `BadVersion`, `NoCursor` (a version of a cursor never written)."""
        return await self.writer.apply(self.cursor_change(topic, name, offset, version))


def _subscriptions(view: View, entries: Sequence[Entry]) -> dict[str, SubscriptionData]:
    """The subscriptions and cursors among `entries`, paired by name."""
    metadata: dict[str, Versioned[SubscriptionMetadata]] = {}
    cursors: dict[str, Versioned[int]] = {}
    for entry in entries:
        key = parse(entry.key)
        if key.kind is KeyKind.SUBSCRIPTION and key.subscription is not None:
            metadata[key.subscription] = view.typed(entry, SubscriptionMetadata)
        elif key.kind is KeyKind.CURSOR and key.subscription is not None:
            cursors[key.subscription] = view.typed(entry, int)
    for orphan in cursors.keys() - metadata.keys():
        log.warning("cursor without its subscription: %s", cursors[orphan].key)
    return {
        name: SubscriptionData(name, value, cursors.get(name)) for name, value in metadata.items()
    }
