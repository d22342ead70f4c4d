"""Child processes for the multi-process registry test, run as
`python tests/schema/worker.py register URL PROCESS COUNT SUBJECT…`. Each says what it did on
stdout, one line per step, flushed, so that the parent waits for the event, not for time."""

from __future__ import annotations

import asyncio
import json
import sys

from metaplane.schema import SchemaRegistry
from metaplane.store import connect_store


def document(process: int, index: int) -> str:
    """An Avro record of its own: one field with a default, so every version stays
    backward-compatible with the one before it, whoever registered that one."""
    field = {"name": f"f_{process}_{index}", "type": "string", "default": ""}
    return json.dumps({"type": "record", "name": "Load", "fields": [field]})


async def register(url: str, process: str, count: str, *subjects: str) -> None:
    """Say "ready", wait for a line on stdin, then register `count` schemas round-robin into
    `subjects` (starting at the process's own), saying `registered SUBJECT VERSION ID
    FINGERPRINT CREATED` for each."""
    async with await connect_store(url) as store:
        registry = SchemaRegistry(store)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for index in range(int(count)):
            subject = subjects[(index + int(process)) % len(subjects)]
            done = await registry.register(subject, "Avro", document(int(process), index))
            version = done.version
            print(
                f"registered {subject} {version.version} {done.schema_id} "
                f"{version.fingerprint} {done.created}",
                flush=True,
            )
        print(f"done {registry.conflicts}", flush=True)


COMMANDS = {"register": register}

if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run(COMMANDS[command](*args))
