"""`LocalCache`: the read path of a broker. After start-up every read is served from memory,
and the cache follows the store's changes without a gap, in revision order, whole
transactions at a time."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import enum
import logging
import operator
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self, TypeVar

from sortedcontainers import SortedList

from metaplane._tasks import cancel_and_wait
from metaplane.cache._listeners import (
    CacheClosed,
    CacheTimeout,
    Listener,
    ListenerTask,
    Subscription,
)
from metaplane.store import (
    Compacted,
    Entry,
    EventType,
    InvalidRequest,
    MetadataError,
    MetadataStore,
    PrefixWatch,
    Unavailable,
    WatchBatch,
    WatchEvent,
    check_prefix,
)
from metaplane.store._keys import (
    ROOT,
    ancestors,
    child_segment,
    children_prefix,
    covering,
    prefix_end,
)

log = logging.getLogger(__name__)

Decoder = Callable[[str, bytes], object]
"""Turns a key's value into its typed form (raises on a malformed value)."""

PAGE = 10_000
"""Keys read per page while loading: a huge prefix never comes as one response."""

T = TypeVar("T")


class NotCovered(enum.Enum):
    """The answer for a key outside the cache's prefixes."""

    NOT_COVERED = "not covered"


NOT_COVERED = NotCovered.NOT_COVERED

DEFAULT_WAIT = 30.0
"""How long `wait_for` waits for a revision unless told otherwise."""

READ_FOLLOWING = 30.0
"""On a store without history: how long a start or resync waits for its new watch to pass
what it read."""


class CacheState(enum.Enum):
    STARTING = "starting"
    SYNCED = "synced"
    """Following the store's changes."""
    DISCONNECTED = "disconnected"
    """The watch broke; reads are served from the last applied revision while it resumes."""
    RESYNCING = "resyncing"
    """History was compacted under the watch; reloading and diffing."""
    CLOSED = "closed"


class LocalCache:
    """An in-memory copy of some prefixes of a store, kept current by one watch.

    Start: one consistent read of every prefix at one revision R, then a watch from R + 1
    (no gap). The watch is on the longest common ancestor of the prefixes, so that every
    transaction arrives whole and in revision order; events outside the prefixes are
    dropped. Changes are applied by mod_revision. A broken stream resumes from the last
    applied revision + 1; `Compacted` (or a backend that cannot resume) triggers a full
    resync at a new revision whose differences reach listeners as ordinary events.

    Read your writes: every write returns its revision; `await cache.wait_for(revision)`
    returns once the cache has applied it.
    """

    def __init__(
        self,
        store: MetadataStore,
        prefixes: Iterable[str] = (ROOT,),
        *,
        decoder: Decoder | None = None,
        subscriber_buffer: int = 100_000,
    ) -> None:
        self._store = store
        self._followed: set[str] = set(_covering(check_prefix(prefix) for prefix in prefixes))
        self._ancestor = _common_ancestor(sorted(self._followed))  # (a name for its logs)
        self._pending: list[_Follow] = []
        self._watch: PrefixWatch | None = None
        self._changing = asyncio.Lock()  # one follow, unfollow or new watch at a time
        self._decoder = decoder
        self._buffer = subscriber_buffer
        self._entries: dict[str, Entry] = {}
        self._keys: SortedList = SortedList()
        self._decoded: dict[str, object] = {}
        self._made: dict[str, object] = {}
        self._applied = 0
        self._state = CacheState.STARTING
        self._advanced = asyncio.Condition()
        self._watch_task: asyncio.Task[None] | None = None
        self._progress_wanted = asyncio.Event()
        self._subscriptions: set[Subscription] = set()
        self._listeners: set[ListenerTask] = set()
        self.resumes = 0
        """Times the watch broke and was resumed from the last applied revision."""
        self.resyncs = 0
        """Times the cache reloaded and diffed (history compacted under its watch)."""

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> int:
        """Load every prefix at one revision and start following; return that revision.
        (On a store without history: follow, then read, and take the watch's changes until
        it has passed the read: `_read_following`.)"""
        watch: PrefixWatch | None = None
        if self._store.keeps_history:
            revision = await self._load_into_empty()
        else:
            watch, revision, state = await self._read_following()
            self._load(revision, state)
        await self._set_state(CacheState.SYNCED)
        self._watch_task = asyncio.get_running_loop().create_task(
            self._follow(watch), name=f"cache watch {self._ancestor}"
        )
        return revision

    async def aclose(self) -> None:
        await self._set_state(CacheState.CLOSED)
        await cancel_and_wait(self._watch_task)
        for listener in list(self._listeners):
            listener.cancel()
        for subscription in list(self._subscriptions):
            subscription.end()
        async with self._advanced:
            self._advanced.notify_all()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def state(self) -> CacheState:
        return self._state

    async def wait_state(self, *states: CacheState, timeout: float | None = None) -> CacheState:
        """Return once the cache is in one of `states` (e.g. SYNCED after a disconnection)."""
        async with asyncio.timeout(timeout), self._advanced:
            await self._advanced.wait_for(lambda: self._state in states)
            return self._state

    async def _set_state(self, state: CacheState) -> None:
        if state is not self._state:
            log.info("cache %s: %s", self._ancestor, state.value)
            self._state = state
            async with self._advanced:
                self._advanced.notify_all()

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The prefixes the cache holds and serves now, sorted."""
        return tuple(sorted(self._followed))

    @property
    def prefix_count(self) -> int:
        """How many prefixes the cache holds and serves now (`len(prefixes)`, unsorted)."""
        return len(self._followed)

    @property
    def applied_revision(self) -> int:
        """Every change up to this revision is in the cache; none after it."""
        return self._applied

    async def wait_for(self, revision: int, timeout: float | None = DEFAULT_WAIT) -> None:
        """Return once the cache's watch has passed `revision` (read your writes): it
        applied it, or the store said nothing under the cache's prefixes changed up to it —
        also for a revision that touched none of its keys. `CacheTimeout` after `timeout`
        seconds (None: wait as long as it takes); `CacheClosed` once closed."""
        try:
            async with asyncio.timeout(timeout), self._advanced:
                while self._applied < revision:
                    if self._state is CacheState.CLOSED:
                        raise CacheClosed("the cache is closed")
                    # The revision may have changed nothing under the watched prefix: ask
                    # the store to say how far the watch has come.
                    self._progress_wanted.set()
                    await self._advanced.wait()
        except TimeoutError:
            raise CacheTimeout(
                f"cache {self._ancestor} ({self._state.value}) is at revision "
                f"{self._applied}, not {revision}, after {timeout} s"
            ) from None

    # -- reads -------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        """The entry of `key` as of `applied_revision`."""
        entry = self._entries.get(key)
        if entry is None:
            self._check_covered(key)
        return entry

    def value(self, key: str) -> object | None:
        """The typed value of `key`, decoded on its first typed read and kept."""
        try:
            return self._decoded[key]
        except KeyError:
            pass
        entry = self.get(key)
        if entry is None:
            return None
        if self._decoder is None:
            raise InvalidRequest("this cache has no decoder: typed reads are not available")
        value = self._decoder(key, entry.value)
        self._decoded[key] = value
        return value

    def made(self, key: str, make: Callable[[Entry, object], T]) -> T | NotCovered | None:
        """`make(entry, typed value)` of `key`, made once per version of the entry and kept
        until the key changes — the layer above keeps its own typed form of an entry here
        and reads it back in one look-up. None when the key does not exist; `NOT_COVERED`
        when it is outside the cache's prefixes (read it from the store)."""
        try:
            return self._made[key]  # type: ignore[return-value]
        except KeyError:
            pass
        entry = self._entries.get(key)
        if entry is None:
            return None if self.covers(key) else NOT_COVERED
        made = make(entry, self.value(key))
        self._made[key] = made
        return made

    def list(self, prefix: str) -> builtins.list[Entry]:
        """The key `prefix` and every key under it, in key order."""
        self._check_covered(prefix)
        return [self._entries[key] for key in self._keys_under(prefix)]

    def children(self, path: str) -> builtins.list[str]:
        """The distinct segments right below `path`, sorted."""
        self._check_covered(path)
        segments = {child_segment(key, path) for key in self._keys_under(path)}
        return sorted(segment for segment in segments if segment is not None)

    def __len__(self) -> int:
        return len(self._entries)

    def covers(self, key: str) -> bool:
        """True if `key` lies under a prefix the cache serves now (a look-up of each of its
        ancestors, whatever the number of prefixes)."""
        followed = self._followed
        if ROOT in followed or key in followed:
            return True
        end = key.find("/", 1)
        while end != -1:
            if key[:end] in followed:
                return True
            end = key.find("/", end + 1)
        return False

    # -- following more, or less -------------------------------------------------------

    async def follow(self, prefixes: Iterable[str], timeout: float | None = DEFAULT_WAIT) -> int:
        """Hold and follow `prefixes` too, gap-free: the watch starts following them at a
        revision R, they are read at R (on a store without history, at once after R:
        `PrefixWatch.add_and_read`), and they are served once the cache has passed the
        revision returned (`await wait_for(it)` to read them from the cache). Changes under
        them that the cache applies before their read is in are kept and laid over it.
        Prefixes under one served already are left as they are. Waits out a watch being
        re-made (a broken stream), for `timeout` seconds: `CacheTimeout` past them (the
        prefixes not followed; the cache goes on as it was)."""
        wanted = _covering(check_prefix(prefix) for prefix in prefixes) if prefixes else ()
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self._follow_until_done(wanted)
        except TimeoutError:
            if not deadline.expired():
                raise
            shown = ", ".join(wanted[:3]) + (
                f" and {len(wanted) - 3} more" if len(wanted) > 3 else ""
            )
            raise CacheTimeout(
                f"cache {self._ancestor}: {shown} not followed within {timeout} s (the store "
                "is away, or slow); the cache serves what it held"
            ) from None

    async def _follow_until_done(self, wanted: Iterable[str]) -> int:
        while True:
            async with self._changing:
                new = self._not_held(wanted)
                if not new:
                    return self._applied
                watch = self._watch
                if watch is not None and self._state is CacheState.SYNCED:
                    try:
                        return await self._follow_on(watch, new)
                    except MetadataError as error:
                        log.warning("cache %s: follow failed (%s); again", self._ancestor, error)
            await self.wait_state(CacheState.SYNCED)
            await asyncio.sleep(0.05)

    async def _follow_on(self, watch: PrefixWatch, prefixes: builtins.list[str]) -> int:
        """Add `prefixes` to the watch and read them; served once the cache passes the
        revision returned. Pending from before the add: the batches applied meanwhile
        (which may already carry their events) are kept in it until it is merged."""
        follow = _Follow(set(prefixes))
        self._pending.append(follow)
        try:
            if self._store.keeps_history:
                revision = await watch.add(prefixes)
                entries: builtins.list[Entry] = []
                async with self._store.scan(prefixes, revision=revision, page=PAGE) as pages:
                    async for page in pages:
                        entries.extend(page)
                ready = revision
            else:
                revision, entries, ready = await watch.add_and_read(prefixes)
        except BaseException:
            with contextlib.suppress(ValueError):
                self._pending.remove(follow)
            raise
        follow.read(revision, entries, ready)
        if follow in self._pending and ready <= self._applied:
            self._pending.remove(follow)
            self._merge(follow)
        return ready

    async def unfollow(self, prefixes: Iterable[str]) -> None:
        """Drop `prefixes` (each one given to `follow` or the constructor): their keys leave
        the cache and their changes are no longer watched. Nothing is told to listeners."""
        gone = set(check_prefix(prefix) for prefix in prefixes)
        async with self._changing:
            self._pending = [f for f in self._pending if not f.prefixes <= gone]
            for follow in self._pending:
                follow.drop(gone)
            dropped = gone & self._followed
            self._followed -= dropped
            for prefix in dropped:
                for key in self._keys_under(prefix):
                    if not self.covers(key):
                        self._remove(key)
            if self._watch is not None and gone:
                with contextlib.suppress(MetadataError):  # a broken watch is re-made without
                    await self._watch.remove(gone)

    def _not_held(self, wanted: Iterable[str]) -> builtins.list[str]:
        """Those of `wanted` neither served nor about to be (a look-up of each one's
        ancestors in the prefixes being followed)."""
        pending: set[str] = set().union(*(follow.prefixes for follow in self._pending))
        new = [prefix for prefix in wanted if not self.covers(prefix)]
        if not pending:
            return new
        return [prefix for prefix in new if not any(a in pending for a in ancestors(prefix))]

    def _merge(self, follow: _Follow) -> None:
        """A followed prefix's read, now that the cache has passed its revision: served."""
        state = follow.state()
        entries = self._entries
        held = state.keys() & entries.keys()  # in C: a follow usually brings new keys only
        for key in held:
            if entries[key].mod_revision >= state[key].mod_revision:
                del state[key]
            else:
                self._decoded.pop(key, None)
                self._made.pop(key, None)
        entries.update(state)
        self._keys.update(state.keys() - held if held else state.keys())  # in one go
        self._followed |= follow.prefixes

    def _merge_due(self, revision: int) -> None:
        """Serve the followed prefixes read at or below `revision` (the cache reaches it)."""
        if not self._pending:
            return
        due = [follow for follow in self._pending if follow.due(revision)]
        if due:
            self._pending = [follow for follow in self._pending if not follow.due(revision)]
            for follow in due:
                self._merge(follow)

    def _watched(self) -> set[str]:
        """Every prefix the watch must follow: those served, and those about to be."""
        return set(self._followed).union(*(follow.prefixes for follow in self._pending))

    def _check_covered(self, key: str) -> None:
        if not self.covers(key):
            raise InvalidRequest(f"{key} is outside this cache's prefixes {self.prefixes}")

    def _keys_under(self, prefix: str) -> builtins.list[str]:
        keys: builtins.list[str] = []
        if prefix != ROOT and prefix in self._entries:
            keys.append(prefix)
        keys.extend(
            self._keys.irange(children_prefix(prefix), prefix_end(prefix), inclusive=(True, False))
        )
        return keys

    # -- listeners ---------------------------------------------------------------------

    def subscribe(self, prefix: str, *, buffer: int | None = None) -> Subscription:
        """The batches applied under `prefix` from now on, as an async iterator that holds
        at most `buffer` batches (default: the cache's `subscriber_buffer`)."""
        self._check_covered(check_prefix(prefix))
        size = self._buffer if buffer is None else buffer
        subscription = Subscription(prefix, size, self._subscriptions.discard)
        self._subscriptions.add(subscription)
        return subscription

    def listen(self, prefix: str, listener: Listener, *, buffer: int | None = None) -> ListenerTask:
        """Call `listener` (sync or async) with each batch applied under `prefix`, in a task
        of its own; `.cancel()` the result to stop."""
        task = ListenerTask(self.subscribe(prefix, buffer=buffer), listener)
        self._listeners.add(task)
        return task

    # -- loading -----------------------------------------------------------------------

    async def _load_into_empty(self) -> int:
        revision, entries = await self._read_all()
        self._load(revision, {entry.key: entry for entry in entries})
        return revision

    def _load(self, revision: int, entries: dict[str, Entry]) -> None:
        # In one go: the keys sorted once, not inserted into the sorted list one at a time.
        self._entries = entries
        self._keys = SortedList(self._entries)
        self._decoded.clear()
        self._made.clear()
        self._applied = revision

    async def _read_following(self) -> tuple[PrefixWatch, int, dict[str, Entry]]:
        """On a store without history: a new watch from now, every prefix added to it and
        read through it ("follow, then read"), and its batches taken until it has passed
        the read. Returns the watch, the revision of its last batch, and the state of the
        prefixes at that revision: for each key, the newer of what was read and what the
        watch delivered."""
        watch = self._store.watch_prefixes((), start_revision=None)
        try:
            follow = _Follow(set(self._watched()))
            follow.read(*await watch.add_and_read(sorted(follow.prefixes)))
            assert follow.ready is not None
            at = follow.revision
            async with asyncio.timeout(READ_FOLLOWING):
                while at < follow.ready:
                    watch.request_progress()
                    batch = await anext(watch)
                    for event in batch.events:
                        follow.record(event)
                    at = batch.revision
        except TimeoutError:
            await watch.aclose()
            raise Unavailable(
                f"cache {self._ancestor}: the watch did not pass its read in {READ_FOLLOWING} s"
            ) from None
        except BaseException:
            await watch.aclose()
            raise
        return watch, at, follow.state()

    async def _read_all(self) -> tuple[int, builtins.list[Entry]]:
        """Every entry under the prefixes, read at one revision: one scan, linear on every
        backend whatever writes meanwhile, in pages of PAGE keys."""
        entries: builtins.list[Entry] = []
        async with self._store.scan(sorted(self._watched()), page=PAGE) as pages:
            async for page in pages:
                entries.extend(page)
        assert pages.revision is not None
        return pages.revision, entries

    # -- following ---------------------------------------------------------------------

    async def _follow(self, watch: PrefixWatch | None = None) -> None:
        """Follow the store: on `watch` (one that has passed the cache's revision), then on
        a watch from the revision after the last applied, resuming or resyncing."""
        delay = _Backoff()
        while self._state is not CacheState.CLOSED:
            try:
                given, watch = watch, None
                await self._watch_from(self._applied + 1, delay, given)
            except Compacted as compacted:
                log.warning("cache %s: %s; resyncing", self._ancestor, compacted)
                self.resyncs += 1
                watch = await self._resync_until_done(delay)
            except MetadataError as error:  # Unavailable, or a refusal that may pass
                self.resumes += 1
                await self._set_state(CacheState.DISCONNECTED)
                log.warning("cache %s: watch broken (%s); resuming", self._ancestor, error)
                await delay.wait()
        if watch is not None:  # made by a resync as the cache closed
            await watch.aclose()

    async def _watch_from(
        self, start: int, delay: _Backoff, given: PrefixWatch | None = None
    ) -> None:
        async with self._changing:
            if given is None:
                prefixes = sorted(self._watched())
                watch = self._store.watch_prefixes(prefixes, start_revision=start)
            else:
                watch = given
            self._watch = watch
        try:
            progress = asyncio.get_running_loop().create_task(
                self._ask_progress(watch.request_progress)
            )
            # The first progress notification says the stream works, even if nothing changes.
            self._progress_wanted.set()
            try:
                async for batch in watch:
                    await self._set_state(CacheState.SYNCED)
                    delay.reset()
                    await self._apply(batch)
            finally:
                progress.cancel()
        finally:
            self._watch = None
            await watch.aclose()
        raise Unavailable("the watch ended")

    async def _ask_progress(self, request: Callable[[], None]) -> None:
        while True:
            await self._progress_wanted.wait()
            self._progress_wanted.clear()
            request()

    async def _apply(self, batch: WatchBatch) -> None:
        if batch.revision <= self._applied:
            if not batch.events:  # progress that says nothing new: a waiter asks again
                async with self._advanced:
                    self._advanced.notify_all()
            return  # a replay after a resume: already applied
        self._merge_due(batch.revision - 1)
        mine = tuple(event for event in batch.events if self.covers(event.key))
        for event in mine:
            self._apply_event(event)
        if self._pending and len(mine) < len(batch.events):
            for event in batch.events:  # prefixes being followed keep their own changes
                for follow in self._pending:
                    follow.record(event)
        await self._advance(batch.revision, WatchBatch(batch.revision, mine) if mine else None)

    def _apply_event(self, event: WatchEvent) -> None:
        current = self._entries.get(event.key)
        if current is not None and current.mod_revision >= event.revision:
            return
        if event.type is EventType.PUT:
            self._put(event.entry)
        elif current is not None:
            self._remove(event.key)

    async def _advance(self, revision: int, batch: WatchBatch | None) -> None:
        self._applied = revision
        self._merge_due(revision)
        if batch is not None:
            for subscription in list(self._subscriptions):
                subscription.offer(batch)
        async with self._advanced:
            self._advanced.notify_all()

    async def _resync_until_done(self, delay: _Backoff) -> PrefixWatch | None:
        """Resync until it succeeds; the watch to go on with (no history), or None."""
        await self._set_state(CacheState.RESYNCING)
        while self._state is not CacheState.CLOSED:
            try:
                watch = await self._resync()
                await self._set_state(CacheState.SYNCED)
                return watch
            except MetadataError as error:
                log.warning("cache %s: resync failed (%s); retrying", self._ancestor, error)
                await delay.wait()
        return None

    async def _resync(self) -> PrefixWatch | None:
        """Reload at a new revision and apply the differences as one batch of events. On a
        store without history, through a new watch (`_read_following`), returned to be
        followed on."""
        async with self._changing:
            for follow in self._pending:  # read again below, with the others
                self._followed |= follow.prefixes
            self._pending = []
        watch: PrefixWatch | None = None
        if self._store.keeps_history:
            revision, entries = await self._read_all()
            fresh = {entry.key: entry for entry in entries}
        else:
            watch, revision, fresh = await self._read_following()
        events = [
            WatchEvent(EventType.DELETE, Entry(key, b"", 0, 0, revision, 0))
            for key in self._entries
            if key not in fresh
        ]
        events.extend(
            WatchEvent(EventType.PUT, entry)
            for key, entry in fresh.items()
            if self._entries.get(key) != entry
        )
        for event in events:
            if event.type is EventType.PUT:
                self._put(event.entry)
            else:
                self._remove(event.key)
        events.sort(key=lambda event: event.key)
        await self._advance(revision, WatchBatch(revision, tuple(events)) if events else None)
        log.info("cache %s: resynced at %d (%d changes)", self._ancestor, revision, len(events))
        return watch

    def _put(self, entry: Entry) -> None:
        if entry.key not in self._entries:
            self._keys.add(entry.key)
        self._entries[entry.key] = entry
        self._decoded.pop(entry.key, None)
        self._made.pop(entry.key, None)

    def _remove(self, key: str) -> None:
        del self._entries[key]
        self._keys.remove(key)
        self._decoded.pop(key, None)
        self._made.pop(key, None)


@dataclass(slots=True)
class _Follow:
    """Prefixes being followed: added to the watch at `revision` and read (at it, or at
    once through the watch on a store without history: up to `ready`), served once the
    cache passes `ready`. Until then the events under them that the cache applies are kept
    here, the newest of each key, and laid over the read when it is served."""

    prefixes: set[str]
    revision: int = 0
    ready: int | None = None
    """None until the prefixes have been read."""
    entries: builtins.list[Entry] = field(default_factory=list)
    changes: dict[str, WatchEvent] = field(default_factory=dict)
    trimmed: bool = False
    """Some prefixes were dropped (unfollowed) since the follow began: the read may hold
    keys under them."""

    def drop(self, gone: set[str]) -> None:
        if self.prefixes & gone:
            self.prefixes -= gone
            self.trimmed = True

    def read(self, revision: int, entries: builtins.list[Entry], ready: int) -> None:
        self.revision, self.entries, self.ready = revision, entries, ready

    def due(self, revision: int) -> bool:
        return self.ready is not None and self.ready <= revision

    def holds(self, key: str) -> bool:
        return any(ancestor in self.prefixes for ancestor in ancestors(key))

    def record(self, event: WatchEvent) -> None:
        if self.holds(event.key):
            kept = self.changes.get(event.key)
            if kept is None or kept.revision < event.revision:
                self.changes[event.key] = event

    def state(self) -> dict[str, Entry]:
        """The entries read, with the newer changes kept laid over them (those after the
        add's revision: the read has the others), under the prefixes followed still."""
        if self.trimmed:
            state = {entry.key: entry for entry in self.entries if self.holds(entry.key)}
        else:  # every entry read lies under the prefixes it was read for
            state = dict(zip(map(_KEY_OF, self.entries), self.entries, strict=True))
        for key, event in self.changes.items():
            if event.revision <= self.revision or not self.holds(key):
                continue
            current = state.get(key)
            if current is not None and current.mod_revision >= event.revision:
                continue
            if event.type is EventType.PUT:
                state[key] = event.entry
            else:
                state.pop(key, None)
        return state


_KEY_OF = operator.attrgetter("key")


class _Backoff:
    """Exponential backoff with jitter, from 50 ms to 2 s."""

    def __init__(self) -> None:
        self._next = 0.05

    def reset(self) -> None:
        self._next = 0.05

    async def wait(self) -> None:
        await asyncio.sleep(self._next * random.uniform(0.5, 1.0))
        self._next = min(self._next * 2, 2.0)


def _covering(prefixes: Iterable[str]) -> tuple[str, ...]:
    """The prefixes without those another one already covers, sorted: a look-up of each
    one's ancestors (a broker follows two prefixes a topic, 20,000 for 10,000 topics —
    comparing each with every other one held its event loop for a minute)."""
    kept = covering(prefixes)
    if not kept:
        raise InvalidRequest("a cache needs at least one prefix")
    return kept


def _common_ancestor(prefixes: Sequence[str]) -> str:
    """The longest prefix that covers every one of `prefixes`."""
    split = [prefix.strip("/").split("/") if prefix != ROOT else [] for prefix in prefixes]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "/" + "/".join(common) if common else ROOT
