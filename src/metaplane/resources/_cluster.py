"""The cluster manager: the cluster's name marker, broker registrations, broker states, load
reports and the leader with its epoch. Registration and election proper belong to the
coordination layer, which runs these keys under its sessions and fences.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from types import NoneType

from metaplane import layout
from metaplane.layout import KeyKind, parse
from metaplane.resources._change import NULL, Change, expecting, key_absent
from metaplane.resources._errors import (
    BrokerRegistered,
    ClusterExists,
    NoBroker,
    NoCluster,
    NoLeader,
    NoLoadReport,
)
from metaplane.resources._reader import Manager, Versioned
from metaplane.resources._values import BrokerRegistration, BrokerState, LoadReport, encode
from metaplane.store import ANY, AlreadyExists, Delete, Expect, Get, Lease, Put


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who leads, and the token of that leadership: (`epoch`, `create_revision` of the leader
    key). A leader-only write compares the create_revision, so that it fails once the writer
    has been deposed; leadership alone guarantees nothing."""

    broker_id: int
    epoch: int
    create_revision: int


class ClusterManager(Manager):
    """Read and write the cluster-wide keys of brokers and the leader.

    Every write has a `…_change` form that returns it unapplied.
    """

    def create_cluster_change(self, name: str) -> Change:
        key = layout.cluster_name(name)
        return Change((key_absent(key, partial(ClusterExists, name)),), (Put(key, NULL),))

    async def create_cluster(self, name: str) -> int:
        """Write the cluster's name marker; `ClusterExists`."""
        return await self.writer.apply(self.create_cluster_change(name))

    async def cluster(self, name: str) -> Versioned[None]:
        """The cluster's name marker (null; its revisions tell when it was created);
        `NoCluster`."""
        found = await self.reader.get(layout.cluster_name(name), NoneType)
        if found is None:
            raise NoCluster(name)
        return found

    # -- registrations -----------------------------------------------------------------

    def register_change(
        self, broker_id: int, registration: BrokerRegistration, lease: Lease | int
    ) -> Change:
        key = layout.broker_registration(broker_id)
        lease_id = lease.id if isinstance(lease, Lease) else lease
        return Change(
            (key_absent(key, partial(BrokerRegistered, broker_id)),),
            (Put(key, encode(registration), lease_id),),
        )

    async def register(
        self, broker_id: int, registration: BrokerRegistration, lease: Lease | int
    ) -> int:
        """Register a broker under `lease` (its session's): the registration vanishes with
        the lease. `BrokerRegistered` while another registration of that id lives."""
        return await self.writer.apply(self.register_change(broker_id, registration, lease))

    async def registration(self, broker_id: int) -> Versioned[BrokerRegistration]:
        """A live broker's registration (its endpoints); `NoBroker`."""
        found = await self.reader.get(layout.broker_registration(broker_id), BrokerRegistration)
        if found is None:
            raise NoBroker(broker_id)
        return found

    async def registrations(self) -> dict[int, Versioned[BrokerRegistration]]:
        """Every live broker's registration, by broker id."""
        found = await self.reader.list(layout.registrations_prefix(), BrokerRegistration)
        return {_broker_id(registration.key): registration for registration in found}

    async def brokers(self) -> list[int]:
        """The ids of the registered (live) brokers, sorted."""
        keys = await self.reader.keys(layout.registrations_prefix())
        return sorted(_broker_id(key) for key in keys)

    # -- broker states -----------------------------------------------------------------

    async def state(self, broker_id: int) -> Versioned[BrokerState]:
        """A broker's state (active, draining, drained); `NoBroker` if it has none."""
        key = layout.broker_state(broker_id)
        found = await self.reader.get(key, BrokerState)
        if found is None:
            raise NoBroker(broker_id, key)
        return found

    def set_state_change(self, broker_id: int, state: BrokerState, version: int | Expect) -> Change:
        key = layout.broker_state(broker_id)
        conditions = expecting(
            key,
            version,
            missing=partial(NoBroker, broker_id, key),
            taken=partial(AlreadyExists, key),
        )
        return Change(conditions, (Put(key, encode(state)),))

    async def set_state(self, broker_id: int, state: BrokerState, version: int | Expect) -> int:
        """Write a broker's state over `version` (or ANY, or ABSENT for a first state);
        `BadVersion`, `NoBroker` for a version of a broker without a state."""
        return await self.writer.apply(self.set_state_change(broker_id, state, version))

    # -- load reports ------------------------------------------------------------------

    async def load_report(self, broker_id: int) -> Versioned[LoadReport]:
        """A broker's latest load report; `NoLoadReport`."""
        found = await self.reader.get(layout.load_report(broker_id), LoadReport)
        if found is None:
            raise NoLoadReport(broker_id)
        return found

    async def load_reports(self) -> dict[int, Versioned[LoadReport]]:
        """Every broker's latest load report, by broker id."""
        found = await self.reader.list(layout.load_reports_prefix(), LoadReport)
        return {_broker_id(report.key): report for report in found}

    def write_load_report_change(
        self, broker_id: int, report: LoadReport, version: int | Expect = ANY
    ) -> Change:
        key = layout.load_report(broker_id)
        conditions = expecting(
            key,
            version,
            missing=partial(NoLoadReport, broker_id),
            taken=partial(AlreadyExists, key),
        )
        return Change(conditions, (Put(key, encode(report)),))

    async def write_load_report(
        self, broker_id: int, report: LoadReport, version: int | Expect = ANY
    ) -> int:
        """Write a broker's load report (over `version` if given); `BadVersion`,
        `NoLoadReport`."""
        return await self.writer.apply(self.write_load_report_change(broker_id, report, version))

    def delete_load_report_change(self, broker_id: int, version: int | Expect = ANY) -> Change:
        key = layout.load_report(broker_id)
        conditions = expecting(
            key,
            version,
            missing=partial(NoLoadReport, broker_id),
            taken=partial(AlreadyExists, key),
        )
        return Change(conditions, (Delete(key),))

    async def delete_load_report(self, broker_id: int, version: int | Expect = ANY) -> int:
        """Delete a (lost) broker's load report, at `version` if given (with ANY, a missing
        report is no error); `BadVersion`, `NoLoadReport`."""
        return await self.writer.apply(self.delete_load_report_change(broker_id, version))

    # -- leader ------------------------------------------------------------------------

    async def leadership(self) -> Leadership:
        """The leader, its epoch and its token, read at one revision; `NoLeader`."""
        leader, epoch = layout.leader(), layout.leader_epoch()
        view = await self.reader.read(Get(leader), Get(epoch))
        found = view.get(leader, int)
        if found is None:
            raise NoLeader()
        counted = view.get(epoch, int)
        return Leadership(
            found.value, 0 if counted is None else counted.value, found.create_revision
        )

    async def leader_epoch(self) -> int:
        """The number of elections so far (0 before the first)."""
        found = await self.reader.get(layout.leader_epoch(), int)
        return 0 if found is None else found.value


def _broker_id(key: str) -> int:
    parsed = parse(key)
    assert parsed.broker_id is not None and parsed.kind in (
        KeyKind.BROKER_REGISTRATION,
        KeyKind.LOAD_REPORT,
    )
    return parsed.broker_id
