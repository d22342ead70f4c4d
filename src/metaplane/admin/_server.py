"""`AdminServer`: the HTTP admin API, the cluster's metrics and the live dashboard on one port,
served by uvicorn from a LocalCache of the whole store (every read after start-up is served
from memory; every write goes through the managers and is waited for in the cache).

Litestar rather than FastAPI: our values are msgspec Structs, and Litestar decodes, validates
and encodes msgspec natively (request bodies are Structs with their bounds, refused with a 400
before a handler runs) with no second model layer (pydantic) to keep in step; its OpenAPI
document comes from the same types.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from litestar import Litestar, MediaType, Request, Response, get
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.static_files import create_static_files_router
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from metaplane import __version__
from metaplane.admin._admin_metrics import ClusterCollector, RequestMetrics, read_summary
from metaplane.admin._api import admin_router
from metaplane.admin._auth import Tokens
from metaplane.admin._events import events
from metaplane.admin._http import EXCEPTION_HANDLERS, JsonRequest, guard
from metaplane.admin._operations import Operations
from metaplane.cache import LocalCache
from metaplane.resources import decode_value
from metaplane.store import MetadataStore, NotFound, Unavailable

log = logging.getLogger(__name__)

DASHBOARD = Path(__file__).parent / "dashboard"
STORE_PATIENCE = 60.0
"""Seconds the server's start waits for a store that does not answer (as a broker does)."""
OPENAPI_PATH = "/admin/v2"


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    tokens: Tokens | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    analysis: Path | None = None


@get("/admin/v2/overview")
async def overview(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Every topic with its owner (live or not), subscriptions and backlogs, and the last
    analysis's summary (null without one): what the dashboard shows."""
    operations: Operations = request.app.state.operations
    document = await operations.overview()
    return {**document, "analysis": read_summary(request.app.state.analysis)}


@get("/admin/v2/analysis")
async def analysis(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The summary of the last analysis (`metaplane serve --analysis DIR`)."""
    summary = read_summary(request.app.state.analysis)
    if summary is None:
        raise NotFound("analysis", "no analysis: start the server with --analysis DIR")
    return summary


@get("/admin/v2/analysis/report.html", media_type=MediaType.HTML)
async def analysis_report(request: Request[Any, Any, Any]) -> bytes:
    folder: Path | None = request.app.state.analysis
    try:
        return (folder / "report.html").read_bytes() if folder else b""
    except OSError:
        raise NotFound("analysis", "no report.html in the analysis folder") from None


@get("/metrics", media_type=CONTENT_TYPE_LATEST)
async def metrics(request: Request[Any, Any, Any]) -> bytes:
    """The cluster's metrics, in Prometheus' text format."""
    return generate_latest(request.app.state.registry)


@get("/healthz", opt={"public": True}, media_type=MediaType.TEXT)
async def healthz() -> str:
    return "ok"


@get("/", opt={"public": True}, media_type=MediaType.HTML, include_in_schema=False)
async def dashboard_page() -> Response[bytes]:
    page = (DASHBOARD / "index.html").read_bytes()
    return Response(page, headers={"Content-Security-Policy": CONTENT_POLICY})


CONTENT_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src blob:; object-src 'none'; base-uri 'none'"
)


def build_app(
    store: MetadataStore,
    operations: Operations,
    cache: LocalCache,
    settings: ServerSettings,
) -> Litestar:
    """The ASGI application on an opened store and a started cache."""
    registry = CollectorRegistry()
    registry.register(ClusterCollector(cache, settings.analysis))
    app = Litestar(
        route_handlers=[
            admin_router(),
            events_router(),
            overview,
            analysis,
            analysis_report,
            metrics,
            healthz,
            dashboard_page,
            create_static_files_router(
                path="/dashboard", directories=[DASHBOARD], opt={"public": True}
            ),
        ],
        guards=[guard],
        request_class=JsonRequest,
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        middleware=[RequestMetrics(registry)],
        openapi_config=OpenAPIConfig(
            title="metaplane admin API",
            version=__version__,
            path=OPENAPI_PATH,
            render_plugins=[JsonRenderPlugin()],
            use_handler_docstrings=True,
        ),
        debug=False,
        logging_config=None,
    )
    app.state.store = store
    app.state.operations = operations
    app.state.tokens = settings.tokens
    app.state.registry = registry
    app.state.analysis = settings.analysis
    return app


def events_router() -> Any:
    from litestar import Router

    return Router(path="/admin/v2", route_handlers=[events])


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process that embeds it (standalone, a test)
    owns SIGINT and SIGTERM."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class AdminServer:
    """The admin server on an open store, until `stop()`."""

    def __init__(self, store: MetadataStore, settings: ServerSettings) -> None:
        self.store = store
        self.settings = settings
        self.cache = LocalCache(store, ["/"], decoder=decode_value)
        self.operations = Operations(store, self.cache)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        assert self._socket is not None
        port: int = self._socket.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        scheme = "https" if self.settings.tls_cert else "http"
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{self.port}/"

    async def start(self, patience: float = STORE_PATIENCE) -> None:
        """Load the cache, bind the port (0: a free one), and serve. While the store does
        not answer (`Unavailable`), the load is tried again for up to `patience` seconds,
        as a broker waits to register: a store that hangs or fails over while the server
        starts is ridden out, one that stays away fails the start with its error."""
        await self._load(patience)
        app = build_app(self.store, self.operations, self.cache, self.settings)
        self._socket = bind(self.settings.host, self.settings.port)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ssl_certfile=str(self.settings.tls_cert) if self.settings.tls_cert else None,
            ssl_keyfile=str(self.settings.tls_key) if self.settings.tls_key else None,
            timeout_graceful_shutdown=2,
        )
        config.load()  # a bad certificate or key fails here, not in the background
        self._server = _Server(config)
        # The socket listens already: a request that comes before uvicorn runs waits in its
        # backlog.
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))

    async def _load(self, patience: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        delay = 0.2
        while True:
            try:
                await self.cache.start()
                return
            except Unavailable as error:
                if loop.time() + delay >= deadline:
                    raise
                log.warning(
                    "the store does not answer (%s): loading the cache again in %.1f s",
                    error,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(2 * delay, 2.0)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        if self._socket is not None:
            self._socket.close()
        await self.operations.aclose()
        await self.cache.aclose()


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say they are TCP (a
    # proto of 0 leaves Nagle on, and every response waits for a delayed ACK: 40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
