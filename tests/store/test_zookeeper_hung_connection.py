"""The ZooKeeper store's session when the connection it talks on hangs, driven through a `Link`
so that each case hits its window on every run (the ensemble's cases pause real members with
SIGSTOP; these pin the rule itself).

The rule: a request that gets no reply within the store's deadline, while not one reply came
on the session since it was sent, breaks the connection, and kazoo carries the same session
on to a new one; a member that is slow but answers keeps the connection. Without the rule,
only kazoo's unanswered ping would move the session: two thirds of its timeout. A member
found hanging is not tried again while another may serve (a paused server still accepts TCP
connections, and its handshake would cost a connect timeout), and a connection made since
the request was queued is broken only once it has been silent for half the deadline.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace

import pytest
from kazoo.exceptions import ConnectionDropped  # type: ignore[import-untyped]
from kazoo.protocol import connection as kazoo_connection  # type: ignore[import-untyped]

from metaplane.store import MetadataStore, Unavailable, ZooKeeperStore, connect_store
from metaplane.store import _zookeeper_wire as wire
from metaplane.testing import ZooKeeperServer
from metaplane.testing.links import Link, length_prefixed, zookeeper_reply

pytestmark = pytest.mark.backends("zk", reason="the ZooKeeper session's own connection")

REQUEST_TIMEOUT = 1.5
SESSION_TIMEOUT = 10.0
"""The test server's largest (its tick is 500 ms)."""
PING_DEADLINE = SESSION_TIMEOUT * 2 / 3
"""When kazoo gives up on a connection whose pings go unanswered."""


@pytest.fixture
def link(zookeeper: ZooKeeperServer) -> Iterator[Link]:
    with Link(("127.0.0.1", zookeeper.client_port), framing=length_prefixed) as running:
        yield running


@pytest.fixture
async def store(link: Link) -> AsyncIterator[MetadataStore]:
    url = (
        f"zk://{link.address}/hung-{uuid.uuid4().hex}"
        f"?timeout={REQUEST_TIMEOUT}&session_timeout={SESSION_TIMEOUT}"
    )
    opened = await connect_store(url)
    try:
        yield opened
    finally:
        link.resume()
        await opened.aclose()


def session_of(store: MetadataStore) -> int:
    assert isinstance(store, ZooKeeperStore)
    session: int = store._client.client_id[0]
    return session


async def put_until_acknowledged(store: MetadataStore, key: str, value: bytes) -> float:
    """Put until acknowledged (a put that raised `Unavailable` may or may not have applied,
    and is made again); when (monotonic) it was."""
    deadline = time.monotonic() + SESSION_TIMEOUT
    while True:
        try:
            await store.put(key, value)
            return time.monotonic()
        except Unavailable:
            if time.monotonic() > deadline:
                raise


async def test_a_connection_silent_for_a_whole_deadline_is_left_for_another(
    store: MetadataStore, link: Link
) -> None:
    session = session_of(store)
    await store.put("/before", b"1")
    assert (link.accepted, link.open) == (1, 1)

    link.hang()
    hung_at = time.monotonic()
    with pytest.raises(Unavailable, match="no answer within"):
        await store.get("/before")
    resumed_at = await put_until_acknowledged(store, "/after", b"2")

    # A new connection, the same session: kazoo moved it when the store broke the silent
    # connection, at the request's deadline instead of its own ping's.
    assert link.accepted == 2
    assert session_of(store) == session
    assert resumed_at - hung_at < PING_DEADLINE / 2, resumed_at - hung_at
    before, after = await store.get("/before"), await store.get("/after")
    assert before is not None and before.value == b"1"
    assert after is not None and after.value == b"2"


@pytest.mark.parametrize("fault", ["refused", "broken after its handshake"])
async def test_one_transient_error_on_the_way_to_the_next_connection(
    store: MetadataStore, link: Link, fault: str
) -> None:
    """The connection the session moves to fails once, at its TCP accept or right after the
    session's handshake: kazoo tries again, the session survives, writes go on."""
    session = session_of(store)
    await store.put("/before", b"1")

    link.hang()
    if fault == "refused":
        link.refuse(times=1)
    else:
        link.break_after_handshake(times=1)
    hung_at = time.monotonic()
    resumed_at = await put_until_acknowledged(store, "/after", b"2")

    assert link.accepted == 3, "the hung connection, the one that failed, the one that serves"
    assert session_of(store) == session
    assert resumed_at - hung_at < PING_DEADLINE / 2, resumed_at - hung_at
    before, after = await store.get("/before"), await store.get("/after")
    assert before is not None and before.value == b"1"
    assert after is not None and after.value == b"2"


async def test_a_slow_connection_that_answers_is_kept(store: MetadataStore, link: Link) -> None:
    """Three reads at once, their replies paced 1 s apart: the first comes within its
    deadline (1.5 s), the two others do not. Their requests fail with `Unavailable`, but a reply did
    come on the session after they were sent: the member is slow, not hung, and the
    connection stays."""
    session = session_of(store)
    await store.put("/slow", b"1")

    link.pace(1.0, only=zookeeper_reply)
    results = await asyncio.gather(*(store.get("/slow") for _ in range(3)), return_exceptions=True)
    link.pace(None)

    first, *late = results
    assert not isinstance(first, BaseException) and first is not None, first
    assert first.value == b"1"
    assert [type(result) for result in late] == [Unavailable, Unavailable], late
    assert (link.accepted, link.open) == (1, 1), "the slow connection was kept"
    assert session_of(store) == session
    await store.put("/slow", b"2")
    entry = await store.get("/slow")
    assert entry is not None and entry.value == b"2"
    assert link.accepted == 1


async def test_a_member_that_hangs_and_comes_back_loses_nothing(
    store: MetadataStore, link: Link
) -> None:
    """The hung connection comes back after the session moved (its held bytes then go to a
    server that closed that connection): acknowledged writes are all there, the session is
    the one it was, and the store goes on."""
    session = session_of(store)
    acknowledged = []
    for index in range(5):
        await store.put(f"/acked/{index}", b"v")
        acknowledged.append(f"/acked/{index}")
    link.hang()
    for index in range(5, 10):
        await put_until_acknowledged(store, f"/acked/{index}", b"v")
        acknowledged.append(f"/acked/{index}")
    link.resume()
    await put_until_acknowledged(store, "/acked/last", b"v")
    acknowledged.append("/acked/last")

    listing = await store.list("/acked")
    assert sorted(entry.key for entry in listing.entries) == sorted(acknowledged)
    assert session_of(store) == session
    assert link.accepted == 2


class FirstOn(random.Random):
    """kazoo's random state, its shuffle of the members made adversarial: the one on `port`
    first."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def shuffle(self, x: list[tuple[str, str, int]]) -> None:  # type: ignore[override]
        x.sort(key=lambda host: host[2] != self.port)


async def test_a_member_found_hanging_is_not_tried_again(
    zookeeper: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ways to one server. The session starts on the second of kazoo's cycle through the
    members (the first refuses once), so that its next connection starts a new cycle,
    shuffled. The second is paused as a stopped process is (new connections accepted, never
    answered) and the shuffle puts it first: the session still moves to the other one at
    once, not through the paused one's handshake (the session's timeout over the members:
    5 s here)."""
    upstream = ("127.0.0.1", zookeeper.client_port)
    with (
        Link(upstream, framing=length_prefixed) as other,
        Link(upstream, framing=length_prefixed) as talking,
    ):
        shuffle = FirstOn(other.port)
        monkeypatch.setattr(kazoo_connection, "random", shuffle)
        other.refuse(times=1)
        url = (
            f"zk://{other.address},{talking.address}/hung-{uuid.uuid4().hex}"
            f"?timeout={REQUEST_TIMEOUT}&session_timeout={SESSION_TIMEOUT}"
        )
        store = await connect_store(url)
        try:
            assert (other.accepted, talking.accepted, talking.open) == (1, 1, 1)
            session = session_of(store)
            await store.put("/before", b"1")
            shuffle.port = talking.port

            talking.pause()
            hung_at = time.monotonic()
            with pytest.raises(Unavailable, match="no answer within"):
                await store.get("/before")
            resumed_at = await put_until_acknowledged(store, "/after", b"2")

            assert talking.accepted == 1, "the paused member was tried again"
            assert (other.accepted, other.open) == (2, 1)
            assert session_of(store) == session
            assert resumed_at - hung_at < PING_DEADLINE / 2, resumed_at - hung_at
            after = await store.get("/after")
            assert after is not None and after.value == b"2"
        finally:
            talking.resume()
            await store.aclose()


def test_a_member_found_hanging_is_kept_away_from_while_another_may_serve() -> None:
    a, b, c = ("a", "10.0.0.1", 1), ("b", "10.0.0.2", 2), ("c", "10.0.0.3", 3)
    now, horizon = 100.0, 6.0

    def order(hung: dict[tuple[str, int], float]) -> list[tuple[str, str, int]]:
        """The members one attempt tries, in turn."""
        left, tried, tried_other = [a, b, c], [], False
        while (chosen := wire.next_member(left, hung, now, horizon, tried_other)) is not None:
            member, recently_hung = chosen
            left.remove(member)
            tried.append(member)
            tried_other = tried_other or not recently_hung
        return tried

    assert order({}) == [a, b, c], "kazoo's order"
    assert order({("10.0.0.1", 1): now - 1}) == [b, c], "hung now: skipped"
    assert order({("10.0.0.1", 1): now - horizon}) == [b, c, a], "hung long ago: last"
    assert order({("10.0.0.1", 1): now - 7, ("10.0.0.2", 2): now - 1}) == [c, a]
    assert order({("10.0.0.2", 1): now - 1}) == [a, b, c], "an address and a port, both"
    every = {("10.0.0.1", 1): now - 1, ("10.0.0.2", 2): now - 3, ("10.0.0.3", 3): now - 2}
    assert order(every) == [b, c, a], "all hung: all tried, the oldest finding first"


def test_only_the_connection_a_request_went_out_on_is_broken() -> None:
    """`drop_connection` breaks the connection of `connection_of` when the request was
    queued, and remembers its member; a connection made since is left alone until its
    handshake is `patience` seconds old, and none at all is left as it is."""
    sent, sent_peer = tcp_pair()
    new, new_peer = tcp_pair()
    with sent, sent_peer, new, new_peer:
        hung: dict[tuple[str, int], float] = {}
        client = SimpleNamespace(_connection=SimpleNamespace(_socket=sent), _metaplane_hung=hung)
        at_sending = wire.connection_of(client)
        client._connection._socket = new
        client._metaplane_made = (new, time.monotonic())
        wire.drop_connection(client, at_sending, patience=60)
        wire.drop_connection(client, None, patience=60)
        new.setblocking(False)
        with pytest.raises(BlockingIOError):
            new.recv(1)  # still open: nothing to read, no end of stream
        assert not hung

        client._connection._socket = None
        wire.drop_connection(client, at_sending, patience=0)
        assert not hung

        client._connection._socket = sent
        wire.drop_connection(client, at_sending, patience=60)
        assert sent_peer.recv(1) == b"", "the peer sees the connection end"
        assert list(hung) == [("127.0.0.1", sent_peer.getsockname()[1])]

        hung.clear()
        client._connection._socket = new
        client._metaplane_made = (new, time.monotonic() - 2)
        wire.drop_connection(client, at_sending, patience=1)
        assert new_peer.recv(1) == b"", "made since, but silent for longer than the patience"
        assert list(hung) == [("127.0.0.1", new_peer.getsockname()[1])]


def test_what_finds_a_member_hanging_and_what_forgives_it() -> None:
    """`avoid_hung`'s wrapper of kazoo's `_connect`: a handshake or a TCP connect that timed
    out finds the member hanging, a refused connection does not, a handshake that succeeds
    forgives it."""

    class HandshakeTimeout(Exception):
        pass

    def socket_error(cause: OSError) -> None:
        try:
            raise cause
        except OSError:  # as kazoo's `_socket_error_handling` does
            raise ConnectionDropped(f"socket connection error: {cause}") from None

    def connect(host: str, address: str, port: int) -> tuple[float, float]:
        if host == "handshake":
            raise HandshakeTimeout
        if host == "tcp":
            socket_error(TimeoutError("timed out"))
        if host == "refused":
            socket_error(ConnectionRefusedError("refused"))
        return 4000.0, 2000.0

    connection = SimpleNamespace(_connect=connect, _connect_loop=None, _socket=None)
    client = SimpleNamespace(
        _connection=connection, handler=SimpleNamespace(timeout_exception=HandshakeTimeout)
    )
    hung: dict[tuple[str, int], float] = {}
    wire.avoid_hung(client, hung, lambda: 2.0)

    with pytest.raises(HandshakeTimeout):
        connection._connect("handshake", "10.0.0.1", 1)
    with pytest.raises(ConnectionDropped):
        connection._connect("tcp", "10.0.0.2", 2)
    with pytest.raises(ConnectionDropped):
        connection._connect("refused", "10.0.0.3", 3)
    assert set(hung) == {("10.0.0.1", 1), ("10.0.0.2", 2)}
    assert connection._connect("serves", "10.0.0.1", 1) == (4000.0, 2000.0)
    assert set(hung) == {("10.0.0.2", 2)}


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of one loopback TCP connection (a member's address is an address and port)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    return client, accepted
