"""A TCP link between clients and one real server that a test makes misbehave on purpose, on
its own connections and at the moment it chooses: a connection that hangs (as a peer stopped
with SIGSTOP: nothing read, nothing answered, the bytes left in the kernel's buffers), replies
that come slowly but come, a new connection refused or broken after its handshake.

    with Link(("127.0.0.1", server_port), framing=length_prefixed) as link:
        client = connect(link.address)
        link.hang()                 # every connection open now stops answering …
        link.resume()               # … until now; new connections are served meanwhile
        link.refuse(times=1)        # the next connection is closed as soon as accepted
        link.pace(1.0, only=zookeeper_reply)  # each reply 1 s after the one before

A member of a real ensemble hangs as a whole, and a client moves to another member; with one
link, the client's next connection (to the same server, through the link) plays that member.
The link runs on a thread of its own, so that a test's own loop being busy slows nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

log = logging.getLogger(__name__)

Framing = Callable[[bytes], int]
"""The length of a whole frame from its first `HEADER` bytes."""

HEADER = 4


def length_prefixed(header: bytes) -> int:
    """A frame of a 4-byte big-endian length and that many bytes (ZooKeeper's, among
    others)."""
    length: int = struct.unpack(">i", header)[0]
    return HEADER + length


def zookeeper_reply(frame: bytes) -> bool:
    """A ZooKeeper frame that answers a request (a positive xid): not a notification (-1), a
    ping's answer (-2) or the handshake's."""
    if len(frame) < HEADER + 4:
        return False
    xid: int = struct.unpack(">i", frame[HEADER : HEADER + 4])[0]
    return xid > 0


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    break_after_handshake: bool = False

    def abort(self) -> None:
        self.client.transport.abort()
        self.server.transport.abort()


@dataclass
class _Pace:
    seconds: float
    only: Callable[[bytes], bool]


class Link:
    """Clients connect to `address`; each connection is forwarded to `upstream`."""

    def __init__(self, upstream: tuple[str, int], *, framing: Framing | None = None) -> None:
        self.upstream = upstream
        self.framing = framing
        self.accepted = 0
        """Connections accepted so far."""
        self._connections: set[_Connection] = set()
        self._refuse = 0
        self._break = 0
        self._paused = False
        self._pace: _Pace | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="link", daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def open(self) -> int:
        """Connections open now."""
        return len(self._connections)

    # -- faults, called from any thread ---------------------------------------------------

    def hang(self) -> None:
        """Every connection open now stops reading and answering, both ways."""

        self._call(self._hang_open)

    def _hang_open(self) -> None:
        for connection in self._connections:
            connection.flowing.clear()

    def pause(self) -> None:
        """As a server stopped with SIGSTOP: every connection open now hangs (`hang`), and
        each new one is accepted (the kernel does that) and hangs from the start: no
        handshake is answered."""

        def pause_all() -> None:
            self._paused = True
            self._hang_open()

        self._call(pause_all)

    def resume(self) -> None:
        """The hung connections go on, with what they held; new ones flow again."""

        def resume_all() -> None:
            self._paused = False
            for connection in self._connections:
                connection.flowing.set()

        self._call(resume_all)

    def refuse(self, times: int = 1) -> None:
        """The next `times` connections are closed as soon as they are accepted."""
        self._call(lambda: setattr(self, "_refuse", self._refuse + times))

    def break_after_handshake(self, times: int = 1) -> None:
        """The next `times` connections are closed right after the server's first frame
        (needs `framing`)."""
        if self.framing is None:
            raise ValueError("a handshake is a frame: give the link its framing")
        self._call(lambda: setattr(self, "_break", self._break + times))

    def pace(self, seconds: float | None, only: Callable[[bytes], bool] = lambda _: True) -> None:
        """From now, each frame from the server that `only` picks (never a connection's
        first, its handshake) is delivered `seconds` after its arrival or after the one
        picked before, whichever is later; the others are not held but keep their order.
        None: no more pacing. Needs `framing`."""
        if self.framing is None:
            raise ValueError("pacing is per frame: give the link its framing")
        pace = None if seconds is None else _Pace(seconds, only)
        self._call(lambda: setattr(self, "_pace", pace))

    def _call(self, action: Callable[[], object]) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                action()
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        if not done.wait(5.0):
            raise RuntimeError("the link's thread does not answer")

    # -- running ------------------------------------------------------------------------

    def start(self) -> Self:
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0), self._loop
        ).result(5.0)
        self._server = server
        self.port = server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for connection in list(self._connections):
                connection.abort()
            # A hung connection's tasks wait for a `resume` that will not come.
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5.0)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._refuse:
            self._refuse -= 1
            log.info("link %s: connection refused (injected)", self.address)
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        connection = _Connection(writer, up_writer)
        if not self._paused:
            connection.flowing.set()
        if self._break:
            self._break -= 1
            connection.break_after_handshake = True
        self._connections.add(connection)
        try:
            upward = asyncio.create_task(self._upward(connection, reader))
            downward = asyncio.create_task(self._downward(connection, up_reader))
            await asyncio.wait([upward, downward], return_when=asyncio.FIRST_COMPLETED)
            upward.cancel()
            downward.cancel()
        finally:
            self._connections.discard(connection)
            connection.abort()

    async def _upward(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        """Client to server, as it comes, until either side ends the connection."""
        while True:
            await connection.flowing.wait()
            try:
                chunk = await reader.read(65536)
            except OSError:
                return
            if not chunk:
                return
            await connection.flowing.wait()
            try:
                connection.server.write(chunk)
                await connection.server.drain()
            except OSError:
                return

    async def _downward(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        """Server to client: frames (paced, broken after the first) or plain chunks."""
        framing = self.framing
        last_paced = float("-inf")
        first = True
        while True:
            await connection.flowing.wait()
            try:
                if framing is None:
                    data = await reader.read(65536)
                else:
                    header = await reader.readexactly(HEADER)
                    data = header + await reader.readexactly(framing(header) - HEADER)
            except (asyncio.IncompleteReadError, OSError):
                return
            if not data:
                return
            arrived = time.monotonic()
            pace = self._pace
            if pace is not None and not first and pace.only(data):
                due = max(arrived, last_paced) + pace.seconds
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                last_paced = time.monotonic()
            await connection.flowing.wait()
            connection.client.write(data)
            with contextlib.suppress(OSError):
                await connection.client.drain()
            if first and connection.break_after_handshake:
                log.info("link %s: connection broken after its handshake (injected)", self.address)
                return
            first = False
