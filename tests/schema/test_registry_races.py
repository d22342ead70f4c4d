"""Lost races, made to happen on purpose: another writer commits between the registry's read
and its transaction. The compares catch it, the registry decides again from what the failure
branch read, and no update is lost, no id or version given twice."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.schema import (
    CompatibilityMode,
    IncompatibleSchema,
    ReferenceNotFound,
    RegistryConflict,
    SchemaReferenced,
    SchemaRegistry,
    parse_schema,
)
from metaplane.store import BadVersion, MemoryStore, Txn, TxnResult
from metaplane.testing import FaultyStore
from tests.schema.consistency import assert_consistent

pytestmark = pytest.mark.backends("memory", reason="the interfering store wraps the memory one")

Interference = Callable[[], Awaitable[object]]


class RacingStore(MemoryStore):
    """A memory store where `interfere()` runs just before each of the next `times` write
    transactions, as if another writer had won the race."""

    def __init__(self) -> None:
        super().__init__()
        self.interference: Interference | None = None
        self.times = 0
        self.sent = 0
        """Transactions sent by others than the interfering writer: round trips."""
        self._interfering = False

    def before_next_writes(self, interference: Interference, times: int = 1) -> None:
        self.interference, self.times = interference, times

    async def _txn(self, txn: Txn) -> TxnResult:
        self.sent += not self._interfering
        if txn.writes and self.times and self.interference and not self._interfering:
            self.times -= 1
            self._interfering = True  # the other writer's own writes go through untouched
            try:
                await self.interference()
            finally:
                self._interfering = False
        return await super()._txn(txn)


def avro(*names: str) -> str:
    fields = [{"name": name, "type": "string", "default": ""} for name in names]
    return json.dumps({"type": "record", "name": "R", "fields": fields})


@pytest.fixture
def store() -> RacingStore:
    return RacingStore()


@pytest.fixture
def registry(store: RacingStore) -> SchemaRegistry:
    return SchemaRegistry(store)


async def test_a_version_registered_meanwhile_makes_ours_the_next(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("s", "Avro", avro("a"))
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.register("s", "Avro", avro("b")))
    done = await registry.register("s", "Avro", avro("c"))
    assert (done.version.version, done.created, registry.conflicts) == (3, True, 1)
    keys = await assert_consistent(store)
    fingerprints = [version.fingerprint for version in keys.metadata["s"].versions]
    assert fingerprints == [parse_schema("Avro", avro(*f)).fingerprint for f in ("a", "b", "c")]


async def test_a_lost_race_costs_one_round_trip(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    """The refused transaction's failure branch read every key the registration read: it
    decides again from that, without reading again — read, refused commit, commit."""
    await registry.register("s", "Avro", avro("a"))
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.register("s", "Avro", avro("b")))
    before = store.sent
    done = await registry.register("s", "Avro", avro("c"))
    assert (done.version.version, registry.conflicts, store.sent - before) == (3, 1, 3)


async def test_a_registration_whose_answer_was_lost_is_made_once() -> None:
    """The store applied the registration and the answer was lost (Unavailable): the one
    runner finds its writes in place and returns them; sent before the store saw it, it is
    sent again. Either way one version, one id."""
    inner = MemoryStore()
    faulty = FaultyStore(inner)
    registry = SchemaRegistry(faulty)
    lost = faulty.fail("txn", "/schemas", after=True, when=lambda txn: txn.writes)
    first = await registry.register("s", "Avro", avro("a"))
    refused = faulty.fail("txn", "/schemas", when=lambda txn: txn.writes)
    second = await registry.register("t", "Avro", avro("a"))
    assert (lost.hits, refused.hits) == (1, 1)
    assert (first.schema_id, first.version.version, first.created) == (1, 1, True)
    written = await inner.get(layout.schema_metadata("s"))
    assert written is not None and first.revision == written.mod_revision
    assert (second.schema_id, second.version.version) == (2, 1)
    keys = await assert_consistent(inner)
    assert keys.counter == 3 and sorted(keys.versions) == ["s", "t"]


async def test_a_mode_set_over_a_version_is_refused_when_another_writer_came_first(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    """`set_mode(…, expect=version)` (the API's If-Match) compares the version in its own
    transaction: a write between its read and its commit refuses it, nothing written."""
    await registry.register("s", "Avro", avro("a"))
    metadata = await store.get(layout.schema_metadata("s"))
    assert metadata is not None
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.set_mode("s", "Full"))
    with pytest.raises(BadVersion, match=r"expected version 1, found 2"):
        await registry.set_mode("s", "None", expect=metadata.version)
    assert await registry.mode("s") is CompatibilityMode.FULL
    assert registry.conflicts == 0, "a version expected is no race to retry"


async def test_the_same_schema_registered_meanwhile_is_returned_and_nothing_written(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("s", "Avro", avro("a"))
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.register("s", "Avro", avro("b")))
    done = await registry.register("s", "Avro", avro("b"))
    assert (done.version.version, done.created, registry.conflicts) == (2, False, 1)
    assert done.revision == await store.revision()


async def test_a_mode_tightened_meanwhile_refuses_the_schema(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("s", "Avro", avro("a"))
    await registry.set_mode("s", "None")
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.set_mode("s", "Backward"))
    retyped = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    with pytest.raises(IncompatibleSchema, match="type-mismatch"):
        await registry.register("s", "Avro", retyped)
    assert [v.version for v in await registry.versions("s")] == [1]


async def test_subjects_created_meanwhile_take_other_ids(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.register("b", "Avro", avro("b")))
    done = await registry.register("a", "Avro", avro("a"))
    assert (done.schema_id, registry.conflicts) == (2, 1)
    keys = await assert_consistent(store)
    assert {subject: m.id for subject, m in keys.metadata.items()} == {"a": 2, "b": 1}
    assert keys.counter == 3


async def test_the_same_subject_created_meanwhile_becomes_a_version_of_it(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.register("s", "Avro", avro("a")))
    done = await registry.register("s", "Avro", avro("a", "b"))
    assert (done.schema_id, done.version.version) == (1, 2)
    assert (await assert_consistent(store)).counter == 2


async def test_a_counter_behind_its_index_gives_no_id_twice(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("a", "Avro", avro("a"))
    await store.put(layout.next_schema_id(), b"1")  # as a restore from an old backup might
    done = await registry.register("b", "Avro", avro("b"))
    assert (done.schema_id, registry.conflicts) == (2, 1)
    assert (await assert_consistent(store)).counter == 3


async def test_a_version_key_left_behind_is_skipped_not_overwritten(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("s", "Avro", avro("a"))
    stray = layout.schema_version("s", 2)
    await store.put(stray, b"{}")  # a crashed non-atomic writer's (Danube's) half
    done = await registry.register("s", "Avro", avro("b"))
    assert done.version.version == 3
    entry = await store.get(stray)
    assert entry is not None and entry.value == b"{}"


async def test_writers_that_always_win_end_in_a_conflict_with_nothing_written(
    store: RacingStore,
) -> None:
    registry = SchemaRegistry(store, attempts=3)
    await registry.register("s", "Avro", avro("a"))
    other = SchemaRegistry(store)
    # Each interference changes the mode, so the metadata never stays as read.
    store.before_next_writes(lambda: other.set_mode("s", ["None", "Full"][store.times % 2]), 9)
    with pytest.raises(
        RegistryConflict, match=r"register s: still conflicting .* after 3 attempts"
    ):
        await registry.register("s", "Avro", avro("a", "b"))
    assert [v.version for v in await registry.versions("s")] == [1]


async def test_a_rebinding_reads_the_subject_it_leaves_and_survives_a_race(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    topic = TopicName("default", "orders")
    await store.put(layout.topic_root(topic), b"0")
    for subject in ("old", "new"):
        await registry.register(subject, "Avro", avro("a"))
    await registry.bind_topic(topic, "old")
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.register("old", "Avro", avro("a", "b")))
    await registry.bind_topic(topic, "new", replace=True)
    keys = await assert_consistent(store)
    assert keys.bindings == {"/default/orders": "new"}
    assert [v.version for v in keys.metadata["old"].versions] == [1, 2]


async def test_a_topic_deleted_and_created_again_meanwhile_is_bound_afresh(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    topic = TopicName("default", "orders")
    root = layout.topic_root(topic)
    await store.put(root, b"0")
    await registry.register("s", "Avro", avro("a"))

    async def recreate() -> None:
        await store.delete(root)
        await store.put(root, b"4")

    store.before_next_writes(recreate)
    await registry.bind_topic(topic, "s")
    assert registry.conflicts == 1
    assert (await assert_consistent(store)).bindings == {"/default/orders": "s"}


# References: the referenced version and its referrers race through `referenced_by`.

MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
    "message Order { common.Money total = 1; }\n"
)


async def test_a_referenced_version_deleted_meanwhile_refuses_the_registration(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("money", "proto", MONEY)
    await registry.register("money", "proto", MONEY.replace("}\n", "string note = 2; }\n"))
    other = SchemaRegistry(store)
    store.before_next_writes(lambda: other.delete_version("money", 1))
    with pytest.raises(ReferenceNotFound, match=r"common/money\.proto=money:1"):
        await registry.register("orders", "proto", ORDER, references=["common/money.proto=money:1"])
    keys = await assert_consistent(store)
    assert "orders" not in keys.metadata and keys.referenced_by == {}


async def test_a_referrer_registered_meanwhile_keeps_its_version_from_deletion(
    store: RacingStore, registry: SchemaRegistry
) -> None:
    await registry.register("money", "proto", MONEY)
    await registry.register("money", "proto", MONEY.replace("}\n", "string note = 2; }\n"))
    other = SchemaRegistry(store)
    store.before_next_writes(
        lambda: other.register("orders", "proto", ORDER, references=["common/money.proto=money:1"])
    )
    with pytest.raises(SchemaReferenced, match="orders version 1"):
        await registry.delete_version("money", 1)
    keys = await assert_consistent(store)
    assert sorted(keys.versions["money"]) == [1, 2] and registry.conflicts == 1
