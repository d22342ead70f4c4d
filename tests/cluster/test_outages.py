"""A store away for 30 s — hung (every etcd member paused; sqlite: another process holding
the write lock) or down (every etcd member stopped, then started again) — is ridden out by
broker processes under traffic: sessions suspended, leadership given up, then resumed; no
process exits; afterwards every topic is on one live broker and the chaos checker's
invariants hold (no fenced write by a non-owner, no cursor lost, no offset used twice).
`metaplane standalone` rides out a hung etcd and a hung ZooKeeper (the chaos checker replays
the store's history, which ZooKeeper does not keep: the broker processes' runs are on sqlite
and etcd)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from metaplane import layout
from metaplane.store import MetadataStore, Unavailable, connect_store
from metaplane.testing import EtcdMember, ZooKeeperServer
from metaplane.testing.chaos import Settings, hold_write_lock, run_chaos

OUTAGE = 30.0


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize(
    ("kind", "outage"), [("sqlite", "hang"), ("etcd", "hang"), ("etcd", "down")]
)
async def test_brokers_ride_out_a_store_outage(kind: str, outage: str, tmp_path: Path) -> None:
    report = await run_chaos(
        Settings(
            backend=kind,
            seconds=OUTAGE + 20,
            seed=11,
            folder=tmp_path,
            outage=outage,
            outage_seconds=OUTAGE,
        )
    )
    assert report.ok, report.table()
    assert report.faults == {f"store-{outage}-30s": 1}
    assert report.checked["brokers-at-the-end"] == 3
    sessions = "\n".join(path.read_text() for path in (tmp_path / "logs").glob("broker-*.log"))
    assert "suspended" in sessions  # they noticed, and went on


METAPLANE = [sys.executable, "-c", "from metaplane.admin.cli import main; main()"]


async def announced(process: asyncio.subprocess.Process) -> str:
    """What `metaplane standalone` printed until it announced its dashboard: the brokers
    started, the admin server's cache loaded (registrations alone come before that)."""
    assert process.stdout is not None
    lines = []
    while not (lines and lines[-1].startswith("dashboard: ")):
        line = await process.stdout.readline()
        assert line, "standalone ended before announcing its dashboard"
        lines.append(line.decode())
    return "".join(lines)


async def registered(store: MetadataStore, count: int, since: int = 0) -> None:
    """Until `count` brokers are registered under leases granted after revision `since`."""
    while True:
        try:
            listing = await store.list(layout.registrations_prefix())
            if sum(entry.create_revision > since for entry in listing) >= count:
                return
        except Unavailable:
            pass
        await asyncio.sleep(0.2)  # polling with the caller's deadline: nothing to await


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["etcd", "zk"])
async def test_standalone_rides_out_a_hung_store(kind: str, tmp_path: Path) -> None:
    """`metaplane standalone` on an etcd or a ZooKeeper that hangs for 30 s (past every
    session's timeout: on ZooKeeper the server expires them all once it runs again): the
    command and its brokers stay up, the brokers register again, and Ctrl-C still stops them
    cleanly."""
    with contextlib.ExitStack() as servers:
        server: EtcdMember | ZooKeeperServer
        if kind == "etcd":
            server = servers.enter_context(EtcdMember(tmp_path / "etcd"))
            url = server.url
        else:
            server = servers.enter_context(ZooKeeperServer(tmp_path / "zookeeper"))
            url = f"zk://{server.hosts}/metaplane"
        process = await asyncio.create_subprocess_exec(
            *METAPLANE,
            "standalone",
            "--brokers",
            "3",
            "--workload",
            "--store",
            url,
            "--folder",
            str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "COLUMNS": "100"},
        )
        failed: BaseException | None = None
        told: list[str] = []
        async with await connect_store(url) as store:
            try:
                async with asyncio.timeout(60):
                    await registered(store, 3)
                    told.append(await announced(process))  # up: the outage is while it runs
                before = await store.revision()
                server.pause()
                try:
                    await asyncio.sleep(OUTAGE)  # the outage itself: nothing to wait for
                finally:
                    server.resume()
                assert process.returncode is None  # still running
                async with asyncio.timeout(60):
                    await registered(store, 3, since=before)
                assert process.returncode is None
            except (AssertionError, TimeoutError) as error:
                failed = error
            finally:
                process.send_signal(signal.SIGINT)
                async with asyncio.timeout(90):
                    out, err = await process.communicate()
        said = f"{''.join(told)}{out.decode()[-2000:]}\n{err.decode()[-3000:]}"
        assert failed is None, f"{failed!r}; the command said:\n{said}"
        assert process.returncode == 0, said
        assert "cluster stopped" in out.decode()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_demo_rides_out_its_store_locked_for_30_s(tmp_path: Path) -> None:
    """`metaplane demo` (without its Spark step) while another process holds its SQLite
    store's write lock for 30 s in the middle of the story: it tells the rest of the story
    and exits 0."""
    database = tmp_path / "demo.db"
    demo = await asyncio.create_subprocess_exec(
        *METAPLANE,
        "demo",
        "--no-analyze",
        "--store",
        f"sqlite://{database}",
        "--folder",
        str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert demo.stdout is not None
    told: list[str] = []
    locked: asyncio.Task[None] | None = None
    async with asyncio.timeout(240):
        async for line in demo.stdout:
            told.append(line.decode())
            if locked is None and "3. traffic" in told[-1]:
                locked = asyncio.create_task(hold_write_lock(database, OUTAGE))
        code = await demo.wait()
    assert locked is not None and locked.done() and locked.exception() is None
    story = "".join(told)
    assert code == 0, story[-3000:]
    assert "no offset used twice" in story and "8. stop" in story
