"""The store contract as a template base class.

`MetadataStore` does what every backend must do — validate keys, values and transactions,
turn expectations into compares and failed compares into typed errors — and calls a small
set of backend methods (`_get`, `_list`, `_put`, `_txn`, `_watch`, the lease methods).
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Self

from metaplane.store._errors import AlreadyExists, BadVersion, InvalidRequest, NotFound
from metaplane.store._keys import check_key, check_prefix, child_segment, covering
from metaplane.store._lease import KeepAliveState, LeaseKeeper
from metaplane.store._model import (
    ABSENT,
    ANY,
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Expect,
    Expectation,
    Get,
    Lease,
    List,
    Listing,
    Operation,
    Put,
    Txn,
    TxnResult,
    WatchBatch,
    check_expectation,
    check_int,
    check_revision,
    lease_id,
)

MAX_LEASE_TTL = 9_000_000_000
"""etcd's own limit on a lease's TTL, in seconds (its MaxLeaseTTL)."""

SCAN_PAGE = 10_000
"""Keys a scan hands out at a time unless told otherwise: a page of the layout's keys is a
few megabytes, whatever the size of the store."""


class Watch(abc.ABC, AsyncIterator[WatchBatch]):
    """An async iterator of the changes under a prefix, one batch per revision, in strictly
    increasing revision order: never a batch at or below one already returned. It raises
    `Compacted` when the history it needs is gone and `Unavailable` when the store cannot be
    reached; the caller resumes from the last revision it saw + 1, or resyncs."""

    def __init__(self, prefix: str, start_revision: int | None) -> None:
        self.prefix = prefix
        self.start_revision = start_revision

    def __aiter__(self) -> Self:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> WatchBatch: ...

    @abc.abstractmethod
    def request_progress(self) -> None:
        """Ask for a batch without events once the watch has caught up with the store.

        The batch at revision P means: every change under the prefix up to P has been
        returned before it. It comes once, after any batch still pending, and only at a
        revision above the last batch returned (on a store that has not moved since, it
        comes when the store moves)."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Scan(AsyncIterator[Listing]):
    """The pages of a scan (`MetadataStore.scan`): `Listing`s in key order, every one read
    at the same revision, the last one with `more` False. `revision` is that revision once
    the first page is out. Close it (or use it as an async context manager) to release what
    the backend holds for it when it is left before its end."""

    def __init__(self, pages: AsyncGenerator[Listing, None]) -> None:
        self._pages = pages  # a backend's pages, some perhaps empty, `more` not set
        self._ahead: Listing | None = None
        self._started = False
        self._finished = False
        self._last_revision: int | None = None
        self.revision: int | None = None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Listing:
        if self._finished:
            raise StopAsyncIteration
        if not self._started:
            self._started = True
            self._ahead = await self._pull()
        current = self._ahead
        if current is None:  # nothing at all: one empty page says at which revision
            self._finished = True
            assert self._last_revision is not None
            self.revision = self._last_revision
            return Listing((), self._last_revision, False)
        self._ahead = await self._pull()
        self._finished = self._ahead is None
        self.revision = current.revision
        return Listing(current.entries, current.revision, self._ahead is not None)

    async def _pull(self) -> Listing | None:
        """The backend's next page that holds keys, or None at its end."""
        async for listing in self._pages:
            self._last_revision = listing.revision
            if listing.entries:
                return listing
        return None

    async def aclose(self) -> None:
        await self._pages.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class PrefixWatch(abc.ABC, AsyncIterator[WatchBatch]):
    """One watch over a set of prefixes that changes while it runs
    (`MetadataStore.watch_prefixes`).

    It yields `WatchBatch`es in strictly increasing revision order, never one at or below a
    batch already returned. A batch at revision X holds every event of X under the prefixes
    the watch follows at X: a prefix given to the constructor is followed from its
    `start_revision`, one added by `add` from the revision after the one `add` returned,
    and none after `remove` returned. A batch without events is a progress batch (asked
    for by `request_progress`): every change under the prefixes up to its revision came
    before it.

    It raises `Compacted` when the history it needs is gone, and its subclass `OrderLost`
    when the store delivered an event it cannot place in order any more (etcd, see
    docs/store.md): the caller then resyncs (reads its prefixes again at a new revision
    and diffs). `Unavailable` when the store cannot be reached: the caller resumes with a
    new watch from the last revision it saw + 1, or resyncs.
    """

    @property
    @abc.abstractmethod
    def prefixes(self) -> frozenset[str]:
        """The prefixes followed now."""

    @abc.abstractmethod
    async def add(self, prefixes: Iterable[str]) -> int:
        """Follow `prefixes` too, and return a revision R: from now on the watch delivers
        every event under them with a revision above R, and none at or below R.

        To miss nothing and get nothing twice, read the prefixes at R and apply what the
        watch delivers after. R may be ahead of the batches handed out so far: the watch
        still has to deliver the other prefixes' events up to R, so hold the read back
        (do not count it as applied) until the watch has passed R — a batch or a progress
        batch at or above R. Prefixes followed already are left as they are; R holds for
        the others. memory and sqlite only update a dict (200,000 prefixes in a few tenths
        of a second); etcd creates one watcher per prefix, about a millisecond of its CPU
        each on 3.4, and then waits for a progress notification to show them synced (see
        docs/store.md).
        """

    async def add_and_read(self, prefixes: Iterable[str]) -> tuple[int, list[Entry], int]:
        """On a store without history (`MetadataStore.keeps_history` False: ZooKeeper),
        where no read can be pinned at the R that `add` returns: follow `prefixes` too and
        read them through the watch, "follow, then read". Returns (R, entries, ready): the
        watch delivers every change under them after R that the entries do not show; each
        entry is its key as read at some revision in (R, ready]. Take, for each key, the
        newer of its entry and of the events the watch delivers after R (by revision); the
        result is exact once the watch has passed `ready`. Stores with history: `add`,
        then read at R."""
        raise NotImplementedError("this store keeps history: add, then read at R")

    @abc.abstractmethod
    async def remove(self, prefixes: Iterable[str]) -> None:
        """Stop following `prefixes`: once this returns, no event under them is handed out
        (unless another prefix followed still covers it). Unknown prefixes are ignored."""

    @abc.abstractmethod
    def request_progress(self) -> None:
        """Ask for a progress batch once the watch has caught up: it comes once, after any
        batch still pending, at a revision above the last batch returned (on a store that
        has not moved since, when it moves)."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    def __aiter__(self) -> Self:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> WatchBatch: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class MetadataStore(abc.ABC):
    """The metadata store: versioned keys, transactions, leases and watches.

    Every write returns the store revision it committed at. Use it as an async context
    manager, or call `aclose()`.
    """

    url: str = ""

    keeps_history: bool = True
    """Whether reads and watches can start at a past revision (within what compaction
    kept). False on ZooKeeper: a reader that must not miss a change follows first, then
    reads (`PrefixWatch.add_and_read`)."""

    # -- reads -------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        """The entry of `key`, or None."""
        return await self._get(check_key(key))

    async def list(
        self,
        prefix: str,
        *,
        revision: int | None = None,
        keys_only: bool = False,
        limit: int | None = None,
        start_after: str | None = None,
        end_before: str | None = None,
        reverse: bool = False,
    ) -> Listing:
        """The key `prefix` and every key under it, in key order, read at one revision.

        `revision` reads the past (`Compacted` if it is gone); `limit` and `start_after` page
        through a large prefix (`Listing.more` says whether more follow); `end_before` and
        `reverse` (descending order) make a floor look-up: the last key before K is
        `list(prefix, end_before=K, reverse=True, limit=1)`.
        """
        op = List(prefix, keys_only, limit, start_after, end_before, reverse)
        if revision is not None:
            check_revision(revision)
        return await self._list(op, revision)

    async def children(self, path: str) -> builtins.list[str]:
        """The distinct segments right below `path`, sorted."""
        listing = await self._list(List(path, keys_only=True), None)
        segments = {child_segment(entry.key, path) for entry in listing}
        segments.discard(None)
        return sorted(segment for segment in segments if segment is not None)

    async def revision(self) -> int:
        """The store's current revision."""
        return await self._revision()

    def scan(
        self,
        prefixes: str | Iterable[str],
        *,
        revision: int | None = None,
        page: int = SCAN_PAGE,
        keys_only: bool = False,
    ) -> Scan:
        """Every key of one or several prefixes, read at one revision, as pages of at most
        `page` keys in key order — a linear read of any size, whatever writes meanwhile.

            async with store.scan("/topics") as pages:
                async for page in pages:
                    ...  # page.revision is the same on every page

        `revision` pins the read (default: the store's revision when the scan starts; the
        first page's `revision` says which). Prefixes covered by another one given are read
        once. `Compacted` when the revision is compacted before the scan could read it
        (sqlite and memory read one snapshot and finish; etcd raises on the next page), at
        a revision in the future `InvalidRequest`. Each backend reads in its own way: see
        docs/store.md.
        """
        given = (prefixes,) if isinstance(prefixes, str) else tuple(prefixes)
        if not given:
            raise InvalidRequest("a scan needs at least one prefix")
        wanted = covering(check_prefix(prefix) for prefix in given)
        if revision is not None:
            check_revision(revision)
        check_int(page, "page", 1)
        return Scan(self._scan(wanted, revision, page, keys_only))

    # -- writes ------------------------------------------------------------------------

    async def put(
        self,
        key: str,
        value: bytes,
        *,
        expect: Expectation = ANY,
        lease: Lease | int | None = None,
    ) -> int:
        """Write `value` at `key` if `expect` holds; return the revision of the write.

        `expect` is ANY, ABSENT (else `AlreadyExists`) or the key's current version (else
        `BadVersion`, or `NotFound` when the key is missing).
        """
        op = Put(key, value, lease_id(lease))
        expect = check_expectation(expect)
        if expect is ANY:
            return await self._put(op)
        result = await self._txn(Txn((_expectation(key, expect),), (op,), (Get(key),)))
        if not result.succeeded:
            raise _failed_expectation(key, expect, result.entry(0))
        return result.revision

    async def delete(self, key: str, *, expect: Expectation = ANY) -> int:
        """Delete `key` if `expect` holds; return the store revision after the delete.

        Deleting a missing key with expect=ANY is not an error and changes nothing.
        """
        op = Delete(key)
        expect = check_expectation(expect)
        if expect is ANY:
            return (await self._txn(Txn((), (op,), ()))).revision
        result = await self._txn(Txn((_expectation(key, expect),), (op,), (Get(key),)))
        if not result.succeeded:
            raise _failed_expectation(key, expect, result.entry(0))
        return result.revision

    async def delete_prefix(self, prefix: str) -> int:
        """Delete `prefix` and every key under it in one revision; return how many."""
        result = await self._txn(Txn((), (DeletePrefix(prefix),), ()))
        return result.count(0)

    async def txn(
        self,
        compares: Iterable[Compare] = (),
        on_success: Iterable[Operation] = (),
        on_failure: Iterable[Operation] = (),
    ) -> TxnResult:
        """If every compare holds, run `on_success`, else `on_failure`: all or nothing, at
        one revision. At most 128 operations a branch (`TxnTooLarge`)."""
        return await self._txn(Txn(tuple(compares), tuple(on_success), tuple(on_failure)))

    async def execute(self, txn: Txn) -> TxnResult:
        """Run a transaction built beforehand."""
        return await self._txn(txn)

    async def compact(self, revision: int) -> None:
        """Forget the history before `revision`: reads and watches of it raise `Compacted`.

        As etcd: compacting at or below the last compaction raises `Compacted` (with that
        compaction's revision), a revision above the current one `InvalidRequest`."""
        await self._compact(check_revision(revision))

    # -- leases ------------------------------------------------------------------------

    async def grant(self, ttl: int) -> Lease:
        """A new lease of `ttl` seconds."""
        return await self._grant(check_int(ttl, "a lease TTL in seconds", 1, MAX_LEASE_TTL))

    async def refresh(self, lease: Lease | int, *, timeout: float | None = None) -> int:
        """Renew a lease once; return its TTL. `LeaseNotFound` once it is gone; `Unavailable`
        when no member answered within `timeout` seconds (default: the store's deadline)."""
        if timeout is not None and (
            type(timeout) not in (int, float) or not 0 < timeout < float("inf")
        ):
            raise InvalidRequest(f"timeout must be a positive number of seconds, not {timeout!r}")
        return await self._refresh(lease_id(lease), timeout)

    async def revoke(self, lease: Lease | int) -> None:
        """Revoke a lease: its keys are deleted, in one revision. `LeaseNotFound` if gone."""
        await self._revoke(lease_id(lease))

    def keep_alive(
        self,
        lease: Lease,
        on_state: Callable[[KeepAliveState], None] | None = None,
    ) -> LeaseKeeper:
        """A keep-alive loop for `lease`, run as an async context manager."""
        return LeaseKeeper(lambda held, within: self.refresh(held, timeout=within), lease, on_state)

    # -- watch -------------------------------------------------------------------------

    def watch(self, prefix: str, *, start_revision: int | None = None) -> Watch:
        """The changes under `prefix` from `start_revision` (default: from now on).

        To miss nothing after a read at revision R, watch from R + 1.
        """
        check_prefix(prefix)
        if start_revision is not None:
            check_revision(start_revision, "start_revision")
        return self._watch(prefix, start_revision)

    def watch_prefixes(
        self, prefixes: Iterable[str] = (), *, start_revision: int | None = None
    ) -> PrefixWatch:
        """One watch over a set of prefixes, changed while it runs by `add` and `remove`:
        the changes under `prefixes` from `start_revision`, and of every prefix added later
        after the revision `add` returns. Without `start_revision` it starts "now": when it
        is created on memory and sqlite, when it first reads or adds on etcd — pass one, or
        start empty and `add`, to know where. On etcd its traffic grows with the changes
        under the prefixes, not with the store's. See `PrefixWatch` for the contract.
        """
        wanted = frozenset(check_prefix(prefix) for prefix in prefixes)
        if start_revision is not None:
            check_revision(start_revision, "start_revision")
        return self._watch_prefixes(wanted, start_revision)

    # -- life cycle --------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # -- what a backend implements -----------------------------------------------------

    @abc.abstractmethod
    async def _get(self, key: str) -> Entry | None: ...

    @abc.abstractmethod
    async def _list(self, op: List, revision: int | None) -> Listing: ...

    @abc.abstractmethod
    async def _put(self, op: Put) -> int: ...

    @abc.abstractmethod
    async def _txn(self, txn: Txn) -> TxnResult: ...

    @abc.abstractmethod
    async def _revision(self) -> int: ...

    @abc.abstractmethod
    async def _compact(self, revision: int) -> None: ...

    @abc.abstractmethod
    async def _grant(self, ttl: int) -> Lease: ...

    @abc.abstractmethod
    async def _refresh(self, lease: int, timeout: float | None) -> int: ...

    @abc.abstractmethod
    async def _revoke(self, lease: int) -> None: ...

    @abc.abstractmethod
    def _watch(self, prefix: str, start_revision: int | None) -> Watch: ...

    def _watch_prefixes(self, prefixes: frozenset[str], start_revision: int | None) -> PrefixWatch:
        raise NotImplementedError(f"{type(self).__name__} cannot watch a set of prefixes")

    async def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        """Pages of `prefixes` (sorted, none covering another) at one revision. This one
        pages with `list` (a backend reads better in its own way; a wrapper store gets it
        right whatever it wraps)."""
        pinned = revision
        for prefix in prefixes:
            after: str | None = None
            while True:
                listing = await self._list(List(prefix, keys_only, page, after), pinned)
                pinned = listing.revision
                yield listing
                if not listing.more or not listing.entries:
                    break
                after = listing.entries[-1].key

    @abc.abstractmethod
    async def _close(self) -> None: ...


def _expectation(key: str, expect: Expect | int) -> Compare:
    if expect is ABSENT:
        return Compare.absent(key)
    assert isinstance(expect, int)
    return Compare.version(key, "==", expect)


def _failed_expectation(key: str, expect: Expect | int, entry: Entry | None) -> Exception:
    if expect is ABSENT:
        return AlreadyExists(key)
    assert isinstance(expect, int)
    if entry is None:
        return NotFound(key, f"{key}: not found (expected version {expect})")
    return BadVersion(key, expect, entry.version)
