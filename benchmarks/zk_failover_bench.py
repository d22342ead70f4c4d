"""Fail-over of a ZooKeeper store when a member hangs (SIGSTOP): a 3-member ensemble (tick
500 ms, syncLimit 5: a follower notices its leader silent after 2.5 s), the store's session
6 s, its request deadline 2 s. Three scenarios, each set up exactly (a store is opened again
until its session is on the kind of member wanted):

- follower: the member the store talks to hangs, a follower;
- leader: the member the store talks to hangs, the ensemble's leader;
- leader elsewhere: the leader hangs while the store talks to a follower.

Timed from the pause, in the same round: the first write acknowledged after it through the
store (a put of a new key, sent again on `Unavailable`) and through two raw kazoo clients
beside it — one on the same member as the store (kazoo with the same session timeout and
reconnection back-off: it notices a hung member by its pings, after two thirds of that
timeout), one on the other members only (the ensemble's own recovery, as a client that
never meets the hung member sees it). The rounds
of the three scenarios alternate.

    .venv/bin/python benchmarks/zk_failover_bench.py [--rounds 5] [--out results.json]

Prints every round and the medians with their spread (lowest-highest), and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from rich.console import Console
from rich.table import Table

from metaplane.store import MetadataStore, Unavailable, ZooKeeperStore, connect_store
from metaplane.testing import ZooKeeperEnsemble, ZooKeeperMember

SESSION_TIMEOUT = 6.0
REQUEST_TIMEOUT = 2.0
GIVE_UP = 20.0
"""Seconds after the pause a writer stops waiting for an acknowledgement."""
SCENARIOS = ("follower", "leader", "leader elsewhere")
RETRY = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}
"""The raw clients' reconnection back-off: the store's (kazoo's default doubles up to an
hour, and would lag a recovery by its own sleep)."""


@dataclass
class Round:
    scenario: str
    round: int
    store_s: float | None
    kazoo_same_member_s: float | None
    kazoo_other_members_s: float | None


class RawWriter:
    """A raw kazoo client setting one znode over and over, in a thread of its own."""

    def __init__(self, hosts: str, *, randomize: bool) -> None:
        self.client = KazooClient(
            hosts=hosts,
            timeout=SESSION_TIMEOUT,
            randomize_hosts=randomize,
            connection_retry=RETRY,
        )
        self.path = f"/bench-zk-failover-{uuid.uuid4().hex}"
        self.acknowledged: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.client.start(30)
        self.client.ensure_path(self.path)

    def write_after(self, paused_at: float) -> None:
        """Start writing; `acknowledged` is the first acknowledgement after `paused_at`."""

        def run() -> None:
            while time.monotonic() < paused_at + GIVE_UP:
                try:
                    self.client.set_async(self.path, b"").get(timeout=REQUEST_TIMEOUT)
                except (KazooException, self.client.handler.timeout_exception):
                    time.sleep(0.01)  # a back-off: kazoo fails queued requests at once
                    continue
                self.acknowledged = time.monotonic() - paused_at
                return

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def finish(self) -> None:
        if self._thread is not None:
            self._thread.join(GIVE_UP + 5)
        self.client.stop()
        self.client.close()


async def store_on(
    ensemble: ZooKeeperEnsemble, wanted: str
) -> tuple[MetadataStore, ZooKeeperMember]:
    """A store whose session talks to a member in mode `wanted` (leader or follower)."""
    for _ in range(30):
        store = await connect_store(
            f"{ensemble.url}/bench-zk-failover?timeout={REQUEST_TIMEOUT}"
            f"&session_timeout={SESSION_TIMEOUT}"
        )
        assert isinstance(store, ZooKeeperStore)
        member = await asyncio.to_thread(ensemble.member_of_session, store._client.client_id[0])
        if await asyncio.to_thread(member.mode) == wanted:
            return store, member
        await store.aclose()
    raise RuntimeError(f"no store's session landed on a {wanted} in 30 tries")


async def one_round(ensemble: ZooKeeperEnsemble, scenario: str, index: int) -> Round:
    store, member = await store_on(ensemble, "follower" if scenario != "leader" else "leader")
    victim = member if scenario != "leader elsewhere" else ensemble.leader()
    others = [m for m in ensemble.members if m is not member]
    same = RawWriter(",".join(m.hosts for m in [member, *others]), randomize=False)
    survivors = [m for m in ensemble.members if m is not victim]
    spared = RawWriter(",".join(m.hosts for m in survivors), randomize=True)
    try:
        await asyncio.to_thread(same.start)
        await asyncio.to_thread(spared.start)
        await store.put("/warm", b"")
        ensemble.pause(victim)
        paused_at = time.monotonic()
        same.write_after(paused_at)
        spared.write_after(paused_at)
        store_s = None
        key = 0
        while time.monotonic() < paused_at + GIVE_UP:
            try:
                await store.put(f"/after/{index}/{key}", b"")
            except Unavailable:
                key += 1
                continue
            store_s = time.monotonic() - paused_at
            break
        await asyncio.to_thread(same.finish)
        await asyncio.to_thread(spared.finish)
    finally:
        ensemble.resume(victim)
        await store.aclose()
    await asyncio.to_thread(serving_again, ensemble)
    return Round(scenario, index, store_s, same.acknowledged, spared.acknowledged)


def serving_again(ensemble: ZooKeeperEnsemble, timeout: float = 60.0) -> None:
    """Every member serves again (a leader that was paused goes through an election)."""
    deadline = time.monotonic() + timeout
    ensemble.wait_serving()
    while any(m.mode() not in ("leader", "follower") for m in ensemble.members):
        if time.monotonic() > deadline:
            raise RuntimeError("the ensemble does not serve again")
        time.sleep(0.1)


def spread(values: list[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "—"
    lost = len(values) - len(seen)
    text = f"{statistics.median(seen):.2f} ({min(seen):.2f}–{max(seen):.2f})"
    return text + (f", {lost} gave up" if lost else "")


def render(rounds: list[Round], console: Console) -> dict[str, dict[str, str]]:
    every = Table(title="rounds: seconds from the pause to the first write acknowledged")
    for column in ("scenario", "round", "store", "kazoo, same member", "kazoo, other members"):
        every.add_column(column)
    for r in rounds:
        cells = (r.store_s, r.kazoo_same_member_s, r.kazoo_other_members_s)
        every.add_row(r.scenario, str(r.round), *("—" if c is None else f"{c:.2f}" for c in cells))
    console.print(every)
    medians = Table(title="medians (lowest–highest), seconds")
    for column in ("scenario", "store", "kazoo, same member", "kazoo, other members"):
        medians.add_column(column)
    summary: dict[str, dict[str, str]] = {}
    for scenario in SCENARIOS:
        of = [r for r in rounds if r.scenario == scenario]
        row = {
            "store": spread([r.store_s for r in of]),
            "kazoo_same_member": spread([r.kazoo_same_member_s for r in of]),
            "kazoo_other_members": spread([r.kazoo_other_members_s for r in of]),
        }
        summary[scenario] = row
        medians.add_row(scenario, *row.values())
    console.print(medians)
    return summary


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each scenario")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/zk_failover_bench.json")
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the fail-overs log warnings by design
    console = Console()
    rounds: list[Round] = []
    with (
        tempfile.TemporaryDirectory() as folder,
        ZooKeeperEnsemble(Path(folder) / "ensemble") as ensemble,
    ):
        await asyncio.to_thread(ensemble.wait_serving)
        for index in range(args.rounds):
            for scenario in SCENARIOS:
                done = await one_round(ensemble, scenario, index)
                console.print(f"round {index}, {scenario}: {done}")
                rounds.append(done)
    summary = render(rounds, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "zk_failover",
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count() or 0},
                "session_timeout_s": SESSION_TIMEOUT,
                "request_timeout_s": REQUEST_TIMEOUT,
                "rounds": [asdict(r) for r in rounds],
                "summary": summary,
            },
            indent=2,
        )
    )
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
