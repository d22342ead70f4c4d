"""The rebalance plan: the quotas bring the spread under the threshold with greedy best moves
and empty the draining brokers; the plan written by `metaplane analyze` carries what applying
it needs (snapshot revision, current owner, the assignment key's mod_revision)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.pipeline import (
    REBALANCE_PLAN,
    Balance,
    BrokerLoad,
    InvalidSetting,
    plan_quotas,
    read_snapshot,
)
from tests.pipeline.conftest import FaultsAnalysis


def load(broker: int, topics: int, mode: str = "active", registered: bool = True) -> BrokerLoad:
    return BrokerLoad(broker, mode, registered, topics)


def test_balance_numbers() -> None:
    assert Balance.of([10, 10, 10]).cv == 0
    balance = Balance.of([0, 20])
    assert (balance.mean, balance.cv, balance.max_over_mean) == (10, 1.0, 2.0)
    assert Balance.of([]).cv == 0


def test_drain_empties_the_draining_broker_onto_the_lightest() -> None:
    quotas = plan_quotas([load(1, 10), load(2, 4), load(3, 6, "draining")], threshold=0.0)
    assert quotas.after[3] == 0
    assert quotas.after[1] + quotas.after[2] == 20
    assert {t.reason for t in quotas.transfers if t.source == 3} == {"drain"}


def test_unregistered_and_drained_brokers_receive_nothing() -> None:
    loads = [load(1, 30), load(2, 0, registered=False), load(3, 0, "drained"), load(4, 0)]
    quotas = plan_quotas(loads, threshold=0.05)
    assert quotas.after[2] == 0 and quotas.after[3] == 0
    assert quotas.after[1] == quotas.after[4] == 15


def test_max_moves_caps_balance_moves_only() -> None:
    quotas = plan_quotas([load(1, 100), load(2, 0), load(3, 7, "draining")], 0.0, max_moves=5)
    balance = sum(t.count for t in quotas.transfers if t.reason == "balance")
    assert balance == 5
    assert quotas.after[3] == 0
    assert any("max-moves" in note for note in quotas.notes)


def test_no_active_broker_means_no_plan() -> None:
    quotas = plan_quotas([load(1, 5, "draining")], 0.1)
    assert quotas.transfers == [] and quotas.notes


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InvalidSetting):
        plan_quotas([load(1, 1)], -0.1)
    with pytest.raises(InvalidSetting):
        plan_quotas([load(1, 1)], 0.1, max_moves=-1)


@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=12),
    st.lists(st.integers(0, 50), max_size=3),
    st.floats(0.0, 0.5),
)
def test_plan_reaches_the_threshold_or_the_best_spread(
    active: list[int], draining: list[int], threshold: float
) -> None:
    loads = [load(index, count) for index, count in enumerate(active)]
    loads += [load(100 + index, count, "draining") for index, count in enumerate(draining)]
    quotas = plan_quotas(loads, threshold)
    after = [quotas.after[index] for index in range(len(active))]
    assert sum(after) == sum(active) + sum(draining)
    assert all(quotas.after[100 + index] == 0 for index in range(len(draining)))
    assert Balance.of(after).cv <= threshold + 1e-9 or max(after) - min(after) <= 1
    # Few moves: never more than what taking every broker to the mean would need.
    drained = sum(draining)
    mean = sum(after) / len(after)
    balance_moves = quotas.moves - drained
    assert balance_moves <= sum(max(count - mean, 0) for count in active) + drained + 1


def test_written_plan_balances_and_carries_what_apply_needs(
    faults_analysis: FaultsAnalysis,
) -> None:
    plan = faults_analysis.json(REBALANCE_PLAN)
    snapshot = read_snapshot(faults_analysis.snapshot)
    assert plan["snapshot"]["revision"] == snapshot.revision
    assert plan["threshold_met"] and plan["balance_after"]["cv"] <= plan["threshold"]
    draining = {b["broker_id"] for b in plan["brokers"] if b["mode"] == "draining"}
    assert draining and all(b["after"] == 0 for b in plan["brokers"] if b["broker_id"] in draining)
    entries = {row["key"]: row for row in _rows(snapshot.paths)}
    assert plan["moves"]
    for move in plan["moves"]:
        topic = TopicName(move["namespace"], move["name"])
        assert move["assignment_key"] == layout.assignment(int(move["from"]), topic)
        assert move["target_key"] == layout.assignment(int(move["to"]), topic)
        assert entries[move["assignment_key"]]["mod_revision"] == move["assignment_mod_revision"]
        assert move["to"] not in draining
    ids = [int(b["broker_id"]) for b in plan["brokers"]]
    assert max(ids) >= 2**63  # u64 ids survive as strings


def _rows(paths: list[str]) -> list[dict[str, object]]:
    return pa.concat_tables([pq.read_table(path) for path in paths]).to_pylist()  # type: ignore[no-any-return]
