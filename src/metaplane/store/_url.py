"""`open_store(url)`: the backend is chosen by the URL's scheme.

memory://
sqlite:///path/to/file.db[?synchronous=full|normal&history=N&history_age=SECONDS]
etcd://[user:password@]host:port[,host:port…][?ca=FILE&cert=FILE&key=FILE&tls=1&timeout=S]
etcds://…  (etcd over TLS with the system's CA certificates unless ca= is given)
zk://host:port[,host:port…]/chroot[?timeout=S&session_timeout=S&max_request=BYTES]
    (also zookeeper://)

A backend's module is imported here only when its scheme is asked for: importing the contract
loads no backend (nor grpc, aetcd or sqlite3).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

from metaplane.store._base import MetadataStore
from metaplane.store._errors import InvalidRequest, InvalidStoreURL

if TYPE_CHECKING:
    from metaplane.store._etcd import EtcdOptions
    from metaplane.store._zookeeper import ZooKeeperOptions

SCHEMES = ("memory", "sqlite", "etcd", "etcds", "zk", "zookeeper")


async def connect_store(url: str) -> MetadataStore:
    """Open the store `url` names; the caller closes it (`await store.aclose()`)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidStoreURL(f"{url!r}: a store URL looks like scheme://…, one of {SCHEMES}")
    location, _, query = rest.partition("?")
    params = _params(url, query)
    if scheme == "memory":
        _no_more(url, params)
        from metaplane.store._memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from metaplane.store._sqlite import SqliteStore

        return await SqliteStore.open(_sqlite_path(url, location), **_sqlite_options(url, params))
    if scheme in ("etcd", "etcds"):
        from metaplane.store._etcd import EtcdStore

        return await EtcdStore.connect(_etcd_options(url, scheme, location, params))
    if scheme in ("zk", "zookeeper"):
        from metaplane.store._zookeeper import ZooKeeperStore

        return await ZooKeeperStore.connect(_zookeeper_options(url, location, params), url)
    raise InvalidStoreURL(f"{url!r}: unknown scheme {scheme!r}; one of {SCHEMES}")


@contextlib.asynccontextmanager
async def open_store(url: str) -> AsyncIterator[MetadataStore]:
    """Open the store `url` names for the duration of an `async with` block."""
    store = await connect_store(url)
    try:
        yield store
    finally:
        await store.aclose()


def _params(url: str, query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, values in parse_qs(query, keep_blank_values=True, strict_parsing=False).items():
        if len(values) > 1:
            raise InvalidStoreURL(f"{url!r}: {name!r} is given more than once")
        params[name] = values[0]
    return params


def _no_more(url: str, params: dict[str, str]) -> None:
    if params:
        raise InvalidStoreURL(f"{url!r}: unknown option(s) {', '.join(sorted(params))}")


def _take(url: str, params: dict[str, str], name: str, parse: Callable[[str], Any]) -> Any:
    if name not in params:
        return None
    text = params.pop(name)
    try:
        return parse(text)
    except ValueError:
        raise InvalidStoreURL(f"{url!r}: option {name}={text!r} is not valid") from None


def _sqlite_path(url: str, location: str) -> str:
    path = unquote(location)
    if not path:
        raise InvalidStoreURL(f"{url!r}: no file; write sqlite:///path/to/file.db")
    return path


def _sqlite_options(url: str, params: dict[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    synchronous = _take(url, params, "synchronous", str.lower)
    if synchronous is not None:
        if synchronous not in ("full", "normal"):
            raise InvalidStoreURL(f"{url!r}: synchronous is full or normal")
        options["synchronous"] = synchronous
    for name, parse in (("history", int), ("history_age", float)):
        value = _take(url, params, name, parse)
        if value is not None:
            options[name] = value
    _no_more(url, params)
    return options


def _etcd_options(url: str, scheme: str, location: str, params: dict[str, str]) -> EtcdOptions:
    from metaplane.store._etcd import EtcdOptions

    user = password = None
    if "@" in location:
        userinfo, _, location = location.rpartition("@")
        user, sep, password = (unquote(part) for part in userinfo.partition(":"))
        if not sep or not user:
            raise InvalidStoreURL(f"{url!r}: credentials are written user:password@")
    endpoints = tuple(endpoint.strip() for endpoint in location.split(",") if endpoint.strip())
    if not endpoints:
        raise InvalidStoreURL(f"{url!r}: no endpoint; write etcd://host:port[,host:port…]")
    for endpoint in endpoints:
        host, sep, port = endpoint.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidStoreURL(f"{url!r}: endpoint {endpoint!r} is not host:port")
    files = {
        name: _take(url, params, name, lambda path: _read(url, path))
        for name in ("ca", "cert", "key")
    }
    tls = _take(url, params, "tls", lambda text: text.lower() in ("1", "true", "yes"))
    timeout = _take(url, params, "timeout", float)
    _no_more(url, params)
    try:
        return EtcdOptions(
            endpoints=endpoints,
            user=user,
            password=password,
            ca=files["ca"],
            cert=files["cert"],
            key=files["key"],
            tls=bool(tls) or scheme == "etcds",
            **({} if timeout is None else {"timeout": timeout}),
        )
    except InvalidRequest as exc:
        raise InvalidStoreURL(f"{url!r}: {exc}") from None


def _zookeeper_options(url: str, location: str, params: dict[str, str]) -> ZooKeeperOptions:
    from metaplane.store._zookeeper import ZooKeeperOptions

    hosts, slash, chroot = location.partition("/")
    if not slash or not chroot.strip("/"):
        raise InvalidStoreURL(f"{url!r}: name a chroot; write zk://host:port[,host:port…]/chroot")
    endpoints = tuple(host.strip() for host in hosts.split(",") if host.strip())
    if not endpoints:
        raise InvalidStoreURL(f"{url!r}: no host; write zk://host:port[,host:port…]/chroot")
    for endpoint in endpoints:
        host, sep, port = endpoint.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidStoreURL(f"{url!r}: host {endpoint!r} is not host:port")
    timeouts = {
        name: value
        for name in ("timeout", "session_timeout")
        if (value := _take(url, params, name, float)) is not None
    }
    max_request: dict[str, int] = {}
    if (size := _take(url, params, "max_request", int)) is not None:
        max_request["max_request"] = size
    _no_more(url, params)
    try:
        root = "/" + unquote(chroot).strip("/")
        return ZooKeeperOptions(endpoints, root, **timeouts, **max_request)
    except InvalidRequest as exc:
        raise InvalidStoreURL(f"{url!r}: {exc}") from None


def _read(url: str, path: str) -> bytes:
    try:
        return Path(unquote(path)).read_bytes()
    except OSError as exc:
        raise InvalidStoreURL(f"{url!r}: cannot read {path}: {exc.strerror}") from None
