"""Synthetic clusters in exactly seed 001's formats (keys from `metaplane.layout`, values from
`metaplane.resources`), for scale tests and for the audit's own tests: optionally with one
injected inconsistency of each kind, listed in `faults.json` beside the snapshot.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from metaplane import layout
from metaplane.layout import TopicName
from metaplane.pipeline._errors import InvalidSetting
from metaplane.pipeline._snapshot import Snapshot, SnapshotWriter
from metaplane.resources import (
    Avro,
    AvroSchema,
    BrokerMode,
    BrokerRegistration,
    BrokerState,
    CompatibilityMode,
    CurrentObject,
    Delivery,
    LoadReport,
    NamespacePolicy,
    ObjectDescriptor,
    ProducerAccessMode,
    ProducerRegistration,
    ResourceUsage,
    SchemaIdIndex,
    SchemaMetadata,
    SchemaVersion,
    SealedState,
    SubscriptionMetadata,
    SubscriptionType,
    UnassignedMarker,
    encode,
)
from metaplane.store import MAX_VALUE_BYTES

FAULTS_FILE = "faults.json"
NULL = b"null"
DAY = 86_400
PARTITIONS = 4
EVERY_PARTITIONED = 10  # one logical topic in ten is partitioned
# One served topic in 499 is between owners (unload marker, sealed state). Not 500: every
# tenth topic is NonReliable (no objects, so no sealed state), and 500 would pick only those.
EVERY_MOVING = 499
EVERY_NEW = 997  # one in 997 was just created and waits for its first owner
EVERY_NON_RELIABLE = 10
OBJECT_OFFSETS = 1000


@dataclass(frozen=True)
class SynthSpec:
    """The shape of a synthetic cluster. `topics` counts served topics (each partition of a
    partitioned topic is one); `draining` brokers still hold their topics."""

    brokers: int = 3
    topics: int = 100
    subscriptions_per_topic: int = 2
    objects_per_topic: int = 3
    namespaces: int = 3
    draining: int = 0
    faults: bool = False
    seed: int = 1
    taken_at: float = field(default_factory=time.time)
    cluster_name: str = "synthetic"

    def check(self) -> None:
        for name in ("brokers", "namespaces"):
            if getattr(self, name) < 1:
                raise InvalidSetting(f"{name} must be at least 1")
        for name in ("topics", "subscriptions_per_topic", "objects_per_topic", "draining"):
            if getattr(self, name) < 0:
                raise InvalidSetting(f"{name} must not be negative")
        if self.draining >= self.brokers:
            raise InvalidSetting("at least one broker must stay active (draining < brokers)")
        if self.faults and (
            self.topics < 200
            or self.brokers < 3
            or self.subscriptions_per_topic < 2
            or self.objects_per_topic < 3
        ):
            raise InvalidSetting(
                "--faults needs at least 200 topics, 3 brokers, 2 subscriptions and 3 objects "
                "per topic (each fault has topics of its own)"
            )

    def keys_per_topic(self) -> int:
        """About how many keys one served topic brings (for sizing a snapshot)."""
        return 6 + 2 * self.subscriptions_per_topic + self.objects_per_topic


def topics_for_keys(keys: int, spec: SynthSpec) -> int:
    """The number of served topics that gives a snapshot of about `keys` keys."""
    return max(1, keys // spec.keys_per_topic())


# Rows ---------------------------------------------------------------------------------------


@dataclass
class Row:
    """A key about to be written; `version` above 1 is a key written several times."""

    key: str
    value: bytes
    version: int = 1
    lease: int = 0


@dataclass
class TopicPlan:
    """One served topic as generated, before it is written; faults edit it."""

    index: int
    name: TopicName
    owner: int | None
    reliable: bool
    rows: list[Row] = field(default_factory=list)
    last_offset: int | None = None

    def find(self, key: str) -> Row:
        return next(row for row in self.rows if row.key == key)

    def drop(self, key: str) -> None:
        self.rows = [row for row in self.rows if row.key != key]


@dataclass
class Broker:
    id: int
    lease: int
    mode: BrokerMode
    topics: list[str] = field(default_factory=list)


class Generator:
    """Generates a cluster's rows in order: topics first (their owners decide the load
    reports), then the cluster keys, namespaces and schemas."""

    def __init__(self, spec: SynthSpec, writer: SnapshotWriter) -> None:
        spec.check()
        self.spec = spec
        self.writer = writer
        self.rng = random.Random(spec.seed)
        self.revision = 0
        self.brokers = [self._broker(index) for index in range(spec.brokers)]
        # Uneven on purpose: a real cluster is never balanced, and the plan needs work.
        self.weights = [1.0 + 0.5 * (index % 3) for index in range(spec.brokers)]
        self.namespaces = [f"ns-{index}" for index in range(spec.namespaces)]
        self.faults = Faults(self) if spec.faults else None

    def _broker(self, index: int) -> Broker:
        broker_id = self.rng.getrandbits(64)
        if index == 0:
            broker_id |= 1 << 63  # one id above the signed range, always
        draining = index >= self.spec.brokers - self.spec.draining
        mode = BrokerMode.DRAINING if draining else BrokerMode.ACTIVE
        return Broker(broker_id, self.rng.getrandbits(62) + 1, mode)

    # Writing ----------------------------------------------------------------------------

    def emit(self, rows: list[Row]) -> None:
        for row in rows:
            self.revision += 1
            created = self.revision
            self.revision += row.version - 1
            self.writer.add(row.key, row.value, created, self.revision, row.version, row.lease)

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        faults = self.faults
        for plan in self.topics():
            if faults is not None:
                faults.topic(plan)
            self.emit(plan.rows)
            if progress is not None and plan.index % 10_000 == 0:
                progress(self.writer.count)
        if faults is not None:
            self.emit(faults.extra_rows())  # before the load reports: they add assignments
        cluster = self.cluster_rows() + self.namespace_rows()
        schemas = self.schema_rows()
        if faults is not None:
            cluster, schemas = faults.cluster(cluster), faults.schemas(schemas)
        self.emit(cluster)
        self.emit(schemas)
        if self.revision > self.writer.revision:
            raise AssertionError(f"revision {self.revision} above the bound {self.writer.revision}")

    def revision_bound(self) -> int:
        """An upper bound of the revisions the cluster's rows take, known before they are
        made: the snapshot's revision (a real store's is above its keys' too, after
        deletes). A cursor is written at most once per thousand offsets."""
        spec = self.spec
        cursor_writes = 2 + 2 * spec.objects_per_topic
        per_topic = 12 + spec.objects_per_topic + spec.subscriptions_per_topic * (1 + cursor_writes)
        subjects = 500
        return (
            (spec.topics + 2) * per_topic
            + spec.topics // 2
            + spec.brokers * 6
            + spec.namespaces
            + subjects * 8
            + 100
        )

    # Topics -----------------------------------------------------------------------------

    def topics(self) -> Iterator[TopicPlan]:
        served = 0
        logical = 0
        while served < self.spec.topics:
            namespace = self.namespaces[logical % len(self.namespaces)]
            partitioned = logical % EVERY_PARTITIONED == EVERY_PARTITIONED - 1
            if partitioned and served + PARTITIONS <= self.spec.topics:
                parent = TopicName(namespace, f"events-{logical:07d}")
                yield self.partitioned_parent(served, parent)
                for partition in parent.partitions(PARTITIONS):
                    yield self.topic(served, partition)
                    served += 1
            else:
                yield self.topic(served, TopicName(namespace, f"topic-{logical:07d}"))
                served += 1
            logical += 1

    def partitioned_parent(self, index: int, parent: TopicName) -> TopicPlan:
        plan = TopicPlan(-1 - index, parent, None, True)
        plan.rows = [
            Row(layout.topic_root(parent), encode(PARTITIONS)),
            Row(layout.namespace_topic(parent), NULL),
        ]
        return plan

    def owner(self) -> Broker:
        return self.rng.choices(self.brokers, self.weights)[0]

    def topic(self, index: int, name: TopicName) -> TopicPlan:
        reliable = index % EVERY_NON_RELIABLE != EVERY_NON_RELIABLE - 1
        broker = self.owner()
        plan = TopicPlan(index, name, broker.id, reliable)
        delivery = Delivery.RELIABLE if reliable else Delivery.NON_RELIABLE
        plan.rows = [
            Row(layout.topic_root(name), encode(0)),
            Row(layout.namespace_topic(name), NULL),
            Row(layout.topic_delivery(name), encode(delivery)),
        ]
        if index % EVERY_NEW == EVERY_NEW - 1:
            plan.owner = None
            plan.rows.append(Row(layout.unassigned(name), NULL))
            return plan
        plan.rows.append(self.producer(name))
        if reliable and self.spec.objects_per_topic:
            plan.rows += self.objects(plan)
        plan.rows += self.subscriptions(plan)
        if index % EVERY_MOVING == EVERY_MOVING - 1:
            self.unload(plan, broker)
        else:
            plan.rows.append(Row(layout.assignment(broker.id, name), NULL))
            broker.topics.append(name.path)
        return plan

    def producer(self, name: TopicName) -> Row:
        producer_id = self.rng.getrandbits(64)
        value = ProducerRegistration(
            access_mode=ProducerAccessMode.SHARED,
            producer_id=producer_id,
            producer_name=f"producer-{name.topic}",
            status=True,
            topic_name=name.path,
        )
        return Row(layout.producer(name, producer_id), encode(value))

    def objects(self, plan: TopicPlan) -> list[Row]:
        rows = []
        start = 0
        count = self.spec.objects_per_topic
        for position in range(count):
            length = self.rng.randint(OBJECT_OFFSETS // 2, OBJECT_OFFSETS * 2)
            age = (count - position) * 14 * DAY // count - self.rng.randint(0, DAY // 2)
            rows.append(self.object_row(plan.name, start, start + length - 1, age))
            start += length
        plan.last_offset = start - 1
        last_start = start - length
        rows.append(Row(layout.storage_cur(plan.name), encode(CurrentObject.at(last_start))))
        return rows

    def object_row(
        self, name: TopicName, start: int, end: int, age: int, completed: bool = True
    ) -> Row:
        value = ObjectDescriptor(
            completed=completed,
            created_at=int(self.spec.taken_at) - max(age, 0),
            end_offset=end,
            etag=f"{self.rng.getrandbits(64):016x}" if completed else None,
            object_id=f"data-{start}-{end}.dnb1",
            offset_index=[(start, 0)],
            size=(end - start + 1) * self.rng.randint(200, 2000),
            start_offset=start,
        )
        return Row(layout.storage_object(name, start), encode(value))

    def subscriptions(self, plan: TopicPlan) -> list[Row]:
        rows = []
        for number in range(self.spec.subscriptions_per_topic):
            subscription = f"sub-{number}"
            consumer = self.rng.getrandbits(64) if number % 2 == 0 else None
            value = SubscriptionMetadata(
                consumer_id=consumer,
                consumer_name=f"consumer-{number}",
                subscription_name=subscription,
                subscription_type=SubscriptionType(number % 3),
            )
            rows.append(Row(layout.subscription(plan.name, subscription), encode(value)))
            if plan.last_offset is not None:
                acked = self.rng.randint(plan.last_offset // 2, plan.last_offset)
                writes = 1 + acked // OBJECT_OFFSETS
                rows.append(Row(layout.cursor(plan.name, subscription), encode(acked), writes))
        return rows

    def unload(self, plan: TopicPlan, broker: Broker) -> None:
        """A topic between owners: its source sealed it and the leader has yet to assign it."""
        plan.owner = None
        marker = UnassignedMarker(reason="unload", from_broker=broker.id)
        plan.rows.append(Row(layout.unassigned(plan.name), encode(marker)))
        if plan.last_offset is not None:
            sealed = SealedState(
                sealed=True,
                last_committed_offset=plan.last_offset,
                broker_id=broker.id,
                timestamp=int(self.spec.taken_at) - 60,
            )
            plan.rows.append(Row(layout.storage_state(plan.name), encode(sealed)))

    # Cluster, namespaces, schemas -------------------------------------------------------

    def cluster_rows(self) -> list[Row]:
        rows = [Row(layout.cluster_name(self.spec.cluster_name), NULL)]
        busiest = max((len(broker.topics) for broker in self.brokers), default=0) or 1
        for number, broker in enumerate(self.brokers):
            rows += self.broker_rows(number, broker, busiest)
        leader = self.brokers[0]
        rows.append(Row(layout.leader(), encode(leader.id), lease=leader.lease))
        rows.append(Row(layout.leader_epoch(), encode(7), version=7))
        return rows

    def broker_rows(self, number: int, broker: Broker, busiest: int) -> list[Row]:
        registration = BrokerRegistration(
            admin_addr=f"http://10.0.0.{number + 1}:50051",
            advertised_addr=f"10.0.0.{number + 1}:6650",
            broker_addr=f"http://10.0.0.{number + 1}:6650",
            prom_exporter=f"10.0.0.{number + 1}:9040",
        )
        state = BrokerState(mode=broker.mode, reason="boot" if number else "leader")
        usage = 10 + 80 * len(broker.topics) // busiest
        report = LoadReport(
            resources_usage=[
                ResourceUsage(resource="CPU", usage=usage),
                ResourceUsage(resource="Memory", usage=max(usage - 5, 1)),
            ],
            topic_list=broker.topics,
            topics_len=len(broker.topics),
        )
        report_value = encode(report)
        if len(report_value) > MAX_VALUE_BYTES:
            raise InvalidSetting(
                f"broker {broker.id} would report {len(broker.topics)} topics, "
                f"{len(report_value)} bytes: above the store's {MAX_VALUE_BYTES}-byte value "
                "limit; give the cluster more brokers"
            )
        return [
            Row(layout.broker_registration(broker.id), encode(registration), lease=broker.lease),
            Row(layout.broker_state(broker.id), encode(state)),
            Row(layout.load_report(broker.id), report_value, version=3),
        ]

    def namespace_rows(self) -> list[Row]:
        policy = encode(NamespacePolicy())
        return [Row(layout.namespace_policy(namespace), policy) for namespace in self.namespaces]

    def schema_rows(self) -> list[Row]:
        subjects = min(max(1, self.spec.topics // 100), 500)
        rows: list[Row] = []
        for number in range(subjects):
            rows += self.subject_rows(f"subject-{number}", number + 1)
        rows.append(Row(layout.next_schema_id(), encode(subjects + 1), version=subjects))
        return rows

    def subject_rows(self, subject: str, schema_id: int) -> list[Row]:
        created = int(self.spec.taken_at) - 30 * DAY
        versions = [self.schema_version(subject, number, created) for number in (1, 2)]
        metadata = SchemaMetadata(
            compatibility_mode=CompatibilityMode.BACKWARD,
            created_at=created,
            created_by="synth",
            id=schema_id,
            latest_version=len(versions),
            subject=subject,
            topics_using=[],
            updated_at=created + 2,
            versions=versions,
        )
        rows = [Row(layout.schema_metadata(subject), encode(metadata), version=2)]
        rows += [
            Row(layout.schema_version(subject, version.version), encode(version))
            for version in versions
        ]
        index = SchemaIdIndex(schema_id=schema_id, subject=subject)
        rows.append(Row(layout.schema_by_id(schema_id), encode(index)))
        return rows

    def schema_version(self, subject: str, number: int, created: int) -> SchemaVersion:
        fields = [{"name": f"field{index}", "type": "string"} for index in range(number)]
        raw = json.dumps({"type": "record", "name": subject.replace("-", "_"), "fields": fields})
        fingerprint = f"sha256:{self.rng.getrandbits(256):064x}"
        return SchemaVersion(
            created_at=created + number,
            created_by="synth",
            version=number,
            fingerprint=fingerprint,
            is_deprecated=False,
            schema_def=Avro(schema=AvroSchema(fingerprint=fingerprint, raw_schema=raw)),
            tags=[],
            description="",
        )


# Faults -------------------------------------------------------------------------------------


class Faults:
    """One injected inconsistency per audit check, each on a topic or key of its own, and
    the keys each check must name (written to `faults.json`)."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator
        self.expected: dict[str, list[str]] = {}
        faults = [
            self.assigned_twice,
            self.unregistered_owner,
            self.assigned_and_unassigned,
            self.unowned,
            self.no_namespace_entry,
            self.cursor_without_subscription,
            self.cursor_beyond,
            self.value_disagrees,
            self.storage_gap,
            self.storage_overlap,
            self.cur_mismatch,
            self.incomplete_upload,
            self.sealed_while_owned,
            self.malformed,
        ]
        # Three served topics apart, so that a fault that moves on to the next topic (this
        # one cannot carry it) never lands on another's.
        self.topic_faults = {3 * number + 1: fault for number, fault in enumerate(faults)}

    def note(self, check: str, *keys: str) -> None:
        self.expected.setdefault(check, []).extend(keys)

    def topic(self, plan: TopicPlan) -> None:
        fault = self.topic_faults.pop(plan.index, None)
        if fault is None:
            return
        if plan.owner is not None and plan.last_offset is not None:
            fault(plan)
        else:  # not reliable, or between owners: the next topic carries it
            self.topic_faults[plan.index + 1] = fault

    def _owner(self, plan: TopicPlan) -> Broker:
        return next(broker for broker in self.generator.brokers if broker.id == plan.owner)

    def _assignment(self, plan: TopicPlan) -> str:
        assert plan.owner is not None
        return layout.assignment(plan.owner, plan.name)

    # Topic faults -------------------------------------------------------------------------

    def assigned_twice(self, plan: TopicPlan) -> None:
        other = next(b for b in self.generator.brokers if b.id != plan.owner)
        key = layout.assignment(other.id, plan.name)
        plan.rows.append(Row(key, NULL))
        other.topics.append(plan.name.path)
        self.note("topic-assigned-twice", self._assignment(plan), key)

    def unregistered_owner(self, plan: TopicPlan) -> None:
        plan.drop(self._assignment(plan))
        self._owner(plan).topics.remove(plan.name.path)
        key = layout.assignment(UNREGISTERED, plan.name)
        plan.rows.append(Row(key, NULL))
        self.note("assigned-to-unregistered-broker", key)

    def assigned_and_unassigned(self, plan: TopicPlan) -> None:
        key = layout.unassigned(plan.name)
        plan.rows.append(Row(key, NULL))
        self.note("assigned-and-unassigned", self._assignment(plan), key)

    def unowned(self, plan: TopicPlan) -> None:
        plan.drop(self._assignment(plan))
        self._owner(plan).topics.remove(plan.name.path)
        self.note("topic-unowned", layout.topic_root(plan.name))

    def no_namespace_entry(self, plan: TopicPlan) -> None:
        plan.drop(layout.namespace_topic(plan.name))
        self.note("topic-without-namespace-entry", layout.topic_root(plan.name))

    def cursor_without_subscription(self, plan: TopicPlan) -> None:
        plan.drop(layout.subscription(plan.name, "sub-1"))
        self.note("cursor-without-subscription", layout.cursor(plan.name, "sub-1"))

    def cursor_beyond(self, plan: TopicPlan) -> None:
        """A topic between owners (sealed, waiting) whose cursor is past the seal: its next
        owner would start below the cursor. (A served topic's cursor may be ahead of its
        uploaded objects: that is no fault.)"""
        assert plan.last_offset is not None
        owner = self._owner(plan)
        plan.drop(self._assignment(plan))
        owner.topics.remove(plan.name.path)
        self.generator.unload(plan, owner)
        key = layout.cursor(plan.name, "sub-0")
        plan.find(key).value = encode(plan.last_offset + 100)
        self.note("cursor-beyond-last-committed", key)

    def value_disagrees(self, plan: TopicPlan) -> None:
        key = layout.subscription(plan.name, "sub-1")
        value = SubscriptionMetadata(
            consumer_id=None,
            consumer_name="consumer-1",
            subscription_name="another-name",
            subscription_type=SubscriptionType.SHARED,
        )
        plan.find(key).value = encode(value)
        self.note("value-disagrees-with-key", key)

    def _objects(self, plan: TopicPlan) -> list[Row]:
        cur = layout.storage_cur(plan.name)
        prefix = layout.storage_objects_prefix(plan.name) + "/"
        return [row for row in plan.rows if row.key.startswith(prefix) and row.key != cur]

    def _restart_second_object(self, plan: TopicPlan, shift: int) -> tuple[str, str]:
        """Move the topic's second object's start by `shift` (its end stays)."""
        first, second = self._objects(plan)[:2]
        value = json.loads(second.value)
        plan.drop(second.key)
        moved = self.generator.object_row(
            plan.name, value["start_offset"] + shift, value["end_offset"], 3 * DAY
        )
        plan.rows.append(moved)
        return first.key, moved.key

    def storage_gap(self, plan: TopicPlan) -> None:
        self.note("storage-gap", *self._restart_second_object(plan, 10))

    def storage_overlap(self, plan: TopicPlan) -> None:
        self.note("storage-overlap", *self._restart_second_object(plan, -10))

    def cur_mismatch(self, plan: TopicPlan) -> None:
        key = layout.storage_cur(plan.name)
        plan.find(key).value = encode(CurrentObject.at(0))
        self.note("storage-cur-mismatch", key)

    def incomplete_upload(self, plan: TopicPlan) -> None:
        row = self._objects(plan)[1]
        value = json.loads(row.value)
        row.value = self.generator.object_row(
            plan.name, value["start_offset"], value["end_offset"], 5 * DAY, completed=False
        ).value
        self.note("upload-incomplete", row.key)

    def sealed_while_owned(self, plan: TopicPlan) -> None:
        assert plan.owner is not None and plan.last_offset is not None
        sealed = SealedState(
            sealed=True, last_committed_offset=plan.last_offset, broker_id=plan.owner, timestamp=1
        )
        key = layout.storage_state(plan.name)
        plan.rows.append(Row(key, encode(sealed)))
        self.note("sealed-state-of-owned-topic", key)

    def malformed(self, plan: TopicPlan) -> None:
        cursor = layout.cursor(plan.name, "sub-1")
        plan.find(cursor).value = b"not-a-number"
        subscription = layout.subscription(plan.name, "sub-0")
        plan.find(subscription).value = b'{"consumer_id": null, "consumer_name": '
        self.note("malformed-value", cursor, subscription)

    # Keys of their own, and edits of the cluster's and the registry's keys --------------

    def extra_rows(self) -> list[Row]:
        generator = self.generator
        namespace = generator.namespaces[0]
        ghost = TopicName(namespace, "ghost-topic")
        assigned = TopicName(namespace, "ghost-assigned")
        rows = {
            "assignment-of-missing-topic": Row(
                layout.assignment(generator.brokers[0].id, assigned), NULL
            ),
            "namespace-entry-without-topic": Row(
                layout.namespace_topic(TopicName(namespace, "ghost-listed")), NULL
            ),
            "subscription-of-missing-topic": Row(
                layout.subscription(ghost, "sub-0"), _subscription("sub-0")
            ),
            "producer-of-missing-topic": Row(
                layout.producer(TopicName(namespace, "ghost-producer"), 7), _producer(namespace)
            ),
            "orphan-storage": generator.object_row(
                TopicName(namespace, "ghost-storage"), 0, 9, DAY
            ),
            "schema-index-missing-subject": Row(
                layout.schema_by_id(99_999),
                encode(SchemaIdIndex(schema_id=99_999, subject="ghost-subject")),
            ),
            "load-report-of-unregistered-broker": Row(
                layout.load_report(UNREGISTERED), encode(_empty_report())
            ),
            "unknown-key": Row("/metaplane/not/a/key", b"{}"),
            "legacy-key": Row(layout.legacy_cluster_name(), b'"old-name"'),
        }
        for check, row in rows.items():
            self.note(check, row.key)
        generator.brokers[0].topics.append(assigned.path)
        return [*rows.values(), *self._crowded_topic()]

    def _crowded_topic(self) -> list[Row]:
        """A namespace that allows one subscription per topic, and a topic with more."""
        crowded = TopicName("limited", "crowded")
        policy = NamespacePolicy(max_subscriptions_per_topic=1)
        plan = self.generator.topic(0, crowded)
        self.note("policy-limit-exceeded", layout.topic_root(crowded))
        return [Row(layout.namespace_policy("limited"), encode(policy)), *plan.rows]

    def cluster(self, rows: list[Row]) -> list[Row]:
        brokers = self.generator.brokers
        dropped_policy = layout.namespace_policy(self.generator.namespaces[-1])
        dropped_state = layout.broker_state(brokers[1].id)
        rows = [row for row in rows if row.key not in (dropped_policy, dropped_state)]
        self.note("namespace-without-policy", dropped_policy)
        self.note("broker-without-state", layout.broker_registration(brokers[1].id))
        registration = next(r for r in rows if r.key == layout.broker_registration(brokers[-1].id))
        registration.lease = 0
        self.note("ephemeral-key-without-lease", registration.key)
        # metaplane's coordination runs here (a fenced lock is held, under the leader's lease)
        # but its epoch is gone: a cluster written by Danube alone has neither.
        rows = [row for row in rows if row.key != layout.leader_epoch()]
        leader = brokers[0]
        lock = layout.lock("rebalance", leader.lease)
        rows.append(Row(lock, encode(leader.id), lease=leader.lease))
        self.note("leader-without-epoch", layout.leader())
        self._stale_report(rows, brokers[-1])
        return rows

    def _stale_report(self, rows: list[Row], broker: Broker) -> None:
        report = next(row for row in rows if row.key == layout.load_report(broker.id))
        value = json.loads(report.value)
        value["topic_list"] = value["topic_list"][1:]
        value["topics_len"] = len(value["topic_list"])
        report.value = json.dumps(value, separators=(",", ":")).encode()
        self.note("load-report-stale", report.key)

    def schemas(self, rows: list[Row]) -> list[Row]:
        dropped = (layout.schema_by_id(2), layout.schema_version("subject-0", 2))
        rows = [row for row in rows if row.key not in dropped]
        self.note("schema-without-index", layout.schema_metadata("subject-1"))
        self.note("schema-version-missing", layout.schema_metadata("subject-0"))
        counter = next(row for row in rows if row.key == layout.next_schema_id())
        counter.value = encode(2)
        self.note("next-schema-id-not-above-max", counter.key)
        return rows


UNREGISTERED = 12345
"""A broker id no synthetic broker has (they are random 64-bit numbers)."""


def _subscription(name: str) -> bytes:
    value = SubscriptionMetadata(
        consumer_id=None,
        consumer_name="c",
        subscription_name=name,
        subscription_type=SubscriptionType.EXCLUSIVE,
    )
    return encode(value)


def _producer(namespace: str) -> bytes:
    value = ProducerRegistration(
        access_mode=ProducerAccessMode.SHARED,
        producer_id=7,
        producer_name="p",
        status=True,
        topic_name=TopicName(namespace, "ghost-producer").path,
    )
    return encode(value)


def _empty_report() -> LoadReport:
    return LoadReport(resources_usage=[], topic_list=[], topics_len=0)


# Entry point --------------------------------------------------------------------------------


def synth_snapshot(
    spec: SynthSpec, folder: Path, progress: Callable[[int], None] | None = None
) -> Snapshot:
    """Write a synthetic cluster of `spec` as a snapshot in `folder` (and, with faults,
    `faults.json`: each audit check and the keys it must name)."""
    spec.check()
    with SnapshotWriter(folder, revision=1, source="synth", taken_at=spec.taken_at) as writer:
        generator = Generator(spec, writer)
        writer.revision = generator.revision_bound()
        generator.run(progress)
        snapshot = writer.close()
    if generator.faults is not None:
        expected = {check: sorted(set(keys)) for check, keys in generator.faults.expected.items()}
        (folder / FAULTS_FILE).write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return snapshot
