"""A broker node of the cluster tests, as a process: `python tests/cluster/worker.py node URL
BROKER_ID [workload]`. It says "ready" once started; SIGTERM stops it cleanly."""

from __future__ import annotations

import asyncio
import signal
import sys

from metaplane.cluster import LoadManagerConfig, Node, NodeSettings, Ranking
from metaplane.store import connect_store

FAST = LoadManagerConfig(ranking=Ranking.FAIR, idle_every=0.1, rebalance_every=0.2)


async def node(url: str, broker_id: str, workload: str = "") -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    settings = NodeSettings(
        int(broker_id),
        int(broker_id),
        workload=workload == "workload",
        session_ttl=2,
        load_report_interval=0.5,
        load_manager=FAST,
    )
    async with await connect_store(url) as store:
        running = Node(store, settings)
        await running.start()
        print("ready", flush=True)
        await stop.wait()
        await running.stop()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run({"node": node}[command](*args))
