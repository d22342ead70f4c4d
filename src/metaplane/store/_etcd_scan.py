"""The etcd backend's scan: prefixes read at one revision in bounded key ranges.

etcd (3.4 and later) walks its whole in-memory index over a range for every request on it,
whatever its limit: paging a prefix with a limit costs the rest of the range per page, and
a count costs as much as a limited read. So no request here is ever larger than what it
returns, give or take one split:

- The first requests read each prefix's range with a limit (`page` keys shared among the
  ranges of one transaction). A prefix that fits is done in one request; that is every
  prefix of a topic. Once the first transaction has pinned the revision, up to DEPTH more
  are in flight while the client decodes one (a broker given 76,000 topics sends 2,400).
- The rest of a larger range, after the last key read, is cut at byte boundaries along
  that key K: the keys that extend K, then, for each position of K from the deepest up, the
  keys that share K up to it and continue with a higher byte (the next FANOUT bytes one by
  one, the others together). The pieces partition the range in key order; one transaction
  of keys-only, limit-1 reads counts every piece and names its first key: one walk of the
  range. A piece above `page` keys is cut the same way along its own first key. Since
  keys share long prefixes (`/topics/ns-3/topic-00…`), cutting along a real key finds
  where they differ without a walk per shared byte.
- Consecutive pieces are read together, `page` keys or fewer a request, up to DEPTH
  requests in flight while the caller handles the page before.

On the layout's 1M keys this costs about three walks of the index besides the read itself,
done by etcd while the client decodes the pages before (docs/store.md has the figures).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aetcd import rpc

from metaplane.store._errors import Compacted
from metaplane.store._etcd_wire import entry_of, key_ranges
from metaplane.store._model import Entry, Listing

if TYPE_CHECKING:
    from metaplane.store._etcd import EtcdStore

FANOUT = 10
"""Bytes after a key's own byte at each position that get a piece of their own."""

TXN_OPS = 128
"""Requests in one transaction: etcd's --max-txn-ops default (the contract's limit)."""

DEPTH = 2
"""Page reads sent ahead of the one the caller waits for."""

READ_UNIT = 10_000
"""The fewest keys one read may return: a caller's smaller page is cut from it, so that
small pages do not multiply the splits (a few megabytes of the layout's keys)."""

_PageRead = asyncio.Future[list[Entry]]
"""A page's read, sent: the entries it returns."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """A key range [low, high) at the scan's revision: how many keys, and the first one."""

    low: bytes
    high: bytes
    count: int
    first: bytes


def end_of(prefix: bytes) -> bytes:
    """The smallest key above every key that starts with `prefix` (not empty, not all 0xFF)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def pieces(low: bytes, high: bytes, first: bytes) -> list[tuple[bytes, bytes]]:
    """[low, high) cut along `first`, the first key at or above `low`: in key order, empty
    ones left out (see the module docstring)."""
    cuts = [(first, first + b"\0"), (first + b"\0", end_of(first))]
    for position in range(len(first) - 1, -1, -1):
        base, byte = first[:position], first[position]
        base_end = end_of(base) if base.strip(b"\xff") else high
        top = min(byte + FANOUT, 255)
        for value in range(byte + 1, top + 1):
            start = base + bytes([value])
            cuts.append((start, end_of(start) if value < 255 else base_end))
        if top < 255:
            cuts.append((base + bytes([top + 1]), base_end))
    clipped = [(max(start, low), min(end, high)) for start, end in cuts]
    return [(start, end) for start, end in clipped if start < end]


class EtcdScan:
    """One scan: its revision (pinned by the first request when not given) and its reads."""

    def __init__(
        self,
        store: EtcdStore,
        prefixes: Sequence[str],
        revision: int | None,
        page: int,
        keys_only: bool,
    ) -> None:
        self._store = store
        self._prefixes = prefixes
        self._revision = revision or 0
        self._handed = page
        self._page = max(page, READ_UNIT)
        self._keys_only = keys_only

    async def pages(self) -> AsyncGenerator[Listing, None]:
        """Pages in key order. A task of its own plans and sends the reads, at most DEPTH
        ahead of the caller, so that etcd counts and reads while the caller decodes."""
        reads: asyncio.Queue[_PageRead | Exception | None] = asyncio.Queue(maxsize=DEPTH)
        planner = asyncio.create_task(self._plan(reads), name="etcd scan plan")
        try:
            while (read := await reads.get()) is not None:
                if isinstance(read, Exception):
                    raise read
                for listing in self._listings(await read):
                    yield listing
            yield Listing((), self._revision)  # the revision, should nothing be found
        finally:
            planner.cancel()
            while not reads.empty():
                left = reads.get_nowait()
                if isinstance(left, asyncio.Future):
                    left.cancel()

    async def _plan(self, reads: asyncio.Queue[_PageRead | Exception | None]) -> None:
        try:
            async for read in self._reads():
                await reads.put(read)
        except Exception as error:  # for the caller to raise
            await reads.put(error)
        else:
            await reads.put(None)

    def _listings(self, entries: list[Entry]) -> list[Listing]:
        """A read's entries as pages of the size the caller asked for."""
        step = self._handed
        return [
            Listing(tuple(entries[start : start + step]), self._revision)
            for start in range(0, len(entries), step)
        ]

    async def _reads(self) -> AsyncIterator[_PageRead]:
        """The page reads in key order, each already sent (or done)."""
        # In key order across the prefixes: `/a`'s children come after `/a-b`'s keys.
        ranges = sorted(
            (start, end or start + b"\0")
            for prefix in self._prefixes
            for start, end in (key_ranges(prefix) if prefix != "/" else [(b"/", b"0")])
        )
        share = max(1, self._page // min(len(ranges), TXN_OPS))
        batches = [ranges[begin : begin + TXN_OPS] for begin in range(0, len(ranges), TXN_OPS)]

        def send(batch: list[tuple[bytes, bytes]]) -> asyncio.Future[list[Any]]:
            return asyncio.ensure_future(
                self._txn([self._range(low, high, limit=share) for low, high in batch])
            )

        # Up to DEPTH transactions ahead of the one handled (a broker's follow of 76,000
        # topics is 2,400 of them): once the first has pinned the revision.
        sent: collections.deque[asyncio.Future[list[Any]]] = collections.deque()
        try:
            for index, batch in enumerate(batches):
                if not sent:
                    sent.append(send(batch))
                parts = await sent.popleft()
                for ahead in batches[index + 1 + len(sent) : index + 1 + DEPTH]:
                    sent.append(send(ahead))
                async for read in self._batch_reads(batch, parts):
                    yield read
        finally:
            for future in sent:
                if future.done() and not future.cancelled():
                    future.exception()  # retrieved: the scan ends on its own error, if any
                future.cancel()

    async def _batch_reads(
        self, batch: list[tuple[bytes, bytes]], parts: list[Any]
    ) -> AsyncIterator[_PageRead]:
        """The reads of one transaction's ranges: what it returned, then the rest of each
        range it did not return whole."""
        done: list[Entry] = []
        for (_, high), part in zip(batch, parts, strict=True):
            done.extend(map(entry_of, part.kvs))
            if not part.more:
                continue
            yield _done(done)
            done = []
            last = part.kvs[-1].key
            rest = await self._count(pieces(last + b"\0", high, last))
            async for read in self._read_counted(rest):
                yield read
        if done:
            yield _done(done)

    async def _read_counted(self, counted: list[_Piece]) -> AsyncIterator[_PageRead]:
        """Reads of `counted` (consecutive pieces of a range) in key order: neighbours
        together up to a page, a piece above a page cut again."""
        group: list[_Piece] = []
        total = 0
        # The large pieces are all cut now: etcd walks them while earlier pages are read.
        finer = {
            index: asyncio.ensure_future(self._count(pieces(piece.low, piece.high, piece.first)))
            for index, piece in enumerate(counted)
            if piece.count > self._page
        }
        try:
            for index, piece in enumerate(counted):
                if index in finer:
                    if group:
                        yield self._read(group[0].low, group[-1].high)
                        group, total = [], 0
                    async for read in self._read_counted(await finer[index]):
                        yield read
                    continue
                if group and total + piece.count > self._page:
                    yield self._read(group[0].low, group[-1].high)
                    group, total = [], 0
                if piece.count or group:
                    group.append(piece)
                    total += piece.count
            if group and total:
                yield self._read(group[0].low, group[-1].high)
        finally:
            for count in finer.values():
                count.cancel()

    def _read(self, low: bytes, high: bytes) -> _PageRead:
        async def read() -> list[Entry]:
            (part,) = await self._txn([self._range(low, high)])
            # Entries made as the response is walked: each key-value's message wrapper is
            # dropped at once. A list of the wrappers lived through young collections and
            # was promoted, ten thousand a page: twice the full collections of a scan.
            return list(map(entry_of, part.kvs))

        return asyncio.ensure_future(read())

    async def _count(self, ranges: list[tuple[bytes, bytes]]) -> list[_Piece]:
        """Each range's count and first key, in transactions of TXN_OPS, sent together."""
        batches = [ranges[begin : begin + TXN_OPS] for begin in range(0, len(ranges), TXN_OPS)]
        answers = await asyncio.gather(
            *(
                self._txn([self._range(low, high, limit=1, keys_only=True) for low, high in batch])
                for batch in batches
            )
        )
        return [
            _Piece(low, high, part.count, part.kvs[0].key if part.kvs else b"")
            for batch, parts in zip(batches, answers, strict=True)
            for (low, high), part in zip(batch, parts, strict=True)
        ]

    def _range(
        self, low: bytes, high: bytes, *, limit: int = 0, keys_only: bool | None = None
    ) -> Any:
        return rpc.RangeRequest(
            key=low,
            range_end=high,
            revision=self._revision,
            limit=limit,
            keys_only=self._keys_only if keys_only is None else keys_only,
        )

    async def _txn(self, requests: list[Any]) -> list[Any]:
        """The range responses of one read-only transaction at the scan's revision; the
        first one pins it."""
        ops = [rpc.RequestOp(request_range=request) for request in requests]
        store = self._store
        try:
            # A request walks etcd's index over its whole range: on a loaded member that can
            # take longer than a point read's deadline, so a scan's requests get the store's.
            response = await store.call(
                "kv",
                "Txn",
                rpc.TxnRequest(success=ops),
                idempotent=True,
                attempt=store.options.timeout,
            )
        except Compacted:
            raise Compacted(await store._compaction()) from None
        if not self._revision:
            self._revision = response.header.revision
        return [part.response_range for part in response.responses]


def _done(entries: list[Entry]) -> _PageRead:
    future: _PageRead = asyncio.get_running_loop().create_future()
    future.set_result(entries)
    return future
