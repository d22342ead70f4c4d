"""The store contract as a template base class.

`MetadataStore` does what every backend must do — validate keys, values and transactions,
turn expectations into compares and failed compares into typed errors — and calls a small
set of backend methods (`_get`, `_list`, `_put`, `_txn`, `_watch`, the lease methods).
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Self

from metaplane.store._errors import AlreadyExists, BadVersion, InvalidRequest, NotFound
from metaplane.store._keys import check_key, check_prefix, child_segment
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


class MetadataStore(abc.ABC):
    """The metadata store: versioned keys, transactions, leases and watches.

    Every write returns the store revision it committed at. Use it as an async context
    manager, or call `aclose()`.
    """

    url: str = ""

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
