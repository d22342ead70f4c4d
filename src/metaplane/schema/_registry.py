"""The schema registry on the store: subjects, versions and global ids in seed 001's keys,
every write one `resources.Change` (conditions with their typed errors, Hedwig's versioned
CAS) applied by the one runner, `resources.Writer`, retried when it loses a race, and every
write returning the store revision it committed at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial

import msgspec

from metaplane import layout
from metaplane.layout import KeyKind, LayoutError, TopicName
from metaplane.resources import (
    Change,
    ChangedSinceRead,
    CompatibilityMode,
    Condition,
    SchemaConfig,
    SchemaIdIndex,
    SchemaMetadata,
    SchemaReferencedBy,
    SchemaReferences,
    SchemaReferrer,
    SchemaVersion,
    Write,
    encode,
)
from metaplane.schema._compat import check
from metaplane.schema._definition import (
    definition_of,
    identical,
    identical_by_fingerprint,
    schema_of,
    type_of,
)
from metaplane.schema._errors import (
    IncompatibleSchema,
    InvalidSchema,
    ReferenceNotFound,
    SchemaIdNotFound,
    SchemaReferenced,
    SchemaVersionNotFound,
    SubjectInUse,
    SubjectNotFound,
    SubjectTooLarge,
    TopicAlreadyBound,
    TopicNotBound,
    TopicNotFound,
)
from metaplane.schema._json_node import Draft
from metaplane.schema._jsonschema import parse_draft
from metaplane.schema._model import (
    CompatibilityResult,
    Dependency,
    Schema,
    SchemaReference,
    SchemaType,
    parse_mode,
)
from metaplane.schema._parse import parse_schema
from metaplane.schema._references import (
    Dependencies,
    checked_references,
    describe,
    entries,
    stored_schema,
    version_field,
    with_referrer,
    without_referrers,
)
from metaplane.schema._transact import Commit, Decision, Done, Read, RegistryWrites, Snapshot
from metaplane.store import (
    MAX_VALUE_BYTES,
    BadVersion,
    Compare,
    Delete,
    DeletePrefix,
    Entry,
    Get,
    MetadataError,
    MetadataStore,
    Put,
)

MAX_WRITE_BYTES = 1_507_328
"""The most bytes one registry write may put: etcd refuses a request above 1.5 MiB (its
default `--max-request-bytes`), and a registration writes its version twice (its own key and
the metadata); 64 KiB are left for keys, compares and framing."""

DEFAULT_ATTEMPTS = 100
"""How many lost races in a row a write survives before it gives up with RegistryConflict:
with the backoff of `_transact`, some 12 to 24 seconds of losing to other processes."""


def unix_seconds() -> int:
    """Now, as the seed's timestamps count it."""
    return int(time.time())


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject as read: the subject, its global id, the stored version, the
    references it was registered with and (when they resolved) the schemas they name."""

    subject: str
    schema_id: int
    version: SchemaVersion
    references: tuple[SchemaReference, ...] = ()
    dependencies: tuple[Dependency, ...] | None = ()
    json_schema_draft: str | None = None

    @property
    def schema(self) -> Schema:
        """The version's document parsed again (cached), for checks and serialisation."""
        if self.dependencies is None:
            raise InvalidSchema(
                type_of(self.version.schema_def).value,
                f"version {self.version.version} of {self.subject!r} references a version "
                "that no longer resolves",
            )
        return stored_schema(self.subject, self.version, self.dependencies, self.json_schema_draft)


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
    references: tuple[SchemaReference, ...] = ()


@dataclass
class _Candidate:
    """A document on its way to becoming a version, with what its registrant said of it;
    parsed once for each set of resolved references and draft (a retry reuses it)."""

    schema_type: SchemaType
    document: str | bytes
    message_name: str | None
    references: tuple[SchemaReference, ...]
    description: str
    tags: tuple[str, ...]
    created_by: str
    parsed: dict[tuple[object, ...], Schema] = field(default_factory=dict)

    def schema(self, dependencies: tuple[Dependency, ...], draft: str | None) -> Schema:
        if self.schema_type is not SchemaType.JSON_SCHEMA:
            draft = None  # only JSON Schema reads it
        key = (dependencies, draft)
        found = self.parsed.get(key)
        if found is None:
            found = parse_schema(
                self.schema_type,
                self.document,
                message_name=self.message_name,
                references=dependencies,
                json_schema_draft=draft,
            )
            self.parsed[key] = found
        return found

    def parse_early(self) -> None:
        """Parse before any I/O where nothing read can change the result (no references; for
        JSON Schema, the default draft, which a subject's setting may yet replace): a bad
        document is refused at once, and the read-to-commit window holds no parse."""
        if self.references:
            return
        try:
            self.schema((), None)
        except InvalidSchema:
            if self.schema_type is not SchemaType.JSON_SCHEMA:
                raise

    def version(self, schema: Schema, number: int, now: int) -> SchemaVersion:
        # description and deprecation_message are always written: Danube's reader needs them.
        return SchemaVersion(
            created_at=now,
            created_by=self.created_by,
            version=number,
            fingerprint=schema.fingerprint,
            is_deprecated=False,
            schema_def=definition_of(schema),
            tags=list(self.tags),
            description=self.description,
            deprecation_message=None,
        )


class SchemaRegistry:
    """Subjects, their versions and global ids, on a metadata store.

    A new subject takes the global default mode (stored, else `default_mode`), the global
    JSON Schema draft setting if one is stored, and the next global id. Writes raise the
    typed errors of `metaplane.schema` and write nothing when they do; reads go to the store,
    through `_read`, `_keys` and read-only plans (where a LocalCache will take over).
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
        self._writes = RegistryWrites(store, attempts)

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
        references: Iterable[SchemaReference | str | tuple[str, str, int]] = (),
    ) -> Registration:
        """Register `document` under `subject`: a new subject, a new version, or the existing
        version when an identical one exists (nothing written).

        `references` name other subjects' versions the document uses (Protobuf imports, JSON
        Schema `$ref`s to other documents, Avro named types): SchemaReference or
        `NAME=SUBJECT:VERSION`. One transaction writes the version key (absent before), the
        metadata (unchanged since read), for a new subject the id index (absent) and the id
        counter (unchanged), and for references the subject's `references` and each referenced
        subject's `referenced_by` (unchanged, the referenced versions still there). Raises
        UnknownSchemaType, InvalidName, InvalidReference before any I/O; InvalidSchema,
        ReferenceNotFound, IncompatibleSchema, SubjectTooLarge before any write;
        RegistryConflict when concurrent writers always win.
        """
        kind = SchemaType.parse(schema_type)
        metadata_key = layout.schema_metadata(subject)
        candidate = _Candidate(
            kind,
            document,
            message_name,
            checked_references(subject, references),
            description,
            tuple(tags),
            created_by or self._created_by,
        )
        candidate.parse_early()
        read = (
            metadata_key,
            layout.next_schema_id(),
            layout.default_compatibility_mode(),
            layout.default_schema_config(),
            layout.schema_config(subject),
            layout.schema_references(subject),
        )
        plan = partial(self._plan_registration, subject, candidate)
        return await self._writes.run(f"register {subject}", read, plan)

    def _plan_registration(
        self, subject: str, candidate: _Candidate, snapshot: Snapshot
    ) -> Decision[Registration]:
        metadata_key = layout.schema_metadata(subject)
        metadata = snapshot.value(metadata_key, SchemaMetadata)
        draft = _subject_draft(snapshot, subject, new=metadata is None)
        reading = Dependencies(snapshot)
        resolved = reading.resolve(candidate.references)
        previous = (
            None
            if metadata is None
            else _previous(metadata, metadata.compatibility_mode, reading, draft)
        )
        if reading.missing:
            return Read(sorted(reading.missing))
        assert resolved is not None
        schema = candidate.schema(resolved, draft)
        if metadata is None:
            return self._plan_new_subject(subject, candidate, schema, snapshot)
        existing = _identical_version(metadata, schema, reading, draft)
        if existing is not None:
            revision = snapshot.mod_revision(metadata_key)
            return Done(
                Registration(subject, metadata.id, existing, False, revision, schema.references)
            )
        assert previous is not None
        _require_compatible(metadata, schema, previous)
        number = _free_version(subject, metadata.latest_version, snapshot)
        now = self._clock()
        version = candidate.version(schema, number, now)
        updated = msgspec.structs.replace(
            metadata,
            latest_version=number,
            updated_at=now,
            versions=[*metadata.versions, version],
        )
        version_key = layout.schema_version(subject, number)
        linked = _reference_writes(subject, number, schema, snapshot)
        if isinstance(linked, Read):
            return linked
        conditions, operations = linked
        return Commit(
            _change(
                [
                    *snapshot.unchanged(metadata_key, layout.schema_config(subject), version_key),
                    *conditions,
                ],
                _fitting(
                    updated,
                    [
                        _version_put(subject, version_key, version),
                        _metadata_put(updated),
                        *operations,
                    ],
                ),
            ),
            outcome=lambda revision: Registration(
                subject, metadata.id, version, True, revision, schema.references
            ),
            queue=metadata_key,
        )

    def _plan_new_subject(
        self, subject: str, candidate: _Candidate, schema: Schema, snapshot: Snapshot
    ) -> Decision[Registration]:
        schema_id = _free_schema_id(snapshot)
        number = _free_version(subject, 0, snapshot)
        now = self._clock()
        version = candidate.version(schema, number, now)
        metadata = SchemaMetadata(
            compatibility_mode=self._stored_default_mode(snapshot),
            created_at=now,
            created_by=candidate.created_by,
            id=schema_id,
            latest_version=number,
            subject=subject,
            topics_using=[],
            updated_at=now,
            versions=[version],
        )
        index = SchemaIdIndex(schema_id=schema_id, subject=subject)
        new = _NewSubjectKeys(subject, number, schema_id)
        linked = _reference_writes(subject, number, schema, snapshot)
        if isinstance(linked, Read):
            return linked
        conditions, operations = linked
        # Each key is compared as read, or absent when it was not read: the metadata, the
        # version and the index were chosen absent.
        unchanged = snapshot.unchanged(
            new.metadata,
            new.version,
            new.index,
            new.counter,
            new.default_mode,
            layout.default_schema_config(),
            layout.schema_config(subject),
        )
        return Commit(
            _change(
                [*unchanged, *conditions],
                _fitting(
                    metadata,
                    [
                        _version_put(subject, new.version, version),
                        _metadata_put(metadata),
                        Put(new.index, encode(index)),
                        Put(new.counter, encode(schema_id + 1)),
                        *_inherited_config(subject, snapshot),
                        *operations,
                    ],
                ),
            ),
            outcome=lambda revision: Registration(
                subject, schema_id, version, True, revision, schema.references
            ),
            queue=new.counter,
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
        references: Iterable[SchemaReference | str | tuple[str, str, int]] = (),
    ) -> CompatibilityResult:
        """Whether `document` could be registered under `subject` now, under the subject's
        mode or `mode`; writes nothing."""
        kind = SchemaType.parse(schema_type)
        override = None if mode is None else parse_mode(mode)
        candidate = _Candidate(
            kind, document, message_name, checked_references(subject, references), "", (), ""
        )
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[CompatibilityResult]:
            metadata = _metadata(snapshot, subject)
            chosen = metadata.compatibility_mode if override is None else override
            draft = _subject_draft(snapshot, subject, new=False)
            reading = Dependencies(snapshot)
            resolved = reading.resolve(candidate.references)
            previous = _previous(metadata, chosen, reading, draft)
            if reading.missing:
                return Read(sorted(reading.missing))
            assert resolved is not None and previous is not None
            return Done(check(candidate.schema(resolved, draft), previous, chosen))

        read = [metadata_key, layout.schema_config(subject), layout.schema_references(subject)]
        return await self._writes.view(f"check against {subject}", read, plan)

    async def mode(self, subject: str) -> CompatibilityMode:
        """The subject's compatibility mode."""
        return (await self.describe(subject)).compatibility_mode

    async def set_mode(
        self, subject: str, mode: CompatibilityMode | str, *, expect: int | None = None
    ) -> int:
        """Set the subject's compatibility mode; returns the revision (of the last write
        when the mode was already that). With `expect`, only while the subject's metadata is
        at that version (its `version`, the API's ETag), compared in the same transaction:
        BadVersion otherwise, nothing written."""
        chosen = parse_mode(mode)
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            metadata = _metadata(snapshot, subject)
            entry = snapshot.entry(metadata_key)
            assert entry is not None
            if expect is not None and entry.version != expect:
                raise BadVersion(metadata_key, expect, entry.version)
            if metadata.compatibility_mode is chosen:
                return Done(entry.mod_revision)
            updated = msgspec.structs.replace(
                metadata, compatibility_mode=chosen, updated_at=self._clock()
            )
            guard = () if expect is None else (_at_version(metadata_key, expect, subject),)
            return _rewrite(snapshot, metadata_key, updated, guard=guard)

        return await self._writes.run(f"set the mode of {subject}", [metadata_key], plan)

    async def default_mode(self) -> CompatibilityMode:
        """The mode new subjects start with: the stored global default, else the registry's."""
        key = layout.default_compatibility_mode()
        return self._stored_default_mode(await self._read(key))

    async def set_default_mode(self, mode: CompatibilityMode | str) -> int:
        """Set the global default mode (for subjects created from now on); returns the
        revision."""
        put = Put(layout.default_compatibility_mode(), encode(parse_mode(mode)))
        return await self._writes.writer.apply(Change((), (put,)))

    # -- the JSON Schema draft of undeclared documents -----------------------------------

    async def json_schema_draft(self, subject: str | None = None) -> str:
        """The draft a JSON Schema document without `$schema` is read as: in `subject` (its
        setting; for a subject not created yet, the global one), or in subjects created from
        now on (None)."""
        config_key = (
            layout.default_schema_config() if subject is None else layout.schema_config(subject)
        )
        read = [config_key, layout.default_schema_config()]
        if subject is not None:
            read.append(layout.schema_metadata(subject))
        snapshot = await self._read(*dict.fromkeys(read))
        if subject is None:
            found = _config_draft(snapshot, layout.default_schema_config())
        else:
            exists = snapshot.exists(layout.schema_metadata(subject))
            found = _subject_draft(snapshot, subject, new=not exists)
        return _draft_of(found).label

    async def set_json_schema_draft(self, draft: str, subject: str | None = None) -> int:
        """Read undeclared JSON Schema documents of `subject` as `draft` (`draft-07`,
        `2020-12`, …), or, with no subject, those of subjects created from now on. A subject's
        existing versions are read again under the new draft: one that would not parse is
        refused (InvalidSchema names it) and nothing is written. Returns the revision."""
        chosen = _draft_of(draft).label
        if subject is None:
            return await self._set_global_draft(chosen)
        config_key = layout.schema_config(subject)
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            if _config_draft(snapshot, config_key) == chosen:
                return Done(snapshot.mod_revision(config_key))
            metadata = snapshot.value(metadata_key, SchemaMetadata)
            if metadata is not None:
                reading = Dependencies(snapshot)
                _previous(metadata, CompatibilityMode.FULL_TRANSITIVE, reading, chosen)
                if reading.missing:
                    return Read(sorted(reading.missing))
            config = _with_draft(snapshot.value(config_key, SchemaConfig), chosen)
            return Commit(
                _change(
                    snapshot.unchanged(config_key, metadata_key, layout.schema_references(subject)),
                    [Put(config_key, encode(config))],
                ),
                _revision,
            )

        read = [config_key, metadata_key, layout.schema_references(subject)]
        return await self._writes.run(f"set the JSON Schema draft of {subject}", read, plan)

    async def _set_global_draft(self, chosen: str) -> int:
        key = layout.default_schema_config()

        def plan(snapshot: Snapshot) -> Decision[int]:
            if _config_draft(snapshot, key) == chosen:
                return Done(snapshot.mod_revision(key))
            config = _with_draft(snapshot.value(key, SchemaConfig), chosen)
            return Commit(_change(snapshot.unchanged(key), [Put(key, encode(config))]), _revision)

        return await self._writes.run("set the global JSON Schema draft", [key], plan)

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
        (SubjectInUse while topics are bound to it). A version other versions reference
        cannot be deleted (SchemaReferenced); the versions this one referenced no longer
        list it among their referrers. Returns the revision.
        """
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            metadata = _metadata(snapshot, subject)
            _version_in(metadata, version)
            if len(metadata.versions) == 1:
                return _subject_deletion(snapshot, metadata)
            _require_unreferenced(snapshot, subject, [version])
            released = _released_references(snapshot, subject, [version])
            if isinstance(released, Read):
                return released
            conditions, operations = released
            versions = [v for v in metadata.versions if v.version != version]
            updated = msgspec.structs.replace(metadata, versions=versions, updated_at=self._clock())
            return Commit(
                _change(
                    [
                        *snapshot.unchanged(metadata_key, layout.schema_referenced_by(subject)),
                        *conditions,
                    ],
                    [
                        _metadata_put(updated),
                        Delete(layout.schema_version(subject, version)),
                        *operations,
                    ],
                ),
                _revision,
            )

        read = [
            metadata_key,
            layout.schema_references(subject),
            layout.schema_referenced_by(subject),
        ]
        return await self._writes.run(f"delete {subject} v{version}", read, plan)

    async def delete_subject(self, subject: str) -> int:
        """Delete a subject: metadata, every version, its references and settings, and its
        id index, in one transaction. SubjectInUse while topics are bound to it,
        SchemaReferenced while other subjects' versions reference one of its versions.
        Returns the revision."""
        metadata_key = layout.schema_metadata(subject)

        def plan(snapshot: Snapshot) -> Decision[int]:
            return _subject_deletion(snapshot, _metadata(snapshot, subject))

        read = [
            metadata_key,
            layout.schema_references(subject),
            layout.schema_referenced_by(subject),
        ]
        return await self._writes.run(f"delete {subject}", read, plan)

    # -- topics --------------------------------------------------------------------------

    async def bind_topic(self, topic: TopicName, subject: str, *, replace: bool = False) -> int:
        """Bind `topic` to `subject`: the topic's `schema_subject` key and the subject's
        `topics_using` (and those of the subject it leaves) in one transaction.

        A topic bound to another subject stays there (TopicAlreadyBound) unless `replace`:
        a binding is never moved silently. TopicNotFound if the topic does not exist,
        SubjectNotFound if the subject does not. Returns the revision.
        """
        binding = layout.topic_schema_subject(topic)
        read = [binding, layout.topic_root(topic), layout.schema_metadata(subject)]
        plan = partial(_plan_binding, topic, subject, replace, self._clock)
        return await self._writes.run(f"bind {topic} to {subject}", read, plan)

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
        """A version of `subject` (its latest when `version` is None), from its own key, with
        its references and the schemas they resolve to."""
        metadata_key = layout.schema_metadata(subject)
        version_key = None if version is None else layout.schema_version(subject, version)

        def plan(snapshot: Snapshot) -> Decision[SubjectVersion]:
            metadata = _metadata(snapshot, subject)
            stored = _chosen_version(snapshot, metadata, version_key, version)
            reading = Dependencies(snapshot)
            draft = _subject_draft(snapshot, subject, new=False)
            references = reading.references_of(subject, stored.version) or ()
            try:
                dependencies = reading.resolve(references)
            except (ReferenceNotFound, InvalidSchema):
                dependencies = None
            if reading.missing:
                return Read(sorted(reading.missing))
            found = SubjectVersion(subject, metadata.id, stored, references, dependencies, draft)
            return Done(found)

        read = [metadata_key, layout.schema_config(subject), layout.schema_references(subject)]
        if version_key is not None:
            read.append(version_key)
        return await self._writes.view(f"read {subject}", read, plan)

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

    async def references(self, subject: str, version: int) -> tuple[SchemaReference, ...]:
        """The references version `version` of `subject` was registered with."""
        found = await self.get(subject, version)
        return found.references

    async def referenced_by(self, subject: str, version: int) -> list[tuple[str, int]]:
        """The (subject, version) pairs whose versions reference this version directly."""
        key = layout.schema_referenced_by(subject)
        found = (await self._read(key)).value(key, SchemaReferencedBy) or {}
        return [(r.subject, r.version) for r in found.get(version_field(version), [])]

    async def describe(self, subject: str) -> SchemaMetadata:
        """The subject's metadata: its id, mode, versions and the topics bound to it."""
        key = layout.schema_metadata(subject)
        return _metadata(await self._read(key), subject)

    async def versions(self, subject: str) -> list[SchemaVersion]:
        """The subject's versions, oldest first."""
        return (await self.describe(subject)).versions

    async def subjects(self) -> list[str]:
        """Every subject, sorted."""
        found = await self._keys(layout.schemas_prefix())
        return sorted(
            parsed.subject
            for parsed in map(_parsed_key, found)
            if parsed is not None and parsed.kind is KeyKind.SCHEMA_METADATA and parsed.subject
        )

    # The registry's reads go through these two, and only these two will read a LocalCache.

    async def _keys(self, prefix: str) -> list[str]:
        """The keys under `prefix`."""
        return (await self._store.list(prefix, keys_only=True)).keys()

    async def _read(self, *wanted: str) -> Snapshot:
        """`wanted` at one revision."""
        if len(wanted) == 1:
            return Snapshot({wanted[0]: await self._store.get(wanted[0])})
        result = await self._store.txn((), [Get(key) for key in wanted], ())
        return Snapshot.of(wanted, result)


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


def _chosen_version(
    snapshot: Snapshot, metadata: SchemaMetadata, version_key: str | None, number: int | None
) -> SchemaVersion:
    if version_key is None or number is None:
        if not metadata.versions:
            key = layout.schema_metadata(metadata.subject)
            raise SchemaVersionNotFound(key, metadata.subject, metadata.latest_version)
        return metadata.versions[-1]
    stored = snapshot.value(version_key, SchemaVersion)
    if stored is None:
        raise SchemaVersionNotFound(version_key, metadata.subject, number)
    return stored


def _identical_version(
    metadata: SchemaMetadata, schema: Schema, reading: Dependencies, draft: str | None
) -> SchemaVersion | None:
    for version in metadata.versions:
        if reading.references_of(metadata.subject, version.version) or schema.references:
            # Versions with references were fingerprinted by this registry, references included.
            if identical_by_fingerprint(schema, version.schema_def, version.fingerprint):
                return version
            continue
        try:
            stored = schema_of(version.schema_def, (), draft)
        except InvalidSchema:
            continue  # a version another writer stored unparsable is identical to nothing
        if identical(schema, stored):
            return version
    return None


def _require_compatible(
    metadata: SchemaMetadata, schema: Schema, previous: Mapping[int, Schema]
) -> None:
    mode = metadata.compatibility_mode
    result = check(schema, previous, mode)
    if not result.ok:
        raise IncompatibleSchema(metadata.subject, mode.value, result.reasons)


def _previous(
    metadata: SchemaMetadata, mode: CompatibilityMode, reading: Dependencies, draft: str | None
) -> dict[int, Schema] | None:
    """The versions `mode` checks a new schema against, parsed with their references: none,
    the latest, or all; None while the snapshot lacks keys their references need."""
    if mode is CompatibilityMode.NONE or not metadata.versions:
        return {}
    chosen = metadata.versions if mode.transitive else metadata.versions[-1:]
    parsed: dict[int, Schema] = {}
    for version in chosen:
        references = reading.references_of(metadata.subject, version.version)
        dependencies = () if not references else reading.resolve(references)
        if references is None or dependencies is None:
            continue
        parsed[version.version] = stored_schema(metadata.subject, version, dependencies, draft)
    return None if reading.missing else parsed


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


def _metadata_put(metadata: SchemaMetadata) -> Put:
    """The metadata's write, refused with SubjectTooLarge (naming the subject, the limit and
    what to do) when seed 001's one value could no longer hold the subject's history."""
    key = layout.schema_metadata(metadata.subject)
    value = encode(metadata)
    if len(value) > MAX_VALUE_BYTES:
        raise SubjectTooLarge(
            metadata.subject, key, len(value), MAX_VALUE_BYTES, len(metadata.versions)
        )
    return Put(key, value)


def _fitting(metadata: SchemaMetadata, operations: list[Put | Delete]) -> list[Put | Delete]:
    """`operations`, if one request can carry them; else SubjectTooLarge."""
    size = sum(len(op.value) for op in operations if isinstance(op, Put))
    if size > MAX_WRITE_BYTES:
        key = layout.schema_metadata(metadata.subject)
        what = "its new version and its metadata would be written in"
        versions = len(metadata.versions)
        raise SubjectTooLarge(metadata.subject, key, size, MAX_WRITE_BYTES, versions, what)
    return operations


def _version_put(subject: str, key: str, version: SchemaVersion) -> Put:
    value = encode(version)
    if len(value) > MAX_VALUE_BYTES:
        raise SubjectTooLarge(subject, key, len(value), MAX_VALUE_BYTES, 1)
    return Put(key, value)


def _rewrite(
    snapshot: Snapshot,
    metadata_key: str,
    metadata: SchemaMetadata,
    *also: Put | Delete,
    guard: Iterable[Condition] = (),
) -> Commit[int]:
    """Write the metadata back, and `also`, if it is unchanged since `snapshot` (and `guard`
    holds, checked first)."""
    conditions = [*guard, *snapshot.unchanged(metadata_key)]
    return Commit(
        _change(conditions, _fitting(metadata, [_metadata_put(metadata), *also])), _revision
    )


def _at_version(metadata_key: str, expect: int, subject: str) -> Condition:
    """The subject's metadata is at version `expect`: else BadVersion, or SubjectNotFound."""

    def refusal(entry: Entry | None) -> MetadataError:
        if entry is None:
            return SubjectNotFound(metadata_key, subject)
        return BadVersion(metadata_key, expect, entry.version)

    return Condition(Compare.version(metadata_key, "==", expect), refusal)


def _change(conditions: Iterable[Condition], operations: Iterable[Write]) -> Change:
    return Change(tuple(conditions), tuple(operations))


def _subject_deletion(snapshot: Snapshot, metadata: SchemaMetadata) -> Decision[int]:
    if metadata.topics_using:
        raise SubjectInUse(metadata.subject, metadata.topics_using)
    subject = metadata.subject
    _require_unreferenced(snapshot, subject, [v.version for v in metadata.versions])
    released = _released_references(snapshot, subject, None)
    if isinstance(released, Read):
        return released
    conditions, operations = released
    metadata_key = layout.schema_metadata(subject)
    return Commit(
        _change(
            [*snapshot.unchanged(metadata_key, layout.schema_referenced_by(subject)), *conditions],
            [
                DeletePrefix(layout.subject_prefix(subject)),
                Delete(layout.schema_by_id(metadata.id)),
                *operations,
            ],
        ),
        _revision,
    )


# References ---------------------------------------------------------------------------------


def _require_unreferenced(snapshot: Snapshot, subject: str, versions: Iterable[int]) -> None:
    found = snapshot.value(layout.schema_referenced_by(subject), SchemaReferencedBy) or {}
    for version in versions:
        referrers = found.get(str(version), [])
        if referrers:
            raise SchemaReferenced(subject, version, describe(referrers))


def _reference_writes(
    subject: str, number: int, schema: Schema, snapshot: Snapshot
) -> tuple[list[Condition], list[Put]] | Read:
    """For a new version with references: its entry in the subject's `references`, itself
    in each referenced subject's `referenced_by`, and the conditions that the referenced
    versions are still there (else ReferenceNotFound) and no one changed those keys
    meanwhile."""
    references_key = layout.schema_references(subject)
    conditions = snapshot.unchanged(references_key)
    if not schema.references:
        return conditions, []
    targets = sorted({reference.subject for reference in schema.references})
    missing = [
        layout.schema_referenced_by(t)
        for t in targets
        if not snapshot.has_read(layout.schema_referenced_by(t))
    ]
    if missing:
        return Read(missing)
    listed: SchemaReferences = dict(snapshot.value(references_key, SchemaReferences) or {})
    listed[version_field(number)] = entries(schema.references)
    operations = [Put(references_key, encode(listed))]
    referrer = SchemaReferrer(subject=subject, version=number)
    for target in targets:
        key = layout.schema_referenced_by(target)
        found: SchemaReferencedBy | None = snapshot.value(key, SchemaReferencedBy)
        for reference in schema.references:
            if reference.subject == target:
                found = with_referrer(found, reference.version, referrer)
        operations.append(Put(key, encode(found)))
        conditions += snapshot.unchanged(key)
    for reference in schema.references:
        version_key = layout.schema_version(reference.subject, reference.version)
        entry = snapshot.entry(version_key)
        if entry is None:
            raise ReferenceNotFound(version_key, reference)
        conditions.append(_still_there(entry, partial(ReferenceNotFound, version_key, reference)))
    return conditions, operations


def _released_references(
    snapshot: Snapshot, subject: str, versions: Iterable[int] | None
) -> tuple[list[Condition], list[Put | Delete]] | Read:
    """For versions being deleted (None: all): their entries gone from the subject's
    `references` and from the `referenced_by` of every subject they referenced."""
    references_key = layout.schema_references(subject)
    listed: SchemaReferences = dict(snapshot.value(references_key, SchemaReferences) or {})
    chosen = list(listed) if versions is None else [str(v) for v in versions]
    gone = [(int(number), entry) for number in chosen for entry in listed.get(number, [])]
    conditions = snapshot.unchanged(references_key)
    if not gone:
        return conditions, []
    targets = sorted({entry.subject for _, entry in gone})
    missing = [
        layout.schema_referenced_by(t)
        for t in targets
        if not snapshot.has_read(layout.schema_referenced_by(t))
    ]
    if missing:
        return Read(missing)
    operations: list[Put | Delete] = []
    for field_name in chosen:
        listed.pop(field_name, None)
    if versions is not None:
        operations.append(Put(references_key, encode(listed)) if listed else Delete(references_key))
    for target in targets:
        key = layout.schema_referenced_by(target)
        found = snapshot.value(key, SchemaReferencedBy)
        for referrer_version, entry in gone:
            if entry.subject == target:
                found = without_referrers(found, subject, referrer_version)
        operations.append(Put(key, encode(found)) if found else Delete(key))
        conditions += snapshot.unchanged(key)
    return conditions, operations


# Settings -------------------------------------------------------------------------------------


def _config_draft(snapshot: Snapshot, key: str) -> str | None:
    config = snapshot.value(key, SchemaConfig)
    return None if config is None else config.json_schema_draft


def _subject_draft(snapshot: Snapshot, subject: str, *, new: bool) -> str | None:
    """The draft a subject reads undeclared documents as: its own setting; for a subject
    being created, the global one; else None (the registry's default, draft-07)."""
    found = _config_draft(snapshot, layout.schema_config(subject))
    if found is None and new:
        found = _config_draft(snapshot, layout.default_schema_config())
    return found


def _inherited_config(subject: str, snapshot: Snapshot) -> list[Put]:
    """A new subject keeps the global draft it was created under, whatever comes later."""
    subject_key = layout.schema_config(subject)
    inherited = _config_draft(snapshot, layout.default_schema_config())
    if inherited is None or _config_draft(snapshot, subject_key) is not None:
        return []
    config = _with_draft(snapshot.value(subject_key, SchemaConfig), inherited)
    return [Put(subject_key, encode(config))]


def _with_draft(config: SchemaConfig | None, draft: str) -> SchemaConfig:
    current = config or SchemaConfig()
    return msgspec.structs.replace(current, json_schema_draft=draft)


def _draft_of(name: str | None) -> Draft:
    return parse_draft(name)


# Topics ---------------------------------------------------------------------------------------


def _plan_binding(
    topic: TopicName, subject: str, replace: bool, clock: Callable[[], int], snapshot: Snapshot
) -> Decision[int]:
    root = _topic_root(snapshot, topic)
    metadata = _metadata(snapshot, subject)
    binding, metadata_key = layout.topic_schema_subject(topic), layout.schema_metadata(subject)
    previous = snapshot.value(binding, str)
    if previous == subject and topic.path in metadata.topics_using:
        return Done(max(snapshot.mod_revision(binding), snapshot.mod_revision(metadata_key)))
    if previous is not None and previous != subject and not replace:
        raise TopicAlreadyBound(binding, topic.path, previous, subject)
    left = _left_subject(previous, subject, snapshot)
    if isinstance(left, Read):
        return left
    now = clock()
    conditions = [*snapshot.unchanged(binding, metadata_key), _same_topic(topic, root)]
    operations = [Put(binding, encode(subject)), _topics_put(metadata, {topic.path}, set(), now)]
    if left is not None:
        conditions += snapshot.unchanged(layout.schema_metadata(left.subject))
        operations.append(_topics_put(left, set(), {topic.path}, now))
    return Commit(_change(conditions, operations), _revision)


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
    return Commit(_change(snapshot.unchanged(binding, metadata_key), operations), _revision)


def _topic_root(snapshot: Snapshot, topic: TopicName) -> Entry:
    root = snapshot.entry(layout.topic_root(topic))
    if root is None:
        raise TopicNotFound(layout.topic_root(topic), topic.path)
    return root


def _same_topic(topic: TopicName, root: Entry) -> Condition:
    """The topic still exists (else TopicNotFound), and is not another topic of the same name
    created since (a lost race: the binding is decided again)."""
    key = layout.topic_root(topic)
    return _still_there(root, partial(TopicNotFound, key, topic.path))


def _still_there(read: Entry, gone: Callable[[], MetadataError]) -> Condition:
    """The key read as `read` is still the one created then: else `gone()` when it no longer
    exists, or ChangedSinceRead when it was deleted and created again."""

    def refusal(now: Entry | None) -> MetadataError:
        if now is None:
            return gone()
        return ChangedSinceRead(read.key, read.mod_revision, now.mod_revision)

    return Condition(Compare.create_revision(read.key, "==", read.create_revision), refusal)


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
    return _metadata_put(updated)


def _revision(revision: int) -> int:
    return revision


def _parsed_key(key: str) -> layout.ParsedKey | None:
    try:
        return layout.parse(key)
    except LayoutError:
        return None  # a key under /schemas that is no key of the layout names no subject
