"""`metaplane rebalance apply`: a plan analysed from a live store's snapshot, applied to that
store while its cluster runs, leaves the assignments as planned; a topic changed in between
is skipped; a dry run writes nothing; a file that is not a plan is one clear error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from metaplane import layout
from metaplane.admin.cli import app
from metaplane.cluster import LoadManagerConfig, Node, NodeSettings, Ranking, unload_topic
from metaplane.layout import TopicName
from metaplane.pipeline import (
    REBALANCE_PLAN,
    AnalyzeSettings,
    PlanError,
    Status,
    analyze,
    apply_plan,
    export_snapshot,
    parse_plan,
    read_plan,
    wait_placed,
)
from metaplane.resources import (
    NamespaceManager,
    OwnershipManager,
    TopicManager,
    assignment_of,
)
from metaplane.store import MetadataStore, open_store

# The cluster's own rebalancer stays out of the way: one rebalancing cycle an hour, and it
# needs several cycles of imbalance before it moves anything.
STILL = LoadManagerConfig(ranking=Ranking.FAIR, idle_every=0.1, rebalance_every=3600)


async def owners(store: MetadataStore) -> dict[TopicName, int]:
    found: dict[TopicName, int] = {}
    for entry in await store.list(layout.brokers_prefix(), keys_only=True):
        if (assignment := assignment_of(entry.key)) is not None:
            broker_id, topic = assignment
            assert topic not in found, f"{topic} assigned twice"
            found[topic] = broker_id
    return found


async def until(store: MetadataStore, check: Any, timeout: float = 20.0) -> None:
    """Wait until `await check()` holds, looking again at each change of the store."""
    start = await store.revision()
    async with asyncio.timeout(timeout), store.watch("/", start_revision=start) as watch:
        if await check():
            return
        async for _ in watch:
            if await check():
                return


def _plan_head() -> dict[str, Any]:
    return {"format": "metaplane-rebalance-plan", "format_version": 1, "snapshot": {"revision": 9}}


def _plan(moves: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_plan_head(), "moves": moves}


def _move(namespace: str, name: str, source: str, target: str, mod: int) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "name": name,
        "from": source,
        "to": target,
        "reason": "balance",
        "assignment_mod_revision": mod,
    }


@pytest.fixture
async def lopsided(store: MetadataStore) -> AsyncIterator[tuple[list[Node], list[TopicName]]]:
    """Three brokers; twelve topics all on broker 1 (created before the others joined)."""
    nodes = [Node(store, NodeSettings(b, b, session_ttl=3, load_manager=STILL)) for b in (1, 2, 3)]
    await nodes[0].start()
    await NamespaceManager(store).create("ns")
    topics = [TopicName("ns", f"t{index:02d}") for index in range(12)]
    for topic in topics:
        await TopicManager(store).create(topic)

    async def all_on_one() -> bool:
        return await owners(store) == dict.fromkeys(topics, 1)

    await until(store, all_on_one)
    for node in nodes[1:]:
        await node.start()
    yield nodes, topics
    for node in nodes:
        if node.broker.session.alive:
            await node.stop()


@pytest.mark.backends("sqlite", "etcd", reason="a live cluster on a shared store")
@pytest.mark.timeout(300)  # Spark's start and an analyze, beside a live cluster
async def test_applying_a_plan_leaves_the_assignments_as_planned(
    store: MetadataStore,
    store_url: str,
    lopsided: tuple[list[Node], list[TopicName]],
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    nodes, topics = lopsided
    snapshot = await export_snapshot(store, tmp_path / "snapshot")
    # Spark blocks: off the event loop, so that the brokers keep their sessions meanwhile.
    await asyncio.to_thread(
        analyze, spark, snapshot, tmp_path / "out", AnalyzeSettings(threshold=0.1)
    )
    plan = read_plan(tmp_path / "out" / REBALANCE_PLAN)
    assert plan.revision == snapshot.revision
    assert len(plan.moves) == 8 and {m.source for m in plan.moves} == {1}
    assert sorted(m.target for m in plan.moves) == [2] * 4 + [3] * 4

    changed = plan.moves[0].topic  # moved by someone else after the snapshot
    await unload_topic(store, changed)
    await until(store, lambda: _assigned(store, changed))

    dry = await apply_plan(store, plan)
    assert dry.count(Status.PLANNED) == 7 and dry.count(Status.SKIPPED) == 1

    # The command, as an operator runs it (its own event loop: in a thread).
    args = ["rebalance", "apply", str(tmp_path / "out" / REBALANCE_PLAN), "--execute"]
    args += ["--store", store_url, "--wait", "30", "-o", "json"]
    ran = await asyncio.to_thread(CliRunner().invoke, app, args)
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)
    assert report["dry_run"] is False
    assert report["counts"] == {"done": 7, "planned": 0, "skipped": 1, "failed": 0}
    skipped = [move for move in report["moves"] if move["status"] == "skipped"]
    assert [move["topic"] for move in skipped] == [changed.path]
    assert "since the snapshot" in skipped[0]["detail"]
    started = [move for move in plan.moves if move.topic != changed]
    for move in report["moves"]:
        if move["status"] == "done":
            assert move["placed_on"] == move["to"]
    assert await wait_placed(store, started, timeout=1) == {m.topic: m.target for m in started}

    final = await owners(store)
    assert sorted(final) == topics  # each topic assigned exactly once (a dict: one owner)
    for move in started:
        assert final[move.topic] == move.target
    assert not await OwnershipManager(store).unassigned()
    unmoved = {t for t in topics if t not in {m.topic for m in plan.moves}}
    assert all(final[topic] == 1 for topic in unmoved)
    assert all(node.broker.session.alive for node in nodes)


async def _assigned(store: MetadataStore, topic: TopicName) -> bool:
    return topic in await owners(store) and not await OwnershipManager(store).unassigned()


@pytest.mark.backends("sqlite", reason="the command's checks, on one backend")
async def test_a_plan_for_another_cluster_is_skipped_move_by_move(
    store: MetadataStore, tmp_path: Path
) -> None:
    """Nothing of the plan exists here: every move is skipped with its reason, nothing is
    written, and the command says so (exit 0: skipping is the guard working)."""
    plan = _plan([_move("ns", "gone", "1", "2", 5)])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    before = await store.revision()
    result = await apply_plan(store, read_plan(path), execute=True)
    assert [o.status for o in result.outcomes] == [Status.SKIPPED]
    assert "no longer on broker 1 since the snapshot" in result.outcomes[0].detail
    assert await store.revision() == before


async def _made(url: str) -> None:
    async with open_store(url):
        pass


def test_the_cli_dry_run_lists_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'meta.db'}"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan([_move("ns", "t", "1", "2", 3)])))
    runner = CliRunner()
    asyncio.run(_made(url))  # an empty cluster
    result = runner.invoke(app, ["rebalance", "apply", str(path), "--store", url, "-o", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dry_run"] is True
    assert document["counts"]["skipped"] == 1
    assert document["moves"][0]["topic"] == "/ns/t"
    listing = runner.invoke(app, ["kv", "ls", "/", "--store", url, "-o", "json"])
    assert listing.exit_code == 0 and json.loads(listing.stdout)["keys"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not JSON"),
        ('{"format": "something-else"}', "not a rebalance plan"),
        (json.dumps({**_plan_head(), "format_version": 2}), "format version 2"),
        (json.dumps({**_plan_head(), "snapshot": {}}), "snapshot.revision"),
        (json.dumps(_plan([{"namespace": "ns", "name": "t"}])), "has no 'from'"),
        (json.dumps(_plan([_move("ns", "t", "x", "2", 1)])), "move 0"),
        (json.dumps(_plan([_move("ns", "t", "1", str(2**64), 1)])), "unsigned 64-bit"),
        (json.dumps(_plan([_move("ns", "t", "1", "1", 1)])), "the broker it is on"),
        (json.dumps(_plan([_move("ns", "t/x", "1", "2", 1)])), "move 0"),
        (json.dumps(_plan([_move("ns", "t", "1", "2", 0)])), "positive integer"),
        (json.dumps(_plan([_move("ns", "t", "1", "2", 1)] * 2)), "moved twice"),
    ],
)
def test_a_bad_plan_is_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(PlanError, match=message):
        read_plan(path)
    result = CliRunner().invoke(
        app, ["rebalance", "apply", str(path), "--store", f"sqlite://{tmp_path / 'm.db'}"]
    )
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "m.db").exists()  # the plan is read before the store is opened


def test_a_plan_never_applies_to_a_missing_store_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_plan([_move("ns", "t", "1", "2", 1)])))
    missing = tmp_path / "nested" / "m.db"
    for extra in ([], ["--execute"]):
        result = CliRunner().invoke(
            app, ["rebalance", "apply", str(path), "--store", f"sqlite://{missing}", *extra]
        )
        assert result.exit_code == 1, result.output
        assert f"no store at {missing}" in result.stderr and "Traceback" not in result.output
        assert not missing.parent.exists()  # nothing made, not even its folder


def test_a_missing_plan_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot read the plan"):
        read_plan(tmp_path / "absent.json")


def test_u64_broker_ids_survive_the_plan() -> None:
    big = str(2**64 - 1)
    plan = parse_plan(_plan([_move("ns", "t", big, "13940288943180594845", 7)]))
    assert plan.moves[0].source == 2**64 - 1
    assert plan.moves[0].target == 13940288943180594845
