"""Child processes for the multi-process store tests, run as
`python tests/store/worker.py COMMAND URL …`. Each says what it did on stdout, one line per
step, flushed, so that the parent waits for the event rather than for time."""

from __future__ import annotations

import asyncio
import sys

from metaplane.store import (
    ABSENT,
    AlreadyExists,
    BadVersion,
    MetadataStore,
    NotFound,
    connect_store,
)


async def cas_increment(store: MetadataStore, key: str) -> None:
    """Add 1 to the counter at `key` with compare-and-set, retrying on conflict."""
    while True:
        entry = await store.get(key)
        try:
            if entry is None:
                await store.put(key, b"1", expect=ABSENT)
            else:
                await store.put(key, b"%d" % (int(entry.value) + 1), expect=entry.version)
            return
        except (AlreadyExists, BadVersion, NotFound):
            continue


async def hold_lease(url: str, key: str, ttl: str) -> None:
    """Put `key` under a new lease, say "ready", then keep the lease alive until killed."""
    async with await connect_store(url) as store:
        lease = await store.grant(int(ttl))
        await store.put(key, b"held", lease=lease)
        async with store.keep_alive(lease):
            print("ready", flush=True)
            await asyncio.Event().wait()


async def increment(url: str, key: str, times: str) -> None:
    """Say "ready", wait for a line on stdin, then increment `key` `times` times."""
    async with await connect_store(url) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for _ in range(int(times)):
            await cas_increment(store, key)
        print("done", flush=True)


async def write_sequence(url: str, prefix: str) -> None:
    """Write prefix/00000000, prefix/00000001, … until killed, printing each key once its
    write is acknowledged."""
    async with await connect_store(url) as store:
        index = 0
        while True:
            key = f"{prefix}/{index:08d}"
            await store.put(key, key.encode())
            print(key, flush=True)
            index += 1


COMMANDS = {
    "hold-lease": hold_lease,
    "increment": increment,
    "write-sequence": write_sequence,
}

if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run(COMMANDS[command](*args))  # type: ignore[operator]
