"""`metaplane schemas …`: the schema registry for operators — register, read, check and evolve
subjects, set compatibility modes, deprecate and delete versions, bind topics to subjects.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from metaplane.admin._console import (
    DEFAULT_STORE,
    Output,
    OutputFormat,
    StoreURL,
    console,
    fail,
    print_json,
    run,
)
from metaplane.layout import TopicName
from metaplane.resources import (
    Avro,
    JsonSchema,
    PrimitiveSchema,
    Protobuf,
    SchemaDefinition,
    SchemaMetadata,
    SchemaVersion,
    encode,
)
from metaplane.schema import (
    CompatibilityResult,
    Registration,
    SchemaRegistry,
    SchemaType,
    SubjectVersion,
)
from metaplane.store import MetadataError, open_store

app = typer.Typer(
    name="schemas",
    help="The schema registry: subjects, versions, compatibility modes, topic bindings.",
    no_args_is_help=True,
)

Subject = Annotated[str, typer.Argument(help="The subject, e.g. orders-value.")]
Document = Annotated[
    str, typer.Argument(help="The schema document: a file, or - for stdin (not for scalars).")
]
TypeName = Annotated[
    str,
    typer.Option(
        "--type", "-t", help="Avro, JsonSchema, Protobuf, Bytes, String or Number (or an alias)."
    ),
]
MessageName = Annotated[
    str | None,
    typer.Option("--message-name", help="The Protobuf message the schema describes."),
]
VersionOption = Annotated[int | None, typer.Option("--version", "-v", help="A version number.")]
References = Annotated[
    list[str] | None,
    typer.Option(
        "--reference",
        "-r",
        help="A schema it references, NAME=SUBJECT:VERSION (repeatable); NAME is the import "
        "path, the $ref URI or the Avro type name the document uses.",
    ),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


@contextlib.asynccontextmanager
async def open_registry(url: str) -> AsyncIterator[SchemaRegistry]:
    async with open_store(url) as store:
        yield SchemaRegistry(store)


def read_document(path: str, schema_type: str) -> str:
    """The document at `path` ("-": stdin); scalar types have none."""
    if SchemaType.parse(schema_type) in (SchemaType.BYTES, SchemaType.STRING, SchemaType.NUMBER):
        return ""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        fail(f"cannot read {path}: {error}")


def topic_name(text: str) -> TopicName:
    """A topic from "/namespace/topic" or "namespace/topic"."""
    return TopicName.parse("/" + text.removeprefix("/"))


def stored_json(value: object) -> Any:
    """A stored value as the JSON the store holds."""
    return json.loads(encode(value))


def type_name(definition: SchemaDefinition) -> str:
    if isinstance(definition, PrimitiveSchema):
        return str(definition.value)
    if isinstance(definition, Avro):
        return SchemaType.AVRO.value
    if isinstance(definition, JsonSchema):
        return SchemaType.JSON_SCHEMA.value
    return SchemaType.PROTOBUF.value


def document_of(definition: SchemaDefinition) -> str:
    if isinstance(definition, Avro | JsonSchema):
        return definition.schema.raw_schema
    if isinstance(definition, Protobuf):
        return definition.schema.raw_proto
    return ""


def timestamp(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


# register -----------------------------------------------------------------------------------


@app.command()
def register(
    subject: Subject,
    document: Document = "-",
    schema_type: TypeName = "Avro",
    message_name: MessageName = None,
    description: Annotated[str, typer.Option(help="What this version is for.")] = "",
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    reference: References = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Register a schema: a new version, or the existing one if it is identical."""

    async def go() -> None:
        text = read_document(document, schema_type)
        async with open_registry(store) as registry:
            try:
                registration = await registry.register(
                    subject,
                    schema_type,
                    text,
                    message_name=message_name,
                    description=description,
                    tags=tag or (),
                    references=reference or (),
                )
            except MetadataError as error:
                fail(escape(str(error)))  # its [rule] tags are text, not console markup
        show_registration(registration, output)

    run(go())


def show_registration(registration: Registration, output: Output) -> None:
    version = registration.version
    if output is Output.JSON:
        print_json(
            {
                "subject": registration.subject,
                "schema_id": registration.schema_id,
                "version": version.version,
                "fingerprint": version.fingerprint,
                "created": registration.created,
                "revision": registration.revision,
            }
        )
    elif registration.created:
        console.print(
            f"registered {registration.subject} version {version.version} "
            f"(schema id {registration.schema_id}) at revision {registration.revision}"
        )
    else:
        console.print(
            f"identical to {registration.subject} version {version.version} "
            f"(schema id {registration.schema_id}): nothing written"
        )


# get, list, versions ------------------------------------------------------------------------


@app.command()
def get(
    subject: Annotated[str | None, typer.Argument(help="The subject.")] = None,
    version: VersionOption = None,
    schema_id: Annotated[int | None, typer.Option("--id", help="A global schema id.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Print the document only.")] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Show a version of a subject (its latest by default), or of the subject holding --id."""
    if (subject is None) == (schema_id is None):
        fail("give either a SUBJECT or --id")

    async def go() -> None:
        async with open_registry(store) as registry:
            if schema_id is not None:
                found = await registry.get_by_id(schema_id, version)
            else:
                assert subject is not None
                found = await registry.get(subject, version)
        show_version(found, output, raw)

    run(go())


def show_version(found: SubjectVersion, output: Output, raw: bool) -> None:
    version = found.version
    document = document_of(version.schema_def)
    if output is Output.JSON:
        print_json({"subject": found.subject, "schema_id": found.schema_id, **stored_json(version)})
        return
    if raw:
        sys.stdout.write(document if document.endswith("\n") else document + "\n")
        return
    table = Table.grid(padding=(0, 2))
    for name, value in (
        ("subject", found.subject),
        ("schema id", str(found.schema_id)),
        ("version", str(version.version)),
        ("type", type_name(version.schema_def)),
        ("fingerprint", version.fingerprint),
        ("created", f"{timestamp(version.created_at)} by {version.created_by}"),
        ("deprecated", deprecation(version)),
    ):
        table.add_row(f"[bold]{name}[/]", value)
    console.print(table)
    if document:
        console.print(document, markup=False, highlight=False)


def deprecation(version: SchemaVersion) -> str:
    if not version.is_deprecated:
        return "no"
    message = version.deprecation_message
    return f"yes: {message}" if isinstance(message, str) and message else "yes"


@app.command("list")
def list_subjects(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """List every subject with its id, mode, versions and bound topics."""

    async def go() -> None:
        async with open_registry(store) as registry:
            subjects = [await registry.describe(name) for name in await registry.subjects()]
        show_subjects(subjects, output)

    run(go())


def show_subjects(subjects: list[SchemaMetadata], output: Output) -> None:
    if output is Output.JSON:
        print_json([subject_summary(metadata) for metadata in subjects])
        return
    table = Table(title=f"{len(subjects)} subject(s)")
    for column in ("subject", "id", "mode", "versions", "latest", "topics"):
        table.add_column(column)
    for metadata in subjects:
        summary = subject_summary(metadata)
        table.add_row(
            metadata.subject,
            str(metadata.id),
            metadata.compatibility_mode.value,
            ", ".join(str(number) for number in summary["versions"]),
            str(summary["latest"]),
            ", ".join(metadata.topics_using),
        )
    console.print(table)


def subject_summary(metadata: SchemaMetadata) -> dict[str, Any]:
    numbers = [version.version for version in metadata.versions]
    return {
        "subject": metadata.subject,
        "schema_id": metadata.id,
        "compatibility_mode": metadata.compatibility_mode.value,
        "versions": numbers,
        "latest": numbers[-1] if numbers else None,
        "topics_using": metadata.topics_using,
    }


@app.command()
def versions(
    subject: Subject, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE
) -> None:
    """List the versions of a subject, oldest first."""

    async def go() -> None:
        async with open_registry(store) as registry:
            found = await registry.versions(subject)
        if output is Output.JSON:
            print_json([stored_json(version) for version in found])
            return
        table = Table(title=subject)
        for column in ("version", "type", "fingerprint", "created", "by", "deprecated"):
            table.add_column(column)
        for version in found:
            table.add_row(
                str(version.version),
                type_name(version.schema_def),
                version.fingerprint[:19] + "…",
                timestamp(version.created_at),
                version.created_by,
                deprecation(version),
            )
        console.print(table)

    run(go())


# check, compat ------------------------------------------------------------------------------


@app.command("check")
def check_compatibility(
    subject: Subject,
    document: Document = "-",
    schema_type: TypeName = "Avro",
    message_name: MessageName = None,
    mode: Annotated[
        str | None, typer.Option("--mode", "-m", help="Check under this mode instead.")
    ] = None,
    reference: References = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Check a schema against a subject without registering it; exit 1 if incompatible."""

    async def go() -> CompatibilityResult:
        text = read_document(document, schema_type)
        async with open_registry(store) as registry:
            return await registry.check(
                subject,
                schema_type,
                text,
                mode=mode,
                message_name=message_name,
                references=reference or (),
            )

    result = run(go())
    show_check(subject, result, output)
    if not result.ok:
        raise typer.Exit(1)


def show_check(subject: str, result: CompatibilityResult, output: Output) -> None:
    checked = ", ".join(str(version) for version in result.checked_versions) or "none"
    if output is Output.JSON:
        print_json(
            {
                "subject": subject,
                "compatible": result.ok,
                "mode": result.mode.value,
                "checked_versions": list(result.checked_versions),
                "reasons": result.reasons,
            }
        )
    elif result.ok:
        console.print(f"compatible with {subject} under {result.mode.value} (versions {checked})")
    else:
        console.print(f"[bold red]not compatible[/] with {subject} under {result.mode.value}:")
        for reason in result.reasons:
            console.print(f"  - {reason}", markup=False, highlight=False)


@app.command()
def compat(
    subject: Annotated[
        str | None, typer.Argument(help="The subject; none: the global default.")
    ] = None,
    set_mode: Annotated[
        str | None,
        typer.Option("--set", help="None, Backward, Forward, Full or a …Transitive form."),
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Show or --set the compatibility mode of a subject, or the global default."""
    what = subject or "default"

    async def go() -> None:
        async with open_registry(store) as registry:
            revision = None
            if set_mode is not None:
                revision = await change_mode(registry, subject, set_mode)
            mode = await (registry.default_mode() if subject is None else registry.mode(subject))
        if output is Output.JSON:
            print_json({"subject": subject, "compatibility_mode": mode.value, "revision": revision})
        elif revision is None:
            console.print(f"{what}: {mode.value}")
        else:
            console.print(f"{what}: {mode.value} (set at revision {revision})")

    run(go())


async def change_mode(registry: SchemaRegistry, subject: str | None, mode: str) -> int:
    if subject is None:
        return await registry.set_default_mode(mode)
    return await registry.set_mode(subject, mode)


# deprecate, delete --------------------------------------------------------------------------


@app.command()
def deprecate(
    subject: Subject,
    version: Annotated[int, typer.Argument(help="The version to deprecate.")],
    message: Annotated[str | None, typer.Option(help="Why, and what to use instead.")] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Take the deprecation back.")] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Mark a version deprecated (its key and the subject's metadata, in one transaction)."""

    async def go() -> int:
        async with open_registry(store) as registry:
            return await registry.deprecate(subject, version, message, deprecated=not undo)

    revision = run(go())
    done = "no longer deprecated" if undo else "deprecated"
    report(output, f"{subject} version {version} {done} at revision {revision}", revision)


@app.command()
def delete(
    subject: Subject,
    version: VersionOption = None,
    yes: Yes = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Delete a version (--version), or the whole subject with every version and its id."""
    what = f"{subject} version {version}" if version is not None else f"subject {subject}"
    if not yes:
        typer.confirm(f"delete {what}?", abort=True)

    async def go() -> int:
        async with open_registry(store) as registry:
            if version is None:
                return await registry.delete_subject(subject)
            return await registry.delete_version(subject, version)

    revision = run(go())
    report(output, f"deleted {what} at revision {revision}", revision)


# topics -------------------------------------------------------------------------------------


@app.command()
def bind(
    topic: Annotated[str, typer.Argument(help="The topic: /namespace/topic.")],
    subject: Subject,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Bind a topic to a subject (the topic's key and the subject's topics_using, at once)."""

    async def go() -> int:
        async with open_registry(store) as registry:
            return await registry.bind_topic(topic_name(topic), subject)

    revision = run(go())
    report(output, f"{topic_name(topic)} bound to {subject} at revision {revision}", revision)


@app.command()
def unbind(
    topic: Annotated[str, typer.Argument(help="The topic: /namespace/topic.")],
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Unbind a topic from its subject."""

    async def go() -> int:
        async with open_registry(store) as registry:
            return await registry.unbind_topic(topic_name(topic))

    revision = run(go())
    report(output, f"{topic_name(topic)} unbound at revision {revision}", revision)


def report(output: Output, text: str, revision: int) -> None:
    if output is Output.JSON:
        print_json({"revision": revision})
    else:
        console.print(text)
