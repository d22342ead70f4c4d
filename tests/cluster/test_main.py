"""`python -m metaplane.cluster`: the LoadManager settings a benchmark gives a broker process."""

from __future__ import annotations

from metaplane.cluster import LoadManagerConfig, Ranking
from metaplane.cluster.__main__ import load_manager_config


def test_no_flag_keeps_the_defaults() -> None:
    assert load_manager_config(None, None) == LoadManagerConfig()


def test_ranking_and_rebalance_period_are_taken() -> None:
    config = load_manager_config("fair", 3600.0)
    assert (config.ranking, config.rebalance_every) == (Ranking.FAIR, 3600.0)
    assert config.batch_size == LoadManagerConfig().batch_size  # the rest as it was
