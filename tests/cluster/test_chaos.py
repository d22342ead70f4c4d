"""Chaos: three broker processes with simulated traffic on sqlite and on a 3-member etcd,
topics created, deleted and moved, subscriptions re-created and brokers drained, while a
nemesis kills and pauses brokers (and etcd members) and injects transient errors and latency
into the running brokers' stores. The checker replays every journal against the store's
history (see `metaplane.testing.chaos` for the invariants). `make chaos` runs it longer."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaplane.testing.chaos import INVARIANTS, Settings, run_chaos

SECONDS = 60.0


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("kind", ["sqlite", "etcd"])
async def test_invariants_hold_under_chaos(kind: str, tmp_path: Path) -> None:
    report = await run_chaos(
        Settings(backend=kind, seconds=SECONDS, seed=20261125, folder=tmp_path)
    )
    assert report.ok, report.table()
    # The run did what it claims: every kind of operation, faults of several kinds, and a
    # checker that looked at real commits.
    assert {"create-topic", "move-topic", "delete-topic", "drain"} <= set(report.operations)
    assert len(report.faults) >= 3, report.table()
    assert sum(report.faults.values()) >= 8, report.table()
    for counted in ("acks", "fenced-commits", "hand-overs-with-cursors", "loads", "cursor-writes"):
        assert report.checked[counted] > 0, report.table()
    assert set(report.as_json()["violations"]) == set(INVARIANTS)
