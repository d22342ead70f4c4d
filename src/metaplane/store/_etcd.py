"""The production backend: etcd v3, spoken through aetcd's generated gRPC stubs.

aetcd's client talks to one host without TLS; this backend keeps one channel per member,
moves to the next member when the active one fails, and retries only what is safe to
retry: reads, and writes the member refused before applying them. A write whose outcome is
unknown raises `Unavailable` and is left to the caller. TLS (CA, client certificate) and
user/password authentication are options of the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from aetcd import rpc

from metaplane._tasks import cancel_and_wait
from metaplane.store._base import MetadataStore, Watch
from metaplane.store._errors import (
    Compacted,
    InvalidRequest,
    InvalidTxn,
    LeaseNotFound,
    MetadataError,
    PermissionDenied,
    TxnTooLarge,
    Unavailable,
)
from metaplane.store._keys import ROOT, children_prefix, in_prefix, prefix_end
from metaplane.store._local import group
from metaplane.store._model import (
    Compare,
    Delete,
    Entry,
    EventType,
    Get,
    Lease,
    List,
    Listing,
    Operation,
    OpResult,
    Put,
    Target,
    Txn,
    TxnResult,
    WatchBatch,
    WatchEvent,
    deleted_entry,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""How long one operation may take, over every member it tries."""

_ATTEMPT_TIMEOUT = 3.0
"""How long one member gets before the next is tried (a read, or a write it refused)."""

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
]

_AUTH_FAILURES = (
    "authentication failed",
    "permission denied",
    "user name is empty",
    "invalid auth token",
)

_TARGETS = {
    Target.VERSION: rpc.Compare.VERSION,
    Target.CREATE_REVISION: rpc.Compare.CREATE,
    Target.MOD_REVISION: rpc.Compare.MOD,
    Target.VALUE: rpc.Compare.VALUE,
}
_RESULTS = {
    "==": rpc.Compare.EQUAL,
    "!=": rpc.Compare.NOT_EQUAL,
    "<": rpc.Compare.LESS,
    ">": rpc.Compare.GREATER,
}


@dataclass(frozen=True)
class EtcdOptions:
    """How to reach an etcd cluster."""

    endpoints: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    tls: bool = False
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise InvalidRequest("etcd: at least one endpoint is needed")
        if (self.user is None) != (self.password is None):
            raise InvalidRequest("etcd: a user needs a password, and a password a user")
        if (self.cert is None) != (self.key is None):
            raise InvalidRequest("etcd: a client certificate needs its key, and a key its cert")
        if self.timeout <= 0:
            raise InvalidRequest("etcd: the timeout must be positive")

    @property
    def secure(self) -> bool:
        return self.tls or self.ca is not None or self.cert is not None


class _Member:
    """One endpoint: its channel and stubs, created on first use."""

    def __init__(self, address: str, options: EtcdOptions) -> None:
        self.address = address
        if options.secure:
            credentials = grpc.ssl_channel_credentials(options.ca, options.key, options.cert)
            self.channel = grpc.aio.secure_channel(address, credentials, _CHANNEL_OPTIONS)
        else:
            self.channel = grpc.aio.insecure_channel(address, _CHANNEL_OPTIONS)
        self.kv = rpc.KVStub(self.channel)
        self.lease = rpc.LeaseStub(self.channel)
        self.watch = rpc.WatchStub(self.channel)
        self.auth = rpc.AuthStub(self.channel)
        self.maintenance = rpc.MaintenanceStub(self.channel)


def orders_progress(version: str) -> bool:
    """True when an etcd server of `version` sends requested progress notifications in order
    with watch events. Before 3.4.25 and 3.5.8 a progress notification could overtake events
    it claims to follow (etcd issue 15220)."""
    try:
        major, minor, patch = (int(part) for part in version.split("-")[0].split(".")[:3])
    except ValueError:
        return False
    if (major, minor) == (3, 4):
        return patch >= 25
    if (major, minor) == (3, 5):
        return patch >= 8
    return (major, minor) > (3, 5)


def _not_applied(error: grpc.aio.AioRpcError) -> bool:
    """True when the member refused the request before applying it: safe to send again."""
    details = (error.details() or "").lower()
    return error.code() == grpc.StatusCode.UNAVAILABLE and (
        "failed to connect" in details
        or "connection refused" in details
        or "etcdserver: no leader" in details
        or "not capable" in details
    )


def _transport(error: grpc.aio.AioRpcError) -> bool:
    """True when the member could not be reached or answer: another member may."""
    return error.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
    ) or "leader changed" in (error.details() or "")


def _convert(error: grpc.aio.AioRpcError, lease: int = 0) -> MetadataError:
    """The one place where etcd's gRPC errors become the contract's."""
    code, details = error.code(), error.details() or ""
    if _transport(error):
        return Unavailable(f"etcd: {details or code.name}")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED) or any(
        reason in details for reason in _AUTH_FAILURES
    ):
        return PermissionDenied(f"etcd: {details}")
    if code == grpc.StatusCode.NOT_FOUND and "lease not found" in details:
        return LeaseNotFound(lease)
    if "required revision has been compacted" in details:
        return Compacted(0, f"etcd: {details}")
    if "future revision" in details:
        return InvalidRequest(f"etcd: {details}")
    if "too many operations" in details:
        return TxnTooLarge(f"etcd: {details}")
    if "duplicate key" in details:
        return InvalidTxn(f"etcd: {details}")
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return InvalidRequest(f"etcd: {details}")
    return MetadataError(f"etcd: {code.name}: {details}")


def _entry(kv: Any) -> Entry:
    key = kv.key.decode("utf-8", "surrogateescape")
    return Entry(key, kv.value, kv.version, kv.create_revision, kv.mod_revision, kv.lease)


def _bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def _ranges(prefix: str) -> list[tuple[bytes, bytes]]:
    """The etcd ranges that make a prefix: the key itself and the keys under it.

    The single range [p, p + '0') would also hold siblings such as `p-part-1`."""
    if prefix == ROOT:
        return [(b"/", b"0")]
    return [(_bytes(prefix), b""), (_bytes(children_prefix(prefix)), _bytes(prefix_end(prefix)))]


def _range_requests(op: List, revision: int = 0) -> list[Any]:
    """The etcd range requests of a List, in the order their results are concatenated."""
    own: list[Any] = []
    if op.prefix != ROOT and op.within(op.prefix):
        own = [rpc.RangeRequest(key=_bytes(op.prefix), revision=revision, keys_only=op.keys_only)]
    low, high = _ranges(op.prefix)[-1]
    if op.start_after is not None and _bytes(op.start_after) >= low:
        low = _bytes(op.start_after) + b"\0"
    if op.end_before is not None and _bytes(op.end_before) < high:
        high = _bytes(op.end_before)
    children: list[Any] = []
    if low < high:
        children = [
            rpc.RangeRequest(
                key=low,
                range_end=high,
                revision=revision,
                keys_only=op.keys_only,
                limit=0 if op.limit is None else op.limit + 1,
                sort_order=rpc.RangeRequest.DESCEND if op.reverse else rpc.RangeRequest.NONE,
                sort_target=rpc.RangeRequest.KEY,
            )
        ]
    return children + own if op.reverse else own + children


def _listing(op: List, parts: Sequence[Any], revision: int) -> Listing:
    """The Listing of a List from the responses of its range requests."""
    entries = [_entry(kv) for part in parts for kv in part.kvs]
    more = any(part.more for part in parts)
    if op.limit is not None and len(entries) > op.limit:
        entries, more = entries[: op.limit], True
    return Listing(tuple(entries), revision, more)


_OPERAND_FIELDS = {
    Target.VERSION: "version",
    Target.CREATE_REVISION: "create_revision",
    Target.MOD_REVISION: "mod_revision",
    Target.VALUE: "value",
}


def _compares(compare: Compare) -> list[Any]:
    """etcd compares of one compare: a prefix compare is one per range of the prefix (etcd
    compares every key of a range, and an empty range as a missing key — our semantics)."""
    ranges = _ranges(compare.key) if compare.whole_prefix else [(_bytes(compare.key), b"")]
    return [
        rpc.Compare(
            key=start,
            range_end=end,
            target=_TARGETS[compare.target],
            result=_RESULTS[compare.op],
            **{_OPERAND_FIELDS[compare.target]: compare.operand},
        )
        for start, end in ranges
    ]


def _requests(op: Operation) -> list[Any]:
    if isinstance(op, Get):
        return [rpc.RequestOp(request_range=rpc.RangeRequest(key=_bytes(op.key)))]
    if isinstance(op, Put):
        put = rpc.PutRequest(key=_bytes(op.key), value=op.value, lease=op.lease)
        return [rpc.RequestOp(request_put=put)]
    if isinstance(op, Delete):
        return [rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=_bytes(op.key)))]
    if isinstance(op, List):
        return [rpc.RequestOp(request_range=request) for request in _range_requests(op)]
    return [
        rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=start, range_end=end))
        for start, end in _ranges(op.prefix)
    ]


def _results(ops: Sequence[Operation], responses: Sequence[Any], revision: int) -> list[OpResult]:
    results: list[OpResult] = []
    position = 0
    for op in ops:
        if isinstance(op, Get):
            kvs = responses[position].response_range.kvs
            results.append(_entry(kvs[0]) if kvs else None)
            position += 1
        elif isinstance(op, Put):
            results.append(revision)
            position += 1
        elif isinstance(op, Delete):
            results.append(responses[position].response_delete_range.deleted)
            position += 1
        elif isinstance(op, List):
            count = len(_range_requests(op))
            parts = [responses[position + i].response_range for i in range(count)]
            results.append(_listing(op, parts, revision))
            position += count
        else:
            count = len(_ranges(op.prefix))
            deleted = sum(
                responses[position + i].response_delete_range.deleted for i in range(count)
            )
            results.append(deleted)
            position += count
    return results


class EtcdStore(MetadataStore):
    """A store on an etcd v3 cluster. Open it with `await EtcdStore.connect(options)`."""

    def __init__(self, options: EtcdOptions) -> None:
        self.options = options
        self.url = "etcd://" + ",".join(options.endpoints)
        self._members = [_Member(address, options) for address in options.endpoints]
        self._active = 0
        self._metadata: tuple[tuple[str, str], ...] | None = None
        self._auth_lock = asyncio.Lock()
        self.server_version = ""
        self.progress_in_order = False

    @property
    def active_endpoint(self) -> str:
        """The member requests go to now."""
        return self._members[self._active].address

    @classmethod
    async def connect(cls, options: EtcdOptions) -> EtcdStore:
        store = cls(options)
        try:
            status = await store.call("maintenance", "Status", rpc.StatusRequest(), idempotent=True)
            await store._revision()  # Status needs no credentials; fail now if they are wrong
        except BaseException:
            await store._close()
            raise
        store.server_version = status.version
        store.progress_in_order = orders_progress(status.version)
        if not store.progress_in_order:
            log.info(
                "etcd %s may send progress notifications ahead of events: each is verified",
                status.version,
            )
        return store

    # -- calling a member --------------------------------------------------------------

    async def call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        idempotent: bool,
        lease: int = 0,
    ) -> Any:
        """Send one request to the active member, moving on to the next member when the
        active one fails and the request is safe to send again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        tried = 0
        while True:
            index = self._active
            member = self._members[index]
            remaining = deadline - loop.time()
            try:
                await self._ensure_token(member)
                stub = getattr(member, service)
                return await getattr(stub, method)(
                    request,
                    timeout=min(_ATTEMPT_TIMEOUT, max(remaining, 0.01)),
                    metadata=self._metadata,
                )
            except grpc.aio.AioRpcError as error:
                if self._token_refused(error) and loop.time() < deadline:
                    continue  # a new token is taken on the next attempt
                if not _transport(error):
                    raise _convert(error, lease) from error
                self._fail_over(index, error)
                if not (idempotent or _not_applied(error)) or loop.time() >= deadline:
                    raise _convert(error, lease) from error
                tried += 1
                if tried % len(self._members) == 0:  # every member failed: back off a little
                    await asyncio.sleep(min(0.05 * tried, 0.5, max(deadline - loop.time(), 0)))

    def _fail_over(self, index: int, error: grpc.aio.AioRpcError) -> None:
        if self._active == index and len(self._members) > 1:
            self._active = (index + 1) % len(self._members)
            log.warning(
                "etcd member %s failed (%s); moving to %s",
                self._members[index].address,
                error.details(),
                self._members[self._active].address,
            )

    async def _ensure_token(self, member: _Member) -> None:
        """Log in (user and password) unless a token is held. Raises gRPC's error, for the
        caller to fail over or convert."""
        if self.options.user is None or self._metadata is not None:
            return
        async with self._auth_lock:
            if self._metadata is not None:
                return
            request = rpc.AuthenticateRequest(
                name=self.options.user, password=self.options.password
            )
            response = await member.auth.Authenticate(request, timeout=_ATTEMPT_TIMEOUT)
            self._metadata = (("token", response.token),)

    def _token_refused(self, error: grpc.aio.AioRpcError) -> bool:
        """True (and the token dropped) when the error says our token expired or was
        invalidated: the request was not applied, and a new token will do."""
        if self.options.user is None:
            return False
        details = error.details() or ""
        if error.code() == grpc.StatusCode.UNAUTHENTICATED or "invalid auth token" in details:
            self._metadata = None
            return True
        return False

    # -- reads -------------------------------------------------------------------------

    async def _get(self, key: str) -> Entry | None:
        response = await self.call(
            "kv", "Range", rpc.RangeRequest(key=_bytes(key)), idempotent=True
        )
        return _entry(response.kvs[0]) if response.kvs else None

    async def _list(self, op: List, revision: int | None) -> Listing:
        requests = [rpc.RequestOp(request_range=r) for r in _range_requests(op, revision or 0)]
        try:
            response = await self.call(
                "kv", "Txn", rpc.TxnRequest(success=requests), idempotent=True
            )
        except Compacted:
            raise Compacted(await self._compact_revision()) from None
        parts = [part.response_range for part in response.responses]
        return _listing(op, parts, revision or response.header.revision)

    async def _revision(self) -> int:
        request = rpc.RangeRequest(key=b"/", count_only=True)
        response = await self.call("kv", "Range", request, idempotent=True)
        revision: int = response.header.revision
        return revision

    async def _compact_revision(self) -> int:
        """etcd's error for a compacted read does not say the compact revision; a watch from
        revision 1 is cancelled with it."""
        member = self._members[self._active]
        call = member.watch.Watch(metadata=self._metadata)
        create = rpc.WatchCreateRequest(key=b"\0", start_revision=1)
        try:
            async with asyncio.timeout(_ATTEMPT_TIMEOUT):
                await call.write(rpc.WatchRequest(create_request=create))
                while True:
                    response = await call.read()
                    if response is grpc.aio.EOF:
                        return 0
                    if response.canceled:
                        revision: int = response.compact_revision
                        return revision
        except (grpc.aio.AioRpcError, TimeoutError):
            return 0
        finally:
            call.cancel()

    # -- writes ------------------------------------------------------------------------

    async def _put(self, op: Put) -> int:
        request = rpc.PutRequest(key=_bytes(op.key), value=op.value, lease=op.lease)
        response = await self.call("kv", "Put", request, idempotent=False, lease=op.lease)
        revision: int = response.header.revision
        return revision

    async def _txn(self, txn: Txn) -> TxnResult:
        request = rpc.TxnRequest(
            compare=[message for compare in txn.compares for message in _compares(compare)],
            success=[request for op in txn.on_success for request in _requests(op)],
            failure=[request for op in txn.on_failure for request in _requests(op)],
        )
        leases = [
            op.lease
            for op in (*txn.on_success, *txn.on_failure)
            if isinstance(op, Put) and op.lease
        ]
        response = await self.call(
            "kv", "Txn", request, idempotent=not txn.writes, lease=leases[0] if leases else 0
        )
        ops = txn.on_success if response.succeeded else txn.on_failure
        revision = response.header.revision
        return TxnResult(
            response.succeeded, revision, tuple(_results(ops, response.responses, revision))
        )

    async def _compact(self, revision: int) -> None:
        await self.call("kv", "Compact", rpc.CompactionRequest(revision=revision), idempotent=True)

    # -- leases ------------------------------------------------------------------------

    async def _grant(self, ttl: int) -> Lease:
        response = await self.call(
            "lease", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl), idempotent=False
        )
        if response.error:
            raise MetadataError(f"etcd: cannot grant a lease: {response.error}")
        return Lease(response.ID, response.TTL)

    async def _refresh(self, lease: int) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        while True:
            index = self._active
            member = self._members[index]
            call: Any = None
            try:
                async with asyncio.timeout(min(_ATTEMPT_TIMEOUT, deadline - loop.time())):
                    await self._ensure_token(member)
                    call = member.lease.LeaseKeepAlive(metadata=self._metadata)
                    await call.write(rpc.LeaseKeepAliveRequest(ID=lease))
                    response = await call.read()
            except grpc.aio.AioRpcError as error:
                if self._token_refused(error) and loop.time() < deadline:
                    continue
                if not _transport(error) or loop.time() >= deadline:
                    raise _convert(error, lease) from error
                self._fail_over(index, error)
                continue
            except TimeoutError:
                if loop.time() >= deadline:
                    raise Unavailable(f"etcd: refreshing lease {lease} timed out") from None
                continue
            finally:
                if call is not None:
                    call.cancel()
            if response is grpc.aio.EOF:
                raise Unavailable(f"etcd: the keep-alive stream of lease {lease} ended")
            if response.TTL <= 0:
                raise LeaseNotFound(lease)
            ttl: int = response.TTL
            return ttl

    async def _revoke(self, lease: int) -> None:
        await self.call(
            "lease", "LeaseRevoke", rpc.LeaseRevokeRequest(ID=lease), idempotent=False, lease=lease
        )

    # -- watch -------------------------------------------------------------------------

    def _watch(self, prefix: str, start_revision: int | None) -> Watch:
        return EtcdWatch(self, prefix, start_revision)

    async def _close(self) -> None:
        for member in self._members:
            await member.channel.close()


class EtcdWatch(Watch):
    """One etcd watch stream over the range of a prefix, filtered to its segment boundary.

    A task of its own reads the stream into a small queue: a caller that stops waiting
    (a timeout) must not cancel the gRPC read, which would end the whole stream.
    """

    def __init__(self, store: EtcdStore, prefix: str, start_revision: int | None) -> None:
        super().__init__(prefix, start_revision)
        self._store = store
        self._call: Any = None
        self._pump: asyncio.Task[None] | None = None
        self._responses: asyncio.Queue[Any] = asyncio.Queue(maxsize=64)
        self._ready: list[WatchBatch] = []
        self._progress = False
        self._closed = False
        self._write_lock = asyncio.Lock()  # one write at a time on a gRPC stream
        self._asking: asyncio.Task[None] | None = None
        self._delivered = (start_revision or 1) - 1  # the last revision this stream passed
        self._reopened = False

    async def __anext__(self) -> WatchBatch:
        while not self._ready:
            if self._closed:
                raise StopAsyncIteration
            if self._call is None:
                await self._open()
            response = await self._responses.get()
            if isinstance(response, MetadataError):
                await self.aclose()
                raise response
            if response.compact_revision:
                await self.aclose()
                raise Compacted(response.compact_revision)
            if response.canceled:
                if "invalid auth token" in response.cancel_reason and not self._reopened:
                    await self._reopen_with_a_new_token()
                    continue
                await self.aclose()
                raise Unavailable(f"etcd: the watch was canceled: {response.cancel_reason}")
            if response.events:
                self._ready = group(
                    self._event(event)
                    for event in response.events
                    if in_prefix(event.kv.key.decode("utf-8", "surrogateescape"), self.prefix)
                )
                self._delivered = max(self._delivered, response.events[-1].kv.mod_revision)
            elif response.created:
                if self.start_revision is None:  # "from now": now is the created revision
                    self._delivered = max(self._delivered, response.header.revision)
            else:
                await self._progress_response(response.header.revision)
        return self._ready.pop(0)

    async def _progress_response(self, revision: int) -> None:
        """Pass on a progress notification only if no event up to it can still be coming."""
        if revision < self._delivered:
            return  # older than what was delivered: stale
        if revision > self._delivered and not (
            self._store.progress_in_order or await self._nothing_pending(revision)
        ):
            return  # events may still be coming: the request is repeated
        self._delivered = revision
        self._progress = False
        self._ready = [WatchBatch(revision, ())]

    async def _nothing_pending(self, revision: int) -> bool:
        """On an etcd that may send progress ahead of events: true if the watched range has
        the same keys at `revision` as at the last revision this stream delivered, none of
        them modified since. (A key created and deleted in between is invisible to this
        check; the state it leaves is the same.)"""
        start, end = _bytes(self.prefix), _bytes(prefix_end(self.prefix))

        async def read(**fields: int | bool) -> Any:
            request = rpc.RangeRequest(key=start, range_end=end, **fields)
            return await self._store.call("kv", "Range", request, idempotent=True)

        try:
            # etcd's count ignores min_mod_revision: look for one modified key instead.
            modified = await read(
                revision=revision, min_mod_revision=self._delivered + 1, keys_only=True, limit=1
            )
            if modified.kvs:
                return False
            now = await read(revision=revision, count_only=True)
            before = await read(revision=self._delivered, count_only=True)
        except (Compacted, InvalidRequest, Unavailable):
            return False
        same: bool = now.count == before.count
        return same

    async def _reopen_with_a_new_token(self) -> None:
        """The token was refused: log in again and resume after what was delivered."""
        self._reopened = True
        self._store._metadata = None
        pump, self._pump = self._pump, None
        await cancel_and_wait(pump)
        if self._call is not None:
            self._call.cancel()
            self._call = None
        self.start_revision = self._delivered + 1

    @staticmethod
    def _event(event: Any) -> WatchEvent:
        if event.type == rpc.Event.EventType.DELETE:
            key = event.kv.key.decode("utf-8", "surrogateescape")
            return WatchEvent(EventType.DELETE, deleted_entry(key, event.kv.mod_revision))
        return WatchEvent(EventType.PUT, _entry(event.kv))

    async def _open(self) -> None:
        start, end = _bytes(self.prefix), _bytes(prefix_end(self.prefix))
        if self.prefix == ROOT:
            start = b"/"
        create = rpc.WatchCreateRequest(
            key=start, range_end=end, start_revision=self.start_revision or 0
        )
        store = self._store
        index = store._active
        try:
            await store._ensure_token(store._members[index])
            self._call = store._members[index].watch.Watch(metadata=store._metadata)
            async with self._write_lock:
                await self._call.write(rpc.WatchRequest(create_request=create))
        except grpc.aio.AioRpcError as error:
            if _transport(error):
                store._fail_over(index, error)
            if store._token_refused(error):
                error_text = "etcd: the token was refused; the next watch logs in again"
                await self.aclose()
                raise Unavailable(error_text) from error
            await self.aclose()
            raise _convert(error) from error
        self._pump = asyncio.get_running_loop().create_task(self._read(self._call, index))
        if self._progress:
            self.request_progress()

    async def _read(self, call: Any, index: int) -> None:
        """Move the stream's responses into the queue; end with the error that ended it."""
        try:
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    await self._responses.put(Unavailable("etcd: the watch stream ended"))
                    return
                await self._responses.put(response)
        except grpc.aio.AioRpcError as error:
            if _transport(error):
                self._store._fail_over(index, error)
            if self._store._token_refused(error):  # resumable: the next watch logs in again
                await self._responses.put(Unavailable("etcd: the watch's token was refused"))
                return
            await self._responses.put(_convert(error))

    def request_progress(self) -> None:
        self._progress = True
        if self._call is not None and (self._asking is None or self._asking.done()):
            self._asking = asyncio.get_running_loop().create_task(self._ask_until_answered())

    async def _ask_until_answered(self) -> None:
        """Ask for progress until a progress batch is delivered: etcd drops a request made
        while the watcher is still catching up (etcd issue 17507), and on old servers we
        pass on only the answers we could verify."""
        request = rpc.WatchRequest(progress_request=rpc.WatchProgressRequest())
        while self._progress and not self._closed:
            await self._write(request)
            await asyncio.sleep(0.1)

    async def _write(self, request: Any) -> None:
        async with self._write_lock:
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                if self._call is not None:
                    await self._call.write(request)

    async def aclose(self) -> None:
        self._closed = True
        pump, self._pump = self._pump, None
        await cancel_and_wait(pump)
        if self._call is not None:
            self._call.cancel()
            self._call = None
        if self._asking is not None:
            self._asking.cancel()
