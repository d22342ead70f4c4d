"""The etcd backend's watch of a set of prefixes: one gRPC stream, one etcd watcher per
prefix on it, their responses put back together into whole revisions in order.

etcd sends the responses of the watchers of one stream through one channel, in revision
order, as long as every watcher is *synced* (created "from now", or caught up) — so every
watcher here is created from now, never from a past revision:

- A revision X is whole once the stream has shown a later revision (every watcher's
  response for X went through the channel before it), or once a progress notification
  at or past X stands (trusted from servers that order it, verified on older ones, as a
  single watch's: `_etcd_watch`). With one watcher, a response is whole by itself.
- History (a `start_revision` in the past; the revisions missed across a fail-over) is
  read by one watch over the whole keyspace from the last revision passed, on a stream of
  its own, up to the revision the new watchers were created at, filtered by the prefixes:
  one watcher's events come in order and whole.
- While watchers are being created (an `add`), nothing above the revision the stream had
  shown when the add began is released: etcd holds a new watcher's events until its
  creation is acknowledged, and that acknowledgement may overtake other watchers' events.
  Then nothing above the creation's revision is released until every new watcher is known
  to be synced (`_until_synced`).
- A watcher whose channel was full when etcd notified it (a "victim") gets its event late,
  after later revisions of the others. The watch sees an event at or below a revision it
  already released: if that batch is still unread, it drops the batches from there and
  re-opens from the revision before (history filling the gap); if the caller has read it,
  it raises `OrderLost`, and the caller resyncs.

Many prefixes with one parent (a broker's topics of one namespace: `/topics/{ns}/{topic}`)
are watched as one: once more than `WATCHERS_PER_PARENT` prefixes followed have the same
parent, that parent gets a watcher and the prefixes under it get none of their own (etcd 3.4
spends about a millisecond of its CPU on each watcher it creates: 100,000 topics would be
200,000 watchers). The parent's watcher sends the changes of its whole range; those under no
prefix followed are dropped here. A prefix added under a parent already watched needs no
creation: it is followed after a revision read once that watcher was created. Watchers of
prefixes created before their parent was are left to the end of the stream (the next one
creates the parent's only), or cancelled when their prefix is removed; a revision's events
are kept by key, so a change seen by both comes once.

The stream is read into an unbounded queue, so that the client never presses back on
etcd's channel (which is how a watcher becomes a victim). Fail-over and liveness are the
single watch's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aetcd import rpc

from metaplane.store._base import PrefixWatch
from metaplane.store._errors import Compacted, MetadataError, OrderLost, Unavailable
from metaplane.store._etcd_watch import EtcdWatch, _Ended, _event, _Stream
from metaplane.store._etcd_wire import key_of, to_bytes
from metaplane.store._keys import ROOT, ancestors, check_prefix, in_prefix, prefix_end
from metaplane.store._model import WatchBatch, WatchEvent

if TYPE_CHECKING:
    from metaplane.store._etcd import EtcdStore

log = logging.getLogger(__name__)

CREATION_COST = 0.002
"""Seconds of a member's silence allowed per watcher it is still creating (etcd 3.4 spends
about a millisecond of CPU on each)."""

WATCHERS_PER_PARENT = 64
"""Above this many prefixes followed with the same parent, the parent is watched instead
(see the module docstring)."""

_WAKE = object()
"""Put in the queue to wake the caller: something changed besides a response."""

_SYNC = object()
"""The key of the hold until the watchers created last are known to be synced."""

SYNC_WAIT = 0.3
"""On a server that does not order progress: how long after a watcher's acknowledgement
etcd may still be catching it up (its loop syncs lagging watchers every 100 ms)."""

_FLUSH = object()
"""The key of the hold while etcd may still send events it held back for a new watcher."""


class _StreamChanged(Exception):
    """The stream an add was following prefixes on ended meanwhile: it starts again."""


def _parent(prefix: str) -> str | None:
    """The prefix's parent, if one it may be watched under (never the whole keyspace)."""
    end = prefix.rfind("/")
    return prefix[:end] if end > 0 else None


@dataclass(eq=False)
class _Creation:
    """Watchers created together (a stream's opening, or one `add`)."""

    prefixes: list[str]
    """The prefixes of the watchers created."""
    done: asyncio.Future[int]
    """The revision of the last acknowledgement, once every one came."""
    waiting: set[int] = field(default_factory=set)
    revision: int = 0
    earliest: int | None = None
    """The lowest revision an acknowledgement carried."""
    opening: bool = False
    follows: list[str] = field(default_factory=list)
    """The prefixes followed after the creation's revision (under the watchers created, or
    under a parent's created before them on the stream)."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once its watchers deliver what they cover (a stream's opening: once its history
    is read too), or once the stream ended."""


class EtcdPrefixWatch(EtcdWatch, PrefixWatch):
    """See the module docstring."""

    def __init__(
        self, store: EtcdStore, prefixes: frozenset[str], start_revision: int | None
    ) -> None:
        EtcdWatch.__init__(self, store, ROOT, start_revision)
        self._responses = asyncio.Queue()  # unbounded: see the module docstring
        first = None if start_revision is None else start_revision - 1
        self._after: dict[str, int | None] = dict.fromkeys(prefixes, first)
        """Each prefix followed and the revision after which its events are delivered
        (None: not yet known, while it is being created)."""
        self._adding: set[str] = set()
        """Prefixes an `add` is creating watchers for (a new stream leaves them to it)."""
        self._children: dict[str, int] = {}
        """Parent → how many prefixes followed have it as their parent."""
        self._parents: set[str] = set()
        """The parents watched as a whole (more than WATCHERS_PER_PARENT children)."""
        for prefix in self._after:
            self._counted(prefix, 1)
        self._ids: dict[int, str] = {}
        """Watch id → the prefix of its watcher (a prefix followed, or a parent)."""
        self._watched: dict[str, int] = {}
        """The prefix of each watcher of this stream → its watch id."""
        self._made_by: dict[int, _Creation] = {}
        """Watch id → the creation that made it, on this stream."""
        self._dropped: set[int] = set()
        self._next_id = 1
        self._creating: dict[int, _Creation] = {}
        """Watch id → the creation it is part of, until etcd acknowledges it."""
        self._holds: dict[object, int] = {}
        """While watchers are being created: the revisions above which nothing is released."""
        self._syncing: list[tuple[int, float, int]] = []
        """Creations not yet known to be synced: (revision, the loop time after which a
        progress request proves it, the lowest revision acknowledged) each; the _SYNC hold
        is the lowest revision."""
        self._pending: dict[int, dict[str, WatchEvent]] = {}
        self._seen = 0
        """The highest revision of an event received on this stream."""
        self._flushing: int | None = None
        """The watcher whose held-back events may still be coming (see `_acknowledged`)."""
        self._covered = 0
        """The revision through which this stream's history was read when it opened: its
        watchers' events up to there are the same again."""
        self._handed = 0
        self._failure: MetadataError | None = None

    # -- the set -------------------------------------------------------------------------

    @property
    def prefixes(self) -> frozenset[str]:
        return frozenset(self._after)

    async def add(self, prefixes: Iterable[str]) -> int:
        new = list(dict.fromkeys(p for p in map(check_prefix, prefixes) if p not in self._after))
        if not new:
            return await self._store._revision()
        for prefix in new:
            self._after[prefix] = None
            self._adding.add(prefix)
            self._counted(prefix, 1)
        try:
            return await self._add(new)
        except BaseException:
            # Not followed after all (an error, a cancellation): a prefix left without its
            # revision would drop its events for good, and a later add would take it as
            # followed already.
            for prefix in new:
                if prefix in self._after and self._after[prefix] is None:
                    del self._after[prefix]
                    self._counted(prefix, -1)
            raise
        finally:
            self._adding.difference_update(new)

    def _counted(self, prefix: str, change: int) -> None:
        """Count `prefix` in (or out of) its parent's children; a parent with more than
        WATCHERS_PER_PARENT becomes watched as a whole (until none is left)."""
        parent = _parent(prefix)
        if parent is None:
            return
        count = self._children.get(parent, 0) + change
        if count > 0:
            self._children[parent] = count
        else:
            self._children.pop(parent, None)
            self._parents.discard(parent)
        if count > WATCHERS_PER_PARENT:
            self._parents.add(parent)

    def _watcher_of(self, prefix: str) -> str:
        """The prefix whose watcher sends the changes under `prefix`."""
        parent = _parent(prefix)
        return parent if parent in self._parents else prefix

    def _watchers_for(self, prefixes: Iterable[str]) -> list[str]:
        """The watchers `prefixes` need (each once)."""
        return list(dict.fromkeys(map(self._watcher_of, prefixes)))

    async def _add(self, new: list[str]) -> int:
        while True:
            if self._closed:
                raise Unavailable("etcd: the prefix watch is closed")
            stream = self._stream
            if stream is None:
                revision = await self._store._revision()
                if self._stream is None:  # the next stream creates them, from here
                    self._follow_after(new, revision)
                    return revision
                continue  # a stream opened meanwhile: create them on it
            missing = [w for w in self._watchers_for(new) if w not in self._watched]
            if not missing:
                try:
                    return await self._follow_covered(stream, new)
                except _StreamChanged:
                    continue
            creation = self._create(stream, missing, hold=self._seen, follows=new)
            try:
                # shielded: a cancelled add must not cancel the creation (its hold would stay)
                return await asyncio.shield(creation.done)
            except MetadataError:
                continue  # the stream ended before they were created: on the next one

    async def _follow_covered(self, stream: _Stream, new: list[str]) -> int:
        """Follow prefixes whose watchers exist on `stream` already (a parent's): after a
        revision read once those watchers are created. Their changes above it come through
        those watchers; nothing above what the stream has shown is released meanwhile, and
        until then the prefixes' events are kept (they are being added)."""
        hold = object()
        self._holds[hold] = self._seen
        try:
            for watcher in self._watchers_for(new):
                creation = self._made_by.get(self._watched.get(watcher, -1))
                if creation is not None:
                    # Settled: acknowledged, and for a stream's opening its history read.
                    await creation.settled.wait()
            if self._stream is not stream:
                raise _StreamChanged
            revision = await self._store._revision()
        except MetadataError:
            if self._stream is stream:
                raise
            raise _StreamChanged from None
        finally:
            self._holds.pop(hold, None)
        if self._stream is not stream:
            raise _StreamChanged  # a new stream: its history did not keep their events
        self._follow_after(new, revision)
        self._release(self._seen - (len(self._ids) > 1))
        self._poke.set()  # a revision held meanwhile waits for its proof: ask at once
        self._wake()
        return revision

    def _follow_after(self, prefixes: list[str], revision: int) -> None:
        for prefix in prefixes:
            if prefix in self._after:
                self._after[prefix] = revision
        if self._passed is None:  # not opened yet: the watch starts here
            self._passed = self._queued = revision
            for prefix, since in self._after.items():
                if since is None and prefix not in self._adding:
                    self._after[prefix] = revision

    async def remove(self, prefixes: Iterable[str]) -> None:
        gone = {prefix for prefix in prefixes if prefix in self._after}
        parents = set(self._parents)
        for prefix in gone:
            del self._after[prefix]
            self._counted(prefix, -1)
        # A removed prefix's own watcher goes, unless it is also a parent still watched; a
        # parent with no prefix left under it goes, unless it is itself followed.
        unwatched = {p for p in gone if p not in self._parents}
        unwatched |= {p for p in parents - self._parents if p not in self._after}
        stream = self._stream
        for watch_id, prefix in list(self._ids.items()):
            if prefix in unwatched:
                del self._ids[watch_id]
                self._watched.pop(prefix, None)
                self._made_by.pop(watch_id, None)
                self._dropped.add(watch_id)
                if stream is not None:
                    cancel = rpc.WatchCancelRequest(watch_id=watch_id)
                    self._write(stream, rpc.WatchRequest(cancel_request=cancel))

    def _delivers(self, event: WatchEvent, creating: bool = False) -> bool:
        """Whether `event` is past the revision its prefix is followed after; `creating`:
        or its prefix is still being created (the revision is not known yet: the event is
        kept, and filtered again when handed out)."""
        after = self._after
        revision = event.revision
        for ancestor in ancestors(event.key):
            since = after.get(ancestor, revision)
            if since is None:
                if creating and ancestor in after:
                    return True
            elif since < revision:
                return True
        return False

    # -- what the caller sees --------------------------------------------------------------

    async def __anext__(self) -> WatchBatch:
        while True:
            while not self._ready:
                if self._failure is not None:
                    raise self._failure
                if self._closed:
                    raise StopAsyncIteration
                if self._stream is None:
                    await self._open()
                    continue
                stream, item = await self._responses.get()
                if stream is not self._stream or item is _WAKE or item is None:
                    continue  # left over from a stream given up on, or a wake-up
                if isinstance(item, _Ended):
                    await self._ended(stream, item)
                else:
                    await self._receive(stream, item)
            batch = self._ready.pop(0)
            if batch.events:
                kept = tuple(event for event in batch.events if self._delivers(event))
                if not kept:
                    continue  # its prefixes were removed since
                batch = WatchBatch(batch.revision, kept)
            self._handed = batch.revision
            return batch

    def _wake(self) -> None:
        self._responses.put_nowait((self._stream, _WAKE))

    # -- a stream --------------------------------------------------------------------------

    def _start(self, index: int) -> _Stream:
        store = self._store
        member = store._members[index]
        loop = asyncio.get_running_loop()
        call = member.watch.Watch(metadata=store._stream_metadata())
        stream = _Stream(index, member.address, call, loop.time())
        stream.tasks = [
            loop.create_task(self._read(stream), name="etcd prefix watch read"),
            loop.create_task(self._watch_over(stream), name="etcd prefix watch dog"),
        ]
        self._ids, self._dropped, self._creating, self._holds = {}, set(), {}, {}
        self._watched, self._made_by = {}, {}
        self._syncing = []
        self._flushing = None
        self._pending, self._seen, self._covered = {}, 0, 0
        follows = [p for p in self._after if p not in self._adding]
        creation = self._create(
            stream, self._watchers_for(follows), hold=self._passed or 0, follows=follows
        )
        creation.opening = True
        stream.tasks.append(loop.create_task(self._opened(stream, creation, index)))
        return stream

    def _create(
        self, stream: _Stream, prefixes: list[str], hold: int, follows: list[str]
    ) -> _Creation:
        """Create a watcher from now for each prefix, for the prefixes `follows`. Nothing
        above `hold` is released until etcd has acknowledged them all (`_created`)."""
        creation = _Creation(prefixes, asyncio.get_running_loop().create_future())
        creation.follows = follows
        self._holds[creation] = hold
        for prefix in prefixes:
            watch_id = self._next_id
            self._next_id += 1
            self._ids[watch_id] = prefix
            self._watched[prefix] = watch_id
            self._made_by[watch_id] = creation
            self._creating[watch_id] = creation
            creation.waiting.add(watch_id)
            start, end = to_bytes(prefix), to_bytes(prefix_end(prefix))
            if prefix == ROOT:
                start = b"/"
            create = rpc.WatchCreateRequest(key=start, range_end=end, watch_id=watch_id)
            self._write(stream, rpc.WatchRequest(create_request=create))
        return creation

    def _acknowledged(self, watch_id: int, revision: int) -> None:
        creation = self._creating.pop(watch_id, None)
        if creation is None:
            return
        creation.waiting.discard(watch_id)
        creation.revision = max(creation.revision, revision)
        creation.earliest = min(creation.earliest or revision, revision)
        if not creation.waiting:
            # etcd holds a watcher's events back until its acknowledgement is sent and sends
            # them right after it: until a response other than those shows, nothing seen so
            # far is released.
            self._flushing = watch_id
            self._holds[_FLUSH] = self._seen
            self._created(creation)

    def _created(self, creation: _Creation) -> None:
        """Every watcher of a creation is acknowledged: its prefixes are followed after the
        last acknowledgement's revision — set now, before any later response is read."""
        if creation.opening:
            if self._passed is None:  # "from now": the last creation is now
                self._follow_after([], creation.revision)
        else:
            self._follow_after(creation.follows, creation.revision)
            self._until_synced(creation)
            self._release(self._seen - 1)
            creation.settled.set()
        if not creation.done.done():
            creation.done.set_result(creation.revision)

    async def _opened(self, stream: _Stream, creation: _Creation, index: int) -> None:
        """Once every watcher is created: the revisions up to then come from history."""
        try:
            await self._opening(stream, creation, index)
        finally:
            creation.settled.set()

    async def _opening(self, stream: _Stream, creation: _Creation, index: int) -> None:
        if not creation.prefixes:
            creation.revision = await self._now(index)
            self._created(creation)
        try:
            now = await asyncio.shield(creation.done)
        except MetadataError:
            return  # the stream ended: its reader said why
        assert self._passed is not None
        if self._passed < now:
            try:
                through = await self.read_history(
                    self._store._members[index], self._passed, now, self._from_history
                )
            except MetadataError as error:  # compacted: the watch is closed already
                self._failure = error
                self._wake()
                return
            if through < now:
                short = Unavailable(f"etcd: the history to {now} was not read")
                await self._responses.put((stream, _Ended(short, fail_over=True)))
                return
            self._covered = now
        self._until_synced(creation)
        self._release(max(self._seen - (len(self._ids) > 1), now))
        self._wake()

    def _until_synced(self, creation: _Creation) -> None:
        """etcd registers a watcher asked for "from now" as one to catch up when a write
        lands between its reading of the revision and the registration; such a watcher
        sends its first events late, after other watchers' later ones, once etcd's sync
        loop (every 100 ms) has caught it up. So nothing above the creation's revision is
        released until a progress notification stands that shows every watcher synced:
        where etcd orders progress, it answers only then; where it does not, one at the
        revision every acknowledgement carried (nothing was written since any watcher read
        it: each was registered synced), or one requested SYNC_WAIT after the
        acknowledgement — verified against history, both."""
        self._holds.pop(creation, None)
        if creation.prefixes:
            loop = asyncio.get_running_loop()
            wait = 0.0 if self._store.progress_in_order else SYNC_WAIT
            earliest = creation.revision if creation.earliest is None else creation.earliest
            self._syncing.append((creation.revision, loop.time() + wait, earliest))
            self._hold_until_synced()
            if wait:
                loop.call_later(wait, self._poke.set)
            self._poke.set()

    def _synced(self, notified: int, through: int, asked: float | None) -> None:
        """A progress notification at `notified` stands through `through`, answering a
        request sent at `asked` (None: not known): the creations it proves synced no longer
        hold. (It came after their acknowledgements: etcd answers requests and creations
        in order.)"""
        in_order = self._store.progress_in_order

        def proven(revision: int, after: float, earliest: int) -> bool:
            if revision > through:
                return False
            waited = asked is not None and asked >= after
            return in_order or waited or notified == earliest

        self._syncing = [entry for entry in self._syncing if not proven(*entry)]
        self._hold_until_synced()

    def _hold_until_synced(self) -> None:
        """Hold at the lowest revision of the creations not yet known synced, if any."""
        if self._syncing:
            self._holds[_SYNC] = min(revision for revision, _, _ in self._syncing)
        else:
            self._holds.pop(_SYNC, None)

    async def _now(self, index: int) -> int:
        response = await self._store._members[index].kv.Range(
            rpc.RangeRequest(key=b"/", count_only=True), metadata=self._store._metadata
        )
        revision: int = response.header.revision
        return revision

    def _from_history(self, event: Any) -> bool:
        revision = int(event.kv.mod_revision)
        watch_event = _event(event)
        if self._delivers(watch_event):
            self._pending.setdefault(revision, {})[watch_event.key] = watch_event
        return False

    async def aclose(self) -> None:
        stream = self._stream
        await super().aclose()
        if stream is not None:
            self._forget(stream)  # an add waiting on the stream's creations ends

    async def _ended(self, stream: _Stream, ended: _Ended) -> None:
        self._forget(stream)
        await super()._ended(stream, ended)

    def _forget(self, stream: _Stream) -> None:
        """The stream is over: the creations it still owed fail (their `add` falls back)."""
        for creation in set(self._creating.values()):
            if not creation.done.done():
                creation.done.set_exception(Unavailable("etcd: the watch stream ended"))
                creation.done.exception()  # retrieved: an add may have stopped waiting
        for made in self._made_by.values():
            made.settled.set()  # an add waiting on one starts again on the next stream
        self._creating = {}
        self._holds = {}
        self._syncing = []

    # -- what a stream says ----------------------------------------------------------------

    async def _receive(self, stream: _Stream, response: Any) -> None:
        self._failures = 0
        if self._flushing is not None and not (
            response.events and response.watch_id == self._flushing
        ):
            self._flushing = None  # the events etcd held back came before this
            self._holds.pop(_FLUSH, None)
        if response.compact_revision:
            raise await self._fail(Compacted(response.compact_revision))
        if response.canceled:
            if response.watch_id in self._dropped:
                self._dropped.discard(response.watch_id)
                return
            await self._cancelled(stream, response.cancel_reason)
        elif response.created:
            self._new_tokens = 0
            self._acknowledged(response.watch_id, response.header.revision)
        elif response.events:
            await self._take(stream, response)
        else:
            asked = stream.unanswered.popleft() if stream.unanswered else None
            await self._progress_notified(response.header.revision, asked)

    async def _take(self, stream: _Stream, response: Any) -> None:
        prefix = self._ids.get(response.watch_id)
        if prefix is None:
            return  # a watcher removed since
        late = None
        for raw in response.events:
            revision = int(raw.kv.mod_revision)
            if not in_prefix(key_of(raw.kv), prefix):
                continue
            event = _event(raw)
            if revision <= self._covered or not self._delivers(event, creating=True):
                continue  # (a watcher acknowledged may send events before its creation's end)
            if self._passed is not None and revision <= self._passed:
                late = revision if late is None else min(late, revision)
                continue
            self._pending.setdefault(revision, {})[event.key] = event
            self._seen = max(self._seen, revision)
        if late is not None:
            await self._late(stream, late)
            return
        self._seen = max(self._seen, int(response.events[-1].kv.mod_revision))
        # With several watchers, a revision is whole once a later one shows.
        self._release(self._seen - (len(self._ids) > 1))
        if self._pending:
            self._poke.set()  # a revision waits for its proof: ask for progress at once

    async def _late(self, stream: _Stream, revision: int) -> None:
        """An event came after batches at or above its revision were released."""
        if revision <= self._handed:
            raise await self._fail(OrderLost(revision))
        log.warning("prefix watch: an event of %d came late; reading again from there", revision)
        self._ready = [batch for batch in self._ready if batch.revision < revision]
        self._passed = revision - 1
        self._queued = self._ready[-1].revision if self._ready else self._handed
        self._stream = None
        self._forget(stream)
        await stream.stop()

    def _release(self, through: int) -> None:
        """Move every pending revision up to `through` (bounded by the holds) to the
        batches ready to hand out."""
        if self._holds:
            through = min(through, *self._holds.values())
        if self._passed is None or through <= self._passed:
            return
        for revision in sorted(r for r in self._pending if r <= through):
            events = tuple(self._pending.pop(revision).values())
            self._ready.append(WatchBatch(revision, events))
            self._queued = revision
        self._passed = through

    def _deadline(self, stream: _Stream) -> float:
        """While etcd creates watchers (about a millisecond of its CPU each on 3.4) it may
        answer nothing else for a while: DEADLINE plus CREATION_COST for each watcher still
        unacknowledged, at most the store's timeout. (A flat store timeout here let a member
        hung just after a watch opened keep a cache silent for that whole timeout.)"""
        base = super()._deadline(stream)
        if self._creating:
            allowance = base + CREATION_COST * len(self._creating)
            return min(max(allowance, base), max(self._store.options.timeout, base))
        return base

    def _creating_now(self) -> bool:
        return any(hold not in (_SYNC, _FLUSH) for hold in self._holds)

    def _wants_progress(self) -> bool:
        if self._creating_now():
            return False
        return self._progress or bool(self._pending) or bool(self._syncing)

    async def _progress_notified(self, revision: int, asked: float | None = None) -> None:
        passed = self._passed
        if passed is None:
            return
        if not self._wants_progress():  # an answer to the watchdog: the stream lives
            if not self._creating_now():
                await self._keep_up(passed, revision)
            return
        through = max(revision, passed)
        if revision > passed and not self._store.progress_in_order:
            through = await self._verified_through(passed, revision)
            if self._closed:
                raise StopAsyncIteration
        if self._syncing:
            self._synced(revision, through, asked)
        self._release(through)
        released = self._passed  # as far as released: the holds may bound it
        if self._progress and released is not None and released > self._queued:
            self._progress = False
            self._queued = released
            self._ready.append(WatchBatch(released, ()))

    def _pass(self, through: int) -> None:
        self._release(through)

    async def _pending_by_reading(self, member: Any, passed: int, revision: int) -> bool | None:
        return None  # a read per prefix would cost more than the probe: no verdict

    def _pending_change(self, event: Any) -> bool:
        watch_event = _event(event)
        if not self._delivers(watch_event):
            return False
        return watch_event.key not in self._pending.get(watch_event.revision, {})
