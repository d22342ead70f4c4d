"""The ZooKeeper backend (`zk://h1:2181,h2:2181/chroot`): the store contract on znodes,
through kazoo.

Keys are znodes under the chroot; the parents a key needs are created with it and are not
entries. A delete leaves the key's znode keyless (a tombstone, whose data version goes on),
removed soon after with the parents only it needed (`_sweep`). Revisions are zxids. A key's
version and create_revision live in its znode's data (`_zookeeper_wire`), since a key may
first be written on a znode that existed as a parent. Transactions are one `multi`: every
compare is read first and enforced inside that multi (a version check of each znode read,
or the create and delete of a probe where a znode was missing), and the whole is retried
when the read went stale. A version check cannot tell a znode from one removed and made
again: every multi that removes znodes (or makes a leased key's, which ZooKeeper removes
uncounted) counts itself in the chroot's data version, and every multi checks that count
first (`_Plan.removals`). A lease is a ZooKeeper session of its own whose timeout is the
TTL; its keys are that session's ephemeral znodes. ZooKeeper keeps no history: reads at a past
revision and watches from one work only while nothing they cover changed since
(`Compacted` otherwise). See docs/store.md for what holds and what does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.serialization import (  # type: ignore[import-untyped]
    CheckVersion,
    Create,
    Exists,
    GetData,
    SetData,
    Sync,
    Transaction,
)
from kazoo.protocol.serialization import Delete as DeleteNode
from kazoo.protocol.states import KazooState, ZnodeStat  # type: ignore[import-untyped]
from kazoo.security import OPEN_ACL_UNSAFE  # type: ignore[import-untyped]

from metaplane.store import _zookeeper_wire as wire
from metaplane.store._base import MetadataStore, PrefixWatch, Watch
from metaplane.store._errors import (
    Compacted,
    InvalidRequest,
    InvalidTxn,
    LeaseNotFound,
    MetadataError,
    TxnTooLarge,
    Unavailable,
)
from metaplane.store._keys import ROOT, in_prefix, prefix_end
from metaplane.store._local import paged, select
from metaplane.store._model import (
    Delete,
    DeletePrefix,
    Entry,
    Get,
    Lease,
    List,
    Listing,
    OpResult,
    Put,
    Txn,
    TxnResult,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""Seconds a request may take before it raises `Unavailable`."""

DEFAULT_SESSION_TIMEOUT = 10.0
"""The store's own session (its watches), in seconds; the server clamps it to 2–20 ticks."""

_ATTEMPTS = 50
"""Times a read or a transaction is tried again when what it read changed under it."""

_MULTI_OPS = 10_000
"""Znode operations one transaction's multi holds at most (`TxnTooLarge` past it): a delete
of a prefix is a znode delete for each key and each parent under it. 10,000 deletes of the
short keys metaplane writes commit in under a second on the 2-core machine."""
_MULTI_BYTES = 900_000
"""What one transaction's multi may take on the wire besides the values it writes (paths and
each operation's framing, `_multi_size`), at most (`TxnTooLarge` past it). ZooKeeper drops
the connection of a request above its jute.maxbuffer (1 MiB less a byte by default), and
would do it again at every try; the values come on top, each bounded by the contract."""

DEFAULT_MAX_REQUEST = 4_194_304
"""The largest request the servers take, in bytes (their jute.maxbuffer): 4 MiB, as
docs/store.md asks of them (ZooKeeper's own default, 1 MiB less a byte, cannot take a
1 MiB value)."""

_JITTER = random.Random()
_LONGEST_SESSION = 86_400
"""The session timeout a lease asks for at most (kazoo sends it in int32 milliseconds; the
server clamps it to 20 ticks anyway)."""
_EPHEMERAL = 1
_PENDING = -1
"""A revision not known before the multi commits: its zxid, filled in after."""


@dataclass(frozen=True, slots=True)
class ZooKeeperOptions:
    """Where and how to reach a ZooKeeper ensemble."""

    hosts: tuple[str, ...]
    chroot: str
    timeout: float = DEFAULT_TIMEOUT
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    max_request: int = DEFAULT_MAX_REQUEST
    """The servers' jute.maxbuffer: a transaction whose multi (values included) would be
    larger is refused with `TxnTooLarge` before it is sent."""

    def __post_init__(self) -> None:
        if not self.hosts:
            raise InvalidRequest("ZooKeeper needs at least one host:port")
        if not self.chroot.startswith("/") or self.chroot == ROOT or self.chroot.endswith("/"):
            raise InvalidRequest(f"the chroot is an absolute path below /, not {self.chroot!r}")
        for what, seconds in (("timeout", self.timeout), ("session_timeout", self.session_timeout)):
            if not 0 < seconds < 3600:
                raise InvalidRequest(f"{what} is a number of seconds from 0 to 3600")
        if not 65_536 <= self.max_request <= 1 << 30:
            raise InvalidRequest("max_request is a number of bytes from 65,536 to 1 GiB")


@dataclass(slots=True)
class Node:
    """A znode as read: its data and stat (None: missing)."""

    data: bytes
    stat: ZnodeStat


@dataclass(frozen=True, slots=True)
class _Known:
    """A key as this store last wrote it: its znode (not ephemeral) at data version
    `version`, holding the key with version `version + offset` and `created` as its
    create_revision. Known from the reply of that write on the store's session, and only
    while the persistent watch runs: every change of the znode after the reply is notified
    before any later reply, and the notification forgets it (so does a connection lost).
    It stands for a read of the key at the reply's zxid, pinned by the data version and the
    removal count as a transaction pins what it read."""

    version: int
    offset: int
    created: int
    removals: int
    """The chroot's removal count (`_Plan.removes`) the write left: a write from memory
    checks it, so that no znode removed and made again since can take the write."""


class _Stale(Exception):
    """What a transaction read changed before its multi committed: read again."""


class _LeaseSession:
    """One lease: a kazoo client of its own, whose session is the lease. kazoo's own pings
    are off: only `refresh` keeps the session, so it expires a TTL after the last one."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self.ttl = 0.0
        self.lost = False
        self.id = 0


@dataclass(slots=True)
class _Znode:
    """A znode as a transaction plans it: data version, children, ephemeral owner (a
    lease id, 0 if none) and the key it holds (None: a parent, or a deleted key's)."""

    version: int
    children: int
    owner: int
    entry: Entry | None


@dataclass(slots=True)
class _Plan:
    """A transaction's view of the znodes it touches, changed by its own operations as they
    are planned, and the multi that makes it so: guards (checks and probes) first."""

    znodes: dict[str, _Znode | None]
    entries: dict[str, Entry | None]
    newest: int
    read: dict[str, _Znode | None] = field(default_factory=dict)
    """The znodes as read, before any operation of the transaction."""
    single: int = 0
    """When the compares and gets look at one key only: the zxid its read holds at."""
    guards: list[Any] = field(default_factory=list)
    ops: list[Any] = field(default_factory=list)
    guarded: set[str] = field(default_factory=set)
    removals: int = 0
    """The chroot's data version, known before anything was read: the count of multis
    that removed znodes. The multi checks it first, so that a version check of a znode
    read cannot pass on a znode removed and made again since (ABA)."""
    removes: bool = False
    """The multi removes znodes (a prefix delete, an empty-prefix compare, a leased key
    deleted, a lease change) or makes a leased key's (whose removal, at its lease's end,
    is ZooKeeper's, uncounted): it counts itself in the chroot's data version."""
    tombstoned: list[str] = field(default_factory=list)
    """Keys deleted by leaving their znode keyless (a tombstone), removed later, many in
    one multi (`_sweep`): a delete does not fail every concurrent multi."""


class ZooKeeperStore(MetadataStore):
    """A store on a ZooKeeper ensemble, under a chroot of its own."""

    keeps_history = False

    def __init__(self, options: ZooKeeperOptions, url: str = "") -> None:
        self.url = url or f"zk://{','.join(options.hosts)}{options.chroot}"
        self._options = options
        self._root = options.chroot
        self._loop = asyncio.get_running_loop()
        self._client = KazooClient(
            hosts=",".join(options.hosts),
            timeout=options.session_timeout,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            logger=log,
        )
        wire.fast_select(self._client)
        self._hung: dict[wire.Member, float] = {}
        """Members a session of this store found hanging, and when: each of its sessions
        keeps away from them (`wire.avoid_hung`)."""
        wire.avoid_hung(self._client, self._hung, lambda: options.session_timeout / 3)
        self._inbox = wire.Inbox(self._loop)
        """Replies, notifications and connection states of every session of the store,
        handled on the loop in the order kazoo's threads hand them over."""
        self._leases: dict[int, _LeaseSession] = {}
        self._seen = 0
        """The zxid of the last reply of the store's session handled on the loop."""
        self._recent: list[str] = []
        """Notifications handled since that reply (their changes are after it)."""
        self._replied_at = 0.0
        """When (monotonic) that reply was handled."""
        self._followers: set[Any] = set()
        self._watching = False
        self._drops = 0
        """Connections of the store's session lost so far, counted on kazoo's thread."""
        self._epoch = 0
        """The same count as the loop has handled it, in the order of the connection's
        stream: the persistent watch may have missed changes since the last one."""
        self._known: dict[str, _Known] = {}
        self._leased: dict[str, int] = {}
        """Keys a multi on a lease's session is writing now, and how many such multis: no
        plain put of them from what is remembered, and nothing remembered of them, meanwhile
        (that session's reply and this one's notifications come in no common order)."""
        """Keys this store last wrote on its own session (see `_Known`): a plain put of one
        is a single setData."""
        self._removals: int | None = None
        """The chroot's data version as last read (None: unknown, read before a multi):
        see `_Plan.removals`. Forgotten on the chroot's notification, on a connection lost
        and when a multi is refused on it."""
        self._tombstones: dict[str, None] = {}
        """Keys this store deleted whose znodes are left to remove (`_sweep`)."""
        self._sweeper: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False
        wire.on_notification(self._client, self._notified)
        self._client.add_listener(self._state_changed)

    @classmethod
    async def connect(cls, options: ZooKeeperOptions, url: str = "") -> ZooKeeperStore:
        store = cls(options, url)
        try:
            await asyncio.to_thread(store._client.start, options.timeout)
            await store._ensure_path(store._root)
            await store._install_watch()
            await store._chroot()
        except BaseException as error:
            await asyncio.to_thread(_stop, store._client)
            if isinstance(error, Exception):
                raise wire.contract_error(error, f"connecting to {store.url}") from None
            raise
        return store

    # -- requests ----------------------------------------------------------------------

    def _path(self, key: str) -> str:
        return self._root if key == ROOT else self._root + wire.znode_name(key)

    def _key(self, path: str) -> str | None:
        """The key of a znode under the chroot; None outside it, or for a name no key has
        (a znode another client made)."""
        if path.startswith(self._root + "/"):
            try:
                return wire.key_name(path[len(self._root) :])
            except ValueError:
                return None
        return None

    async def _request(
        self,
        request: Any,
        client: KazooClient | None = None,
        then: Callable[[wire.Reply], None] | None = None,
    ) -> wire.Reply:
        """Send one request; `Unavailable` when no reply came within the deadline. `then`
        (the store's own session only) runs on the loop when the reply comes, in the order
        of the connection's stream: before any notification sent after the reply."""
        if self._closed:
            raise Unavailable(f"{self.url}: the store is closed")
        observe: Callable[[wire.Reply], None] | None = None
        if client is None:
            observe = self._observe
            if then is not None:
                epoch = self._epoch

                def observe(reply: wire.Reply) -> None:
                    self._observe(reply)
                    # Kept only from a reply after which every change is notified: the
                    # watch set up, and on the connection the request went out on.
                    if self._watching and epoch == self._epoch:
                        then(reply)

        sent_at = time.monotonic()
        sent_on = wire.connection_of(self._client)
        future = wire.call(client or self._client, self._inbox, request, observe)
        try:
            async with asyncio.timeout(self._options.timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            if client is None and self._replied_at < sent_at:
                # Not one reply on the store's session for the whole deadline: its member
                # may hang. On to the next member with the same session, as kazoo does
                # when a ping goes unanswered, but after the request's deadline instead of
                # two thirds of the session's timeout (a hung leader or member otherwise
                # held writes for 4 s and more of a 6 s session). Not a connection made
                # since the request was queued, unless it has been silent for half the
                # deadline: a new one has had no time to answer.
                wire.drop_connection(self._client, sent_on, self._options.timeout / 2)
            raise Unavailable(
                f"{self.url}: no answer within {self._options.timeout} s (it may still apply)"
            ) from None

    def _observe(self, reply: wire.Reply) -> None:
        self._replied_at = time.monotonic()
        if reply.zxid > self._seen:
            self._seen = reply.zxid
        self._recent.clear()

    async def _value(self, request: Any, client: KazooClient | None = None) -> Any:
        reply = await self._request(request, client)
        if reply.error is not None:
            raise wire.contract_error(reply.error, f"{self.url}: {type(request).__name__}")
        return reply.value

    async def _read(self, path: str) -> Node | None:
        return (await self._read_at(path))[0]

    async def _read_at(self, path: str) -> tuple[Node | None, int]:
        """A znode, and the zxid of the reply: the state it was read in."""
        reply = await self._request(GetData(path, None))
        if isinstance(reply.error, NoNodeError):
            return None, reply.zxid
        if reply.error is not None:
            raise wire.contract_error(reply.error, f"{self.url}: reading {path}")
        data, stat = reply.value
        return Node(data, stat), reply.zxid

    async def _exists(self, path: str) -> ZnodeStat | None:
        stat: ZnodeStat | None = await self._value(Exists(path, None))
        return stat

    async def _chroot(self) -> ZnodeStat:
        """The chroot's stat, read now; its data version is learned as the removal count
        (in the order of the connection's stream: a later notification forgets it)."""

        def learned(reply: wire.Reply) -> None:
            if reply.error is None and reply.value is not None:
                self._removals = int(reply.value.version)

        reply = await self._request(Exists(self._root, None), then=learned)
        if reply.error is not None:
            raise wire.contract_error(reply.error, f"{self.url}: reading {self._root}")
        if reply.value is None:
            raise Unavailable(f"{self.url}: the chroot {self._root} is gone")
        stat: ZnodeStat = reply.value
        return stat

    async def _sync(self) -> int:
        """The zxid the server is at after catching up with the leader."""
        reply = await self._request(Sync(self._root))
        if reply.error is not None:
            raise wire.contract_error(reply.error, f"{self.url}: sync")
        return reply.zxid

    async def _ensure_path(self, path: str) -> None:
        current = ""
        for segment in path.strip("/").split("/"):
            current += "/" + segment
            reply = await self._request(Create(current, b"", OPEN_ACL_UNSAFE, 0))
            if reply.error is not None and not isinstance(reply.error, NodeExistsError):
                raise wire.contract_error(reply.error, f"{self.url}: creating {current}")

    # -- reads -------------------------------------------------------------------------

    async def _get(self, key: str) -> Entry | None:
        node = await self._read(self._path(key))
        return None if node is None else wire.decode(key, node.data, node.stat)

    async def _revision(self) -> int:
        return await self._sync()

    async def _list(self, op: List, revision: int | None) -> Listing:
        entries, at = await self.snapshot((op.prefix,), op, revision)
        selected, more = select(entries, op)
        return Listing(tuple(selected), at, more)

    async def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        entries, at = await self.snapshot(prefixes, None, revision)
        for listing in paged(entries, at, page, keys_only):
            yield listing

    async def snapshot(
        self, prefixes: Iterable[str], bounds: List | None, revision: int | None
    ) -> tuple[list[Entry], int]:
        """The keys under `prefixes` (sorted), read at one revision, and that revision.

        ZooKeeper reads one znode at a time: the read holds at zxid R when no znode it read
        changed after R (every mzxid and pzxid at most R), else it is read again. At a past
        `revision`, that is also the test that nothing read changed since."""
        wanted = tuple(prefixes)
        if revision is not None and revision > self._seen:
            current = await self._sync()
            if revision > current:
                raise InvalidRequest(f"revision {revision} is in the future (current {current})")
        at = revision if revision is not None else self._seen
        for attempt in range(_ATTEMPTS):
            tree = await self._walk(wanted, bounds)
            if tree is not None:
                nodes, newest = tree
                entries = self._entries(nodes, bounds)
                if newest <= at:
                    return entries, at
                if revision is not None:
                    raise Compacted(
                        newest,
                        f"ZooKeeper keeps no history: {', '.join(wanted)} changed at {newest}, "
                        f"after revision {revision}; read at {newest} or later",
                    )
            at = await self._sync()
            if attempt:
                await asyncio.sleep(_JITTER.uniform(0, 0.01 * attempt))
        raise Unavailable(f"{self.url}: {', '.join(wanted)} kept changing under every read")

    def _entries(self, nodes: dict[str, Node], bounds: List | None) -> list[Entry]:
        found = []
        for key, node in nodes.items():
            entry = wire.decode(key, node.data, node.stat)
            if entry is not None and (bounds is None or bounds.within(key)):
                found.append(entry)
        found.sort(key=lambda entry: entry.key)
        return found

    async def _walk(
        self,
        prefixes: Iterable[str],
        bounds: List | None = None,
        give_up: int | None = None,
        fuzzy: bool = False,
    ) -> tuple[dict[str, Node], int] | None:
        """Every znode under `prefixes` (by key; the chroot itself left out) and the newest
        zxid among what was read; None when a znode vanished between two reads (`fuzzy`:
        what vanished is left out, and the walk goes on). With `give_up`, the walk stops
        (what it read so far) once the newest zxid reaches it.

        Level by level, in multiReads (`_read_many`): the data of every znode of the level,
        then the children of those that have some, each listing followed by a read of its
        parent's stat, so that a child that appears or vanishes after the listing moves the
        pzxid read (and `newest`)."""
        found: dict[str, Node] = {}
        newest = 0
        wanted = list(prefixes)
        level: list[tuple[str, Node | None]] = [(ROOT, None)] if ROOT in wanted else []
        tops = [prefix for prefix in wanted if prefix != ROOT]
        for prefix, result in zip(
            tops, await self._read_many([(wire.GET_DATA, self._path(p)) for p in tops]), strict=True
        ):
            if isinstance(result, NoNodeError):
                newest = max(newest, await self._anchor(prefix))
            else:
                level.append((prefix, self._node(result, prefix)))
        while level:
            parents: list[str] = []
            for key, node in level:
                if node is None:
                    parents.append(key)
                    continue
                stat = node.stat
                newest = max(newest, stat.mzxid, stat.pzxid)
                found[key] = node
                if stat.numChildren:
                    parents.append(key)
            reads: list[tuple[int, str]] = []
            for parent in parents:
                path = self._path(parent)
                reads.append((wire.GET_CHILDREN, path))
                reads.append((wire.GET_DATA, path))
            listed = await self._read_many(reads)
            keys: list[str] = []
            for index, parent in enumerate(parents):
                names, after = listed[2 * index], listed[2 * index + 1]
                if isinstance(names, NoNodeError) or isinstance(after, NoNodeError):
                    if fuzzy:
                        continue
                    return None
                stat = self._node(after, parent).stat
                # (the chroot's data is the removal count, no key's: its mzxid is no change)
                newest = max(newest, stat.pzxid, stat.mzxid if parent != ROOT else 0)
                base = "" if parent == ROOT else parent
                for name in self._names(names, parent):
                    key = f"{base}/{wire.key_name(name)}"
                    if bounds is None or _may_hold(bounds, key):
                        keys.append(key)
            if give_up is not None and newest >= give_up:
                return found, newest
            nodes = await self._read_many([(wire.GET_DATA, self._path(key)) for key in keys])
            level = []
            for key, result in zip(keys, nodes, strict=True):
                if isinstance(result, NoNodeError):
                    if fuzzy:
                        continue
                    return None
                level.append((key, self._node(result, key)))
        return found, newest

    def _node(self, result: Any, key: str) -> Node:
        """A getData result of a multiRead as a Node (a read's error raised)."""
        if isinstance(result, BaseException):
            raise wire.contract_error(result, f"{self.url}: reading {key}")
        data, stat = result
        return Node(data, stat)

    def _names(self, result: Any, key: str) -> list[str]:
        """A getChildren result of a multiRead (a read's error raised)."""
        if isinstance(result, BaseException):
            raise wire.contract_error(result, f"{self.url}: children of {key}")
        names: list[str] = result
        return names

    async def _read_many(self, reads: list[tuple[int, str]]) -> list[Any]:
        """The results of `reads` (`wire.MultiRead`'s), in order: _BATCH reads a request,
        _IN_FLIGHT requests at once, the next one sent as soon as one is answered."""
        chunks = [reads[start : start + _BATCH] for start in range(0, len(reads), _BATCH)]
        replies: list[list[Any]] = [[] for _ in chunks]
        pending = iter(enumerate(chunks))

        async def lane() -> None:
            for index, chunk in pending:
                replies[index] = await self._value(wire.MultiRead(chunk))

        await asyncio.gather(*(lane() for _ in range(min(_IN_FLIGHT, len(chunks)))))
        return [result for reply in replies for result in reply]

    async def _anchor(self, key: str) -> int:
        """The pzxid of the nearest znode above `key` that exists: the last time a child
        appeared or vanished there (so the last time `key` could have)."""
        path = self._path(key)
        while path != self._root:
            path = path.rsplit("/", 1)[0]
            stat = await self._exists(path)
            if stat is not None:
                return int(stat.pzxid)
        raise Unavailable(f"{self.url}: the chroot {self._root} is gone")

    # -- writes ------------------------------------------------------------------------

    async def _put(self, op: Put) -> int:
        self._inbox.flush()  # notifications already in: a key changed is forgotten first
        known = self._known.get(op.key) if not op.lease else None
        if known is not None and op.key not in self._leased:
            revision = await self._set(op, known)
            if revision:
                return revision
        return (await self._txn(Txn((), (op,), ()))).revision

    async def _set(self, op: Put, known: _Known) -> int:
        """A plain put of a key this store knows as it is (`_Known`): one multi of a check
        of the chroot's removal count and a setData on the znode's data version, which only
        that znode in that state takes (one removed and made again since counted a removal).
        0 when the znode moved on meanwhile: the caller reads and writes as a transaction.

        The count checked is the store's, when it knows one: learned in the order of the
        stream, and neither it nor the key notified since, both hold as of the same point
        (the key's own count would fail the put after any removal anywhere since)."""
        data = wire.encode(op.value, known.offset, known.created)
        removals = self._removals if self._removals is not None else known.removals
        ops = [
            CheckVersion(self._root, removals),
            SetData(self._path(op.key), data, known.version),
        ]

        def written(reply: wire.Reply) -> None:
            if reply.error is None and not _failed(reply.value):
                version = reply.value[1].version
                self._remember(op.key, _Known(version, known.offset, known.created, removals))

        reply = await self._request(Transaction(ops), then=written)
        error = _multi_error(reply)
        if error is None:
            return int(reply.value[1].mzxid)
        if self._known.get(op.key) is known:
            del self._known[op.key]
        if isinstance(error, BadVersionError | NoNodeError):
            return 0
        raise wire.contract_error(error, f"{self.url}: writing {op.key}")

    def _remember(self, key: str, known: _Known) -> None:
        self._known.pop(key, None)
        if key in self._leased:
            return
        if len(self._known) >= _KNOWN:
            # The older half at once: deleting the oldest key one at a time leaves a dict's
            # first slots empty, and each look for the oldest would walk past them all.
            older = len(self._known) // 2
            self._known = dict(itertools.islice(self._known.items(), older, None))
        self._known[key] = known

    async def _txn(self, txn: Txn) -> TxnResult:
        for attempt in range(_ATTEMPTS):
            try:
                return await self._try_txn(txn)
            except _Stale:
                await asyncio.sleep(_JITTER.uniform(0, 0.002 * (attempt + 1)))
        raise Unavailable(f"{self.url}: a transaction kept conflicting ({_ATTEMPTS} tries)")

    async def _try_txn(self, txn: Txn) -> TxnResult:
        """Read, evaluate the compares, plan the branch as one multi and commit it; `_Stale`
        when what was read changed before the multi (or, read-only, during the reads)."""
        read_at = self._seen
        plan = await self._plan(txn.compares, (*txn.on_success, *txn.on_failure))
        succeeded = all(_holds(plan, compare) for compare in txn.compares)
        branch = txn.on_success if succeeded else txn.on_failure
        lease = self._lease_for(branch, plan)
        for compare in txn.compares:
            if compare.whole_prefix:
                self._guard_prefix(plan, compare.key)
            else:
                self._guard(plan, compare.key)
        results = [self._apply(plan, op, lease) for op in branch]
        if not plan.ops:  # nothing written: the reads hold at one revision, or read again
            if plan.single:  # one znode read: it holds at the zxid of its reply
                read_at = plan.single
            elif plan.newest > read_at:
                raise _Stale
            return TxnResult(succeeded, read_at, tuple(_at(r, read_at) for r in results))
        multi = [CheckVersion(self._root, plan.removals), *plan.guards, *plan.ops]
        if plan.removes:
            multi.append(SetData(self._root, b"", plan.removals))
        _check_multi(multi, self._options.max_request)
        zxid = await self._commit(multi, lease, _written(plan, branch))
        if plan.tombstoned:
            self._tombstoned(plan.tombstoned)
        return TxnResult(succeeded, zxid, tuple(_at(r, zxid) for r in results))

    async def _plan(self, compares: Iterable[Any], ops: Iterable[Any]) -> _Plan:
        """Read what `compares` and `ops` look at (a transaction's compares and both its
        branches), as of one removal count learned before."""
        compares, ops = tuple(compares), tuple(ops)
        keys: set[str] = set()
        prefixes: set[str] = set()
        for compare in compares:
            (prefixes if compare.whole_prefix else keys).add(compare.key)
        for op in ops:
            if isinstance(op, List | DeletePrefix):
                prefixes.add(op.prefix)
            else:
                keys.add(op.key)
        # The parents of a key are read only when they matter: for a delete (the parents
        # only it needed go with it), a prefix, or a key whose znode is missing (to create
        # them, or to pin its absence); a key compared absent is probably missing.
        wide = {op.key for op in ops if isinstance(op, Delete)}
        wide.update(c.key for c in compares if not c.whole_prefix and c.holds(None))
        wide.update(p for p in prefixes if p != ROOT)
        for key in list(wide):
            keys.update(_ancestors(key))
        paths = sorted(keys)
        # Known before any read (a removal after it fails the multi), else read first.
        removals = self._removals
        if removals is None:
            removals = int((await self._chroot()).version)
        read, tree = await asyncio.gather(
            asyncio.gather(*(self._read_at(self._path(key)) for key in paths)),
            self._walk(sorted(prefixes)),
        )
        if tree is None:
            raise _Stale
        by_path = dict(zip(paths, read, strict=True))
        missing = {a for k, r in by_path.items() if r[0] is None for a in _ancestors(k)}
        if more := sorted(missing - keys):
            again = await asyncio.gather(*(self._read_at(self._path(key)) for key in more))
            by_path.update(zip(more, again, strict=True))
            paths = sorted(by_path)
            read = [by_path[key] for key in paths]
        nodes: dict[str, Node | None] = {k: r[0] for k, r in by_path.items()}
        # A key missing down to its top segment: only the chroot's pzxid says since when.
        bare = any(node is None and nodes.get(_top(key)) is None for key, node in nodes.items())
        chroot = await self._exists(self._root) if bare else None
        looked_at = {compare.key for compare in compares if not compare.whole_prefix} | {
            op.key for op in ops if isinstance(op, Get)
        }
        single = 0
        if not prefixes and len(looked_at) == 1:
            single = dict(zip(paths, read, strict=True))[next(iter(looked_at))][1]
        nodes.update(tree[0])
        newest = tree[1] if chroot is None else max(tree[1], int(chroot.pzxid))
        znodes: dict[str, _Znode | None] = {}
        entries: dict[str, Entry | None] = {}
        for key, node in nodes.items():
            if node is None:
                znodes[key] = None
                entries[key] = None
                continue
            newest = max(newest, node.stat.mzxid, node.stat.pzxid)
            entry = wire.decode(key, node.data, node.stat)
            znodes[key] = _Znode(
                node.stat.version,
                node.stat.numChildren,
                wire.lease_of(node.stat.ephemeralOwner),
                entry,
            )
            entries[key] = entry
        as_read = {
            key: None if z is None else _Znode(z.version, z.children, z.owner, z.entry)
            for key, z in znodes.items()
        }
        return _Plan(znodes, entries, newest, as_read, single, removals=removals)

    def _lease_for(self, branch: tuple[Any, ...], plan: _Plan) -> int:
        """The lease whose session runs the multi: the one the branch puts keys with (one at
        most: a multi runs on one session); else the lease of a compared ephemeral key this
        store holds, so that a write fenced on it cannot commit once that session is gone."""
        leases = {op.lease for op in branch if isinstance(op, Put) and op.lease}
        if len(leases) > 1:
            raise InvalidTxn(
                "on ZooKeeper a transaction puts keys with one lease at most (a lease is a "
                "session, and a multi runs on one session)"
            )
        for lease in leases:
            session = self._leases.get(lease)
            if session is None or session.lost:
                raise LeaseNotFound(lease)
            return lease
        for znode in plan.znodes.values():
            if znode is not None and znode.owner in self._leases:
                return znode.owner
        return 0

    def _guard(self, plan: _Plan, key: str) -> None:
        """Pin what was read of `key` in the multi: its znode's data version, or, missing,
        the absence of the first missing znode on its path (created and deleted again)."""
        if key in plan.guarded:
            return
        plan.guarded.add(key)
        original = plan.read.get(key)
        if original is not None:
            plan.guards.append(CheckVersion(self._path(key), original.version))
            return
        top = next(
            path for path in [*reversed(list(_ancestors(key))), key] if plan.read.get(path) is None
        )
        if top in plan.guarded and top != key:
            return
        plan.guarded.add(top)
        plan.guards.append(Create(self._path(top), b"", OPEN_ACL_UNSAFE, 0))
        plan.guards.append(DeleteNode(self._path(top), 0))

    def _guard_prefix(self, plan: _Plan, prefix: str) -> None:
        """Pin "no key under `prefix`" (or, when there were keys, one of them): the znodes
        left under an empty prefix are parents no key needs any more, deleted here, so that
        a key created under one meanwhile fails the multi."""
        under = sorted((k for k in plan.znodes if in_prefix(k, prefix)), reverse=True)
        keys = [k for k in under if plan.entries.get(k) is not None]
        if keys:
            self._guard(plan, keys[0])
            return
        if prefix != ROOT and plan.znodes.get(prefix) is None:
            self._guard(plan, prefix)
            return
        for key in under:
            znode = plan.znodes[key]
            if znode is not None and znode.children == 0 and znode.owner == 0:
                plan.guards.append(DeleteNode(self._path(key), znode.version))
                self._drop(plan, key)
                plan.removes = True

    def _apply(self, plan: _Plan, op: Any, lease: int) -> OpResult:
        if isinstance(op, Get):
            self._guard(plan, op.key)
            return plan.entries.get(op.key)
        if isinstance(op, List):
            entries = [
                e
                for k, e in sorted(plan.entries.items())
                if e is not None and in_prefix(k, op.prefix)
            ]
            selected, more = select(entries, op)
            return Listing(tuple(selected), _PENDING, more)
        if isinstance(op, Put):
            self._write(plan, op, lease)
            return _PENDING
        if isinstance(op, Delete):
            return self._delete(plan, op.key)
        count = sum(
            self._delete(plan, key, remove=True)
            for key in sorted(plan.entries, reverse=True)
            if plan.entries[key] is not None and in_prefix(key, op.prefix)
        )
        for key in sorted(plan.znodes, reverse=True):
            znode = plan.znodes[key]
            if in_prefix(key, op.prefix) and znode is not None and znode.children == 0:
                plan.ops.append(DeleteNode(self._path(key), znode.version))
                self._drop(plan, key)
                plan.removes = True
        return count

    def _write(self, plan: _Plan, op: Put, lease: int) -> None:
        key, path = op.key, self._path(op.key)
        current = plan.znodes.get(key)
        before = current.entry if current is not None else None
        version = before.version + 1 if before is not None else 1
        created = before.create_revision if before is not None else 0
        flags = _EPHEMERAL if op.lease else 0
        if current is None:
            for ancestor in reversed(list(_ancestors(key))):
                above = plan.znodes.get(ancestor)
                if above is None:
                    plan.ops.append(Create(self._path(ancestor), b"", OPEN_ACL_UNSAFE, 0))
                    self._add(plan, ancestor, _Znode(0, 0, 0, None))
                elif above.owner:
                    raise InvalidRequest(
                        f"{key}: {ancestor} was put with a lease: an ephemeral znode on "
                        "ZooKeeper, which cannot have keys under it"
                    )
            plan.ops.append(Create(path, wire.encode(op.value, 1, 0), OPEN_ACL_UNSAFE, flags))
            self._add(plan, key, _Znode(0, 0, op.lease, None))
            # ZooKeeper removes a leased key's znode as its lease ends, uncounted: the
            # making of one is counted instead, so that a multi planned before cannot
            # take the new znode for the old.
            plan.removes = plan.removes or bool(op.lease)
        elif current.owner == op.lease:
            offset = version - (current.version + 1)
            data = wire.encode(op.value, offset, created)
            plan.ops.append(SetData(path, data, current.version))
            current.version += 1
        else:  # a lease taken or left: the znode is made again, of the right kind
            if current.children:
                raise InvalidRequest(
                    f"{key}: a key with keys under it cannot change its lease on ZooKeeper "
                    "(a leased key is an ephemeral znode, which has no children)"
                )
            plan.ops.append(DeleteNode(path, current.version))
            data = wire.encode(op.value, version, created)
            plan.ops.append(Create(path, data, OPEN_ACL_UNSAFE, flags))
            plan.znodes[key] = _Znode(0, 0, op.lease, None)
            plan.removes = True
        entry = Entry(key, op.value, version, created or _PENDING, _PENDING, op.lease)
        znode = plan.znodes[key]
        assert znode is not None
        znode.entry = entry
        plan.entries[key] = entry

    def _delete(self, plan: _Plan, key: str, remove: bool = False) -> int:
        """Delete `key`: its znode is left keyless (a tombstone: its data version goes on,
        so a check of it stays exact) when it has children or is a plain key, else, or
        with `remove`, removed with the parents only it needed (counted as a removal)."""
        current = plan.znodes.get(key)
        if current is None or current.entry is None:
            self._guard(plan, key)
            return 0
        plan.entries[key] = None
        if current.children or (current.owner == 0 and not remove):
            plan.ops.append(SetData(self._path(key), b"", current.version))
            current.version += 1
            current.entry = None
            if not current.children:
                plan.tombstoned.append(key)
            return 1
        plan.ops.append(DeleteNode(self._path(key), current.version))
        self._drop(plan, key)
        plan.removes = True
        for ancestor in _ancestors(key):  # the parents only this key needed
            above = plan.znodes.get(ancestor)
            if above is None or above.entry is not None or above.children or above.owner:
                break
            plan.ops.append(DeleteNode(self._path(ancestor), above.version))
            self._drop(plan, ancestor)
        return 1

    def _add(self, plan: _Plan, key: str, znode: _Znode) -> None:
        plan.znodes[key] = znode
        parent = _parent(key)
        above = plan.znodes.get(parent) if parent != ROOT else None
        if above is not None:
            above.children += 1

    def _drop(self, plan: _Plan, key: str) -> None:
        plan.znodes[key] = None
        parent = _parent(key)
        above = plan.znodes.get(parent) if parent != ROOT else None
        if above is not None:
            above.children -= 1

    async def _commit(
        self, ops: list[Any], lease: int, written: dict[str, _Known] | None = None
    ) -> int:
        """Run the multi `ops` (on `lease`'s session, if any); its zxid. `written`: the keys
        it leaves as `_Known` (created at the multi's zxid where _PENDING)."""
        session = self._leases.get(lease) if lease else None
        client = session.client if session is not None else None

        def committed(reply: wire.Reply) -> None:
            if reply.error is None and written and not _failed(reply.value):
                for key, known in written.items():
                    created = reply.zxid if known.created == _PENDING else known.created
                    self._remember(
                        key, _Known(known.version, known.offset, created, known.removals)
                    )

        if client is None:
            reply = await self._request(Transaction(ops), client, committed)
        else:
            reply = await self._on_lease_session(ops, client)
        error = _multi_error(reply)
        if isinstance(error, BadVersionError) and isinstance(reply.value, list):
            failed = next(i for i, result in enumerate(reply.value) if result is error)
            if ops[failed].path == self._root:
                self._removals = None  # the removal count it was planned on is stale
        if isinstance(error, BadVersionError | NoNodeError | NodeExistsError | NotEmptyError):
            for key in written or ():
                self._known.pop(key, None)
            raise _Stale
        if error is not None:
            if session is not None and session.lost:
                raise LeaseNotFound(lease)
            raise wire.contract_error(error, f"{self.url}: transaction")
        return reply.zxid

    async def _on_lease_session(self, ops: list[Any], client: KazooClient) -> wire.Reply:
        """Run a multi on a lease's session. What this store remembers of the keys it writes
        is forgotten first, and kept from being remembered or put from memory until its
        reply is in: the store's own notifications of it come on another connection, in no
        common order with that reply (a plain put from memory could otherwise land on the
        lease's new znode, at the version remembered of the old one, and leave the key on
        the lease)."""
        keys = {key for op in ops if (key := self._key(op.path)) is not None}
        for key in keys:
            self._known.pop(key, None)
            self._leased[key] = self._leased.get(key, 0) + 1
        try:
            return await self._request(Transaction(ops), client)
        finally:
            for key in keys:
                if self._leased[key] == 1:
                    del self._leased[key]
                else:
                    self._leased[key] -= 1

    # -- tombstones ----------------------------------------------------------------------

    def _tombstoned(self, keys: Iterable[str]) -> None:
        """Keys whose znodes a committed delete left keyless: removed in `_SWEEP_DELAY`."""
        self._tombstones.update(dict.fromkeys(keys))
        if not self._closing and (self._sweeper is None or self._sweeper.done()):
            self._sweeper = self._loop.create_task(self._sweep_later())

    async def _sweep_later(self) -> None:
        """Sweep what is pending every `_SWEEP_DELAY` seconds while there is some; after a
        failure (the store away) the keys stay pending and the wait doubles, up to 60 s."""
        delay = _SWEEP_DELAY
        while self._tombstones and not self._closing:
            await asyncio.sleep(delay)
            try:
                await self._sweep_pending()
                delay = _SWEEP_DELAY
            except Exception as error:  # a background task: said, and tried again
                log.info("%s: the znodes of deleted keys not removed yet: %r", self.url, error)
                delay = min(2 * delay, 60.0)

    async def _sweep_pending(self) -> None:
        """Remove the znodes of the keys this store deleted (where still keyless and
        childless), with the parents only they needed, `_SWEEP_BATCH` keys a multi; keys
        whose sweep failed (raised) stay pending."""
        while self._tombstones and not self._closed:
            keys = list(itertools.islice(self._tombstones, _SWEEP_BATCH))
            for key in keys:
                del self._tombstones[key]
            try:
                await self._sweep(keys)
            except BaseException:
                self._tombstones.update(dict.fromkeys(keys))
                raise

    async def _sweep(self, keys: list[str]) -> None:
        """One multi removing what of `keys` is still a tombstone, counted as a removal:
        a multi planned before it, whose checks a znode made again could fool, fails on the
        removal count and reads again."""
        for attempt in range(_ATTEMPTS):
            plan = await self._plan((), [Delete(key) for key in keys])
            ops: list[Any] = []
            for key in sorted(keys, reverse=True):
                for znode_key in (key, *_ancestors(key)):
                    znode = plan.znodes.get(znode_key)
                    if znode is None or znode.entry is not None or znode.children or znode.owner:
                        break
                    ops.append(DeleteNode(self._path(znode_key), znode.version))
                    self._drop(plan, znode_key)
            if not ops:
                return
            ops.append(SetData(self._root, b"", plan.removals))
            try:
                _check_multi(ops, self._options.max_request)
            except TxnTooLarge:
                if len(keys) == 1:
                    return  # one key's parents past the bound: left to a prefix delete
                half = len(keys) // 2
                await self._sweep(keys[:half])
                await self._sweep(keys[half:])
                return
            try:
                await self._commit(ops, 0)
                return
            except _Stale:
                await asyncio.sleep(_JITTER.uniform(0, 0.002 * (attempt + 1)))
        log.info("%s: %d keys' znodes kept changing, not removed", self.url, len(keys))

    # -- compaction: there is no history -----------------------------------------------

    async def _compact(self, revision: int) -> None:
        """ZooKeeper keeps no history: nothing to forget. A future revision is refused."""
        current = await self._sync()
        if revision > current:
            raise InvalidRequest(f"revision {revision} is in the future (current {current})")

    # -- leases ------------------------------------------------------------------------

    async def _grant(self, ttl: int) -> Lease:
        client = KazooClient(
            hosts=",".join(self._options.hosts),
            timeout=float(min(ttl, _LONGEST_SESSION)),
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            logger=log,
        )
        session = _LeaseSession(client)
        wire.fast_select(client)
        wire.avoid_hung(client, self._hung, lambda: session.ttl / 3)
        wire.no_heartbeat(client)
        wire.on_negotiated(client, lambda seconds: setattr(session, "ttl", seconds))
        client.add_listener(lambda state: self._lease_state(session, state))
        try:
            await asyncio.to_thread(client.start, self._options.timeout)
        except Exception as error:
            await asyncio.to_thread(_stop, client)
            raise wire.contract_error(error, f"{self.url}: granting a lease") from None
        session.id = wire.lease_of(client.client_id[0])
        self._leases[session.id] = session
        return Lease(session.id, max(1, int(round(session.ttl * 1000) // 1000)))

    def _lease_state(self, session: _LeaseSession, state: str) -> None:
        """From kazoo's thread: a lost session is an expired lease; kazoo would open a new
        session on its own, so its client is stopped instead."""
        if state == KazooState.LOST and not session.lost:
            session.lost = True
            log.info("lease %d expired", session.id)
            self._loop.call_soon_threadsafe(self._lease_lost, session)

    def _lease_lost(self, session: _LeaseSession) -> None:
        self._loop.run_in_executor(None, _stop, session.client)

    async def _refresh(self, lease: int, timeout: float | None) -> int:
        session = self._leases.get(lease)
        if session is None or session.lost:
            raise LeaseNotFound(lease)
        sent_on = wire.connection_of(session.client)
        future = wire.call(session.client, self._inbox, Exists(self._root, None))
        deadline = timeout or self._options.timeout
        try:
            async with asyncio.timeout(deadline):
                reply = await asyncio.shield(future)
        except TimeoutError:
            # Its member may hang: on to the next one, within the session's timeout.
            wire.drop_connection(session.client, sent_on, deadline / 2)
            raise Unavailable(f"{self.url}: lease {lease} not refreshed in time") from None
        if session.lost:
            raise LeaseNotFound(lease)
        if reply.error is not None:
            raise wire.contract_error(reply.error, f"{self.url}: refreshing lease {lease}")
        return max(1, int(round(session.ttl * 1000) // 1000))

    async def _revoke(self, lease: int) -> None:
        session = self._leases.pop(lease, None)
        if session is None or session.lost:
            raise LeaseNotFound(lease)
        session.lost = True
        await asyncio.to_thread(_stop, session.client)

    # -- watches -----------------------------------------------------------------------

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        from metaplane.store._zookeeper_watch import ZooKeeperWatch

        return ZooKeeperWatch(self, prefix, start_revision)

    def _watch_prefixes(self, prefixes: frozenset[str], start_revision: int | None) -> PrefixWatch:
        from metaplane.store._zookeeper_watch import ZooKeeperPrefixWatch

        return ZooKeeperPrefixWatch(self, prefixes, start_revision)

    async def _install_watch(self) -> None:
        """One persistent recursive watch on the chroot for the store's session: every
        watch of this store is served from its notifications."""
        epoch = self._epoch
        await self._value(wire.AddWatch(self._root, wire.PERSISTENT_RECURSIVE))
        if epoch == self._epoch:  # else set up again once connected again
            self._watching = True

    def follow(self, follower: Any) -> tuple[int, list[str]]:
        """Register `follower` for notifications: the zxid after which every change is
        notified to it, and the keys notified since that zxid's reply (changes after it)."""
        self._followers.add(follower)
        if not self._watching:
            follower.fail(Unavailable(f"{self.url}: the watch is being set up again"))
        return self._seen, [k for k in (self._key(p) for p in self._recent) if k is not None]

    def unfollow(self, follower: Any) -> None:
        self._followers.discard(follower)

    def _notified(self, event_type: int, path: str) -> None:
        """From kazoo's connection thread: a znode changed."""
        self._inbox.put(self._dispatch, path)

    def _dispatch(self, path: str) -> None:
        self._recent.append(path)
        key = self._key(path)
        if key is None:
            if path == self._root:
                self._removals = None
            return
        self._known.pop(key, None)
        for follower in list(self._followers):
            follower.hint(key)

    def _state_changed(self, state: str) -> None:
        """From kazoo's connection thread: a connection lost loses the watch's
        notifications. Counted here, before any request goes out on the next connection."""
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._drops += 1
        self._inbox.put(self._connection_state, (state, self._drops))

    def _connection_state(self, change: tuple[str, int]) -> None:
        state, drops = change
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._epoch = drops
            self._watching = False
            self._known.clear()
            self._removals = None
        if self._closed:
            return
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            for follower in list(self._followers):
                follower.fail(Unavailable(f"{self.url}: connection to ZooKeeper lost ({state})"))
        elif state == KazooState.CONNECTED and not self._watching:
            self._loop.create_task(self._rewatch())

    async def _rewatch(self) -> None:
        try:
            await self._install_watch()
        except Exception as error:  # the next connection change tries again
            log.warning("%s: persistent watch not set up again: %s", self.url, error)

    async def read_back_many(self, keys: list[str]) -> list[tuple[Entry | None, int]]:
        """Each of `keys` as it is now, and when absent the revision it is absent since (at
        the latest): the mzxid of its znode left for children, or the pzxid above it. In
        multiReads (`_read_many`): a watch notified of 100,000 changes at once reads them
        back in a thousand requests, not 100,000."""
        results = await self._read_many([(wire.GET_DATA, self._path(key)) for key in keys])
        found: list[tuple[Entry | None, int]] = []
        gone: list[int] = []
        for index, (key, result) in enumerate(zip(keys, results, strict=True)):
            if isinstance(result, NoNodeError):
                gone.append(index)
                found.append((None, 0))
                continue
            node = self._node(result, key)
            found.append((wire.decode(key, node.data, node.stat), int(node.stat.mzxid)))
        anchors = await asyncio.gather(*(self._anchor(keys[index]) for index in gone))
        for index, anchor in zip(gone, anchors, strict=True):
            found[index] = (None, anchor)
        return found

    async def sync(self) -> int:
        return await self._sync()

    @property
    def seen(self) -> int:
        return self._seen

    # -- life cycle --------------------------------------------------------------------

    async def _close(self) -> None:
        if self._closed:
            return
        self._closing = True
        for follower in list(self._followers):
            follower.fail(None)
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._tombstones and self._watching:  # a last sweep, if the server answers at once
            with contextlib.suppress(MetadataError, TimeoutError):
                async with asyncio.timeout(_SWEEP_ON_CLOSE):
                    await self._sweep_pending()
        sessions = list(self._leases.values())
        self._leases.clear()
        self._closed = True
        await asyncio.gather(*(asyncio.to_thread(_stop, s.client) for s in sessions))
        await asyncio.to_thread(_stop, self._client)


_SWEEP_DELAY = 5.0
"""Seconds a deleted key's znode is left before it is removed: the removals of that time
go in few multis, and each such multi fails every multi planned before it once (a store
that deletes keys all the time counts a removal every 5 s, not one a delete)."""
_SWEEP_BATCH = 500
"""Deleted keys whose znodes one multi removes at most (with the parents only they needed;
halved while the multi is past the bounds)."""
_SWEEP_ON_CLOSE = 2.0
"""Seconds a closing store gives the removal of its deleted keys' znodes."""
_KNOWN = 100_000
"""Keys remembered as last written (`_Known`) at most: the older half is forgotten first."""
_BATCH = 100
"""Reads of one multiRead (a walk's): few enough that a reply stays small even with large
values, many enough that a request's cost in kazoo's thread and on the loop is shared."""
_IN_FLIGHT = 10
"""A walk's multiReads in flight at once (at most _BATCH × _IN_FLIGHT znodes being read, as
the 1,000 single reads before them: a level of 100,000 znodes sent all together queued its
last reads past the request timeout)."""


def _stop(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception as error:  # a client that never connected: nothing to close
        log.debug("kazoo client stop: %s", error)


def _top(key: str) -> str:
    """The first segment of `key` (`/a` of `/a/b/c`)."""
    end = key.find("/", 1)
    return key if end < 0 else key[:end]


def _ancestors(key: str) -> Iterable[str]:
    """The keys above `key`, nearest first, without the root."""
    end = key.rfind("/")
    while end > 0:
        key = key[:end]
        yield key
        end = key.rfind("/")


def _parent(key: str) -> str:
    end = key.rfind("/")
    return key[:end] if end > 0 else ROOT


def _may_hold(bounds: List, key: str) -> bool:
    """Whether the subtree of `key` may hold a key within `bounds`' start and end."""
    if bounds.start_after is not None and prefix_end(key) <= bounds.start_after:
        return False
    return bounds.end_before is None or key < bounds.end_before


def _failed(value: Any) -> bool:
    """Whether a multi's results hold an error (kazoo sets those as the value)."""
    return isinstance(value, list) and any(isinstance(result, Exception) for result in value)


def _multi_error(reply: wire.Reply) -> BaseException | None:
    """Why a multi failed (the operation that failed, not one rolled back), or None."""
    if reply.error is not None or not isinstance(reply.value, list):
        return reply.error
    failed = [r for r in reply.value if isinstance(r, Exception)]
    error = next((r for r in failed if not isinstance(r, RolledBackError)), None)
    return error if error is not None or not failed else failed[0]


def _written(plan: _Plan, branch: tuple[Any, ...]) -> dict[str, _Known]:
    """The keys a planned branch puts without a lease on znodes of their own kind, as the
    multi leaves them (created _PENDING: the multi's zxid)."""
    written: dict[str, _Known] = {}
    for op in branch:
        if isinstance(op, Put) and not op.lease:
            znode = plan.znodes.get(op.key)
            if znode is not None and znode.owner == 0 and znode.entry is not None:
                entry = znode.entry
                offset = entry.version - znode.version
                removals = plan.removals + plan.removes
                written[op.key] = _Known(znode.version, offset, entry.create_revision, removals)
    return written


def _check_multi(ops: list[Any], max_request: int) -> None:
    """Refuse, before it is sent, a multi ZooKeeper would not take: more than _MULTI_OPS
    znode operations, more than _MULTI_BYTES on the wire besides its values, or more than
    `max_request` (the servers' jute.maxbuffer) with them."""
    size = _multi_size(ops)
    if len(ops) <= _MULTI_OPS and size <= _MULTI_BYTES:
        total = size + sum(len(op.data) for op in ops if isinstance(op, Create | SetData))
        if total <= max_request:
            return
        raise TxnTooLarge(
            f"on ZooKeeper a transaction is one multi request, and this one would be "
            f"{total:,} bytes with the values it writes: at most {max_request:,}, the "
            "servers' jute.maxbuffer (the store URL's max_request; ZooKeeper drops a larger "
            "request). Write the large values in several transactions"
        )
    raise TxnTooLarge(
        f"on ZooKeeper a transaction is one multi request, and this one would be "
        f"{len(ops):,} znode operations and {size:,} bytes besides the values it writes: "
        f"at most {_MULTI_OPS:,} operations and {_MULTI_BYTES:,} bytes (ZooKeeper drops a "
        "request above its jute.maxbuffer). A prefix delete is a znode delete for each key "
        "and parent under it: delete the keys in smaller prefixes, in several transactions"
    )


def _multi_size(ops: Iterable[Any]) -> int:
    """The bytes a multi of `ops` takes on the wire, as kazoo's `Transaction` encodes it,
    less the data of its creates and setDatas: the length and header of the request, its
    end marker, and for each operation its header, path, and the rest of its fields."""
    size = 4 + 8 + 9
    for op in ops:
        path: str = op.path
        size += 9 + 4 + (len(path) if path.isascii() else len(path.encode("utf-8")))
        if isinstance(op, Create):  # data length, ACLs, flags
            size += 4 + 4 + 4
            for acl in op.acl:
                size += 4 + 4 + len(acl.id.scheme.encode()) + 4 + len(acl.id.id.encode())
        elif isinstance(op, SetData):  # data length, version
            size += 4 + 4
        else:  # DeleteNode, CheckVersion: version
            size += 4
    return size


def _holds(plan: _Plan, compare: Any) -> bool:
    if not compare.whole_prefix:
        return bool(compare.holds(plan.entries.get(compare.key)))
    return not any(e is not None and in_prefix(k, compare.key) for k, e in plan.entries.items())


def _at(result: OpResult, zxid: int) -> OpResult:
    """A result with the multi's zxid where it was not known before."""
    if result == _PENDING and type(result) is int:
        return zxid
    if isinstance(result, Entry):
        return _entry_at(result, zxid)
    if isinstance(result, Listing):
        entries = tuple(_entry_at(entry, zxid) for entry in result.entries)
        return Listing(entries, zxid, result.more)
    return result


def _entry_at(entry: Entry, zxid: int) -> Entry:
    if _PENDING not in (entry.create_revision, entry.mod_revision):
        return entry
    return Entry(
        entry.key,
        entry.value,
        entry.version,
        zxid if entry.create_revision == _PENDING else entry.create_revision,
        zxid if entry.mod_revision == _PENDING else entry.mod_revision,
        entry.lease,
    )
