"""Values and small helpers the manager tests share: seed-001-like values, a store that
records what it is asked, and a snapshot of a store to show that a refused change wrote
nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    LoadReport,
    ObjectDescriptor,
    ProducerAccessMode,
    ProducerRegistration,
    ResourceUsage,
    SealedState,
    SubscriptionMetadata,
    SubscriptionType,
)
from metaplane.store import Entry, MetadataStore, Txn, TxnResult
from metaplane.testing import Fault, FaultyStore

BROKER = 13308604176970018988
OTHER_BROKER = 625722408599041316
PRODUCER = 13940288943180594845
TOPIC = TopicName("default", "reliable_topic")


def subscription(name: str = "subs_reliable", consumer: int | None = None) -> SubscriptionMetadata:
    return SubscriptionMetadata(
        consumer_id=consumer,
        consumer_name="cons_reliable",
        subscription_name=name,
        subscription_type=SubscriptionType.EXCLUSIVE,
    )


def producer(topic: TopicName = TOPIC, producer_id: int = PRODUCER) -> ProducerRegistration:
    return ProducerRegistration(
        access_mode=ProducerAccessMode.SHARED,
        producer_id=producer_id,
        producer_name="prod_json_reliable",
        status=True,
        topic_name=topic.path,
    )


def registration(port: int = 6650) -> BrokerRegistration:
    return BrokerRegistration(
        admin_addr="http://0.0.0.0:50051",
        advertised_addr=f"0.0.0.0:{port}",
        broker_addr=f"http://0.0.0.0:{port}",
        prom_exporter="0.0.0.0:9040",
    )


ACTIVE = BrokerState(mode=BrokerMode.ACTIVE, reason="boot")
DRAINING = BrokerState(mode=BrokerMode.DRAINING, reason="maintenance")


def load_report(topics: int = 1) -> LoadReport:
    return LoadReport(
        resources_usage=[
            ResourceUsage(resource="CPU", usage=30),
            ResourceUsage(resource="Memory", usage=30),
        ],
        topic_list=[TOPIC.path] * topics,
        topics_len=topics,
    )


def descriptor(start: int, end: int, *, completed: bool = True) -> ObjectDescriptor:
    return ObjectDescriptor(
        completed=completed,
        created_at=1768728599,
        end_offset=end,
        etag=None,
        object_id=f"data-{start}-{end}.dnb1",
        offset_index=[(start, 0)],
        size=7164,
        start_offset=start,
    )


# Objects at 10-29, 30-59 and 100-149: (offset, the start of the object holding it).
FIND_CASES = [
    (5, None),  # before the first object
    (10, 10),
    (29, 10),
    (30, 30),
    (59, 30),
    (60, None),  # a gap
    (99, None),
    (100, 100),
    (149, 100),
    (150, None),  # after the last
    (2**64 - 1, None),
]


SEALED = SealedState(
    sealed=True, last_committed_offset=21, broker_id=10285063371164059634, timestamp=1768625254
)


async def snapshot(store: MetadataStore) -> tuple[int, list[Entry]]:
    """The store's revision and every entry: equal before and after a change that wrote
    nothing."""
    return await store.revision(), list(await store.list("/"))


class RecordingStore(FaultyStore):
    """A store that records each operation it is asked (and may run a hook before the next
    transaction, as a concurrent writer would)."""

    def __init__(self, inner: MetadataStore) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, str | None]] = []
        self.before_txn: list[Callable[[], Awaitable[object]]] = []

    def _matching(
        self, operation: str, keys: Iterable[str | None], txn: Txn | None = None
    ) -> list[Fault]:
        wanted = list(keys)
        self.calls.extend((operation, key) for key in wanted)
        return super()._matching(operation, wanted, txn)

    async def _txn(self, txn: Txn) -> TxnResult:
        if self.before_txn:
            await self.before_txn.pop(0)()
        return await super()._txn(txn)
