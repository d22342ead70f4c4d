"""What the broker tests share: a host whose offsets a test advances by hand, a broker's
configuration, and the steps a test takes with a topic (assign it, take it away, wait for
its seal, read its cursor)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from metaplane import layout
from metaplane.cluster import UNLOAD, BrokerConfig, BrokerNode
from metaplane.cluster._node import registration
from metaplane.layout import TopicName
from metaplane.resources import Condition, OwnershipManager, SealedState, decode
from metaplane.store import MetadataStore, Unavailable
from tests.cluster.test_cluster import converged


class Topics:
    """A TopicHost whose offsets the test advances by hand."""

    def __init__(self) -> None:
        self.next: dict[TopicName, int] = {}
        self.fences: dict[TopicName, Condition] = {}
        self.loads: list[tuple[TopicName, int]] = []
        self.unloads: list[tuple[TopicName, int]] = []
        self.fail_loads = 0

    async def load(self, topic: TopicName, start_offset: int, owned: Condition) -> None:
        if self.fail_loads:
            self.fail_loads -= 1
            raise Unavailable("injected: the host could not open the topic's log")
        self.next[topic] = start_offset
        self.fences[topic] = owned
        self.loads.append((topic, start_offset))

    async def unload(self, topic: TopicName, fence: Condition) -> int:
        last = self.next.pop(topic) - 1
        self.fences.pop(topic)
        self.unloads.append((topic, last))
        return last

    def publish(self, topic: TopicName, count: int) -> int:
        """Publish `count` messages; the last offset."""
        self.next[topic] += count
        return self.next[topic] - 1


BROKER, OTHER = 7, 8


def config(broker_id: int, **settings: float) -> BrokerConfig:
    return BrokerConfig(broker_id, registration(broker_id, broker_id), session_ttl=5, **settings)  # type: ignore[arg-type]


async def assign(store: MetadataStore, topic: TopicName, broker: BrokerNode) -> None:
    revision = await OwnershipManager(store).assign(topic, broker.broker_id)
    await broker.caught_up(revision, timeout=20)


async def move_away(store: MetadataStore, topic: TopicName) -> int:
    return await OwnershipManager(store).unassign(topic, reason=UNLOAD)


async def sealed(store: MetadataStore, topic: TopicName) -> SealedState:
    async def present() -> bool:
        return await store.get(layout.storage_state(topic)) is not None

    await converged(store, present)
    entry = await store.get(layout.storage_state(topic))
    assert entry is not None
    return decode(SealedState, entry.value)


async def cursor(store: MetadataStore, topic: TopicName, subscription: str = "sub") -> int | None:
    entry = await store.get(layout.cursor(topic, subscription))
    return None if entry is None else decode(int, entry.value)


Started = Callable[..., Awaitable[tuple[BrokerNode, Topics]]]
