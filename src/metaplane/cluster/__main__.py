"""`python -m metaplane.cluster --store URL --broker-id ID [--workload]`: one broker node
process (what `metaplane standalone` starts). It prints "ready" once it has joined, and stops
cleanly on SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from metaplane.cluster._journal import NO_JOURNAL, FileJournal, Journal
from metaplane.cluster._load_manager import LoadManagerConfig
from metaplane.cluster._node import NodeSettings, run_node
from metaplane.cluster._rankings import Ranking
from metaplane.store import MetadataStore


def ready() -> None:
    sys.stdout.write("ready\n")  # the parent process waits for this line
    sys.stdout.flush()


def load_manager_config(ranking: str | None, rebalance_every: float | None) -> LoadManagerConfig:
    config = LoadManagerConfig()
    if ranking is not None:
        config = replace(config, ranking=Ranking(ranking))
    if rebalance_every is not None:
        config = replace(config, rebalance_every=rebalance_every)
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--workload", action="store_true")
    parser.add_argument("--session-ttl", type=int, default=5)
    parser.add_argument("--rate", type=float, default=20.0, help="messages/s a topic publishes")
    # For tests: a journal of what the node does, and faults read from a control file.
    parser.add_argument("--journal", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--faults", type=Path, help=argparse.SUPPRESS)
    # For benchmarks (scale_sim): the LoadManager's ranking and rebalancing period.
    parser.add_argument("--ranking", choices=[r.value for r in Ranking], help=argparse.SUPPRESS)
    parser.add_argument("--rebalance-every", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s broker {args.broker_id} %(name)s %(levelname)s %(message)s",
    )
    settings = NodeSettings(
        args.broker_id,
        args.index,
        workload=args.workload,
        session_ttl=args.session_ttl,
        load_report_interval=1.0,
        rate=args.rate,
        endpoints=True,
        load_manager=load_manager_config(args.ranking, args.rebalance_every),
    )
    journal: Journal = NO_JOURNAL
    if args.journal is not None:
        journal = FileJournal(args.journal, args.broker_id)
    wrap: Callable[[MetadataStore], MetadataStore] | None = None
    if args.faults is not None:
        from metaplane.testing import FaultyStore

        control = args.faults
        wrap = lambda store: FaultyStore(store, control=control)  # noqa: E731
    asyncio.run(run_node(args.store, settings, on_ready=ready, journal=journal, wrap=wrap))


if __name__ == "__main__":
    main()
