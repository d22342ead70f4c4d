"""The rebalance plan written by `metaplane analyze`: planned by the cluster's own planner
(its quotas are tested in tests/cluster/test_rebalance.py), it balances and carries what
applying it needs (snapshot revision, current owner, the assignment key's mod_revision)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metaplane import layout
from metaplane.cluster._rankings import BrokerLoad
from metaplane.layout import TopicName
from metaplane.pipeline import REBALANCE_PLAN, AnalyzeSettings, InvalidSetting, read_snapshot
from metaplane.pipeline._rebalance import broker_load
from tests.pipeline.conftest import FaultsAnalysis


def test_the_pipeline_plans_with_the_clusters_load() -> None:
    row = {"broker_id": 2**64 - 1, "mode": "draining", "registered": True, "topics": 7}
    load = broker_load(row)  # type: ignore[arg-type]
    assert load == BrokerLoad(2**64 - 1, "draining", registered=True, counted=7)
    assert load.emptied and load.topic_count == 7


@pytest.mark.parametrize(
    "settings", [AnalyzeSettings(threshold=-0.1), AnalyzeSettings(max_moves=-1)]
)
def test_bad_settings_are_refused(settings: AnalyzeSettings) -> None:
    with pytest.raises(InvalidSetting, match="at least 0"):
        settings.check()


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
