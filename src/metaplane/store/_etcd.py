"""The production backend: etcd v3, spoken through aetcd's generated gRPC stubs.

aetcd's client talks to one host without TLS; this backend keeps one channel per member,
moves to the next member when the active one fails or stops answering (every request has a
deadline), and retries only what is safe to retry: reads, lease refreshes, and writes the
member refused before applying them. A write whose outcome is unknown raises `Unavailable`
and is left to the caller. TLS (CA, client certificate) and user/password authentication
are options of the URL. The watch lives in `_etcd_watch`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from aetcd import rpc

from metaplane.store._base import MetadataStore, PrefixWatch, Watch
from metaplane.store._errors import (
    Compacted,
    InvalidRequest,
    LeaseNotFound,
    MetadataError,
    Unavailable,
)
from metaplane.store._etcd_prefixes import EtcdPrefixWatch
from metaplane.store._etcd_scan import EtcdScan
from metaplane.store._etcd_watch import EtcdWatch, orders_progress, stalls_progress
from metaplane.store._etcd_wire import (
    convert,
    entry_of,
    is_transport,
    key_ranges,
    not_applied,
    to_bytes,
)
from metaplane.store._keys import ROOT
from metaplane.store._model import (
    MAX_INT64,
    Compare,
    Delete,
    Entry,
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
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""How long one operation may take, over every member it tries."""

ATTEMPT_TIMEOUT = 3.0
"""How long one member gets before the next is tried (a read, or a write it refused)."""

VERSION_TIMEOUT = 1.0
"""How long each member gets to tell its version when the store connects."""

REFRESH_SHARE = 0.6
"""The share of a lease refresh's deadline one member gets before the next is tried: a hung
member costs a refresh at most this much, and the rest goes to another member."""

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
]

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
        self.version = ""
        """The server's version, once it said (`EtcdStore.connect`)."""


def _range_requests(op: List, revision: int = 0) -> list[Any]:
    """The etcd range requests of a List, in the order their results are concatenated."""
    own: list[Any] = []
    if op.prefix != ROOT and op.within(op.prefix):
        own = [rpc.RangeRequest(key=to_bytes(op.prefix), revision=revision, keys_only=op.keys_only)]
    low, high = key_ranges(op.prefix)[-1]
    if op.start_after is not None and to_bytes(op.start_after) >= low:
        low = to_bytes(op.start_after) + b"\0"
    if op.end_before is not None and to_bytes(op.end_before) < high:
        high = to_bytes(op.end_before)
    children: list[Any] = []
    if low < high:
        children = [
            rpc.RangeRequest(
                key=low,
                range_end=high,
                revision=revision,
                keys_only=op.keys_only,
                # one more than asked tells whether more follow
                limit=0 if op.limit is None else min(op.limit + 1, MAX_INT64),
                sort_order=rpc.RangeRequest.DESCEND if op.reverse else rpc.RangeRequest.NONE,
                sort_target=rpc.RangeRequest.KEY,
            )
        ]
    return children + own if op.reverse else own + children


def _listing(op: List, parts: Sequence[Any], revision: int) -> Listing:
    """The Listing of a List from the responses of its range requests."""
    entries = [entry_of(kv) for part in parts for kv in part.kvs]
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
    ranges = key_ranges(compare.key) if compare.whole_prefix else [(to_bytes(compare.key), b"")]
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
        return [rpc.RequestOp(request_range=rpc.RangeRequest(key=to_bytes(op.key)))]
    if isinstance(op, Put):
        put = rpc.PutRequest(key=to_bytes(op.key), value=op.value, lease=op.lease)
        return [rpc.RequestOp(request_put=put)]
    if isinstance(op, Delete):
        return [rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=to_bytes(op.key)))]
    if isinstance(op, List):
        return [rpc.RequestOp(request_range=request) for request in _range_requests(op)]
    return [
        rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=start, range_end=end))
        for start, end in key_ranges(op.prefix)
    ]


def _results(ops: Sequence[Operation], responses: Sequence[Any], revision: int) -> list[OpResult]:
    results: list[OpResult] = []
    position = 0
    for op in ops:
        if isinstance(op, Get):
            kvs = responses[position].response_range.kvs
            results.append(entry_of(kvs[0]) if kvs else None)
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
            count = len(key_ranges(op.prefix))
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
        """Every member sends requested progress notifications in order with events."""
        self.progress_may_stall = False
        """Some member may never answer a progress request made while a watch catches up."""

    @property
    def active_endpoint(self) -> str:
        """The member requests go to now."""
        return self._members[self._active].address

    @classmethod
    async def connect(cls, options: EtcdOptions) -> EtcdStore:
        store = cls(options)
        try:
            status = await store.call("maintenance", "Status", rpc.StatusRequest(), idempotent=True)
            store._members[store._active].version = status.version
            await store._revision()  # Status needs no credentials; fail now if they are wrong
            await store._learn_versions()
        except BaseException:
            await store._close()
            raise
        store.server_version = status.version
        return store

    async def _learn_versions(self) -> None:
        """Ask every member its version, briefly. A progress notification is trusted to
        follow the events before it only when every member runs a version that sends them
        in order; a member that did not answer counts as one that does not."""

        async def ask(member: _Member) -> None:
            try:
                status = await member.maintenance.Status(
                    rpc.StatusRequest(), timeout=VERSION_TIMEOUT
                )
            except grpc.aio.AioRpcError:
                return
            member.version = status.version

        await asyncio.gather(*(ask(member) for member in self._members if not member.version))
        versions = [member.version for member in self._members]
        self.progress_in_order = all(orders_progress(version) for version in versions)
        self.progress_may_stall = any(stalls_progress(version) for version in versions)
        if not self.progress_in_order:
            log.info(
                "etcd %s: progress notifications may come ahead of events; each is verified",
                ", ".join(version or "(version unknown)" for version in versions),
            )

    # -- calling a member --------------------------------------------------------------

    async def call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        idempotent: bool,
        lease: int = 0,
        attempt: float = ATTEMPT_TIMEOUT,
    ) -> Any:
        """Send one request to the active member, moving on to the next member when the
        active one fails (or does not answer within `attempt` seconds) and the request is
        safe to send again."""
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
                    timeout=min(attempt, max(remaining, 0.01)),
                    metadata=self._metadata,
                )
            except grpc.aio.AioRpcError as error:
                if self._token_refused(error) and loop.time() < deadline:
                    continue  # a new token is taken on the next attempt
                if not is_transport(error):
                    raise convert(error, lease) from error
                self._fail_over(index, error.details() or error.code().name)
                if not (idempotent or not_applied(error)) or loop.time() >= deadline:
                    raise convert(error, lease) from error
                tried += 1
                if tried % len(self._members) == 0:  # every member failed: back off a little
                    await asyncio.sleep(min(0.05 * tried, 0.5, max(deadline - loop.time(), 0)))

    def _fail_over(self, index: int, reason: str) -> None:
        """Member `index` failed or did not answer in time: requests go to the next one
        (unless another request moved on already)."""
        if self._active == index and len(self._members) > 1:
            self._active = (index + 1) % len(self._members)
            log.warning(
                "etcd member %s failed (%s); moving to %s",
                self._members[index].address,
                reason,
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
            response = await member.auth.Authenticate(request, timeout=ATTEMPT_TIMEOUT)
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

    def _stream_metadata(self) -> tuple[tuple[str, str], ...]:
        """A watch stream's metadata: the token, and etcd's "require leader" flag, so that a
        member cut off from its cluster ends the stream rather than keep it silent."""
        return (*(self._metadata or ()), ("hasleader", "true"))

    # -- reads -------------------------------------------------------------------------

    async def _get(self, key: str) -> Entry | None:
        response = await self.call(
            "kv", "Range", rpc.RangeRequest(key=to_bytes(key)), idempotent=True
        )
        return entry_of(response.kvs[0]) if response.kvs else None

    async def _list(self, op: List, revision: int | None) -> Listing:
        ranges = _range_requests(op, revision or 0)
        # etcd checks a revision only where something is read at it: an empty selection
        # still reads a count (and drops it), so that a compacted or future revision raises
        # as on every backend.
        only_checks = not ranges and revision is not None
        if only_checks:
            start = b"/" if op.prefix == ROOT else to_bytes(op.prefix)
            ranges = [rpc.RangeRequest(key=start, revision=revision, count_only=True)]
        requests = [rpc.RequestOp(request_range=request) for request in ranges]
        try:
            response = await self.call(
                "kv", "Txn", rpc.TxnRequest(success=requests), idempotent=True
            )
        except Compacted:
            raise Compacted(await self._compaction()) from None
        parts = [] if only_checks else [part.response_range for part in response.responses]
        return _listing(op, parts, revision or response.header.revision)

    async def _scan(
        self, prefixes: tuple[str, ...], revision: int | None, page: int, keys_only: bool
    ) -> AsyncGenerator[Listing, None]:
        async for listing in EtcdScan(self, prefixes, revision, page, keys_only).pages():
            yield listing

    async def _revision(self) -> int:
        request = rpc.RangeRequest(key=b"/", count_only=True)
        response = await self.call("kv", "Range", request, idempotent=True)
        revision: int = response.header.revision
        return revision

    async def _compaction(self) -> int:
        """The revision of the last compaction: etcd's error for a compacted request does
        not say it, but a watch from revision 1 is cancelled with it. Tried on each member
        in turn, as any read; `Unavailable` when none says."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        while True:
            index = self._active
            created = asyncio.Event()
            try:
                async with asyncio.timeout(min(ATTEMPT_TIMEOUT, deadline - loop.time())):
                    return await self._compaction_on(self._members[index], created)
            except grpc.aio.AioRpcError as error:
                if not is_transport(error):
                    raise convert(error) from error
                reason = error.details() or error.code().name
            except TimeoutError:
                if created.is_set():
                    # Created and never cancelled: revision 1 is still there, so the only
                    # compaction there was is the one at revision 1.
                    return 1
                reason = f"no answer within {ATTEMPT_TIMEOUT} s"
            self._fail_over(index, reason)
            if loop.time() >= deadline - 0.05:
                raise Unavailable(f"etcd: history compacted, and no member said where ({reason})")

    async def _compaction_on(self, member: _Member, created: asyncio.Event) -> int:
        call = member.watch.Watch(metadata=self._stream_metadata())
        try:
            create = rpc.WatchCreateRequest(key=b"\0", start_revision=1)
            await call.write(rpc.WatchRequest(create_request=create))
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    raise Unavailable("etcd: the watch stream ended")
                if response.compact_revision:
                    revision: int = response.compact_revision
                    return revision
                if response.canceled:
                    raise Unavailable(f"etcd: the watch was cancelled: {response.cancel_reason}")
                if response.created:
                    created.set()
        finally:
            call.cancel()

    # -- writes ------------------------------------------------------------------------

    async def _put(self, op: Put) -> int:
        request = rpc.PutRequest(key=to_bytes(op.key), value=op.value, lease=op.lease)
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
        try:
            await self.call(
                "kv", "Compact", rpc.CompactionRequest(revision=revision), idempotent=True
            )
        except Compacted:
            raise Compacted(await self._compaction()) from None

    # -- leases ------------------------------------------------------------------------

    async def _grant(self, ttl: int) -> Lease:
        response = await self.call(
            "lease", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl), idempotent=False
        )
        if response.error:
            raise MetadataError(f"etcd: cannot grant a lease: {response.error}")
        return Lease(response.ID, response.TTL)

    async def _refresh(self, lease: int, timeout: float | None) -> int:
        """Refresh within `timeout` (default: the store's). A member that fails, or does not
        answer within REFRESH_SHARE of it, is failed over as a dead one and the rest of the
        time goes to the next member: a hung member never costs a lease."""
        loop = asyncio.get_running_loop()
        budget = self.options.timeout if timeout is None else timeout
        deadline = loop.time() + budget
        per_member = min(ATTEMPT_TIMEOUT, budget * REFRESH_SHARE)
        tried = 0
        while True:
            index = self._active
            attempt = min(per_member, deadline - loop.time())
            try:
                ttl = await self._refresh_on(self._members[index], lease, attempt)
            except grpc.aio.AioRpcError as error:
                if self._token_refused(error) and loop.time() < deadline:
                    continue
                if not is_transport(error):
                    raise convert(error, lease) from error
                reason = error.details() or error.code().name
            except TimeoutError:
                reason = f"no answer to a lease refresh within {attempt:.2f} s"
            else:
                if ttl is not None:
                    return ttl
                reason = "the keep-alive stream ended"
            self._fail_over(index, reason)
            left = deadline - loop.time()
            if left < 0.02:
                raise Unavailable(f"etcd: lease {lease} not refreshed in {budget:.2f} s: {reason}")
            tried += 1
            if tried % len(self._members) == 0:  # every member failed: back off a little
                await asyncio.sleep(min(0.05 * tried, 0.25, left / 2))

    async def _refresh_on(self, member: _Member, lease: int, seconds: float) -> int | None:
        """One keep-alive on `member` within `seconds`: the TTL granted, or None when the
        stream ended without an answer."""
        call: Any = None
        try:
            async with asyncio.timeout(seconds):
                await self._ensure_token(member)
                call = member.lease.LeaseKeepAlive(metadata=self._metadata)
                await call.write(rpc.LeaseKeepAliveRequest(ID=lease))
                response = await call.read()
        finally:
            if call is not None:
                call.cancel()
        if response is grpc.aio.EOF:
            return None
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

    def _watch_prefixes(self, prefixes: frozenset[str], start_revision: int | None) -> PrefixWatch:
        return EtcdPrefixWatch(self, prefixes, start_revision)

    async def _close(self) -> None:
        for member in self._members:
            await member.channel.close()
