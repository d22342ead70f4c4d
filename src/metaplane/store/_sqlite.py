"""The embedded backend: one SQLite file in WAL mode, shared by every process on the machine.

Writes go to one thread per store that commits them in groups: each transaction keeps its
own revision, but several share one SQLite commit (and one fsync). Reads run on the event
loop's thread against their own connection; WAL readers never wait for writers. Watches
follow the `changes` table; other processes' commits are noticed through `PRAGMA
data_version`. Leases expire by wall-clock deadlines that any process holding the file
enforces, so a dead holder's keys are deleted by the survivors.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import enum
import itertools
import logging
import queue
import random
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from metaplane._tasks import cancel_and_wait
from metaplane.store._errors import (
    Compacted,
    InvalidRequest,
    LeaseNotFound,
    MetadataError,
    Unavailable,
)
from metaplane.store._keys import ROOT, children_prefix, prefix_end, ranges_in_key_order
from metaplane.store._local import (
    Change,
    LocalStore,
    apply_txn,
    paged,
    rewind,
    rewound,
    select,
    trim,
    under_any,
    undo_map,
)
from metaplane.store._model import (
    MAX_INT64,
    Entry,
    EventType,
    Lease,
    List,
    Listing,
    Put,
    Txn,
    TxnResult,
    WatchEvent,
    deleted_entry,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Synchronous = Literal["full", "normal"]

FORMAT = 1
DEFAULT_HISTORY = 100_000
DEFAULT_HISTORY_AGE = 3600.0
_MAX_GROUP = 256


class _Wake(enum.Enum):
    """Put on the writer's queue to wake it for an urgent job (kept apart, taken first)."""

    WAKE = "wake"


_WAKE = _Wake.WAKE

_Job = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", int]
"""A job of the writer, the future of its outcome, and its cost (operations it writes)."""

_MAX_GROUP_COST = 4_096
"""Operations a group of jobs writes at most: an urgent job waits at most for one group."""
_MAX_EVENTS_READ = 500
"""Changes a watch reads at a time. Each read holds the loop's thread, and every watch of
the process that is behind takes its turn in each pass of the loop: ten caches catching up
on a burst of 400,000 changes at 10,000 a read made a pass last seconds, past the lease
refreshes' deadline."""
_TAIL_EVENTS = 20_000
"""Changes of the whole store kept decoded after a read of the log, for the other watches of
this process that read the same revisions (the caches of a process's brokers each follow
their own prefixes, and each read the whole log: ten of them decoded every change ten
times)."""
_TAIL_BYTES = 32 << 20
"""The values the decoded tail holds at most, in bytes (a value may be up to 1 MiB)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('format', 1), ('revision', 1), ('floor', 1);
INSERT OR IGNORE INTO meta VALUES ('compacted', 0);
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    version INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    mod_revision INTEGER NOT NULL,
    lease INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_by_lease ON kv (lease) WHERE lease != 0;
CREATE TABLE IF NOT EXISTS changes (
    revision INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    value BLOB,
    version INTEGER,
    create_revision INTEGER,
    lease INTEGER,
    prev_value BLOB,
    prev_version INTEGER,
    prev_create_revision INTEGER,
    prev_mod_revision INTEGER,
    prev_lease INTEGER,
    committed_at REAL NOT NULL,
    PRIMARY KEY (revision, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY,
    ttl INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
"""

_COLUMNS = "key, value, version, create_revision, mod_revision, lease"
_KEY_COLUMNS = "key, x'', version, create_revision, mod_revision, lease"
_CHANGE_COLUMNS = (
    "revision, key, deleted, value, version, create_revision, lease, prev_value, "
    "prev_version, prev_create_revision, prev_mod_revision, prev_lease"
)


def _convert(exc: sqlite3.Error) -> MetadataError:
    """The one place where sqlite3's exceptions become the contract's."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError):
        return Unavailable(f"sqlite: {text}")
    if "not a database" in text or "malformed" in text:
        return MetadataError(f"sqlite: the file is not a usable metaplane store: {text}")
    return Unavailable(f"sqlite: {text}")


def _connect(path: str, synchronous: Synchronous, *, reader: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=not reader)
    conn.execute("PRAGMA busy_timeout = 10000" if not reader else "PRAGMA busy_timeout = 2000")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    return conn


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(*row)


class _View:
    """The state view of a transaction running in the writer thread."""

    def __init__(self, conn: sqlite3.Connection, now: float) -> None:
        self._conn = conn
        self._now = now

    def get(self, key: str) -> Entry | None:
        row = self._conn.execute(f"SELECT {_COLUMNS} FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else _entry(row)

    def range(self, op: List) -> tuple[list[Entry], bool]:
        return _range(self._conn, op)

    def lease_exists(self, lease: int) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM leases WHERE id = ? AND expires_at > ?", (lease, self._now)
        ).fetchone()
        return row is not None

    def write(self, key: str, entry: Entry | None, prev: Entry | None) -> None:
        if entry is None:
            self._conn.execute("DELETE FROM kv WHERE key = ?", (key,))
        else:
            self._conn.execute(
                f"INSERT OR REPLACE INTO kv ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key,
                    entry.value,
                    entry.version,
                    entry.create_revision,
                    entry.mod_revision,
                    entry.lease,
                ),
            )


def _range(conn: sqlite3.Connection, op: List) -> tuple[list[Entry], bool]:
    """The entries `op` selects, in its order, limited."""
    columns = _KEY_COLUMNS if op.keys_only else _COLUMNS
    own: list[Entry] = []
    if op.prefix != ROOT and op.within(op.prefix):
        row = conn.execute(f"SELECT {columns} FROM kv WHERE key = ?", (op.prefix,)).fetchone()
        own = [] if row is None else [_entry(row)]
    low, high = children_prefix(op.prefix), prefix_end(op.prefix)
    low_test = "key >= ?"
    if op.start_after is not None and op.start_after >= low:
        low, low_test = op.start_after, "key > ?"
    if op.end_before is not None and op.end_before < high:
        high = op.end_before
    order = "DESC" if op.reverse else "ASC"
    sql = f"SELECT {columns} FROM kv WHERE {low_test} AND key < ? ORDER BY key {order}"
    args: tuple[object, ...] = (low, high)
    if op.limit is not None:
        sql += " LIMIT ?"
        args += (min(op.limit + 1, MAX_INT64),)  # one more tells whether more follow
    children = [Entry(*row) for row in conn.execute(sql, args)]
    return trim(children + own if op.reverse else own + children, op)


def _meta(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise MetadataError(f"sqlite: the store has no {name!r}; is this a metaplane store?")
    value: int = row[0]
    return value


def _set_meta(conn: sqlite3.Connection, name: str, value: int) -> None:
    conn.execute("UPDATE meta SET value = ? WHERE name = ?", (value, name))


def _append(conn: sqlite3.Connection, revision: int, changes: list[Change], now: float) -> None:
    rows = []
    for seq, (event, prev) in enumerate(changes):
        entry = event.entry
        deleted = event.type is EventType.DELETE
        rows.append(
            (
                revision,
                seq,
                entry.key,
                int(deleted),
                None if deleted else entry.value,
                None if deleted else entry.version,
                None if deleted else entry.create_revision,
                None if deleted else entry.lease,
                None if prev is None else prev.value,
                None if prev is None else prev.version,
                None if prev is None else prev.create_revision,
                None if prev is None else prev.mod_revision,
                None if prev is None else prev.lease,
                now,
            )
        )
    conn.executemany("INSERT INTO changes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    _set_meta(conn, "revision", revision)


def _event(row: Sequence[Any]) -> WatchEvent:
    revision, key = row[0], row[1]
    if row[2]:
        return WatchEvent(EventType.DELETE, deleted_entry(key, revision))
    return WatchEvent(EventType.PUT, Entry(key, row[3], row[4], row[5], revision, row[6]))


def _change(row: Sequence[Any]) -> Change:
    key = row[1]
    event = _event(row)
    prev = None if row[8] is None else Entry(key, row[7], row[8], row[9], row[10], row[11])
    return event, prev


def _prefix_filter(prefix: str) -> tuple[str, tuple[str, ...]]:
    if prefix == ROOT:
        return "1", ()
    return "(key = ? OR (key >= ? AND key < ?))", (prefix, prefix + "/", prefix_end(prefix))


def _commit_txn(conn: sqlite3.Connection, txn: Txn) -> TxnResult:
    revision = _meta(conn, "revision")
    now = time.time()
    result, changes = apply_txn(_View(conn, now), txn, revision + 1)
    if changes:
        _append(conn, revision + 1, changes, now)
    return result


def _expire_leases(conn: sqlite3.Connection, leases: Iterable[int]) -> None:
    """Delete each lease and its keys, one revision per lease that had keys."""
    now = time.time()
    for lease in leases:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM kv WHERE lease = ? ORDER BY key", (lease,)
        ).fetchall()
        conn.execute("DELETE FROM leases WHERE id = ?", (lease,))
        if not rows:
            continue
        revision = _meta(conn, "revision") + 1
        conn.execute("DELETE FROM kv WHERE lease = ?", (lease,))
        changes: list[Change] = [
            (WatchEvent(EventType.DELETE, deleted_entry(row[0], revision)), _entry(row))
            for row in rows
        ]
        _append(conn, revision, changes, now)


def _trim(conn: sqlite3.Connection, keep_from: int) -> None:
    """Forget the changes before `keep_from`. The floor moves past what was forgotten, and
    no further: a history with nothing to forget keeps every revision readable."""
    floor = _meta(conn, "floor")
    if keep_from <= floor:
        return
    newest = conn.execute(
        "SELECT max(revision) FROM changes WHERE revision < ?", (keep_from,)
    ).fetchone()[0]
    if newest is None:
        return
    conn.execute("DELETE FROM changes WHERE revision <= ?", (newest,))
    _set_meta(conn, "floor", newest + 1)
    _set_meta(conn, "compacted", newest + 1)  # as etcd's automatic compaction


def _compacted(conn: sqlite3.Connection) -> int:
    """The revision of the last compaction or trim (0: none). A file written before this
    was recorded has only its floor to tell."""
    floor = _meta(conn, "floor")
    return max(_meta(conn, "compacted"), floor if floor > 1 else 0)


class _Writer(threading.Thread):
    """The thread that owns the write connection and commits jobs in groups."""

    def __init__(self, path: str, synchronous: Synchronous, on_commit: Callable[[], None]) -> None:
        super().__init__(name=f"metaplane-sqlite-writer {path}", daemon=True)
        self._path = path
        self._synchronous = synchronous
        self._on_commit = on_commit
        self._jobs: queue.SimpleQueue[_Job | _Wake | None] = queue.SimpleQueue()
        self._urgent: collections.deque[_Job] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: sqlite3.Connection | None = None

    def submit(
        self, job: Callable[[sqlite3.Connection], T], *, urgent: bool = False, cost: int = 1
    ) -> asyncio.Future[T]:
        """Queue `job`; an `urgent` one (a lease refresh) goes ahead of every queued job,
        into the next group: a refresh must not wait behind a burst of bulk writes."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = self._loop.create_future()
        if urgent:
            self._urgent.append((job, future, cost))
            self._jobs.put(_WAKE)
        else:
            self._jobs.put((job, future, cost))
        return future

    def _take_urgent(self) -> list[_Job]:
        taken = []
        while self._urgent:
            taken.append(self._urgent.popleft())
        return taken

    def stop(self) -> None:
        self._jobs.put(None)

    def run(self) -> None:
        stopping = False
        while not stopping:
            first = self._jobs.get()
            if first is None:
                break
            group = self._take_urgent()
            if not isinstance(first, _Wake):
                group.append(first)
            cost = sum(job[2] for job in group)
            while len(group) < _MAX_GROUP and cost < _MAX_GROUP_COST:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                    break
                if not isinstance(job, _Wake):
                    group.append(job)
                    cost += job[2]
            group += self._take_urgent()
            if group:
                self._run_group(group)
        if self._conn is not None:
            self._conn.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = _connect(self._path, self._synchronous, reader=False)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                conn.close()
                raise MetadataError(f"sqlite: {self._path} cannot use WAL mode (got {mode!r})")
            self._conn = conn
        return self._conn

    def _run_group(self, group: list[_Job]) -> None:
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, MetadataError) as exc:
            error = _convert(exc) if isinstance(exc, sqlite3.Error) else exc
            self._deliver([(future, None, error) for _, future, _ in group])
            return
        for job, future, _ in group:
            conn.execute("SAVEPOINT job")
            try:
                outcome = job(conn)
            except BaseException as exc:  # delivered to the caller, not swallowed
                conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
                failure = _convert(exc) if isinstance(exc, sqlite3.Error) else exc
                outcomes.append((future, None, failure))
            else:
                conn.execute("RELEASE job")
                outcomes.append((future, outcome, None))
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = _convert(exc)
            outcomes = [(future, None, error) for future, _, _ in outcomes]
        self._deliver(outcomes)

    def _deliver(
        self, outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]
    ) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            self._loop.call_soon_threadsafe(self._resolve, outcomes)

    def _resolve(
        self, outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]
    ) -> None:
        for future, outcome, error in outcomes:
            if future.done():
                continue
            if error is None:
                future.set_result(outcome)
            else:
                future.set_exception(error)
        self._on_commit()


class SqliteStore(LocalStore):
    """A store in one SQLite file. Open it with `await SqliteStore.open(path)`."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: Synchronous = "full",
        history: int = DEFAULT_HISTORY,
        history_age: float = DEFAULT_HISTORY_AGE,
        poll_interval: float = 0.005,
        reap_interval: float = 0.25,
    ) -> None:
        super().__init__()
        if synchronous not in ("full", "normal"):
            raise InvalidRequest(f"synchronous is 'full' or 'normal', not {synchronous!r}")
        if history < 1 or history_age <= 0:
            raise InvalidRequest("history must keep at least one revision and some seconds")
        self.path = path
        self.url = f"sqlite://{path}"
        self._synchronous: Synchronous = synchronous
        self._history = history
        self._history_age = history_age
        self._poll_interval = poll_interval
        self._reap_interval = reap_interval
        self._writer = _Writer(path, synchronous, self._notify)
        self._reader: sqlite3.Connection | None = None
        self._scans: set[sqlite3.Connection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._data_version = -1
        self._tail: list[WatchEvent] = []
        """Every change of revisions `_tail_from` to `_tail_to`, in order (see `_TAIL_EVENTS`)."""
        self._tail_revisions: list[int] = []
        self._tail_from = 0
        self._tail_to = -1
        self._tail_bytes = 0

    @classmethod
    async def open(cls, path: str | Path, **options: Any) -> SqliteStore:
        store = cls(str(path), **options)
        await store._start()
        return store

    async def _start(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer.start()
        try:
            await self._writer.submit(_prepare)
            self._reader = _connect(self.path, self._synchronous, reader=True)
            self._reader.execute("PRAGMA query_only = 1")
            fmt = self._read(lambda conn: _meta(conn, "format"))
        except BaseException:
            await self._close()
            raise
        if fmt != FORMAT:
            await self._close()
            raise MetadataError(f"{self.path}: store format {fmt}; this version reads {FORMAT}")
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._poll_other_processes(), name=f"poll {self.path}"),
            loop.create_task(self._maintain(), name=f"maintain {self.path}"),
        ]

    # -- reads -------------------------------------------------------------------------

    def _read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read on the loop's thread, in one snapshot."""
        conn = self._reader
        if conn is None:
            raise Unavailable(f"{self.path}: the store is closed")
        try:
            conn.execute("BEGIN")
            try:
                return read(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _convert(exc) from exc

    async def _get(self, key: str) -> Entry | None:
        conn = self._reader
        if conn is None:
            raise Unavailable(f"{self.path}: the store is closed")
        try:
            row = conn.execute(f"SELECT {_COLUMNS} FROM kv WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise _convert(exc) from exc
        return None if row is None else _entry(row)

    async def _list(self, op: List, revision: int | None) -> Listing:
        def read(conn: sqlite3.Connection) -> Listing:
            current = _meta(conn, "revision")
            if revision is None or revision == current:
                entries, more = _range(conn, op)
                return Listing(tuple(entries), current, more)
            _check_readable(conn, revision)
            state = {e.key: e for e in _range(conn, List(op.prefix))[0]}
            where, args = _prefix_filter(op.prefix)
            later = conn.execute(
                f"SELECT {_CHANGE_COLUMNS} FROM changes WHERE revision > ? AND {where} "
                "ORDER BY revision, seq",
                (revision, *args),
            )
            rewind(state, op.prefix, (_change(row) for row in later))
            entries, more = select((state[k] for k in sorted(state)), op)
            return Listing(tuple(entries), revision, more)

        return self._read(read)

    async def _revision(self) -> int:
        return self._current_revision()

    async def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        """Every page from one read transaction on a connection of the scan's own: one WAL
        snapshot, so that writes meanwhile change nothing and no page rewinds anything.
        Pinned below the snapshot's revision, the changes since are undone once, merged
        into the rows as they stream."""
        if self._reader is None:
            raise Unavailable(f"{self.path}: the store is closed")
        conn = _connect(self.path, self._synchronous, reader=True)
        self._scans.add(conn)
        try:
            conn.execute("PRAGMA query_only = 1")
            conn.execute("BEGIN")
            current = _meta(conn, "revision")  # the snapshot starts with this read
            if revision is None:
                revision = current
            _check_readable(conn, revision)
            undo: dict[str, Entry | None] = {}
            if revision < current:
                later = conn.execute(
                    f"SELECT {_CHANGE_COLUMNS} FROM changes WHERE revision > ? "
                    "ORDER BY revision, seq",
                    (revision,),
                )
                undo = undo_map((_change(row) for row in later), under_any(prefixes))
            rows = _stream(conn, prefixes, keys_only and not undo, page)
            entries = rewound(rows, undo) if undo else rows
            for listing in paged(entries, revision, page, keys_only and bool(undo)):
                yield listing
        except sqlite3.Error as exc:
            raise _convert(exc) from exc
        finally:
            self._scans.discard(conn)
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")
            conn.close()

    # -- writes ------------------------------------------------------------------------

    async def _put(self, op: Put) -> int:
        return (await self._txn(Txn((), (op,), ()))).revision

    async def _txn(self, txn: Txn) -> TxnResult:
        cost = len(txn.on_success) + len(txn.on_failure)
        return await self._writer.submit(lambda conn: _commit_txn(conn, txn), cost=cost)

    async def _compact(self, revision: int) -> None:
        def compact(conn: sqlite3.Connection) -> None:
            # As etcd: the revisions before `revision` are gone, whatever they held, and a
            # revision at or below the last compaction cannot be compacted again.
            compacted = _compacted(conn)
            if revision <= compacted:
                raise Compacted(compacted)
            _check_readable(conn, revision)
            conn.execute("DELETE FROM changes WHERE revision < ?", (revision,))
            _set_meta(conn, "floor", max(_meta(conn, "floor"), revision))
            _set_meta(conn, "compacted", revision)

        await self._writer.submit(compact)

    # -- leases ------------------------------------------------------------------------

    async def _grant(self, ttl: int) -> Lease:
        def grant(conn: sqlite3.Connection) -> Lease:
            while True:
                lease = random.getrandbits(62) + 1
                with contextlib.suppress(sqlite3.IntegrityError):
                    conn.execute(
                        "INSERT INTO leases VALUES (?, ?, ?)", (lease, ttl, time.time() + ttl)
                    )
                    return Lease(lease, ttl)

        return await self._writer.submit(grant)

    async def _refresh(self, lease: int, timeout: float | None) -> int:
        def refresh(conn: sqlite3.Connection) -> int:
            now = time.time()
            row = conn.execute(
                "SELECT ttl FROM leases WHERE id = ? AND expires_at > ?", (lease, now)
            ).fetchone()
            if row is None:
                raise LeaseNotFound(lease)
            ttl: int = row[0]
            conn.execute("UPDATE leases SET expires_at = ? WHERE id = ?", (now + ttl, lease))
            return ttl

        try:
            async with asyncio.timeout(timeout):
                return await self._writer.submit(refresh, urgent=True)
        except TimeoutError:
            # The writer is held up (another process holds the write lock, a slow disk);
            # the refresh may still apply later, which does no harm.
            message = f"{self.path}: refreshing lease {lease} took over {timeout} s"
            raise Unavailable(message) from None

    async def _revoke(self, lease: int) -> None:
        def revoke(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT 1 FROM leases WHERE id = ? AND expires_at > ?", (lease, time.time())
            ).fetchone()
            if row is None:
                raise LeaseNotFound(lease)
            _expire_leases(conn, [lease])

        await self._writer.submit(revoke)

    # -- the change log ----------------------------------------------------------------

    def _current_revision(self) -> int:
        return self._read(lambda conn: _meta(conn, "revision"))

    def _compact_floor(self) -> int:
        return self._read(lambda conn: _meta(conn, "floor"))

    def _read_log(self, prefix: str, start: int) -> tuple[Sequence[WatchEvent], int]:
        if prefix != ROOT:
            return self._read_log_rows(prefix, start)
        if self._tail_from <= start <= self._tail_to:
            floor = self._compact_floor()
            if start < floor:
                raise Compacted(floor)
            return self._from_tail(start)
        events, seen = self._read_log_rows(ROOT, start)
        if start > self._tail_to:  # a reader behind the tail leaves it as it is
            self._extend_tail(start, events, seen)
        return events, seen

    def _from_tail(self, start: int) -> tuple[Sequence[WatchEvent], int]:
        """What a read of the whole log from `start` gives, from the decoded tail: at most
        _MAX_EVENTS_READ changes (or one revision whole), and the last revision covered."""
        revisions = self._tail_revisions
        first = bisect.bisect_left(revisions, start)
        end = first + _MAX_EVENTS_READ
        if end >= len(revisions):
            return self._tail[first:], self._tail_to
        if revisions[end - 1] == revisions[end]:  # not in the middle of a revision
            end = bisect.bisect_left(revisions, revisions[end], first)
            if end == first:  # one revision larger than a read: take it whole
                end = bisect.bisect_right(revisions, revisions[first])
                if end == len(revisions):
                    return self._tail[first:], self._tail_to
        return self._tail[first:end], revisions[end] - 1

    def _extend_tail(self, start: int, events: Sequence[WatchEvent], seen: int) -> None:
        """Keep a read of the whole log from `start` to `seen` decoded: after the tail when
        it follows it, else in its place; the oldest revisions go past _TAIL_EVENTS."""
        if start != self._tail_to + 1:
            self._tail, self._tail_revisions, self._tail_bytes = [], [], 0
            self._tail_from, self._tail_to = start, start - 1
        self._tail.extend(events)
        self._tail_revisions.extend(event.revision for event in events)
        self._tail_bytes += sum(len(event.entry.value) for event in events)
        self._tail_to = max(self._tail_to, seen)
        tail = self._tail
        dropped = max(len(tail) - _TAIL_EVENTS, 0)
        freed = sum(len(event.entry.value) for event in tail[:dropped])
        while dropped < len(tail) and self._tail_bytes - freed > _TAIL_BYTES:
            freed += len(tail[dropped].entry.value)
            dropped += 1
        if dropped:
            revisions = self._tail_revisions
            cut = bisect.bisect_right(revisions, revisions[dropped - 1])  # whole revisions
            self._tail_bytes -= sum(len(event.entry.value) for event in tail[:cut])
            self._tail_from = revisions[cut - 1] + 1
            del tail[:cut], revisions[:cut]

    def _read_log_rows(self, prefix: str, start: int) -> tuple[Sequence[WatchEvent], int]:
        def read(conn: sqlite3.Connection) -> tuple[Sequence[WatchEvent], int]:
            floor = _meta(conn, "floor")
            if start < floor:
                raise Compacted(floor)
            current = _meta(conn, "revision")
            if start > current:
                return [], current
            where, args = _prefix_filter(prefix)
            rows = conn.execute(
                f"SELECT {_CHANGE_COLUMNS} FROM changes WHERE revision >= ? AND {where} "
                "ORDER BY revision, seq LIMIT ?",
                (start, *args, _MAX_EVENTS_READ + 1),
            ).fetchall()
            if len(rows) <= _MAX_EVENTS_READ:
                return [_event(row) for row in rows], current
            last = rows[-1][0]
            if rows[0][0] == last:  # one revision larger than a read: take it whole
                rows = conn.execute(
                    f"SELECT {_CHANGE_COLUMNS} FROM changes WHERE revision = ? AND {where} "
                    "ORDER BY seq",
                    (last, *args),
                ).fetchall()
                return [_event(row) for row in rows], last
            return [_event(row) for row in rows if row[0] != last], last - 1

        return self._read(read)

    # -- background work ---------------------------------------------------------------

    async def _poll_other_processes(self) -> None:
        """Wake the watches when another connection (another process) committed."""
        while True:
            await asyncio.sleep(self._poll_interval)
            try:
                version = self._read(lambda c: c.execute("PRAGMA data_version").fetchone()[0])
            except MetadataError as exc:
                log.warning("%s: cannot poll for changes: %s", self.path, exc)
                continue
            if version != self._data_version:
                self._data_version = version
                self._notify()

    async def _maintain(self) -> None:
        """Expire leases whose holders stopped refreshing them, and trim the history."""
        while True:
            await asyncio.sleep(self._reap_interval)
            try:
                await self._maintain_once()
            except MetadataError as exc:
                log.warning("%s: maintenance failed: %s", self.path, exc)

    async def _maintain_once(self) -> None:
        now = time.time()

        def due(conn: sqlite3.Connection) -> tuple[bool, int]:
            expired = conn.execute(
                "SELECT 1 FROM leases WHERE expires_at <= ? LIMIT 1", (now,)
            ).fetchone()
            return expired is not None, self._keep_from(conn, now)

        expired, keep_from = self._read(due)
        if not expired and keep_from <= self._read(lambda conn: _meta(conn, "floor")):
            return

        def maintain(conn: sqlite3.Connection) -> None:
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT id FROM leases WHERE expires_at <= ?", (time.time(),)
                )
            ]
            _expire_leases(conn, ids)
            _trim(conn, self._keep_from(conn, time.time()))

        await self._writer.submit(maintain)

    def _keep_from(self, conn: sqlite3.Connection, now: float) -> int:
        """The oldest revision to keep: within `history` revisions and `history_age`
        seconds, and never the latest revision."""
        current = _meta(conn, "revision")
        keep_from = current - self._history + 1
        row = conn.execute(
            "SELECT min(revision) FROM changes WHERE committed_at >= ?",
            (now - self._history_age,),
        ).fetchone()
        by_age = current if row[0] is None else row[0]
        return max(1, min(max(keep_from, by_age), current))

    async def _close(self) -> None:
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        if self._writer.is_alive():
            self._writer.stop()
            await asyncio.get_running_loop().run_in_executor(None, self._writer.join)
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        for conn in self._scans:
            conn.close()  # a scan left open: its next page raises
        self._scans.clear()
        await super()._close()


def _stream(
    conn: sqlite3.Connection, prefixes: Sequence[str], keys_only: bool, batch: int
) -> Iterator[Entry]:
    """The entries of `prefixes` (sorted, none covering another) in key order, fetched
    `batch` rows at a time (entries built and chained in C: no Python step per row)."""
    return itertools.chain.from_iterable(_fetched(conn, prefixes, keys_only, batch))


def _fetched(
    conn: sqlite3.Connection, prefixes: Sequence[str], keys_only: bool, batch: int
) -> Iterator[list[Entry]]:
    columns = _KEY_COLUMNS if keys_only else _COLUMNS
    one = f"SELECT {columns} FROM kv WHERE key = ?"
    many = f"SELECT {columns} FROM kv WHERE key >= ? AND key < ? ORDER BY key"
    # Rows of consecutive ranges are gathered into batches: a broker's follow of 76,000
    # topics reads 152,000 ranges of a few keys each, and a step per range costs.
    rows: list[Any] = []
    for start, end in ranges_in_key_order(prefixes):
        if end is None:
            rows += conn.execute(one, (start,)).fetchall()
        else:
            cursor = conn.execute(many, (start, end))
            while True:
                fetched = cursor.fetchmany(batch)
                rows += fetched
                if len(rows) >= batch:
                    yield list(itertools.starmap(Entry, rows))
                    rows = []
                if len(fetched) < batch:
                    break
    if rows:
        yield list(itertools.starmap(Entry, rows))


def _prepare(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def _check_readable(conn: sqlite3.Connection, revision: int) -> None:
    floor = _meta(conn, "floor")
    if revision < floor:
        raise Compacted(floor)
    current = _meta(conn, "revision")
    if revision > current:
        raise InvalidRequest(f"revision {revision} is in the future (current {current})")
