"""A store that wraps another and misbehaves on purpose, for testing what stands on the store:
chosen operations on chosen paths fail (before they reach the store, or after — the outcome
unknown to the caller), answer late, or hang until released; watches break, stall or lag.

Faults are values a test passes in, so that a race window is hit on every run:

    faulty = FaultyStore(store)
    faulty.fail("txn", "/topics", after=True)       # one write applies, its caller sees Unavailable
    faulty.delay("txn", seconds=0.3)                # every transaction takes 0.3 s more
    stall = faulty.hang("refresh")                  # lease refreshes never answer …
    stall.release()                                 # … until now

A process that cannot be reached from the test (a broker started as a child process) reads
its faults from a control file instead (`control=`): a JSON list of fault objects, read again
whenever the file changes; each fault with a new `id` applies afresh. See `ControlFile`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from metaplane.store import (
    Delete,
    Entry,
    Lease,
    List,
    Listing,
    MetadataError,
    MetadataStore,
    PrefixWatch,
    Put,
    Txn,
    TxnResult,
    Unavailable,
    Watch,
    WatchBatch,
    in_prefix,
)

log = logging.getLogger(__name__)

OPERATIONS = (
    "get",
    "list",
    "put",
    "txn",
    "revision",
    "compact",
    "grant",
    "refresh",
    "revoke",
    "watch",
)
"""What a fault can name ("*" names every one)."""

Kind = Literal["error", "latency", "hang"]


def _unavailable() -> Exception:
    return Unavailable("injected fault")


@dataclass(eq=False)
class Fault:
    """Misbehave on `operation` for keys under `prefix` (or prefix operations above it).

    `kind` is "error" (raise `make_error()`; with `after`, once the operation has applied),
    "latency" (answer `seconds` later) or "hang" (never answer until `release()`). `times`
    counts the operations it still applies to (None: until removed); a transaction counts
    once whatever the number of its keys.
    """

    operation: str
    prefix: str = "/"
    make_error: Callable[[], Exception] = _unavailable
    times: int | None = 1
    kind: Kind = "error"
    seconds: float = 0.0
    after: bool = False
    when: Callable[[Txn], bool] | None = field(default=None, repr=False)
    """For a transaction: strike only those it holds for (one that deletes a key, say)."""
    hits: int = 0
    _released: asyncio.Event | None = field(default=None, repr=False)
    _struck: asyncio.Event | None = field(default=None, repr=False)

    def applies(self, operation: str, keys: Iterable[str | None], txn: Txn | None = None) -> bool:
        if self.operation not in (operation, "*") or self.times == 0:
            return False
        if self.when is not None and (txn is None or not self.when(txn)):
            return False
        return any(
            key is None or in_prefix(key, self.prefix) or in_prefix(self.prefix, key)
            for key in keys
        )

    def consume(self) -> None:
        self.hits += 1
        if self.times is not None:
            self.times -= 1
        if self._struck is not None:
            self._struck.set()

    async def wait_struck(self) -> None:
        """Return once the fault has struck at least once (an operation is held up in it,
        or failed by it)."""
        if self.hits:
            return
        if self._struck is None:
            self._struck = asyncio.Event()
        await self._struck.wait()

    def release(self) -> None:
        """End a hang: operations waiting on it go on, and it stops applying."""
        self.times = 0
        if self._released is not None:
            self._released.set()

    async def wait_released(self) -> None:
        if self._released is None:
            self._released = asyncio.Event()
        if self.times == 0:
            return
        await self._released.wait()


class FaultyStore(MetadataStore):
    """Delegates to `inner`, except where a fault says otherwise."""

    def __init__(self, inner: MetadataStore, *, control: Path | str | None = None) -> None:
        self.inner = inner
        self.url = f"faulty+{inner.url}"
        self.keeps_history = inner.keeps_history
        self.faults: list[Fault] = []
        self._watch_breaks: list[int] = []
        self._control = ControlFile(Path(control)) if control is not None else None
        self._added = asyncio.Event()
        self.injected: list[tuple[float, str, str, str]] = []
        """(time, operation, kind, key) of every fault that struck, for a test to report."""

    # -- adding and removing faults ----------------------------------------------------

    def add(self, fault: Fault) -> Fault:
        if fault.operation not in (*OPERATIONS, "*"):
            raise ValueError(f"unknown operation {fault.operation!r}; one of {OPERATIONS}")
        self.faults.append(fault)
        added, self._added = self._added, asyncio.Event()
        added.set()  # watches waiting for their next batch look at the faults again
        return fault

    def fail(
        self,
        operation: str,
        prefix: str = "/",
        *,
        error: Callable[[], Exception] = _unavailable,
        times: int | None = 1,
        after: bool = False,
        when: Callable[[Txn], bool] | None = None,
    ) -> Fault:
        """Raise `error()` on `operation` under `prefix`, `times` times. With `after`, the
        operation reaches the store and applies first: its caller cannot tell. `when`
        narrows a transaction fault to the transactions it holds for (`deletes(key)`)."""
        fault = Fault(operation, prefix, error, times, "error", after=after, when=when)
        return self.add(fault)

    def delay(
        self,
        operation: str,
        prefix: str = "/",
        *,
        seconds: float,
        times: int | None = None,
        when: Callable[[Txn], bool] | None = None,
    ) -> Fault:
        """Answer `operation` under `prefix` `seconds` late (each watch batch, for a watch)."""
        fault = Fault(operation, prefix, times=times, kind="latency", seconds=seconds, when=when)
        return self.add(fault)

    def hang(self, operation: str, prefix: str = "/", *, times: int | None = None) -> Fault:
        """Never answer `operation` under `prefix` until the fault is released (a watch
        delivers nothing meanwhile). A caller's own timeout still cancels the wait."""
        return self.add(Fault(operation, prefix, times=times, kind="hang"))

    def remove(self, fault: Fault) -> None:
        fault.release()
        if fault in self.faults:
            self.faults.remove(fault)

    def clear(self) -> None:
        for fault in list(self.faults):
            self.remove(fault)

    def break_watches_after(self, *batches: int) -> None:
        """The next watches opened break with `Unavailable` after so many batches each."""
        self._watch_breaks.extend(batches)

    # -- striking ----------------------------------------------------------------------

    def _matching(
        self, operation: str, keys: Iterable[str | None], txn: Txn | None = None
    ) -> list[Fault]:
        if self._control is not None:
            self._control.refresh(self)
        wanted = list(keys)
        found = [fault for fault in self.faults if fault.applies(operation, wanted, txn)]
        for fault in found:
            fault.consume()
            key = next((k for k in wanted if k is not None), "")
            self.injected.append((time.time(), operation, fault.kind, key))
            log.info("injected %s on %s %s", fault.kind, operation, key)
        return found

    async def _before(
        self, operation: str, *keys: str | None, txn: Txn | None = None
    ) -> list[Fault]:
        """Apply latency, hangs and errors that come before the operation; return the
        errors that come after it."""
        faults = self._matching(operation, keys or (None,), txn)
        for fault in faults:
            if fault.kind == "latency":
                await asyncio.sleep(fault.seconds)
            elif fault.kind == "hang":
                await fault.wait_released()
        for fault in faults:
            if fault.kind == "error" and not fault.after:
                raise fault.make_error()
        return [fault for fault in faults if fault.kind == "error" and fault.after]

    @staticmethod
    def _after(faults: list[Fault]) -> None:
        if faults:
            raise faults[0].make_error()

    # -- the contract ------------------------------------------------------------------

    async def _get(self, key: str) -> Entry | None:
        after = await self._before("get", key)
        entry = await self.inner._get(key)
        self._after(after)
        return entry

    async def _list(self, op: List, revision: int | None) -> Listing:
        after = await self._before("list", op.prefix)
        listing = await self.inner._list(op, revision)
        self._after(after)
        return listing

    async def _put(self, op: Put) -> int:
        after = await self._before("put", op.key)
        revision = await self.inner._put(op)
        self._after(after)
        return revision

    async def _txn(self, txn: Txn) -> TxnResult:
        keys = [compare.key for compare in txn.compares] + [
            getattr(op, "key", getattr(op, "prefix", "/")) for op in txn.on_success
        ]
        after = await self._before("txn", *(keys or ["/"]), txn=txn)
        result = await self.inner._txn(txn)
        self._after(after)
        return result

    async def _revision(self) -> int:
        after = await self._before("revision")
        revision = await self.inner._revision()
        self._after(after)
        return revision

    async def _compact(self, revision: int) -> None:
        after = await self._before("compact")
        await self.inner._compact(revision)
        self._after(after)

    async def _grant(self, ttl: int) -> Lease:
        after = await self._before("grant")
        lease = await self.inner._grant(ttl)
        self._after(after)
        return lease

    async def _refresh(self, lease: int, timeout: float | None = None) -> int:
        after = await self._before("refresh")
        ttl = await self.inner._refresh(lease, timeout)
        self._after(after)
        return ttl

    async def _revoke(self, lease: int) -> None:
        after = await self._before("revoke")
        await self.inner._revoke(lease)
        self._after(after)

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        breaks_after = self._watch_breaks.pop(0) if self._watch_breaks else None
        return _FaultyWatch(self, self.inner._watch(prefix, start_revision), breaks_after)

    def _watch_prefixes(self, prefixes: frozenset[str], start_revision: int | None) -> PrefixWatch:
        breaks_after = self._watch_breaks.pop(0) if self._watch_breaks else None
        inner = self.inner._watch_prefixes(prefixes, start_revision)
        return _FaultyPrefixWatch(self, inner, breaks_after)

    async def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        """The inner store's own scan; "list" faults strike at each page."""
        async for listing in self.inner._scan(prefixes, revision, page, keys_only):
            after = await self._before("list", *prefixes)
            self._after(after)
            yield listing

    async def _close(self) -> None:
        await self.inner.aclose()


class _FaultyWatch(Watch):
    def __init__(self, store: FaultyStore, inner: Watch, breaks_after: int | None) -> None:
        super().__init__(inner.prefix, inner.start_revision)
        self._store = store
        self._inner = inner
        self._left = breaks_after
        self._next: asyncio.Task[WatchBatch] | None = None

    async def __anext__(self) -> WatchBatch:
        """The next batch. An error fault breaks the stream at once — also one added while
        the watch waits, as a broken connection would; latency and hangs strike when asked
        for the batch and hold it back once it has arrived (the watch lags)."""
        while True:
            faults = self._store._matching("watch", [self.prefix])
            for fault in faults:
                if fault.kind == "error":
                    await self.aclose()
                    raise fault.make_error()
            if self._left == 0:
                await self.aclose()
                raise Unavailable("injected: the watch stream broke")
            if self._next is None:
                self._next = asyncio.ensure_future(anext(self._inner))
            added = asyncio.ensure_future(self._store._added.wait())
            try:
                await asyncio.wait({self._next, added}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                added.cancel()
            if self._next.done():
                break
        arrived, self._next = self._next, None
        batch = arrived.result()
        for fault in faults:
            if fault.kind == "latency":
                await asyncio.sleep(fault.seconds)
            elif fault.kind == "hang":
                await fault.wait_released()
        if self._left is not None:
            self._left -= 1
        return batch

    def request_progress(self) -> None:
        self._inner.request_progress()

    async def aclose(self) -> None:
        waiting, self._next = self._next, None
        if waiting is not None:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiting
        await self._inner.aclose()


class _FaultyPrefixWatch(PrefixWatch):
    """A prefix watch that breaks, lags or stalls as `_FaultyWatch` does; `add` and
    `remove` go through (an "add"/"remove" fault is a "watch" fault)."""

    def __init__(self, store: FaultyStore, inner: PrefixWatch, breaks_after: int | None) -> None:
        self._store = store
        self._inner = inner
        self._batches = _FaultyWatch(store, _Batches(inner), breaks_after)

    @property
    def prefixes(self) -> frozenset[str]:
        return self._inner.prefixes

    async def add(self, prefixes: Iterable[str]) -> int:
        wanted = list(prefixes)
        after = await self._store._before("watch", *wanted)
        revision = await self._inner.add(wanted)
        self._store._after(after)
        return revision

    async def add_and_read(self, prefixes: Iterable[str]) -> tuple[int, list[Entry], int]:
        """As `add`, and the read strikes "list" faults once it is done (as a scan's page)."""
        wanted = list(prefixes)
        after = await self._store._before("watch", *wanted)
        added = await self._inner.add_and_read(wanted)
        self._store._after(after)
        after = await self._store._before("list", *wanted)
        self._store._after(after)
        return added

    async def remove(self, prefixes: Iterable[str]) -> None:
        await self._inner.remove(prefixes)

    def request_progress(self) -> None:
        self._inner.request_progress()

    async def __anext__(self) -> WatchBatch:
        return await anext(self._batches)

    async def aclose(self) -> None:
        await self._batches.aclose()


class _Batches(Watch):
    """A prefix watch seen as a watch (for `_FaultyWatch` to wrap)."""

    def __init__(self, inner: PrefixWatch) -> None:
        super().__init__("/", None)
        self._inner = inner

    async def __anext__(self) -> WatchBatch:
        return await anext(self._inner)

    def request_progress(self) -> None:
        self._inner.request_progress()

    async def aclose(self) -> None:
        await self._inner.aclose()


def deletes(key: str) -> Callable[[Txn], bool]:
    """A `when` for transactions that delete `key` (on success)."""
    return lambda txn: any(isinstance(op, Delete) and op.key == key for op in txn.on_success)


def writes(key: str) -> Callable[[Txn], bool]:
    """A `when` for transactions that put `key` (on success)."""
    return lambda txn: any(isinstance(op, Put) and op.key == key for op in txn.on_success)


class ControlFile:
    """Faults read from a JSON file that another process (a test's nemesis) writes:

        [{"id": "f17", "operation": "txn", "prefix": "/topics", "kind": "error",
          "times": 1, "after": false},
         {"id": "f18", "operation": "*", "kind": "latency", "seconds": 0.3, "times": null},
         {"id": "f19", "operation": "refresh", "kind": "hang", "times": null}]

    The file is looked at no more than every `interval` seconds (by its modification time).
    A fault is added the first time its `id` is seen; a fault whose `id` has left the file is
    removed (a hang is released). Errors are `Unavailable`.
    """

    def __init__(self, path: Path, interval: float = 0.05) -> None:
        self.path = path
        self.interval = interval
        self._checked = 0.0
        self._stamp: tuple[int, int] | None = None
        self._active: dict[str, Fault] = {}

    def refresh(self, store: FaultyStore) -> None:
        now = time.monotonic()
        if now - self._checked < self.interval:
            return
        self._checked = now
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        wanted = self._read() if stamp is not None else []
        ids = {str(spec["id"]) for spec in wanted}
        for gone in set(self._active) - ids:
            store.remove(self._active.pop(gone))
        for spec in wanted:
            ident = str(spec["id"])
            if ident not in self._active:
                self._active[ident] = store.add(_fault(spec))

    def _read(self) -> list[dict[str, Any]]:
        try:
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError) as error:  # a half-written file: read it next time
            log.warning("fault control file %s unreadable: %s", self.path, error)
            self._stamp = None
            return [spec for spec in self._current_specs()]
        if not isinstance(loaded, list):
            raise MetadataError(f"{self.path}: a fault control file holds a JSON list")
        return [spec for spec in loaded if isinstance(spec, dict) and "id" in spec]

    def _current_specs(self) -> list[dict[str, Any]]:
        return [{"id": ident} for ident in self._active]


def _fault(spec: dict[str, Any]) -> Fault:
    kind = spec.get("kind", "error")
    if kind not in ("error", "latency", "hang"):
        raise ValueError(f"unknown fault kind {kind!r}")
    times = spec.get("times", 1)
    return Fault(
        operation=str(spec.get("operation", "*")),
        prefix=str(spec.get("prefix", "/")),
        times=None if times is None else int(times),
        kind=kind,
        seconds=float(spec.get("seconds", 0.0)),
        after=bool(spec.get("after", False)),
    )


def write_control(path: Path, faults: Iterable[dict[str, Any]]) -> None:
    """Replace the faults of a control file at once (write aside, then rename)."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(list(faults)))
    os.replace(temporary, path)
