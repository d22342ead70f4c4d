"""The cluster as an operator sees it — brokers with their state, load and liveness, the
leader and its epoch, the topics waiting for assignment, the store's health — and the
broker-state changes (drain, undrain). Every function returns the JSON document that both
`metaplane … -o json` prints and the HTTP API returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from metaplane import layout
from metaplane.admin._errors import NotDraining
from metaplane.cache import LocalCache
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.resources import (
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    ClusterManager,
    LoadReport,
    MalformedValue,
    Reader,
    UnassignedMarker,
    Versioned,
    decode,
)
from metaplane.store import BadVersion, Entry, InvalidValue, List, MetadataError


@dataclass
class Broker:
    """One broker as the keys under /cluster tell it; a broker that is not registered (not
    live) may still have a state, assignments and a load report."""

    broker_id: int
    registration: BrokerRegistration | None = None
    state: BrokerState | None = None
    state_version: int = 0
    topics: int = 0
    load: LoadReport | None = None


@dataclass
class Brokers:
    """Every broker, the leadership and the waiting topics, read at one revision."""

    revision: int
    brokers: dict[int, Broker] = field(default_factory=dict)
    leader: int | None = None
    epoch: int = 0
    unassigned: dict[str, Any] = field(default_factory=dict)

    def broker(self, broker_id: int) -> Broker:
        return self.brokers.setdefault(broker_id, Broker(broker_id))

    def live(self, broker_id: int | None) -> bool:
        found = None if broker_id is None else self.brokers.get(broker_id)
        return found is not None and found.registration is not None


CLUSTER = List(layout.cluster_prefix())
BROKERS = layout.brokers_prefix() + "/"
ASSIGNMENT_SEGMENTS = len(layout.assignment(1, TopicName("n", "t")).split("/"))


async def read_brokers(reader: Reader) -> Brokers:
    """Registrations, states, assignments, load reports, markers and the leader: one read of
    /cluster, so that they agree with each other."""
    view = await reader.read(CLUSTER)
    found = Brokers(view.revision)
    counts: dict[str, int] = {}
    for entry in view.entries(CLUSTER):
        # Most keys are assignments (/cluster/brokers/{id}/{ns}/{topic}): counted by their
        # segments, the cheapest test; the few others are parsed.
        if entry.key.startswith(BROKERS):
            parts = entry.key.split("/")
            if len(parts) == ASSIGNMENT_SEGMENTS:
                counts[parts[3]] = counts.get(parts[3], 0) + 1
                continue
        try:
            take(found, entry)
        except MalformedValue as error:  # name the key, for the operator to fix it
            raise InvalidValue(f"{entry.key}: {error}") from None
    for broker_id, count in counts.items():
        found.broker(int(broker_id)).topics += count
    return found


def take(found: Brokers, entry: Entry) -> None:
    """Add what `entry` says to `found`; keys outside the layout say nothing."""
    try:
        key = layout.parse(entry.key)
    except LayoutError:
        return
    if key.kind is KeyKind.LEADER:
        found.leader = decode(int, entry.value)
    elif key.kind is KeyKind.LEADER_EPOCH:
        found.epoch = decode(int, entry.value)
    elif key.kind is KeyKind.UNASSIGNED and key.topic_name is not None:
        found.unassigned[key.topic_name.path] = marker_document(decode(key.kind, entry.value))
    elif key.broker_id is None:
        return
    elif key.kind is KeyKind.BROKER_REGISTRATION:
        found.broker(key.broker_id).registration = decode(BrokerRegistration, entry.value)
    elif key.kind is KeyKind.BROKER_STATE:
        broker = found.broker(key.broker_id)
        broker.state, broker.state_version = decode(BrokerState, entry.value), entry.version
    elif key.kind is KeyKind.ASSIGNMENT:
        found.broker(key.broker_id).topics += 1
    elif key.kind is KeyKind.LOAD_REPORT:
        found.broker(key.broker_id).load = decode(LoadReport, entry.value)


def marker_document(marker: object) -> dict[str, Any]:
    """Why a topic waits for assignment (all null for a new topic)."""
    if not isinstance(marker, UnassignedMarker):
        return {"reason": None, "from_broker": None, "to_broker": None}
    found: dict[str, Any] = {"to_broker": None, **msgspec.to_builtins(marker)}
    return {name: found.get(name) for name in ("reason", "from_broker", "to_broker")}


def usage(report: LoadReport, resource: str) -> int | float | None:
    """The usage of one resource ("CPU", "Memory", …) in a load report, if it has it."""
    for item in report.resources_usage:
        if item.resource.lower() == resource.lower():
            return item.usage
    return None


def broker_document(broker: Broker, leader: int | None) -> dict[str, Any]:
    """One broker for scripts; ids are JSON numbers, all 64 bits of them."""
    registration, state, load = broker.registration, broker.state, broker.load
    return {
        "broker_id": broker.broker_id,
        "live": registration is not None,
        "leader": broker.broker_id == leader,
        "addresses": None if registration is None else msgspec.to_builtins(registration),
        "state": None if state is None else {"mode": str(state.mode), "reason": state.reason},
        "topics_owned": broker.topics,
        "load": None
        if load is None
        else {
            "cpu": usage(load, "CPU"),
            "memory": usage(load, "Memory"),
            "topics": load.topics_len,
        },
    }


def brokers_document(found: Brokers) -> dict[str, Any]:
    leader = None if found.leader is None else {"broker_id": found.leader, "epoch": found.epoch}
    return {
        "revision": found.revision,
        "leader": leader,
        "brokers": [broker_document(found.brokers[i], found.leader) for i in sorted(found.brokers)],
    }


async def store_health(cluster: ClusterManager) -> dict[str, Any]:
    """Whether the store answers a read now, and how fast (a read of the store itself,
    never of a cache)."""
    started = time.perf_counter()
    try:
        revision = await cluster.store.revision()
    except MetadataError as error:
        return {"healthy": False, "error": str(error), "latency_ms": None, "revision": None}
    latency = round((time.perf_counter() - started) * 1000, 2)
    return {"healthy": True, "error": None, "latency_ms": latency, "revision": revision}


async def status(cluster: ClusterManager, memo: StatusMemo | None = None) -> dict[str, Any]:
    """Leader, epoch, brokers, topics waiting for assignment and the store's health. A store
    that does not answer is said so (from a cache, the rest is still shown). With a `memo`
    (a server's, on its cache), the cluster's part is computed once per cache revision."""
    health = await store_health(cluster)
    try:
        document = await cluster_state(cluster, memo)
    except MetadataError:
        if health["healthy"]:
            raise
        document = cluster_document(Brokers(0))
    return {**document, "store": health}


@dataclass
class StatusMemo:
    """The cluster's part of the status at one revision of a cache: the same until the cache
    applies another revision, so that a busy dashboard or a load balancer's probe costs one
    pass over /cluster per revision, not per request."""

    cache: LocalCache
    revision: int = -1
    document: dict[str, Any] = field(default_factory=dict)


async def cluster_state(cluster: ClusterManager, memo: StatusMemo | None) -> dict[str, Any]:
    if memo is not None and memo.revision == memo.cache.applied_revision:
        return memo.document
    revision = memo.cache.applied_revision if memo is not None else -1
    document = cluster_document(await read_brokers(cluster.reader))
    if memo is not None:
        memo.revision, memo.document = revision, document
    return document


def cluster_document(found: Brokers) -> dict[str, Any]:
    waiting = [{"topic": topic, **marker} for topic, marker in sorted(found.unassigned.items())]
    live = sum(broker.registration is not None for broker in found.brokers.values())
    return {**brokers_document(found), "live_brokers": live, "unassigned": waiting}


def state_document(broker_id: int, state: Versioned[BrokerState]) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "mode": str(state.value.mode),
        "reason": state.value.reason,
        "version": state.version,
    }


def check_expected(state: Versioned[Any], expect: int | None) -> None:
    if expect is not None and expect != state.version:
        raise BadVersion(state.key, expect, state.version)


async def drain(
    cluster: ClusterManager, broker_id: int, reason: str, expect: int | None = None
) -> dict[str, Any]:
    """Write `draining` over the state as read (`NoBroker` if it has none); nothing if the
    broker is draining or drained already. A broker in a custom state (maintenance) can be
    drained too."""
    state = await cluster.state(broker_id)
    check_expected(state, expect)
    before = str(state.value.mode)
    if state.value.mode in (BrokerMode.DRAINING, BrokerMode.DRAINED):
        return {"broker_id": broker_id, "was": before, "revision": None}
    draining = BrokerState(mode=BrokerMode.DRAINING, reason=reason)
    revision = await cluster.set_state(broker_id, draining, state.version)
    return {"broker_id": broker_id, "was": before, "revision": revision}


async def undrain(
    cluster: ClusterManager, broker_id: int, reason: str, expect: int | None = None
) -> dict[str, Any]:
    """Set a draining or drained broker active again, over the version read: the leader
    then places topics on it again. `NotDraining` for any other state."""
    state = await cluster.state(broker_id)
    check_expected(state, expect)
    before = str(state.value.mode)
    if state.value.mode is BrokerMode.ACTIVE:
        return {"broker_id": broker_id, "was": before, "revision": None}
    if state.value.mode not in (BrokerMode.DRAINING, BrokerMode.DRAINED):
        raise NotDraining(broker_id, before)
    active = BrokerState(mode=BrokerMode.ACTIVE, reason=reason)
    revision = await cluster.set_state(broker_id, active, state.version)
    return {"broker_id": broker_id, "was": before, "revision": revision}
