"""A node of the election tests, as a process: `python tests/coordination/worker.py lead URL
NODE TTL`. It says what happens on stdout, one line each, with CLOCK_MONOTONIC nanoseconds
(one clock for every process): ready, elected EPOCH, demoted, wrote REVISION EPOCH, fenced.
While it believes it leads it writes through the fenced transaction every 20 ms."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from metaplane.coordination import LeaderElection, LeaderToken, Session
from metaplane.resources import Change
from metaplane.store import Fenced, MetadataError, Put, connect_store


def say(*words: object) -> None:
    print(*words, time.monotonic_ns(), flush=True)


async def lead(url: str, node: str, ttl: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with await connect_store(url) as store:
        session = await Session(store, ttl=int(ttl)).start()
        election = LeaderElection(session, int(node))

        def told(token: LeaderToken | None) -> None:
            if token is None:
                say("demoted")
            else:
                say("elected", token.epoch)

        election.listen(told)
        await election.start()
        say("ready")
        writing = asyncio.create_task(write_while_leading(election, int(node)))
        await stop.wait()
        writing.cancel()
        await election.stop(resign=True)
        await session.close()


async def write_while_leading(election: LeaderElection, node: int) -> None:
    held: LeaderToken | None = None
    sequence = 0
    while True:
        held = election.token or held  # after a pause, the last token we believed in
        if held is not None:
            try:
                key = f"/test/writes/{node}-{sequence:06d}"
                write = Change((), (Put(key, f"{node}:{held.epoch}".encode()),))
                revision = await election.apply(write)
                say("wrote", revision, held.epoch)
                sequence += 1
            except Fenced:
                say("fenced")
                held = None
            except MetadataError as error:
                say("error", type(error).__name__)
        await asyncio.sleep(0.02)  # the pace of this node's work, not a synchronisation


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run({"lead": lead}[command](*args))
