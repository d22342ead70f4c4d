"""The sqlite backend's writer thread: a lease refresh is not queued behind bulk writes (a
burst of topic creations had held refreshes past their deadline and suspended every
session of the process)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from metaplane.store._sqlite import _Writer


async def test_an_urgent_job_runs_before_every_job_queued_ahead_of_it(tmp_path: Path) -> None:
    """Invariant: the order the writer ran the jobs in has the urgent one right after the
    job that was running when it came, before the ten queued earlier."""
    ran: list[str] = []
    running, release = threading.Event(), threading.Event()
    writer = _Writer(str(tmp_path / "store.db"), "normal", lambda: None)
    writer.start()

    def blocking(conn: sqlite3.Connection) -> None:
        running.set()
        release.wait()
        ran.append("blocking")

    def job(name: str) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: ran.append(name)

    try:
        first = writer.submit(blocking)
        await asyncio.to_thread(running.wait)
        queued = [writer.submit(job(f"bulk {i}")) for i in range(10)]
        urgent = writer.submit(job("refresh"), urgent=True)
        release.set()
        await asyncio.gather(first, urgent, *queued)
    finally:
        release.set()
        writer.stop()
        await asyncio.to_thread(writer.join)
    assert ran == ["blocking", "refresh"] + [f"bulk {i}" for i in range(10)]
