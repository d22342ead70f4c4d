"""The command line run in-process (typer's CliRunner) against a store URL, and what the
tests write into that store beforehand: brokers, assignments, a leader played by a thread."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from typer.testing import CliRunner, Result

from metaplane import layout
from metaplane.admin.cli import app
from metaplane.layout import TopicName
from metaplane.resources import (
    BrokerState,
    ClusterManager,
    NamespaceManager,
    OwnershipManager,
    TopicManager,
    encode,
)
from metaplane.store import ABSENT, Entry, MetadataStore, open_store
from tests.resources.samples import ACTIVE, registration

StoreWork = Callable[[MetadataStore], Awaitable[Any]]


class Cli:
    """`metaplane …` against one store; each call checks the exit code and that no
    traceback got out."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, *args: str, input: str | bytes | None = None, code: int = 0) -> Result:
        arguments = [*args, "--store", self.url]
        result = CliRunner().invoke(app, arguments, input=input, env={"COLUMNS": "200"})
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)

    def error(self, *args: str, code: int = 1) -> str:
        """The error line of a command that must fail: one line, on stderr, nothing on
        stdout."""
        result = self(*args, code=code)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert result.stdout == ""
        return lines[0]

    def do(self, work: StoreWork) -> Any:
        """Run `work` on the store, as another client would."""
        return asyncio.run(on_store(self.url, work))

    def get(self, key: str) -> Entry | None:
        return self.do(lambda store: store.get(key))


async def on_store(url: str, work: StoreWork) -> Any:
    async with open_store(url) as store:
        return await work(store)


async def emptied(store: MetadataStore) -> None:
    """A store shared by the session (etcd) starts each test empty."""
    await store.delete_prefix("/")


async def add_broker(store: MetadataStore, broker_id: int, state: BrokerState = ACTIVE) -> None:
    """A live broker: registered (without a lease: the test is its session) and in `state`."""
    await store.put(layout.broker_registration(broker_id), encode(registration()))
    await ClusterManager(store).set_state(broker_id, state, ABSENT)


async def add_topic(store: MetadataStore, topic: TopicName, owner: int | None = None) -> None:
    """A topic in its namespace (created if missing), assigned to `owner` if given."""
    namespaces = NamespaceManager(store)
    if topic.namespace not in await namespaces.namespaces():
        await namespaces.create(topic.namespace)
    await TopicManager(store).create(topic)
    if owner is not None:
        await OwnershipManager(store).assign(topic, owner)


@contextmanager
def leader_thread(url: str, act: StoreWork) -> Iterator[None]:
    """A thread that plays the leader while the test runs a command: it runs `act` on the
    store until `act` returns True (its part done) or the block ends."""
    failures: list[BaseException] = []
    done = threading.Event()

    def play() -> None:
        try:
            asyncio.run(on_store(url, lambda store: until(store, act, done)))
        except BaseException as error:  # reported in the test's thread
            failures.append(error)

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=10)
    assert not thread.is_alive() and not failures, failures


async def until(store: MetadataStore, act: StoreWork, done: threading.Event) -> None:
    """Run `act` until it has done its part; the store is polled, it has no event to wait on."""
    while not done.is_set():
        if await act(store):
            return
        await asyncio.sleep(0.05)
