"""A store that wraps another and breaks on purpose: chosen operations fail on chosen paths,
watches break after some batches. For testing what stands on the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metaplane.store import (
    Entry,
    Lease,
    List,
    Listing,
    MetadataStore,
    Put,
    Txn,
    TxnResult,
    Unavailable,
    Watch,
    WatchBatch,
    in_prefix,
)

OPERATIONS = ("get", "list", "put", "txn", "revision", "grant", "refresh", "revoke", "watch")


@dataclass
class Fault:
    """Fail `operation` on keys under `prefix`, `times` times (None: until removed)."""

    operation: str
    prefix: str
    make_error: Callable[[], Exception]
    times: int | None = 1

    def applies(self, operation: str, key: str | None) -> bool:
        if operation != self.operation or self.times == 0:
            return False
        return key is None or in_prefix(key, self.prefix) or in_prefix(self.prefix, key)


class FaultyStore(MetadataStore):
    """Delegates to `inner`, except where a fault says otherwise."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.url = f"faulty+{inner.url}"
        self.faults: list[Fault] = []
        self._watch_breaks: list[int] = []

    def fail(
        self,
        operation: str,
        prefix: str = "/",
        *,
        error: Callable[[], Exception] = lambda: Unavailable("injected fault"),
        times: int | None = 1,
    ) -> Fault:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")
        fault = Fault(operation, prefix, error, times)
        self.faults.append(fault)
        return fault

    def break_watches_after(self, *batches: int) -> None:
        """The next watches opened break with `Unavailable` after so many batches each."""
        self._watch_breaks.extend(batches)

    def _check(self, operation: str, key: str | None = None) -> None:
        for fault in self.faults:
            if fault.applies(operation, key):
                if fault.times is not None:
                    fault.times -= 1
                raise fault.make_error()

    async def _get(self, key: str) -> Entry | None:
        self._check("get", key)
        return await self.inner._get(key)

    async def _list(self, op: List, revision: int | None) -> Listing:
        self._check("list", op.prefix)
        return await self.inner._list(op, revision)

    async def _put(self, op: Put) -> int:
        self._check("put", op.key)
        return await self.inner._put(op)

    async def _txn(self, txn: Txn) -> TxnResult:
        keys = [c.key for c in txn.compares] + [
            getattr(op, "key", getattr(op, "prefix", "/")) for op in txn.on_success
        ]
        for key in keys or ["/"]:
            self._check("txn", key)
        return await self.inner._txn(txn)

    async def _revision(self) -> int:
        self._check("revision")
        return await self.inner._revision()

    async def _compact(self, revision: int) -> None:
        await self.inner._compact(revision)

    async def _grant(self, ttl: int) -> Lease:
        self._check("grant")
        return await self.inner._grant(ttl)

    async def _refresh(self, lease: int) -> int:
        self._check("refresh")
        return await self.inner._refresh(lease)

    async def _revoke(self, lease: int) -> None:
        self._check("revoke")
        await self.inner._revoke(lease)

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        breaks_after = self._watch_breaks.pop(0) if self._watch_breaks else None
        return _FaultyWatch(self, self.inner._watch(prefix, start_revision), breaks_after)

    async def _close(self) -> None:
        await self.inner.aclose()


class _FaultyWatch(Watch):
    def __init__(self, store: FaultyStore, inner: Watch, breaks_after: int | None) -> None:
        super().__init__(inner.prefix, inner.start_revision)
        self._store = store
        self._inner = inner
        self._left = breaks_after

    async def __anext__(self) -> WatchBatch:
        self._store._check("watch", self.prefix)
        if self._left == 0:
            await self._inner.aclose()
            raise Unavailable("injected: the watch stream broke")
        batch = await anext(self._inner)
        if self._left is not None:
            self._left -= 1
        return batch

    def request_progress(self) -> None:
        self._inner.request_progress()

    async def aclose(self) -> None:
        await self._inner.aclose()
