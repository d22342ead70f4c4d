"""The schema registry on the store: subjects, versions and global ids in seed 001's keys,
every write one transaction with compares (Hedwig's versioned CAS), retried when it loses a
race, and every write returning the store revision it committed at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial

import msgspec

from metaplane import layout
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.resources import (
    CompatibilityMode,
    SchemaIdIndex,
    SchemaMetadata,
    SchemaVersion,
    encode,
)
from metaplane.schema._compat import check
from metaplane.schema._definition import definition_of, identical, schema_of
from metaplane.schema._errors import (
    IncompatibleSchema,
    InvalidSchema,
    SchemaIdNotFound,
    SchemaVersionNotFound,
    SubjectInUse,
    SubjectNotFound,
    TopicNotBound,
    TopicNotFound,
)
from metaplane.schema._model import CompatibilityResult, Schema, SchemaType, parse_mode
from metaplane.schema._parse import parse_schema
from metaplane.schema._transact import Commit, Decision, Done, Read, Snapshot, WriteLoop
from metaplane.store import Compare, Delete, DeletePrefix, Entry, Get, MetadataStore, Put

DEFAULT_ATTEMPTS = 100
"""How many lost races in a row a write survives before it gives up with RegistryConflict:
with the backoff of `_transact`, some 10 to 15 seconds of losing to other processes."""


def unix_seconds() -> int:
    """Now, as the seed's timestamps count it."""
    return int(time.time())


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject as read: the subject, its global id, the stored version."""

    subject: str
    schema_id: int
    version: SchemaVersion

    @property
    def schema(self) -> Schema:
        """The version's document parsed again (cached), for checks and serialisation."""
        return schema_of(self.version.schema_def)


@dataclass(frozen=True)
class Registration:
    """What a registration left in the store: the version that holds the schema.

    `created` is False when an identical version existed and nothing was written; `revision`
    is the store revision to wait for (in a cache) to see that version.
    """

    subject: str
    schema_id: int
    version: SchemaVersion
    created: bool
    revision: int


@dataclass(frozen=True)
class _Draft:
    """A schema on its way to becoming a version, with what its registrant said of it."""

    schema: Schema
    description: str
    tags: tuple[str, ...]
    created_by: str

    def version(self, number: int, now: int) -> SchemaVersion:
        # description and deprecation_message are always written: Danube's reader needs them.
        return SchemaVersion(
            created_at=now,
            created_by=self.created_by,
            version=number,
            fingerprint=self.schema.fingerprint,
            is_deprecated=False,
            schema_def=definition_of(self.schema),
            tags=list(self.tags),
            description=self.description,
            deprecation_message=None,
        )


class SchemaRegistry:
    """Subjects, their versions and global ids, on a metadata store.

    A new subject takes the global default mode (stored, else `default_mode`) and the next
    global id. Writes raise the typed errors of `metaplane.schema` and write nothing when they
    do; reads go to the store, through `_read` and `_keys` (where a LocalCache will take over).
    """

    def __init__(
        self,
        store: MetadataStore,
        *,
        default_mode: CompatibilityMode = CompatibilityMode.BACKWARD,
        clock: Callable[[], int] = unix_seconds,
        created_by: str = "metaplane",
        attempts: int = DEFAULT_ATTEMPTS,
    ) -> None:
        self._store = store
        self._fallback_mode = parse_mode(default_mode)
        self._clock = clock
        self._created_by = created_by
        self._writes = WriteLoop(store, attempts)

    @property
    def conflicts(self) -> int:
        """Races lost to concurrent writers (and retried) since this registry was made."""
        return self._writes.conflicts

    # -- registration --------------------------------------------------------------------

    async def register(
        self,
        subject: str,
        schema_type: SchemaType | str,
        document: str | bytes,
        *,
        message_name: str | None = None,
        description: str = "",
        tags: Iterable[str] = (),
        created_by: str | None = None,
    ) -> Registration:
        """Register `document` under `subject`: a new subject, a new version, or the existing
        version when an identical one exists (nothing written).

        One transaction writes the version key (absent before), the metadata (unchanged since
        read), and for a new subject the id index (absent) and the id counter (unchanged).
        Raises InvalidSchema / UnknownSchemaType before any I/O, IncompatibleSchema when the
        subject's mode refuses it, RegistryConflict when concurrent writers always win.
        """
        schema = parse_schema(schema_type, document, message_name=message_name)
        draft = _Draft(schema, description, tuple(tags), created_by or self._created_by)
        keys = (
            layout.schema_metadata(subject),
            layout.next_schema_id(),
            layout.default_compatibility_mode(),
        )
        plan = partial(self._plan_registration, subject, draft)
        return await self._writes.run(f"register {subject}", keys, plan)

    def _plan_registration(
        self, subject: str, draft: _Draft, snapshot: Snapshot
    ) -> Decision[Registration]:
        metadata_key = layout.schema_metadata(subject)
        metadata = snapshot.value(metadata_key, SchemaMetadata)
        if metadata is None:
            return self._plan_new_subject(subject, draft, snapshot)
        existing = _identical_version(metadata, draft.schema)
        if existing is not None:
            revision = snapshot.mod_revision(metadata_key)
            return Done(Registration(subject, metadata.id, existing, False, revision))
        _require_compatible(metadata, draft.schema)
        number = _free_version(subject, metadata.latest_version, snapshot)
        now = self._clock()
        version = draft.version(number, now)
        updated = msgspec.structs.replace(
            metadata,
            latest_version=number,
            updated_at=now,
            versions=[*metadata.versions, version],
        )
        version_key = layout.schema_version(subject, number)
        return Commit(
            compares=[*snapshot.unchanged(metadata_key), Compare.absent(version_key)],
            operations=[Put(version_key, encode(version)), Put(metadata_key, encode(updated))],
            outcome=lambda revision: Registration(subject, metadata.id, version, True, revision),
            watch=[version_key],
            queue=metadata_key,
        )

    def _plan_new_subject(
        self, subject: str, draft: _Draft, snapshot: Snapshot
    ) -> Decision[Registration]:
        schema_id = _free_schema_id(snapshot)
        number = _free_version(subject, 0, snapshot)
        now = self._clock()
        version = draft.version(number, now)
        metadata = SchemaMetadata(
            compatibility_mode=self._stored_default_mode(snapshot),
            created_at=now,
            created_by=draft.created_by,
            id=schema_id,
            latest_version=number,
            subject=subject,
            topics_using=[],
            updated_at=now,
            versions=[version],
        )
        index = SchemaIdIndex(schema_id=schema_id, subject=subject)
        keys = _NewSubjectKeys(subject, number, schema_id)
        return Commit(
            compares=[
                Compare.absent(keys.metadata),
                Compare.absent(keys.version),
                Compare.absent(keys.index),
                *snapshot.unchanged(keys.counter, keys.default_mode),
            ],
            operations=[
                Put(keys.version, encode(version)),
                Put(keys.metadata, encode(metadata)),
                Put(keys.index, encode(index)),
                Put(keys.counter, encode(schema_id + 1)),
            ],
            outcome=lambda revision: Registration(subject, schema_id, version, True, revision),
            watch=[keys.version, keys.index],
            queue=keys.counter,
        )

    def _stored_default_mode(self, snapshot: Snapshot) -> CompatibilityMode:
        stored = snapshot.value(layout.default_compatibility_mode(), CompatibilityMode)
        return self._fallback_mode if stored is None else stored

    # -- compatibility -------------------------------------------------------------------

    async def check(
        self,
        subject: str,
        schema_type: SchemaType | str,
        document: str | bytes,
        *,
        mode: CompatibilityMode | str | None = None,
        message_name: str | None = None,
    ) -> CompatibilityResult:
        """Whether `document` could be registered under `subject` now, under the subject's
        mode or `mode`; writes nothing."""
        schema = parse_schema(schema_type, document, message_name=message_name)
        override = None if mode is None else parse_mode(mode)
        metadata = await self.describe(subject)
        chosen = metadata.compatibility_mode if override is None else override
        return check(schema, _previous(metadata, chosen), chosen)

    async def mode(self, subject: str) -> CompatibilityMode:
        """The subject's compatibility mode."""
        return (await self.describe(subject)).compatibility_mode

    async def set_mode(self, subject: str, mode: CompatibilityMode | str) -> int:
        """Set the subject's compatibility mode; returns the revision (of the last write
        when the mode was already that)."""
        chosen = parse_mode(mode)
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            metadata = _metadata(snapshot, subject)
            if metadata.compatibility_mode is chosen:
                return Done(snapshot.mod_revision(metadata_key))
            updated = msgspec.structs.replace(
                metadata, compatibility_mode=chosen, updated_at=self._clock()
            )
            return _rewrite(snapshot, metadata_key, updated)

        return await self._writes.run(f"set the mode of {subject}", [metadata_key], plan)

    async def default_mode(self) -> CompatibilityMode:
        """The mode new subjects start with: the stored global default, else the registry's."""
        key = layout.default_compatibility_mode()
        return self._stored_default_mode(await self._read(key))

    async def set_default_mode(self, mode: CompatibilityMode | str) -> int:
        """Set the global default mode (for subjects created from now on); returns the
        revision."""
        return await self._store.put(layout.default_compatibility_mode(), encode(parse_mode(mode)))

    # -- versions: deprecate, delete -----------------------------------------------------

    async def deprecate(
        self,
        subject: str,
        version: int,
        message: str | None = None,
        *,
        deprecated: bool = True,
    ) -> int:
        """Mark a version deprecated (or, with deprecated=False, no longer), in its key and in
        the metadata in one transaction; returns the revision."""
        metadata_key = layout.schema_metadata(subject)
        version_key = layout.schema_version(subject, version)

        def plan(snapshot: Snapshot) -> Decision[int]:
            metadata = _metadata(snapshot, subject)
            current = _version_in(metadata, version)
            marked = msgspec.structs.replace(
                current,
                is_deprecated=deprecated,
                deprecation_message=message if deprecated else None,
            )
            if marked == current:
                return Done(snapshot.mod_revision(metadata_key))
            versions = [marked if v.version == version else v for v in metadata.versions]
            updated = msgspec.structs.replace(metadata, versions=versions, updated_at=self._clock())
            return _rewrite(snapshot, metadata_key, updated, Put(version_key, encode(marked)))

        return await self._writes.run(f"deprecate {subject} v{version}", [metadata_key], plan)

    async def delete_version(self, subject: str, version: int) -> int:
        """Delete one version: its key goes and the metadata drops it, in one transaction.

        Its number is never given again. Deleting the last version deletes the subject
        (SubjectInUse while topics are bound to it). Returns the revision.
        """
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            metadata = _metadata(snapshot, subject)
            _version_in(metadata, version)
            if len(metadata.versions) == 1:
                return _subject_deletion(snapshot, metadata)
            versions = [v for v in metadata.versions if v.version != version]
            updated = msgspec.structs.replace(metadata, versions=versions, updated_at=self._clock())
            gone = Delete(layout.schema_version(subject, version))
            return _rewrite(snapshot, metadata_key, updated, gone)

        return await self._writes.run(f"delete {subject} v{version}", [metadata_key], plan)

    async def delete_subject(self, subject: str) -> int:
        """Delete a subject: metadata, every version and its id index, in one transaction.
        SubjectInUse while topics are bound to it. Returns the revision."""
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            return _subject_deletion(snapshot, _metadata(snapshot, subject))

        return await self._writes.run(f"delete {subject}", [metadata_key], plan)

    # -- topics --------------------------------------------------------------------------

    async def bind_topic(self, topic: TopicName, subject: str) -> int:
        """Bind `topic` to `subject`: the topic's `schema_subject` key and the subject's
        `topics_using` (and those of the subject it leaves) in one transaction.

        TopicNotFound if the topic does not exist. Returns the revision.
        """
        binding = layout.topic_schema_subject(topic)
        keys = [binding, layout.topic_root(topic), layout.schema_metadata(subject)]
        plan = partial(_plan_binding, topic, subject, self._clock)
        return await self._writes.run(f"bind {topic} to {subject}", keys, plan)

    async def unbind_topic(self, topic: TopicName) -> int:
        """Unbind `topic` from its subject, in the same way; TopicNotBound if it is not
        bound. Returns the revision."""
        plan = partial(_plan_unbinding, topic, self._clock)
        return await self._writes.run(f"unbind {topic}", [layout.topic_schema_subject(topic)], plan)

    async def topic_subject(self, topic: TopicName) -> str | None:
        """The subject `topic` is bound to, or None."""
        key = layout.topic_schema_subject(topic)
        return (await self._read(key)).value(key, str)

    # -- reads ---------------------------------------------------------------------------

    async def get(self, subject: str, version: int | None = None) -> SubjectVersion:
        """A version of `subject` (its latest when `version` is None), from its own key."""
        metadata_key = layout.schema_metadata(subject)
        if version is None:
            metadata = _metadata(await self._read(metadata_key), subject)
            if not metadata.versions:
                raise SchemaVersionNotFound(metadata_key, subject, metadata.latest_version)
            return SubjectVersion(subject, metadata.id, metadata.versions[-1])
        version_key = layout.schema_version(subject, version)
        snapshot = await self._read(metadata_key, version_key)
        metadata = _metadata(snapshot, subject)
        stored = snapshot.value(version_key, SchemaVersion)
        if stored is None:
            raise SchemaVersionNotFound(version_key, subject, version)
        return SubjectVersion(subject, metadata.id, stored)

    async def get_by_id(self, schema_id: int, version: int | None = None) -> SubjectVersion:
        """A version (the latest by default) of the subject that holds global id `schema_id`."""
        index_key = layout.schema_by_id(schema_id)
        index = (await self._read(index_key)).value(index_key, SchemaIdIndex)
        if index is None:
            raise SchemaIdNotFound(index_key, schema_id)
        try:
            found = await self.get(index.subject, version)
        except SubjectNotFound:
            raise SchemaIdNotFound(index_key, schema_id) from None
        if found.schema_id != schema_id:
            raise SchemaIdNotFound(index_key, schema_id)
        return found

    async def describe(self, subject: str) -> SchemaMetadata:
        """The subject's metadata: its id, mode, versions and the topics bound to it."""
        key = layout.schema_metadata(subject)
        return _metadata(await self._read(key), subject)

    async def versions(self, subject: str) -> list[SchemaVersion]:
        """The subject's versions, oldest first."""
        return (await self.describe(subject)).versions

    async def subjects(self) -> list[str]:
        """Every subject, sorted."""
        keys = await self._keys(layout.schemas_prefix())
        return sorted(
            parsed.subject
            for parsed in map(_parsed_key, keys)
            if parsed is not None and parsed.kind is KeyKind.SCHEMA_METADATA and parsed.subject
        )

    # The registry's reads go through these two, and only these two will read a LocalCache.

    async def _keys(self, prefix: str) -> list[str]:
        """The keys under `prefix`."""
        return (await self._store.list(prefix, keys_only=True)).keys()

    async def _read(self, *keys: str) -> Snapshot:
        """`keys` at one revision."""
        if len(keys) == 1:
            return Snapshot({keys[0]: await self._store.get(keys[0])})
        result = await self._store.txn((), [Get(key) for key in keys], ())
        return Snapshot.of(keys, result)


# Plans shared by several writes ------------------------------------------------------------


@dataclass(frozen=True)
class _NewSubjectKeys:
    """The keys a new subject's registration writes."""

    subject: str
    number: int
    schema_id: int

    @property
    def metadata(self) -> str:
        return layout.schema_metadata(self.subject)

    @property
    def version(self) -> str:
        return layout.schema_version(self.subject, self.number)

    @property
    def index(self) -> str:
        return layout.schema_by_id(self.schema_id)

    @property
    def counter(self) -> str:
        return layout.next_schema_id()

    @property
    def default_mode(self) -> str:
        return layout.default_compatibility_mode()


def _metadata(snapshot: Snapshot, subject: str) -> SchemaMetadata:
    key = layout.schema_metadata(subject)
    metadata = snapshot.value(key, SchemaMetadata)
    if metadata is None:
        raise SubjectNotFound(key, subject)
    return metadata


def _version_in(metadata: SchemaMetadata, number: int) -> SchemaVersion:
    for version in metadata.versions:
        if version.version == number:
            return version
    key = layout.schema_version(metadata.subject, number)
    raise SchemaVersionNotFound(key, metadata.subject, number)


def _identical_version(metadata: SchemaMetadata, schema: Schema) -> SchemaVersion | None:
    for version in metadata.versions:
        try:
            stored = schema_of(version.schema_def)
        except InvalidSchema:
            continue  # a version another writer stored unparsable is identical to nothing
        if identical(schema, stored):
            return version
    return None


def _require_compatible(metadata: SchemaMetadata, schema: Schema) -> None:
    mode = metadata.compatibility_mode
    result = check(schema, _previous(metadata, mode), mode)
    if not result.ok:
        raise IncompatibleSchema(metadata.subject, mode.value, result.reasons)


def _previous(metadata: SchemaMetadata, mode: CompatibilityMode) -> Mapping[int, Schema]:
    """The versions `mode` checks a new schema against, parsed: none, the latest, or all."""
    if mode is CompatibilityMode.NONE or not metadata.versions:
        return {}
    chosen = metadata.versions if mode.transitive else metadata.versions[-1:]
    return {version.version: _stored_schema(metadata.subject, version) for version in chosen}


def _stored_schema(subject: str, version: SchemaVersion) -> Schema:
    try:
        return schema_of(version.schema_def)
    except InvalidSchema as error:
        stored = f"version {version.version} of {subject!r} as stored: {error.reason}"
        raise InvalidSchema(error.schema_type, stored) from error


def _free_version(subject: str, latest: int, snapshot: Snapshot) -> int:
    """The number after `latest` whose key is not known to exist: a number is never given
    twice, even where a crashed non-atomic writer (Danube's) left a version key behind."""
    number = latest + 1
    while snapshot.exists(layout.schema_version(subject, number)):
        number += 1
    return number


def _free_schema_id(snapshot: Snapshot) -> int:
    """The counter's id, or the next one whose index is not known to exist (a counter that
    fell behind its index must not hand out an id twice)."""
    counter = snapshot.value(layout.next_schema_id(), int)
    schema_id = 1 if counter is None else counter
    while snapshot.exists(layout.schema_by_id(schema_id)):
        schema_id += 1
    return schema_id


def _rewrite(
    snapshot: Snapshot, metadata_key: str, metadata: SchemaMetadata, *also: Put | Delete
) -> Commit[int]:
    """Write the metadata back, and `also`, if it is unchanged since `snapshot`."""
    return Commit(
        compares=snapshot.unchanged(metadata_key),
        operations=[Put(metadata_key, encode(metadata)), *also],
        outcome=_revision,
    )


def _subject_deletion(snapshot: Snapshot, metadata: SchemaMetadata) -> Commit[int]:
    if metadata.topics_using:
        raise SubjectInUse(metadata.subject, metadata.topics_using)
    metadata_key = layout.schema_metadata(metadata.subject)
    return Commit(
        compares=snapshot.unchanged(metadata_key),
        operations=[
            DeletePrefix(layout.subject_prefix(metadata.subject)),
            Delete(layout.schema_by_id(metadata.id)),
        ],
        outcome=_revision,
    )


def _plan_binding(
    topic: TopicName, subject: str, clock: Callable[[], int], snapshot: Snapshot
) -> Decision[int]:
    root = _topic_root(snapshot, topic)
    metadata = _metadata(snapshot, subject)
    binding, metadata_key = layout.topic_schema_subject(topic), layout.schema_metadata(subject)
    previous = snapshot.value(binding, str)
    if previous == subject and topic.path in metadata.topics_using:
        return Done(max(snapshot.mod_revision(binding), snapshot.mod_revision(metadata_key)))
    left = _left_subject(previous, subject, snapshot)
    if isinstance(left, Read):
        return left
    now = clock()
    compares = [*snapshot.unchanged(binding, metadata_key), _same_topic(topic, root)]
    operations = [Put(binding, encode(subject)), _topics_put(metadata, {topic.path}, set(), now)]
    if left is not None:
        compares += snapshot.unchanged(layout.schema_metadata(left.subject))
        operations.append(_topics_put(left, set(), {topic.path}, now))
    return Commit(compares, operations, _revision)


def _plan_unbinding(
    topic: TopicName, clock: Callable[[], int], snapshot: Snapshot
) -> Decision[int]:
    binding = layout.topic_schema_subject(topic)
    subject = snapshot.value(binding, str)
    if subject is None:
        raise TopicNotBound(binding, topic.path)
    metadata_key = layout.schema_metadata(subject)
    if not snapshot.has_read(metadata_key):
        return Read([metadata_key])
    metadata = snapshot.value(metadata_key, SchemaMetadata)
    operations: list[Put | Delete] = [Delete(binding)]
    if metadata is not None:
        operations.append(_topics_put(metadata, set(), {topic.path}, clock()))
    return Commit(snapshot.unchanged(binding, metadata_key), operations, _revision)


def _topic_root(snapshot: Snapshot, topic: TopicName) -> Entry:
    root = snapshot.entry(layout.topic_root(topic))
    if root is None:
        raise TopicNotFound(layout.topic_root(topic), topic.path)
    return root


def _same_topic(topic: TopicName, root: Entry) -> Compare:
    """The topic still exists, and is not another topic of the same name created since."""
    return Compare.create_revision(layout.topic_root(topic), "==", root.create_revision)


def _left_subject(
    previous: str | None, subject: str, snapshot: Snapshot
) -> SchemaMetadata | Read | None:
    """The metadata of the subject a topic leaves for `subject`, once it has been read."""
    if previous is None or previous == subject:
        return None
    key = layout.schema_metadata(previous)
    if not snapshot.has_read(key):
        return Read([key])
    return snapshot.value(key, SchemaMetadata)


def _topics_put(metadata: SchemaMetadata, joining: set[str], leaving: set[str], now: int) -> Put:
    """The subject's metadata with topics joining and leaving its `topics_using`."""
    topics = sorted((set(metadata.topics_using) | joining) - leaving)
    updated = msgspec.structs.replace(metadata, topics_using=topics, updated_at=now)
    return Put(layout.schema_metadata(metadata.subject), encode(updated))


def _revision(revision: int) -> int:
    return revision


def _parsed_key(key: str) -> layout.ParsedKey | None:
    try:
        return layout.parse(key)
    except LayoutError:
        return None  # a key under /schemas that is no key of the layout names no subject
