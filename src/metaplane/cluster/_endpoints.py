"""The HTTP endpoints a broker process serves where its registration says: Prometheus
metrics at `prom_exporter` (GET /metrics), and its admin endpoint at `admin_addr`:

    POST /admin/v1/cursors/reset   {"topic": "/ns/t", "subscription": "s", "offset": 41}
        200 {"revision": R}; 409 {"error": "topic_not_owned"} when this broker does not
        serve the topic; 404 {"error": "no_subscription"}; 400 a bad request
    GET  /admin/v1/status          the broker's id, process id, session state, topics served

A reset is the administrator's cursor write through the owning broker (`reset_cursor`): fenced
on owning the topic, and this broker's pending acknowledgement of it dropped. The endpoints
are plain ASGI apps on uvicorn (no framework: a broker stays light), without uvicorn's signal
handlers (the node owns SIGTERM). A port already taken is logged and the broker runs on
without that endpoint: metrics are never a reason for a broker not to serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from metaplane.layout import TopicName
from metaplane.resources import NoSubscription, TopicNotOwned
from metaplane.store import InvalidRequest, MetadataError, Unavailable

if TYPE_CHECKING:
    from metaplane.cluster._metrics import BrokerMetrics
    from metaplane.cluster._node import Node

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
MAX_BODY = 64 * 1024


def host_port(address: str) -> tuple[str, int]:
    """The host and port of "host:port" or "http://host:port"."""
    parsed = urlsplit(address if "://" in address else f"http://{address}")
    if parsed.hostname is None or parsed.port is None:
        raise ValueError(f"{address!r} names no host and port")
    return parsed.hostname, parsed.port


async def respond(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def respond_json(send: Send, status: int, document: object) -> None:
    await respond(send, status, json.dumps(document).encode(), "application/json")


async def read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        chunk: bytes = message.get("body", b"")
        body += chunk
        if len(body) > MAX_BODY:
            raise InvalidRequest("the body is too large")
        if not message.get("more_body"):
            return body


class MetricsApp:
    """GET /metrics: the broker's registry in Prometheus' text format."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics":
            await respond(send, 404, b"not found: GET /metrics\n", "text/plain")
            return
        text: bytes = generate_latest(self.metrics.registry)
        await respond(send, 200, text, CONTENT_TYPE_LATEST)


class AdminApp:
    """The broker's admin endpoint (see the module's docstring)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        route = (scope["method"], scope["path"])
        if route == ("POST", "/admin/v1/cursors/reset"):
            await self.reset(receive, send)
        elif route == ("GET", "/admin/v1/status"):
            await respond_json(send, 200, self.status())
        else:
            await respond_json(send, 404, {"error": "not_found", "detail": scope["path"]})

    def status(self) -> dict[str, Any]:
        broker = self.node.broker
        return {
            "broker_id": broker.broker_id,
            "pid": os.getpid(),
            "session": broker.session.state.value,
            "owned": sorted(topic.path for topic in broker.owned),
        }

    async def reset(self, receive: Receive, send: Send) -> None:
        try:
            topic, subscription, offset = parse_reset(await read_body(receive))
            revision = await self.node.broker.reset_cursor(topic, subscription, offset)
        except TopicNotOwned as error:
            await respond_json(send, 409, {"error": "topic_not_owned", "detail": str(error)})
        except NoSubscription as error:
            await respond_json(send, 404, {"error": "no_subscription", "detail": str(error)})
        except InvalidRequest as error:
            await respond_json(send, 400, {"error": "bad_request", "detail": str(error)})
        except Unavailable as error:
            await respond_json(send, 503, {"error": "unavailable", "detail": str(error)})
        except MetadataError as error:
            await respond_json(send, 409, {"error": type(error).__name__, "detail": str(error)})
        else:
            await respond_json(send, 200, {"revision": revision})


def parse_reset(body: bytes) -> tuple[TopicName, str, int]:
    try:
        document = json.loads(body)
        topic, subscription, offset = (
            document["topic"],
            document["subscription"],
            document["offset"],
        )
    except (ValueError, KeyError, TypeError):
        raise InvalidRequest('the body is {"topic", "subscription", "offset"}') from None
    if not isinstance(topic, str) or not isinstance(subscription, str):
        raise InvalidRequest("topic and subscription are strings")
    if type(offset) is not int or not -1 <= offset < 2**64:
        raise InvalidRequest(f"offset {offset!r} is not from -1 to 2^64-1")
    return TopicName.parse(topic), subscription, offset


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class Endpoint:
    """One ASGI app on one address, started and stopped with the node."""

    def __init__(self, name: str, address: str, app: Any) -> None:
        self.name = name
        self.address = address
        self.app = app
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    async def start(self) -> None:
        try:
            host, port = host_port(self.address)
        except ValueError as error:
            log.error("no %s endpoint: %s", self.name, error)
            return
        try:
            self._socket = bind(host, port)
        except OSError as error:
            log.error("no %s endpoint: %s:%d: %s", self.name, host, port, error.strerror)
            return
        config = uvicorn.Config(self.app, log_level="error", access_log=False, lifespan="off")
        server = _Server(config)
        # The socket listens already: a request that comes before uvicorn runs waits in
        # its backlog.
        task = asyncio.get_running_loop().create_task(server.serve(sockets=[self._socket]))
        self._server, self._task = server, task
        log.info("%s endpoint on %s", self.name, self.address)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            self._server = self._task = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (OSError when it is taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say they are TCP (a
    # proto of 0 leaves Nagle on, and every response waits for a delayed ACK: 40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock
