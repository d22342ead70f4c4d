"""The leader's view of the cluster, read cycle after cycle by a `ViewReader` that applies
only what changed: after any sequence of changes it is the view a whole read gives, and a
view handed out earlier is never changed by a later read."""

from __future__ import annotations

import random

import pytest

from metaplane import layout
from metaplane.cache import LocalCache
from metaplane.cluster._view import ClusterView, ViewReader, read_view
from metaplane.layout import TopicName
from metaplane.resources import (
    LoadReport,
    ResourceUsage,
    UnassignedMarker,
    decode_value,
    encode,
)
from metaplane.store import Delete, MemoryStore, Put
from tests.resources.samples import ACTIVE, BROKER, DRAINING

TOPICS = [TopicName(f"ns{i % 3}", f"t{i}") for i in range(30)]


def report(topics: int) -> LoadReport:
    return LoadReport(
        resources_usage=[ResourceUsage(resource="CPU", usage=topics)],
        topic_list=[f"/ns0/t{i}" for i in range(topics)],
        topics_len=topics,
    )


def random_change(pick: random.Random) -> list[Put | Delete]:
    """One change of /cluster as the cluster makes them: an assignment, a marker, a
    registration, a state, a load report — put, or deleted; a few at once."""
    ops: dict[str, Put | Delete] = {}
    for _ in range(pick.randint(1, 6)):
        broker, topic = pick.randint(1, 4), pick.choice(TOPICS)
        key, value = pick.choice(
            [
                (layout.assignment(broker, topic), b"null"),
                (
                    layout.unassigned(topic),
                    encode(UnassignedMarker(from_broker=broker, reason="unload")),
                ),
                (layout.unassigned(topic), b"null"),
                (layout.broker_registration(broker), encode(BROKER)),
                (layout.broker_state(broker), encode(pick.choice([ACTIVE, DRAINING]))),
                (layout.load_report(broker), encode(report(pick.randint(0, 5)))),
            ]
        )
        ops[key] = Delete(key) if pick.random() < 0.3 else Put(key, value)
    return list(ops.values())


def shape(view: ClusterView) -> tuple[object, ...]:
    """What the view says, copied: a later change of the view does not reach it."""
    return (
        view.revision,
        set(view.registered),
        dict(view.states),
        {topic: sorted(owners, key=lambda o: o.key) for topic, owners in view.owners.items()},
        dict(view.waiting),
        dict(view.reports),
        dict(view.owned_count),
    )


@pytest.mark.parametrize("seed", range(6))
async def test_a_view_from_the_changes_is_the_view_of_a_whole_read(seed: int) -> None:
    pick = random.Random(seed)
    async with (
        MemoryStore() as store,
        LocalCache(store, [layout.cluster_prefix()], decoder=decode_value) as cache,
    ):
        reader = ViewReader(cache, chunk=2)  # more than 50 keys changed: a whole read again
        handed_out: list[tuple[ClusterView, tuple[object, ...]]] = []
        for step in range(80):
            for _ in range(pick.randint(0, 3) if step % 20 else 60):  # now and then a burst
                revision = (await store.txn((), random_change(pick))).revision
                await cache.wait_for(revision)
            view = await reader.read()
            assert shape(view) == shape(read_view(cache))
            counted = {broker: len(topics) for broker, topics in view.by_broker().items()}
            assert view.owned_count == counted
            handed_out.append((view, shape(view)))
        assert all(shape(view) == then for view, then in handed_out)
        assert 1 < reader.whole_reads < 10  # the first, and one after each burst
        reader.close()


async def test_a_read_copies_only_what_changed() -> None:
    """A cycle that follows a load report shares the owners of every topic with the view
    before it instead of copying them (at 1M topics the copy, and freeing it, took most of
    the leader's loop); a change of an assignment copies them, and the earlier view keeps
    what it showed."""
    async with (
        MemoryStore() as store,
        LocalCache(store, [layout.cluster_prefix()], decoder=decode_value) as cache,
    ):
        await store.txn((), [Put(layout.assignment(1, topic), b"null") for topic in TOPICS])
        await cache.wait_for(await store.put(layout.load_report(1), encode(report(1))))
        reader = ViewReader(cache)
        first = await reader.read()
        await cache.wait_for(await store.put(layout.load_report(1), encode(report(2))))
        second = await reader.read()
        assert second.owners is first.owners and second.owned_count is first.owned_count
        assert second.reports is not first.reports
        assert (first.reports[1].value.topics_len, second.reports[1].value.topics_len) == (1, 2)
        await cache.wait_for(await store.delete(layout.assignment(1, TOPICS[0])))
        third = await reader.read()
        assert third.owners is not second.owners and TOPICS[0] not in third.owners
        assert TOPICS[0] in second.owners and first.owned_count == {1: len(TOPICS)}
        assert third.owned_count == {1: len(TOPICS) - 1}
        reader.close()
