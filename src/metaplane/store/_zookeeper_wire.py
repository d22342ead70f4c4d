"""kazoo for asyncio: requests put on a kazoo client's queue, replies resolved on the event
loop together with the zxid of the reply that carried them; the znode data format of a key;
the requests kazoo 2.11 lacks (`AddWatch`, ZooKeeper 3.6's persistent recursive watch).

kazoo runs its connection in a thread of its own. Replies and watch notifications are handed
to the loop with `call_soon_threadsafe` from that thread, in the order they came off the
socket: ZooKeeper sends the notification of a change before the reply to any later request,
so a watch that has a reply at zxid Z has every notification of a change up to Z.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import re
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo import retry as kazoo_retry  # type: ignore[import-untyped]
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    EXCEPTIONS,
    AuthFailedError,
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoChildrenForEphemeralsError,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.protocol import connection as kazoo_connection  # type: ignore[import-untyped]
from kazoo.protocol.serialization import (  # type: ignore[import-untyped]
    Watch,
    int_struct,
    multiheader_struct,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat  # type: ignore[import-untyped]

from metaplane.store._errors import (
    InvalidRequest,
    MetadataError,
    PermissionDenied,
    Unavailable,
)
from metaplane.store._model import MAX_INT64, Entry

log = logging.getLogger(__name__)

# kazoo draws its reconnection and ping jitter from the process's global random state, in
# its own threads, under the feet of whoever seeded it (hypothesis checks it did not move):
# it gets a generator of its own.
kazoo_connection.random = random.Random()
kazoo_retry.random = random.Random()

PERSISTENT_RECURSIVE = 1
"""AddWatchMode.PERSISTENT_RECURSIVE of ZooKeeper 3.6+."""

_HEADER = struct.Struct(">Bqq")
_KEY_MARK = 1


class AddWatch:
    """ZooKeeper 3.6's addWatch (opcode 106), which kazoo 2.11 does not have."""

    type = 106

    def __init__(self, path: str, mode: int) -> None:
        self.path = path
        self.mode = mode

    def serialize(self) -> bytearray:
        return bytearray(write_string(self.path) + int_struct.pack(self.mode))

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        return True


GET_DATA = 4
GET_CHILDREN = 8
_MULTI_READ = 22
_HEADER_SIZE = multiheader_struct.size
_INT_SIZE = int_struct.size
_STAT_SIZE = stat_struct.size


class MultiRead:
    """ZooKeeper 3.6's multiRead (opcode 22), which kazoo 2.11 does not have: several
    getData / getChildren in one request and one reply. Not atomic: each read sees the
    tree as the server has it when it gets to that read, in order. Its value is one result
    a read: `(data, stat)` for a getData, the list of names for a getChildren, or the
    kazoo exception of that read (`NoNodeError`: the znode is missing)."""

    type = _MULTI_READ

    def __init__(self, reads: list[tuple[int, str]]) -> None:
        self.reads = reads

    def serialize(self) -> bytearray:
        buffer = bytearray()
        for kind, path in self.reads:
            buffer += multiheader_struct.pack(kind, False, -1)
            buffer += write_string(path)
            buffer += b"\0"  # no watch
        buffer += multiheader_struct.pack(-1, True, -1)
        return buffer

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        unpack_header = multiheader_struct.unpack_from
        unpack_int = int_struct.unpack_from
        unpack_stat = stat_struct.unpack_from
        make_stat = ZnodeStat._make
        while True:
            kind, done, error = unpack_header(buffer, offset)
            offset += _HEADER_SIZE
            if done:
                return results
            if kind == GET_DATA:
                (length,) = unpack_int(buffer, offset)
                offset += _INT_SIZE
                if length < 0:
                    data = b""
                else:
                    data = bytes(buffer[offset : offset + length])
                    offset += length
                results.append((data, make_stat(unpack_stat(buffer, offset))))
                offset += _STAT_SIZE
            elif kind == GET_CHILDREN:
                (count,) = unpack_int(buffer, offset)
                offset += _INT_SIZE
                names = []
                for _ in range(max(count, 0)):
                    (length,) = unpack_int(buffer, offset)
                    offset += _INT_SIZE
                    names.append(buffer[offset : offset + length].decode("utf-8"))
                    offset += length
                results.append(names)
            else:  # an error: its code (the header's, then again in the body)
                (code,) = unpack_int(buffer, offset)
                offset += _INT_SIZE
                results.append(EXCEPTIONS[code or error]())


@dataclass(frozen=True, slots=True)
class Reply:
    """A request's outcome: its value or the kazoo exception, and the zxid of the reply."""

    value: Any
    error: BaseException | None
    zxid: int


class Inbox:
    """What kazoo's threads hand to the event loop (replies, notifications, state changes),
    run on the loop in the order it was handed over. One wake-up of the loop takes every
    item queued by then: under load, a reply or a notification costs kazoo's connection
    thread an append, not a write to the loop's wake-up pipe."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[tuple[Callable[[Any], None], Any]] = deque()
        self._scheduled = False

    def put(self, callback: Callable[[Any], None], argument: Any) -> None:
        """From any thread: `callback(argument)` on the loop, after every item put before."""
        self._items.append((callback, argument))
        if not self._scheduled:
            self._scheduled = True
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                self._loop.call_soon_threadsafe(self._drain)

    def flush(self) -> None:
        """On the loop: run what was handed over so far now, before its scheduled turn."""
        self._drain()

    def _drain(self) -> None:
        # Reset first: an item appended after the last look below schedules another drain.
        self._scheduled = False
        items = self._items
        while items:
            callback, argument = items.popleft()
            try:
                callback(argument)
            except Exception:  # one bad item must not hold up the replies behind it
                log.exception("ZooKeeper: handling %r failed", argument)


class _Pending:
    """The async result kazoo sets from its connection thread (`set` / `set_exception`)."""

    def __init__(self, client: KazooClient, deliver: Callable[[Reply], None]) -> None:
        self._client = client
        self._deliver = deliver

    def set(self, value: Any = None) -> None:
        self._deliver(Reply(value, None, self._client.last_zxid))

    def set_exception(self, error: BaseException) -> None:
        self._deliver(Reply(None, error, self._client.last_zxid))


def call(
    client: KazooClient,
    inbox: Inbox,
    request: Any,
    observe: Callable[[Reply], None] | None = None,
) -> asyncio.Future[Reply]:
    """Queue `request` on `client`; the future resolves on the inbox's loop with its Reply,
    after `observe(reply)` ran on the loop (in the order of the connection's stream)."""
    future: asyncio.Future[Reply] = inbox._loop.create_future()

    def resolve(reply: Reply) -> None:
        try:
            if observe is not None:
                observe(reply)
        finally:
            if not future.done():
                future.set_result(reply)

    client._call(request, _Pending(client, lambda reply: inbox.put(resolve, reply)))
    return future


def on_notification(client: KazooClient, listener: Callable[[int, str], None]) -> None:
    """Call `listener(event type, path)` from kazoo's connection thread for every watch
    notification, before kazoo's own (one-shot) watchers see it: kazoo 2.11 dispatches only
    to one-shot watchers, and a persistent recursive watch names the changed node."""
    connection = client._connection
    original = connection._read_watch_event

    def read_watch_event(buffer: bytes, offset: int) -> Any:
        watch, _ = Watch.deserialize(buffer, offset)
        listener(watch.type, watch.path)
        if client._data_watchers or client._child_watchers:
            return original(buffer, offset)
        return None  # no one-shot watcher to tell (kazoo's own would look and find none)

    connection._read_watch_event = read_watch_event


_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR | select.POLLNVAL


def poll_select(
    rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """kazoo's `select` on `poll`: kazoo 2.11 makes, registers and closes an epoll selector
    for each wait, three or four times a message (before each read of a length and of a
    body, each write, and in its loop); one poll call is a single system call. Any number of
    descriptors, as kazoo's (plain `select` is limited to 1,024)."""
    poller = select.poll()
    wanted: dict[int, int] = {}
    for objects, mask in ((rlist, select.POLLIN | select.POLLPRI), (wlist, select.POLLOUT)):
        for item in objects:
            fd = _fd(item)
            if fd < 0:
                raise ValueError("Invalid event mask or fd")
            wanted[fd] = wanted.get(fd, 0) | mask
    for fd, mask in wanted.items():
        poller.register(fd, mask)
    if timeout is None:
        ready = poller.poll()
    else:
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
        ready = poller.poll(math.ceil(timeout * 1000))
    events = dict(ready)
    readable = [item for item in rlist if events.get(_fd(item), 0) & _READABLE]
    writable = [item for item in wlist if events.get(_fd(item), 0) & _WRITABLE]
    return readable, writable, []


def _fd(item: Any) -> int:
    return item if isinstance(item, int) else int(item.fileno())


def fast_select(client: KazooClient) -> None:
    """`client`'s connection waits on its sockets with `poll_select`."""
    client.handler.select = poll_select


def no_heartbeat(client: KazooClient) -> None:
    """Stop kazoo from pinging on its own: a lease's session must expire unless refreshed."""
    client._connection._send_ping = lambda connect_timeout: None


Member = tuple[str, int]
"""A member's address and port."""


def drop_connection(client: KazooClient, sent_on: socket.socket | None, patience: float) -> None:
    """Break `client`'s connection to its member, as kazoo does itself when a ping goes
    unanswered, and count the member as hung (`avoid_hung`): kazoo connects to another with
    the same session. A lease's client pings nothing (`no_heartbeat`), so a member that
    hangs is noticed only by a refresh that gets no answer, which calls this.

    `sent_on` (`connection_of` when the unanswered request was queued): that connection is
    broken. A connection kazoo made since (the request waited through the reconnection and
    went out on it) is broken only once its handshake is `patience` seconds old: a new
    connection has had no time to answer, and breaking it would send kazoo through its
    members again; one that has stayed silent that long hangs too."""
    sock: socket.socket | None = client._connection._socket
    if sock is None:
        return
    if sock is not sent_on:
        made: tuple[socket.socket, float] | None = client._metaplane_made
        if made is None or made[0] is not sock or time.monotonic() - made[1] < patience:
            return
    hung: dict[Member, float] = client._metaplane_hung
    with contextlib.suppress(OSError):
        address, port = sock.getpeername()[:2]
        hung[(address, port)] = time.monotonic()
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def connection_of(client: KazooClient) -> socket.socket | None:
    """`client`'s connection now (its socket, or None between connections): what
    `drop_connection` may break later."""
    sock: socket.socket | None = client._connection._socket
    return sock


def avoid_hung(
    client: KazooClient, hung: dict[Member, float], horizon: Callable[[], float]
) -> None:
    """`client` keeps away from the members in `hung` (when, monotonic, each was found
    hanging), which several clients may share (a store's sessions), each adding what it
    finds. A member is found hanging when `drop_connection` breaks a connection to it, or
    its TCP connect or its handshake gets no answer in time, and is forgiven once a
    handshake with it succeeds. A paused member (SIGSTOP) still accepts TCP connections:
    each handshake with it would cost kazoo's connect timeout (the session's timeout over
    the members). `drop_connection` needs what this sets on `client`.

    kazoo goes once through its shuffled members per attempt, resuming where it was after a
    connection is lost. Here the member to try is chosen again at each step (`next_member`),
    so that what another session found meanwhile counts: one found hanging within
    `horizon()` seconds is not tried in an attempt that tries another member, only in one
    where every member left was found hanging that recently (the oldest finding first);
    one found hanging longer ago comes after those never found hanging. A store gives a
    third of the session's timeout (a lease's, as negotiated): a member taken for hung that
    was not (a follower whose leader hung leaves a request unanswered too) is tried again
    well within the session's life when every other fails."""
    connection = client._connection
    client._metaplane_hung = hung
    client._metaplane_made = None  # the socket of the last handshake that succeeded, and when
    connect = connection._connect
    timeout_error = client.handler.timeout_exception

    def connect_to(host: str, address: str, port: int) -> Any:
        try:
            result = connect(host, address, port)
        except timeout_error:
            hung[(address, port)] = time.monotonic()
            raise
        except ConnectionDropped as error:
            # A TCP connect that timed out (a host that drops connection requests): kazoo
            # waited the session's whole timeout for it.
            if isinstance(error.__context__, TimeoutError):
                hung[(address, port)] = time.monotonic()
            raise
        hung.pop((address, port), None)
        client._metaplane_made = (connection._socket, time.monotonic())
        return result

    def connect_loop(retry: Any) -> Any:
        """kazoo 2.11's `_connect_loop`, the member to try chosen at each step."""
        left = connection._expand_client_hosts()
        if not left:
            raise kazoo_retry.ForceRetryError("No host resolved. Reconnecting")
        tried_other = False
        while not client._stopped.is_set():
            chosen = next_member(left, hung.copy(), time.monotonic(), horizon(), tried_other)
            if chosen is None:
                raise kazoo_retry.ForceRetryError("Reconnecting")
            member, recently_hung = chosen
            left.remove(member)
            tried_other = tried_other or not recently_hung
            status = connection._connect_attempt(*member, retry)
            if status is kazoo_connection.STOP_CONNECTING:
                return status
        return kazoo_connection.STOP_CONNECTING

    connection._connect = connect_to
    connection._connect_loop = connect_loop


def next_member(
    left: list[tuple[str, str, int]],
    hung: dict[Member, float],
    now: float,
    horizon: float,
    tried_other: bool,
) -> tuple[tuple[str, str, int], bool] | None:
    """Of the (host, address, port) members `left` to try in kazoo's shuffled order, the next
    one and whether it was found hanging within `horizon` seconds of `now`; None to end the
    attempt. First those never found hanging, then those found hanging before the horizon,
    in order; those found hanging since, oldest finding first, only when no other was tried
    in this attempt (`tried_other`): a member that hangs is not waited for while another
    may serve."""

    def rank(member: tuple[str, str, int]) -> tuple[int, float]:
        found = hung.get((member[1], member[2]))
        if found is None:
            return 0, 0.0
        return (1, 0.0) if now - found >= horizon else (2, found)

    ranked = sorted(left, key=rank)
    if not ranked:
        return None
    first = ranked[0]
    recently_hung = rank(first)[0] == 2
    if recently_hung and tried_other:
        return None
    return first, recently_hung


def on_negotiated(client: KazooClient, listener: Callable[[float], None]) -> None:
    """Call `listener(session timeout in seconds)` each time the session is (re)negotiated
    (kazoo keeps the negotiated timeout to itself: its read timeout is two thirds of it)."""
    connection = client._connection
    original = connection._connect

    def connect(*args: Any) -> Any:
        read_timeout, connect_timeout = original(*args)
        listener(read_timeout * 1.5 / 1000.0)
        return read_timeout, connect_timeout

    connection._connect = connect


def contract_error(error: BaseException, what: str) -> MetadataError:
    """kazoo's exception as the contract's, converted here and nowhere else."""
    if isinstance(error, MetadataError):
        return error
    if isinstance(error, NoAuthError | AuthFailedError):
        return PermissionDenied(f"{what}: {type(error).__name__}")
    if isinstance(error, NoChildrenForEphemeralsError):
        return InvalidRequest(
            f"{what}: a key put with a lease is an ephemeral znode on ZooKeeper, which "
            "cannot have keys under it"
        )
    if isinstance(
        error,
        ConnectionLoss | ConnectionClosedError | OperationTimeoutError | SessionExpiredError,
    ):
        return Unavailable(f"{what}: ZooKeeper unreachable ({type(error).__name__})")
    if isinstance(error, ZookeeperError | KazooException):
        return Unavailable(f"{what}: ZooKeeper error {type(error).__name__}")
    return Unavailable(f"{what}: {error!r}")


# -- znode names ---------------------------------------------------------------------------
#
# ZooKeeper refuses in a path what UTF-16 cannot hold in one unit (every character above
# U+FFFF), the private use area and U+FFF0-U+FFFF, all valid in a key: those, and the escape
# character itself, are written %XXXXXX (six hex digits).

_UNSAFE = re.compile("[%\ue000-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")
_ESCAPED = re.compile("%([0-9a-f]{6})")


def znode_name(key: str) -> str:
    """`key` as a ZooKeeper path."""
    return _UNSAFE.sub(lambda match: f"%{ord(match.group()):06x}", key)


def key_name(path: str) -> str:
    """The key of a ZooKeeper path `znode_name` made."""
    if "%" not in path:
        return path
    return _ESCAPED.sub(lambda match: chr(int(match.group(1), 16)), path)


# -- the data of a znode -------------------------------------------------------------------
#
# A key's znode holds a header and the value: a mark, `offset` (the key's version is the
# znode's data version + offset: a key may first be written on a znode that existed as an
# implicit parent, and keeps its version across a lease change that recreates the znode),
# and the key's create_revision (0: the znode's mzxid, true as long as the write that made
# the key is the znode's last: every later write stores it). A znode with any other data
# (empty) is an implicit parent, or what a deleted key leaves for its children.


def encode(value: bytes, offset: int, create_revision: int) -> bytes:
    return _HEADER.pack(_KEY_MARK, offset, create_revision) + value


def is_key(data: bytes) -> bool:
    return len(data) >= _HEADER.size and data[0] == _KEY_MARK


def decode(key: str, data: bytes, stat: ZnodeStat) -> Entry | None:
    """The entry a znode holds, or None when it is not a key."""
    if not is_key(data):
        return None
    _, offset, create_revision = _HEADER.unpack_from(data)
    return Entry(
        key,
        data[_HEADER.size :],
        stat.version + offset,
        create_revision or stat.mzxid,
        stat.mzxid,
        lease_of(stat.ephemeralOwner),
    )


def lease_of(session_id: int) -> int:
    """The lease id of a ZooKeeper session: its id within the contract's int64 range."""
    return session_id & MAX_INT64
