"""Conformance: every integer the contract passes to a backend as a number fits etcd's int64
(versions, revisions, lease ids, compare operands, limits; a TTL fits etcd's own lease
limit). One above is refused with `InvalidRequest` naming the bound, before any backend sees
it, and the store is unchanged; the bound itself reaches every backend and is answered
alike."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from metaplane.store import (
    BadVersion,
    Compare,
    InvalidRequest,
    Lease,
    LeaseNotFound,
    MetadataStore,
    Put,
    connect_store,
)

LARGEST = 9_223_372_036_854_775_807  # 2**63 - 1, etcd's int64: as a literal on purpose
TOO_BIG = LARGEST + 1
LONGEST_TTL = 9_000_000_000  # etcd's MaxLeaseTTL, in seconds


def test_the_bound_is_etcds_int64() -> None:
    assert LARGEST == 2**63 - 1


ABOVE_INT64: dict[str, Callable[[MetadataStore], Awaitable[object]]] = {
    "put expect": lambda store: store.put("/b/k", b"w", expect=TOO_BIG),
    "delete expect": lambda store: store.delete("/b/k", expect=TOO_BIG),
    "put lease": lambda store: store.put("/b/k", b"w", lease=TOO_BIG),
    "put Lease": lambda store: store.put("/b/k", b"w", lease=Lease(TOO_BIG, 60)),
    "txn put lease": lambda store: store.txn([], [Put("/b/k", b"w", TOO_BIG)]),
    "list revision": lambda store: store.list("/b", revision=TOO_BIG),
    "list limit": lambda store: store.list("/b", limit=TOO_BIG),
    "compact": lambda store: store.compact(TOO_BIG),
    "refresh": lambda store: store.refresh(TOO_BIG),
    "revoke": lambda store: store.revoke(TOO_BIG),
    "version compare": lambda store: store.txn([Compare.version("/b/k", "==", TOO_BIG)]),
    "mod_revision compare": lambda store: store.txn([Compare.mod_revision("/b/k", "<", TOO_BIG)]),
    "create_revision compare": lambda store: store.txn(
        [Compare.create_revision("/b/k", ">", TOO_BIG)]
    ),
}


@pytest.mark.parametrize("operation", list(ABOVE_INT64))
async def test_numbers_above_int64_are_refused_before_any_backend(
    store: MetadataStore, operation: str
) -> None:
    await store.put("/b/k", b"v")
    before = await store.revision()
    with pytest.raises(InvalidRequest, match=str(LARGEST)):
        await ABOVE_INT64[operation](store)
    assert await store.revision() == before
    entry = await store.get("/b/k")
    assert entry is not None and entry.value == b"v"


async def test_watch_and_grant_refuse_their_bounds(store: MetadataStore) -> None:
    with pytest.raises(InvalidRequest, match=str(LARGEST)):
        store.watch("/b", start_revision=TOO_BIG)
    for ttl in (LONGEST_TTL + 1, TOO_BIG):
        with pytest.raises(InvalidRequest, match=str(LONGEST_TTL)):
            await store.grant(ttl)


async def test_the_largest_int64_is_answered_alike_everywhere(store: MetadataStore) -> None:
    written = await store.put("/b/k", b"v")
    assert (await store.txn([Compare.mod_revision("/b/k", "<", LARGEST)])).succeeded
    assert not (await store.txn([Compare.version("/b/k", "==", LARGEST)])).succeeded
    assert not (await store.txn([Compare.create_revision("/b/k", ">", LARGEST)])).succeeded
    with pytest.raises(BadVersion):
        await store.put("/b/k", b"w", expect=LARGEST)
    with pytest.raises(BadVersion):
        await store.delete("/b/k", expect=LARGEST)
    listing = await store.list("/b", limit=LARGEST)
    assert (listing.keys(), listing.more) == (["/b/k"], False)
    for future in (lambda: store.list("/b", revision=LARGEST), lambda: store.compact(LARGEST)):
        with pytest.raises(InvalidRequest):
            await future()
    for lease_op in (
        lambda: store.put("/b/k", b"w", lease=LARGEST),
        lambda: store.refresh(LARGEST),
        lambda: store.revoke(LARGEST),
    ):
        with pytest.raises(LeaseNotFound):
            await lease_op()
    assert await store.revision() == written  # nothing refused wrote anything
    # The longest TTL is granted (a ZooKeeper lease is a session: its opening and closing
    # are transactions of their own, so the revision is not compared across them).
    longest = await store.grant(LONGEST_TTL)
    await store.revoke(longest)


@pytest.mark.backends("sqlite", "etcd", reason="a store the CLI's own process can open")
async def test_the_cli_says_so_in_one_line(store_url: str) -> None:
    """`metaplane kv put … --expect 2**63` used to print etcd's 68-line traceback."""
    async with await connect_store(store_url) as store:
        await store.put("/a/b", b"v")
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "metaplane.admin",
        "kv",
        "put",
        "/a/b",
        "v",
        "--expect",
        str(TOO_BIG),
        "--store",
        store_url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await cli.communicate()
    stdout, stderr = out.decode(), err.decode()
    assert cli.returncode == 1
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert str(LARGEST) in lines[0] and "Traceback" not in stderr
