"""The etcd backend's watch: one etcd watch stream at a time over the range of a prefix,
moved to the next member when its member dies or stops answering, and progress
notifications passed on only once no event before them can still be coming.

Liveness. A stream that has been silent for IDLE seconds is asked for progress, again every
REPEAT seconds while unanswered (etcd may drop one request from a watcher still catching
up). If nothing at all — event, progress, any response — arrives within DEADLINE of the
first unanswered request (or of the request that created the stream), its member counts as
failed, exactly as a dead one: the store moves to the next member and the watch re-opens
there from the last revision it passed + 1. What was received but not yet handed out is
kept, so the caller sees no gap, no duplicate and no reordering. Only when no member has
answered for the store's timeout does the watch raise `Unavailable`. (A server that orders
progress, 3.4.25 and later, also defers a request until a watcher has caught up with the
history it started in: while a stream catches up there, its deadline is the store's.)

Progress. etcd before 3.4.25 / 3.5.8 sends a requested progress notification on its
control stream, where it can overtake the events it claims to follow (etcd issue 15220).
On such a server a notification at P, after the stream passed D, is verified: a cheap read
at P first (a key under the prefix modified in (D, P], or a different count at D and at P,
means events are pending); then a probe watch over the whole keyspace from D + 1 on a
stream of its own. A watcher's own events come in order and every revision has an event
somewhere in the keyspace, so once the probe has shown an event at or past P it has shown
every change in (D, P]: the notification stands if none lies under the prefix. The probe
reads the whole store's changes since the last verified revision; that is the price of an
old server. So that the price stays small, a watch whose stream answers its liveness checks
with a revision KEEP_UP or more past D verifies that answer too (a quiet prefix would else
stay at D while the store moves on by millions of changes, more than etcd sends within a
probe's time), and a probe that got no history in its time waits twice as long the next time
(etcd 3.4 reads all of it before sending the first part). If the probe's history is
compacted the watch cannot verify and raises `Compacted`, for the caller to resync.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from aetcd import rpc

from metaplane._tasks import cancel_and_wait
from metaplane.store._base import Watch
from metaplane.store._errors import (
    Compacted,
    MetadataError,
    PermissionDenied,
    Unavailable,
)
from metaplane.store._etcd_wire import (
    convert,
    entry_of,
    is_transport,
    key_of,
    key_ranges,
    to_bytes,
)
from metaplane.store._keys import ROOT, in_prefix, prefix_end
from metaplane.store._local import group
from metaplane.store._model import EventType, WatchBatch, WatchEvent, deleted_entry

if TYPE_CHECKING:
    from metaplane.store._etcd import EtcdStore, _Member

log = logging.getLogger(__name__)

IDLE = 0.5
"""A stream silent this long is asked for progress, to learn whether its member lives."""

DEADLINE = 1.0
"""A stream that sends nothing at all this long after a request its member must answer
(the watch's creation, a progress request) counts as failed: its member is hung or gone."""

REPEAT = 0.25
"""An unanswered progress request is sent again this often: etcd may drop one."""

STALL_GRACE = 0.25
"""On a server that may never answer a progress request made while a new watch catches up
(etcd issue 17507), the first request waits this long after the watch is created."""

PROBE_TIMEOUT = 3.0
"""How long a probe may read once its watcher is created (DEADLINE for that) before it
stops; what it read through so far still counts."""

PATIENCE_LIMIT = 60.0
"""The longest a probe waits for history after its watcher was created. etcd 3.4 reads the
whole history from the probe's start before it sends the first 1,000 revisions of it, again
for each next 1,000: a probe that read nothing in its time waits twice as long the next time
(up to this), so that it makes progress whatever the history's size."""

KEEP_UP = 1_000
"""On a server whose progress is verified: once a progress notification nobody asked for
is this many revisions past the last revision passed, it is verified anyway, and passed."""

_WHOLE_KEYSPACE = (b"\0", b"\0")  # etcd: key "\0" and range_end "\0" mean every key
_PROGRESS_REQUEST = rpc.WatchRequest(progress_request=rpc.WatchProgressRequest())


def _version(version: str) -> tuple[int, int, int] | None:
    try:
        major, minor, patch = (int(part) for part in version.split("-")[0].split(".")[:3])
    except ValueError:
        return None
    return major, minor, patch


def orders_progress(version: str) -> bool:
    """True when an etcd server of `version` sends requested progress notifications in order
    with watch events: 3.4.25, 3.5.8 and later (etcd issue 15220, fixed by PR 15237). An
    unknown version is not trusted."""
    parsed = _version(version)
    if parsed is None:
        return False
    major, minor, patch = parsed
    if (major, minor) == (3, 4):
        return patch >= 25
    if (major, minor) == (3, 5):
        return patch >= 8
    return (major, minor) > (3, 5)


def stalls_progress(version: str) -> bool:
    """True when an etcd server of `version` may never answer a progress request made while
    a watcher catches up and no event matches it: the fix for 15220 deferred such requests
    until the next event (etcd issue 17507), until 3.4.31 and 3.5.13 (PRs 17567, 17566)."""
    parsed = _version(version)
    if parsed is None:
        return False
    major, minor, patch = parsed
    if (major, minor) == (3, 4):
        return 25 <= patch < 31
    if (major, minor) == (3, 5):
        return 8 <= patch < 13
    return False


@dataclass(frozen=True)
class _Ended:
    """The last item of a stream in the queue: why it ended, and whether the watch goes on
    on the next member (`fail_over`), after a new login (`new_token`), or stops."""

    error: MetadataError
    fail_over: bool = False
    new_token: bool = False


class _Stream:
    """One gRPC watch stream on one member, and what its watchdog knows of it."""

    def __init__(self, index: int, address: str, call: Any, now: float) -> None:
        self.index = index
        self.address = address
        self.call = call
        self.reading_since: float | None = now
        """Since when its reader waits for a response (None while it hands one over)."""
        self.expecting_since: float | None = now
        """Since when a request that must be answered (creation, progress) is unanswered."""
        self.asked_at: float | None = None
        self.unanswered: collections.deque[float] = collections.deque()
        """When each progress request still unanswered was sent, oldest first (a server that
        does not order progress answers every request, in order)."""
        self.created_at: float | None = None
        self.catching_up_to = 0
        """The store's revision when the stream was created, if it started behind it."""
        self.tasks: list[asyncio.Task[None]] = []
        self.outbox: collections.deque[Any] = collections.deque()
        self.writing: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        """Cancel its tasks and its call, every one before waiting for any."""
        current = asyncio.current_task()
        tasks = [t for t in (*self.tasks, self.writing) if t is not None and t is not current]
        for task in tasks:
            task.cancel()
        self.call.cancel()
        for task in tasks:
            await cancel_and_wait(task)


class EtcdWatch(Watch):
    """One etcd watch stream at a time over the range of a prefix, filtered to its segment
    boundary, moved between members as the module docstring says.

    A task of its own reads the stream into a small queue (a caller that stops waiting must
    not cancel the gRPC read, which would end the whole stream); another watches over it.
    """

    def __init__(self, store: EtcdStore, prefix: str, start_revision: int | None) -> None:
        super().__init__(prefix, start_revision)
        self._store = store
        self._stream: _Stream | None = None
        self._responses: asyncio.Queue[tuple[_Stream | None, Any]] = asyncio.Queue(maxsize=64)
        self._ready: list[WatchBatch] = []
        self._passed: int | None = None if start_revision is None else start_revision - 1
        """Every change under the prefix up to this revision is in `_ready` or handed out
        (None: a watch "from now" whose stream has not said when now is)."""
        self._queued = 0
        """The revision of the last batch put in `_ready`: every batch after it is above."""
        self._progress = False
        self._poke = asyncio.Event()
        self._closed = False
        self._heard_at: float | None = None
        self._failures = 0
        self._last_error: MetadataError | None = None
        self._new_tokens = 0
        self._patience = PROBE_TIMEOUT

    # -- what the caller sees ------------------------------------------------------------

    async def __anext__(self) -> WatchBatch:
        while not self._ready:
            if self._closed:
                raise StopAsyncIteration
            if self._stream is None:
                await self._open()
                continue
            stream, item = await self._responses.get()
            if stream is None or stream is not self._stream:
                continue  # left over from a stream given up on, or a wake-up (a close)
            if isinstance(item, _Ended):
                await self._ended(stream, item)
            else:
                await self._receive(stream, item)
        return self._ready.pop(0)

    def request_progress(self) -> None:
        self._progress = True
        self._poke.set()

    async def aclose(self) -> None:
        self._closed = True
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()
        with contextlib.suppress(asyncio.QueueFull):
            self._responses.put_nowait((None, None))  # wake a caller waiting in __anext__

    async def _fail(self, error: MetadataError) -> MetadataError:
        await self.aclose()
        return error

    # -- opening a stream ----------------------------------------------------------------

    async def _open(self) -> None:
        """Open a stream on the store's active member, from the revision after the last one
        passed; on failure move on to the next member until the store's timeout."""
        store = self._store
        loop = asyncio.get_running_loop()
        if self._heard_at is None:
            self._heard_at = loop.time()
        while True:
            silent_for = loop.time() - self._heard_at
            if silent_for >= store.options.timeout:
                reason = self._last_error or "no answer"
                message = f"etcd: no member answered the watch of {self.prefix} for "
                raise await self._fail(Unavailable(f"{message}{silent_for:.1f} s ({reason})"))
            if self._failures and self._failures % len(store._members) == 0:
                # every member failed in turn: back off a little
                await asyncio.sleep(min(0.05 * self._failures, 0.5))
            index = store._active
            try:
                async with asyncio.timeout(DEADLINE):
                    await store._ensure_token(store._members[index])
            except grpc.aio.AioRpcError as error:
                if not is_transport(error):
                    raise await self._fail(convert(error)) from error
                self._member_failed(index, Unavailable(f"etcd: {error.details()}"))
                continue
            except TimeoutError:
                self._member_failed(index, Unavailable("etcd: no answer to a login"))
                continue
            self._stream = self._start(index)
            return

    def _start(self, index: int) -> _Stream:
        store = self._store
        member = store._members[index]
        loop = asyncio.get_running_loop()
        call = member.watch.Watch(metadata=store._stream_metadata())
        stream = _Stream(index, member.address, call, loop.time())
        start, end = to_bytes(self.prefix), to_bytes(prefix_end(self.prefix))
        if self.prefix == ROOT:
            start = b"/"
        create = rpc.WatchCreateRequest(
            key=start,
            range_end=end,
            start_revision=0 if self._passed is None else self._passed + 1,
        )
        stream.tasks = [
            loop.create_task(self._read(stream), name=f"etcd watch {self.prefix} read"),
            loop.create_task(self._watch_over(stream), name=f"etcd watch {self.prefix} dog"),
        ]
        self._write(stream, rpc.WatchRequest(create_request=create))
        return stream

    def _write(self, stream: _Stream, request: Any) -> bool:
        """Send a request on the stream after those before it, from a task of its own: a
        write to a hung member may never finish, and the watchdog must not wait for it.
        False when a progress request is already waiting to go: one is enough."""
        if request.HasField("progress_request") and any(
            waiting.HasField("progress_request") for waiting in stream.outbox
        ):
            return False
        stream.outbox.append(request)
        if stream.writing is None or stream.writing.done():
            stream.writing = asyncio.get_running_loop().create_task(self._drain(stream))
        return True

    @staticmethod
    async def _drain(stream: _Stream) -> None:
        while stream.outbox:
            try:
                await stream.call.write(stream.outbox[0])
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                stream.outbox.clear()  # the call is over: its reader says why
                return
            stream.outbox.popleft()

    def _member_failed(self, index: int, error: MetadataError) -> None:
        self._failures += 1
        self._last_error = error
        self._store._fail_over(index, str(error))

    # -- the stream's reader and watchdog --------------------------------------------------

    async def _read(self, stream: _Stream) -> None:
        """Move the stream's responses into the queue; end with why the stream ended."""
        loop = asyncio.get_running_loop()
        ended: _Ended
        try:
            while True:
                stream.reading_since = loop.time()
                response = await stream.call.read()
                stream.reading_since = None
                if response is grpc.aio.EOF:
                    ended = _Ended(Unavailable("etcd: the watch stream ended"), fail_over=True)
                    break
                stream.expecting_since = None  # heard: whatever was asked, it lives
                self._heard_at = loop.time()
                if response.created:
                    stream.created_at = loop.time()
                await self._responses.put((stream, response))
        except grpc.aio.AioRpcError as error:
            stream.reading_since = None
            ended = self._ended_by(error)
        await self._responses.put((stream, ended))

    def _ended_by(self, error: grpc.aio.AioRpcError) -> _Ended:
        if self._store._token_refused(error):
            return _Ended(Unavailable("etcd: the watch's token was refused"), new_token=True)
        if is_transport(error):
            return _Ended(Unavailable(f"etcd: {error.details() or error.code().name}"), True)
        return _Ended(convert(error))

    async def _watch_over(self, stream: _Stream) -> None:
        """Ask for progress when asked to or silent, and give the stream up when nothing
        comes back within DEADLINE."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self._silent_past_deadline(stream, now, self._deadline(stream)):
                await self._give_up(stream, now)
                return
            if self._should_ask(stream, now) and self._write(stream, _PROGRESS_REQUEST):
                stream.asked_at = now
                stream.unanswered.append(now)
                if stream.expecting_since is None:
                    stream.expecting_since = now
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(self._next_look(stream, now, self._deadline(stream))):
                    await self._poke.wait()

    def _deadline(self, stream: _Stream) -> float:
        """DEADLINE; or, while the stream catches up on a server that answers progress in
        order, the store's timeout: such a server defers a progress request until the watcher
        has caught up, and a long history with nothing under the prefix sends nothing."""
        catching_up = self._passed is not None and self._passed < stream.catching_up_to
        if catching_up and self._store.progress_in_order:
            return self._store.options.timeout
        return DEADLINE

    @staticmethod
    def _silent_past_deadline(stream: _Stream, now: float, deadline: float) -> bool:
        expecting = stream.expecting_since
        return (
            stream.reading_since is not None
            and expecting is not None
            and now - expecting >= deadline
        )

    def _should_ask(self, stream: _Stream, now: float) -> bool:
        if stream.reading_since is None:
            return False  # a response is being handed over: the stream is not silent
        if stream.asked_at is not None and now - stream.asked_at < REPEAT:
            return False
        if self._store.progress_may_stall and (
            stream.created_at is None or now - stream.created_at < STALL_GRACE
        ):
            return False
        return self._wants_progress() or now - stream.reading_since >= IDLE

    def _wants_progress(self) -> bool:
        """Whether a progress notification is needed now, silence aside."""
        return self._progress

    @staticmethod
    def _next_look(stream: _Stream, now: float, deadline: float) -> float:
        if stream.reading_since is None:  # handing a response over: look again soon
            return now + REPEAT
        looks = [now + IDLE, stream.reading_since + IDLE]
        if stream.asked_at is not None:
            looks.append(stream.asked_at + REPEAT)
        if stream.expecting_since is not None:
            looks.append(stream.expecting_since + deadline)
        if stream.created_at is not None:
            looks.append(stream.created_at + STALL_GRACE)
        return max(min(look for look in looks if look > now - 1e-3), now + 0.01)

    async def _give_up(self, stream: _Stream, now: float) -> None:
        """The member sent nothing within its deadline of a request: end the stream as if its
        member had died. The reader is waiting on the stream (checked by the caller, with no
        await since), so stopping it first keeps the end marker last in the queue."""
        assert stream.expecting_since is not None
        silent = now - stream.expecting_since
        error = Unavailable(f"etcd member {stream.address} sent nothing for {silent:.1f} s")
        await cancel_and_wait(stream.tasks[0])
        stream.call.cancel()
        await self._responses.put((stream, _Ended(error, fail_over=True)))

    # -- what a stream says ----------------------------------------------------------------

    async def _ended(self, stream: _Stream, ended: _Ended) -> None:
        self._stream = None
        await stream.stop()
        if ended.new_token and self._new_tokens < 2:
            self._new_tokens += 1
            self._store._metadata = None  # log in again on the next stream
            return
        if not ended.fail_over:
            raise await self._fail(ended.error)
        log.warning("watch of %s: %s; moving on", self.prefix, ended.error)
        self._member_failed(stream.index, ended.error)

    async def _receive(self, stream: _Stream, response: Any) -> None:
        self._failures = 0
        if response.compact_revision:
            raise await self._fail(Compacted(response.compact_revision))
        if response.canceled:
            await self._cancelled(stream, response.cancel_reason)
        elif response.created:
            self._new_tokens = 0
            if self._passed is None:  # "from now": now is the revision it was created at
                self._passed = response.header.revision
            elif response.header.revision > self._passed:
                stream.catching_up_to = response.header.revision
        elif response.events:
            self._take_events(response.events)
        else:
            if stream.unanswered:
                stream.unanswered.popleft()
            await self._progress_notified(response.header.revision)

    async def _cancelled(self, stream: _Stream, reason: str) -> None:
        if "invalid auth token" in reason:
            await self._ended(stream, _Ended(Unavailable(f"etcd: {reason}"), new_token=True))
        elif "permission denied" in reason:
            raise await self._fail(PermissionDenied(f"etcd: the watch was cancelled: {reason}"))
        elif "no leader" in reason:
            await self._ended(stream, _Ended(Unavailable(f"etcd: {reason}"), fail_over=True))
        else:
            raise await self._fail(Unavailable(f"etcd: the watch was cancelled: {reason}"))

    def _take_events(self, events: Any) -> None:
        passed = self._passed or 0
        fresh = [event for event in events if event.kv.mod_revision > passed]
        batches = group(
            _event(event) for event in fresh if in_prefix(key_of(event.kv), self.prefix)
        )
        self._ready.extend(batches)
        if batches:
            self._queued = batches[-1].revision
        if fresh:
            self._passed = max(passed, fresh[-1].kv.mod_revision)

    async def _progress_notified(self, revision: int) -> None:
        """Pass a progress notification on if it was asked for and says something new,
        once nothing under the prefix up to it can still be coming."""
        passed = self._passed
        if passed is None:
            return
        if not self._progress:  # an answer to the watchdog: the stream lives
            await self._keep_up(passed, revision)
            return
        through = max(revision, passed)
        if revision > passed and not self._store.progress_in_order:
            through = await self._verified_through(passed, revision)
            if self._closed:
                raise StopAsyncIteration
            if through <= passed:
                return  # changes are pending, or no verdict: the request stands
        if through <= self._queued:
            return  # nothing new to say: the request stands, and is repeated
        self._passed = max(passed, through)
        self._queued = through
        self._progress = False
        self._ready.append(WatchBatch(through, ()))

    # -- verifying progress on an old server -------------------------------------------------

    async def _keep_up(self, passed: int, revision: int) -> None:
        """Verify a progress notification nobody asked for once it is KEEP_UP revisions past
        `passed`, and pass what it proves. A watch of quiet prefixes otherwise stays at the
        revision of its last event while the store moves on, and the proof its caller asks
        for next (a cache's follow waits for one) reads every change since: with 3M changes
        behind it etcd 3.4 sent nothing within a probe's deadline, attempt after attempt,
        and a follow never ended. Kept up, each probe reads about KEEP_UP revisions."""
        if self._store.progress_in_order or revision - passed < KEEP_UP:
            return
        # The probe alone: the read that may spare it reads the prefix's whole range, and
        # for a watch of "/" that is every key of the store.
        through = await self._probe(self._member(), passed, revision)
        if self._closed:
            raise StopAsyncIteration
        if through > passed:
            self._pass(through)

    def _pass(self, through: int) -> None:
        """Everything under the prefix through `through` is known to be in `_ready` or
        handed out."""
        self._passed = max(self._passed or 0, through)

    async def _verified_through(self, passed: int, revision: int) -> int:
        """The highest revision up to which no change under the prefix lies after `passed`,
        as far as can be told now: `passed` itself when changes are pending."""
        if revision <= 1:
            return revision  # revision 1 is the empty store: no change lies at or before it
        member = self._member()
        if await self._pending_by_reading(member, passed, revision):
            return passed  # changes are pending: the request is repeated
        return await self._probe(member, passed, revision)  # none seen, or no verdict

    def _member(self) -> _Member:
        """The member of the stream (or the store's active one between streams)."""
        stream = self._stream
        return self._store._members[stream.index if stream else self._store._active]

    async def _pending_by_reading(self, member: _Member, passed: int, revision: int) -> bool | None:
        """True if a read at `revision` shows a change under the prefix since `passed`: a
        key modified since, or a different number of keys; None if the read failed. A key
        created and deleted in between leaves no trace here: the probe sees it."""
        counted_at = [revision, passed] if passed >= 1 else [revision]
        # (revision 0 would mean "now"; before revision 2 the store is empty)
        requests = []
        for start, end in key_ranges(self.prefix):
            requests.append(
                rpc.RangeRequest(
                    key=start,
                    range_end=end,
                    revision=revision,
                    min_mod_revision=passed + 1,  # etcd's count ignores it: look for a key
                    keys_only=True,
                    limit=1,
                )
            )
            requests += [
                rpc.RangeRequest(key=start, range_end=end, revision=at, count_only=True)
                for at in counted_at
            ]
        txn = rpc.TxnRequest(success=[rpc.RequestOp(request_range=r) for r in requests])
        try:
            response = await member.kv.Txn(txn, timeout=DEADLINE, metadata=self._store._metadata)
        except grpc.aio.AioRpcError as error:  # compacted, or the member failed: no verdict
            log.debug("watch of %s: progress not read (%s)", self.prefix, error.details())
            return None
        parts = [part.response_range for part in response.responses]
        step = 1 + len(counted_at)
        modified = sum(len(part.kvs) for part in parts[0::step])
        now = sum(part.count for part in parts[1::step])
        before = sum(part.count for part in parts[2::step]) if passed >= 1 else 0
        return modified > 0 or now != before

    async def _probe(self, member: _Member, passed: int, revision: int) -> int:
        """Read every change of the keyspace from `passed` + 1 on a stream of its own until
        one at or past `revision`. Returns the highest revision read through with no change
        under the prefix; raises `Compacted` if that history is gone."""
        return await self.read_history(member, passed, revision, self._pending_change)

    def _pending_change(self, event: Any) -> bool:
        """True when `event`, read by a probe, is a change the watch has not passed on yet."""
        return in_prefix(key_of(event.kv), self.prefix)

    async def read_history(
        self, member: _Member, passed: int, revision: int, stops: Callable[[Any], bool]
    ) -> int:
        """Read every change of the keyspace from `passed` + 1 on a stream of its own until
        one at or past `revision`, or one that `stops` (the revision before it is returned
        then). Returns the highest revision read through; raises `Compacted` if that
        history is gone."""
        call = member.watch.Watch(metadata=self._store._stream_metadata())
        create = rpc.WatchCreateRequest(
            key=_WHOLE_KEYSPACE[0], range_end=_WHOLE_KEYSPACE[1], start_revision=passed + 1
        )
        through = passed
        created = False
        try:
            async with asyncio.timeout(DEADLINE):  # etcd answers a creation at once
                await call.write(rpc.WatchRequest(create_request=create))
                response = await call.read()
            created = True
            async with asyncio.timeout(self._patience):
                while through < revision:
                    if response is grpc.aio.EOF:
                        break
                    if response.compact_revision:
                        raise await self._fail(Compacted(response.compact_revision))
                    if response.canceled:
                        break
                    # A response holds whole revisions, in order, from `passed` + 1 on.
                    for event in response.events:
                        if stops(event):
                            self._patience = PROBE_TIMEOUT
                            return int(event.kv.mod_revision) - 1
                    if response.events:
                        through = response.events[-1].kv.mod_revision
                        self._patience = PROBE_TIMEOUT
                    if through < revision:
                        response = await call.read()
        except (TimeoutError, grpc.aio.AioRpcError, asyncio.InvalidStateError) as error:
            if created and through == passed:  # the member answers, its history is slow
                self._patience = min(self._patience * 2, PATIENCE_LIMIT)
            log.info(
                "watch of %s: progress verified through %d only (%r; next probe waits %.0f s)",
                self.prefix,
                through,
                error,
                self._patience,
            )
        finally:
            call.cancel()
        return through


def _event(event: Any) -> WatchEvent:
    if event.type == rpc.Event.EventType.DELETE:
        return WatchEvent(EventType.DELETE, deleted_entry(key_of(event.kv), event.kv.mod_revision))
    return WatchEvent(EventType.PUT, entry_of(event.kv))
