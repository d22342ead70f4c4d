"""Reads for the managers: typed, versioned values, from a LocalCache when one is given and
covers every key of the read, else from the store; several keys at one revision either way.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from metaplane.cache import NOT_COVERED, CacheState, LocalCache
from metaplane.layout import kind_of, parse
from metaplane.resources._change import RetryPolicy, Writer
from metaplane.resources._errors import MalformedValue
from metaplane.resources._values import decode
from metaplane.store import Entry, Get, List, MetadataStore

T = TypeVar("T")

Read: TypeAlias = Get | List

_SERVING = (CacheState.SYNCED, CacheState.DISCONNECTED, CacheState.RESYNCING)
"""The cache states in which it holds a complete, consistent (if perhaps late) copy."""


def decode_value(key: str, data: bytes) -> object:
    """The typed value of `data` at `key`, by the key's kind in the layout.

    The decoder to give a LocalCache that managers read from:
    `LocalCache(store, prefixes, decoder=decode_value)`.
    """
    return decode(kind_of(key), data)


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A typed value and where it stands in the key's history, as Hedwig's `Versioned<T>`:
    `version` is what a versioned write expects, `mod_revision` what a compare of "unchanged"
    expects."""

    value: T
    version: int
    mod_revision: int
    create_revision: int
    key: str


class View:
    """The results of some reads at one revision (`revision`), with typed access."""

    def __init__(
        self,
        revision: int,
        results: dict[Read, Entry | Sequence[Entry] | None],
        cache: LocalCache | None,
    ) -> None:
        self.revision = revision
        self._results = results
        self._cache = cache

    def entry(self, key: str) -> Entry | None:
        result = self._results[Get(key)]
        assert result is None or isinstance(result, Entry)
        return result

    def entries(self, read: List) -> Sequence[Entry]:
        result = self._results[read]
        assert isinstance(result, Sequence)
        return result

    def get(self, key: str, as_type: type[T]) -> Versioned[T] | None:
        """The typed value of `key`, or None if it does not exist."""
        entry = self.entry(key)
        return None if entry is None else self.typed(entry, as_type)

    def typed(self, entry: Entry, as_type: type[T]) -> Versioned[T]:
        """`entry` with its typed value, decoded once by the cache if it came from there."""
        value = self._decoded(entry)
        if not isinstance(value, as_type):
            raise _malformed(entry.key, value, as_type)
        return Versioned(value, entry.version, entry.mod_revision, entry.create_revision, entry.key)

    def _decoded(self, entry: Entry) -> object:
        # The cache may have moved on since this view was taken: its kept value is this
        # entry's only while the cache still holds this very entry.
        if self._cache is not None and self._cache.get(entry.key) is entry:
            return self._cache.value(entry.key)
        return decode_value(entry.key, entry.value)


def _versioned(entry: Entry, value: object) -> Versioned[object]:
    return Versioned(value, entry.version, entry.mod_revision, entry.create_revision, entry.key)


def _malformed(key: str, value: object, as_type: type[object]) -> MalformedValue:
    kind = parse(key).kind
    return MalformedValue(
        str(kind), f"{key} holds a {type(value).__name__}, not {as_type.__name__}"
    )


class Reader:
    """Serves reads from `cache` when it is given, loaded, and covers all the keys of a read;
    from `store` otherwise. A cached read may be late (never torn): a write built on it with
    a version or an "unchanged" compare fails rather than overwrite what it did not see.

    The cache must decode with `decode_value`; wait for a write's revision with
    `await cache.wait_for(revision)` to read it back.
    """

    def __init__(self, store: MetadataStore, cache: LocalCache | None = None) -> None:
        self.store = store
        self.cache = cache

    async def read(self, *reads: Read, fresh: bool = False) -> View:
        """The results of `reads` at one revision; `fresh` skips the cache."""
        if not fresh and self._cached(reads):
            assert self.cache is not None
            return self._from_cache(self.cache, reads)
        return await self._from_store(reads)

    async def get(self, key: str, as_type: type[T]) -> Versioned[T] | None:
        """The typed value of `key`, or None if it does not exist. From the cache, the
        typed value and its entry come in one look-up (made once per version of the key)."""
        cache = self.cache
        if cache is not None and cache.state in _SERVING:
            found = cache.made(key, _versioned)
            if found is not NOT_COVERED:
                if found is None:
                    return None
                if not isinstance(found.value, as_type):
                    raise _malformed(found.key, found.value, as_type)
                return found  # type: ignore[return-value]
        return (await self.read(Get(key))).get(key, as_type)

    async def list(self, prefix: str, as_type: type[T]) -> builtins.list[Versioned[T]]:
        """The typed values of the keys under `prefix` (and of `prefix` itself)."""
        read = List(prefix)
        view = await self.read(read)
        return [view.typed(entry, as_type) for entry in view.entries(read)]

    async def keys(self, prefix: str) -> builtins.list[str]:
        """The keys under `prefix` (and `prefix` itself), in key order."""
        read = List(prefix, keys_only=True)
        return [entry.key for entry in (await self.read(read)).entries(read)]

    async def children(self, path: str) -> builtins.list[str]:
        """The distinct segments right below `path`, sorted."""
        if self._cached([Get(path)]):
            assert self.cache is not None
            return self.cache.children(path)
        return await self.store.children(path)

    def _cached(self, reads: Sequence[Read]) -> bool:
        cache = self.cache
        if cache is None or cache.state not in _SERVING:
            return False
        return all(cache.covers(_key_of(read)) for read in reads)

    @staticmethod
    def _from_cache(cache: LocalCache, reads: Sequence[Read]) -> View:
        # No await between the reads: they all see the cache at one applied revision.
        results: dict[Read, Entry | Sequence[Entry] | None] = {}
        for read in reads:
            if isinstance(read, Get):
                results[read] = cache.get(read.key)
            else:
                results[read] = _select(cache.list(read.prefix), read)
        return View(cache.applied_revision, results, cache)

    async def _from_store(self, reads: Sequence[Read]) -> View:
        if len(reads) == 1 and isinstance(reads[0], List):
            read = reads[0]
            listing = await self.store.list(
                read.prefix,
                keys_only=read.keys_only,
                limit=read.limit,
                start_after=read.start_after,
                end_before=read.end_before,
                reverse=read.reverse,
            )
            return View(listing.revision, {read: listing}, None)
        result = await self.store.txn((), reads)
        return View(result.revision, dict(zip(reads, _results(result.results), strict=True)), None)


def _results(results: Sequence[object]) -> list[Entry | Sequence[Entry] | None]:
    checked: list[Entry | Sequence[Entry] | None] = []
    for result in results:
        assert result is None or isinstance(result, Entry | Sequence)
        checked.append(result)
    return checked


def _key_of(read: Read) -> str:
    return read.key if isinstance(read, Get) else read.prefix


def _select(entries: builtins.list[Entry], read: List) -> builtins.list[Entry]:
    """What `read` selects from a cached prefix, as the store would: bounds, order, limit."""
    selected = [entry for entry in entries if read.within(entry.key)]
    if read.reverse:
        selected.reverse()
    return selected if read.limit is None else selected[: read.limit]


class Manager:
    """What every manager has: the store it writes to, a reader (through `cache`), and the
    one runner of its changes."""

    def __init__(
        self,
        store: MetadataStore,
        cache: LocalCache | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.store = store
        self.reader = Reader(store, cache)
        self.writer = Writer(store, policy)
