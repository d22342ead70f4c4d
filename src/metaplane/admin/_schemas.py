"""`metaplane schemas …`: the schema registry for operators — register, read, check and evolve
subjects, set compatibility modes and the JSON Schema draft, deprecate and delete versions,
bind topics to subjects. Each command is one of the registry's operations (`_schema_ops`, the
API's too) run by the CLI's one runner.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from metaplane.admin import _schema_ops as schema_ops
from metaplane.admin._console import (
    DEFAULT_STORE,
    Create,
    Output,
    OutputFormat,
    StoreURL,
    console,
    print_json,
    said,
    usage,
)
from metaplane.admin._runner import execute
from metaplane.admin._topics import topic_name_or_usage
from metaplane.schema import (
    InvalidReference,
    SchemaType,
    UnknownCompatibilityMode,
    UnknownJsonSchemaDraft,
    UnknownSchemaType,
    parse_draft,
    parse_mode,
    parse_reference,
)

app = typer.Typer(
    name="schemas",
    help="The schema registry: subjects, versions, compatibility modes, drafts, topic bindings.",
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
VersionOption = Annotated[
    int | None, typer.Option("--version", "-v", min=1, help="A version number.")
]
References = Annotated[
    list[str] | None,
    typer.Option(
        "--reference",
        "-r",
        help="A schema it references, NAME=SUBJECT:VERSION (repeatable); NAME is the import "
        "path, the $ref URI or the Avro type name the document uses.",
    ),
]
TopicPath = Annotated[str, typer.Argument(help="The topic: /namespace/topic.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

_SCALARS = (SchemaType.BYTES, SchemaType.STRING, SchemaType.NUMBER)


# What the command line says, checked before the store is opened (usage errors, exit 2) ----


def schema_type_or_usage(text: str) -> SchemaType:
    try:
        return SchemaType.parse(text)
    except UnknownSchemaType as error:
        usage(str(error))


def references_or_usage(given: list[str] | None) -> list[str]:
    for text in given or ():
        try:
            parse_reference(text)
        except InvalidReference as error:
            usage(str(error))
    return list(given or ())


def mode_or_usage(text: str) -> str:
    try:
        return parse_mode(text).value
    except UnknownCompatibilityMode as error:
        usage(str(error))


def draft_or_usage(text: str) -> str:
    try:
        return parse_draft(text).label
    except UnknownJsonSchemaDraft as error:
        usage(str(error))


def read_document(path: str, schema_type: str) -> str:
    """The document at `path` ("-": stdin); scalar types have none."""
    if schema_type_or_usage(schema_type) in _SCALARS:
        return ""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        usage(f"cannot read {path}: {error}")


def stored_type(definition: object) -> str:
    """A stored `schema_def`'s type: Danube's tag ("Bytes", or the one key of {"Avro": …})."""
    return next(iter(definition)) if isinstance(definition, dict) else str(definition)


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
    create_store: Create = False,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Register a schema: a new version, or the existing one if it is identical."""
    references = references_or_usage(reference)
    text = read_document(document, schema_type)
    found = execute(
        store,
        lambda ops: schema_ops.register(
            ops.registry,
            subject,
            schema_type,
            text,
            message_name=message_name,
            description=description,
            tags=tag or [],
            references=references,
        ),
        create=create_store,
    )
    what = f"{found['subject']} version {found['version']} (schema id {found['schema_id']})"
    if found["created"]:
        said(output, found, f"registered {what} at revision {found['revision']}")
    else:
        said(output, found, f"identical to {what}: nothing written")


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
        usage("give either a SUBJECT or --id")
    if schema_id is not None:
        chosen_id = schema_id
        found = execute(store, lambda ops: schema_ops.by_id(ops.registry, chosen_id, version))
    else:
        assert subject is not None
        name = subject
        found = execute(store, lambda ops: schema_ops.version(ops.registry, name, version))
    show_version(found, output, raw)


def show_version(found: dict[str, Any], output: Output, raw: bool) -> None:
    document: str = found["document"]
    if output is Output.JSON:
        print_json(found)
        return
    if raw:
        sys.stdout.write(document if document.endswith("\n") else document + "\n")
        return
    table = Table.grid(padding=(0, 2))
    for name, value in (
        ("subject", found["subject"]),
        ("schema id", str(found["schema_id"])),
        ("version", str(found["version"])),
        ("type", found["type"]),
        ("fingerprint", found["fingerprint"]),
        ("created", f"{timestamp(found['created_at'])} by {found['created_by']}"),
        ("deprecated", deprecation(found)),
    ):
        table.add_row(f"[bold]{name}[/]", value)
    console.print(table)
    if document:
        console.print(document, markup=False, highlight=False)


def deprecation(version: dict[str, Any]) -> str:
    if not version["is_deprecated"]:
        return "no"
    message = version.get("deprecation_message")
    return f"yes: {message}" if isinstance(message, str) and message else "yes"


@app.command("list")
def list_subjects(store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE) -> None:
    """List every subject with its id, mode, versions and bound topics."""
    subjects = execute(store, lambda ops: schema_ops.subjects(ops.registry))
    if output is Output.JSON:
        print_json(subjects)
        return
    table = Table(title=f"{len(subjects)} subject(s)")
    for column in ("subject", "id", "mode", "versions", "latest", "topics"):
        table.add_column(column)
    for summary in subjects:
        table.add_row(
            summary["subject"],
            str(summary["schema_id"]),
            summary["compatibility_mode"],
            ", ".join(str(number) for number in summary["versions"]),
            str(summary["latest"]),
            ", ".join(summary["topics_using"]),
        )
    console.print(table)


@app.command()
def versions(
    subject: Subject, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE
) -> None:
    """List the versions of a subject, oldest first."""
    found = execute(store, lambda ops: schema_ops.versions(ops.registry, subject))
    if output is Output.JSON:
        print_json(found)
        return
    table = Table(title=subject)
    for column in ("version", "type", "fingerprint", "created", "by", "deprecated"):
        table.add_column(column)
    for version in found:
        table.add_row(
            str(version["version"]),
            stored_type(version["schema_def"]),
            version["fingerprint"][:19] + "…",
            timestamp(version["created_at"]),
            version["created_by"],
            deprecation(version),
        )
    console.print(table)


# check, compat, draft -----------------------------------------------------------------------


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
    chosen = None if mode is None else mode_or_usage(mode)
    references = references_or_usage(reference)
    text = read_document(document, schema_type)
    verdict = execute(
        store,
        lambda ops: schema_ops.check(
            ops.registry,
            subject,
            schema_type,
            text,
            mode=chosen,
            message_name=message_name,
            references=references,
        ),
    )
    show_check(verdict, output)
    if not verdict["compatible"]:
        raise typer.Exit(1)


def show_check(verdict: dict[str, Any], output: Output) -> None:
    subject, mode = verdict["subject"], verdict["mode"]
    checked = ", ".join(str(version) for version in verdict["checked_versions"]) or "none"
    if output is Output.JSON:
        print_json(verdict)
    elif verdict["compatible"]:
        console.print(f"compatible with {subject} under {mode} (versions {checked})")
    else:
        console.print(f"[bold red]not compatible[/] with {subject} under {mode}:")
        for reason in verdict["reasons"]:
            console.print(f"  - {reason}", markup=False, highlight=False)


SubjectOrGlobal = Annotated[
    str | None, typer.Argument(help="The subject; none: the global setting.")
]


@app.command()
def compat(
    subject: SubjectOrGlobal = None,
    set_mode: Annotated[
        str | None,
        typer.Option("--set", help="None, Backward, Forward, Full or a …Transitive form."),
    ] = None,
    expect: Annotated[
        int | None,
        typer.Option(
            "--expect", min=1, help="Only if the subject's metadata is still at this version."
        ),
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Show or --set the compatibility mode of a subject, or the global default (the mode
    new subjects start with)."""
    if expect is not None and (subject is None or set_mode is None):
        usage("--expect goes with a SUBJECT and --set (it compares the subject's version)")
    chosen = None if set_mode is None else mode_or_usage(set_mode)
    if chosen is None:
        found = execute(
            store, lambda ops: schema_ops.compatibility(ops.registry, ops.store, subject)
        )
    else:
        mode = chosen
        found = execute(
            store,
            lambda ops: schema_ops.set_compatibility(
                ops.registry, ops.store, subject, mode, expect
            ),
        )
    _setting_said(output, found, subject, "compatibility_mode")


@app.command()
def draft(
    subject: SubjectOrGlobal = None,
    set_draft: Annotated[
        str | None,
        typer.Option(
            "--set", help="draft-04, draft-06, draft-07, 2019-09 or 2020-12 (or its URI)."
        ),
    ] = None,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Show or --set the JSON Schema draft that documents without $schema are read as: a
    subject's (its existing versions are read again under it), or the global one (copied
    into each subject created from now on)."""
    if set_draft is None:
        found = execute(store, lambda ops: schema_ops.json_schema_draft(ops.registry, subject))
    else:
        chosen = draft_or_usage(set_draft)
        found = execute(
            store, lambda ops: schema_ops.set_json_schema_draft(ops.registry, subject, chosen)
        )
    _setting_said(output, found, subject, "json_schema_draft")


def _setting_said(output: Output, found: dict[str, Any], subject: str | None, name: str) -> None:
    """A subject's (or the default) setting, with the revision that set it if it was set."""
    text = f"{subject or 'default'}: {found[name]}"
    if "revision" in found:
        text += f" (set at revision {found['revision']})"
    said(output, found, text)


# deprecate, delete --------------------------------------------------------------------------


@app.command()
def deprecate(
    subject: Subject,
    version: Annotated[int, typer.Argument(min=1, help="The version to deprecate.")],
    message: Annotated[str | None, typer.Option(help="Why, and what to use instead.")] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Take the deprecation back.")] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Mark a version deprecated (its key and the subject's metadata, in one transaction)."""
    found = execute(
        store, lambda ops: schema_ops.deprecate(ops.registry, subject, version, message, undo=undo)
    )
    done = "no longer deprecated" if undo else "deprecated"
    said(output, found, f"{subject} version {version} {done} at revision {found['revision']}")


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
    found = execute(store, lambda ops: schema_ops.delete(ops.registry, subject, version))
    said(output, found, f"deleted {what} at revision {found['revision']}")


# topics -------------------------------------------------------------------------------------


@app.command()
def bind(
    topic: TopicPath,
    subject: Subject,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Move the topic off the subject it is bound to, if another."
        ),
    ] = False,
    store: StoreURL = DEFAULT_STORE,
    output: OutputFormat = Output.TABLE,
) -> None:
    """Bind a topic to a subject (the topic's key and the subject's topics_using, at once).
    A topic bound to another subject is refused unless --replace."""
    name = topic_name_or_usage(topic)
    found = execute(
        store, lambda ops: schema_ops.bind(ops.registry, name, subject, replace=replace)
    )
    text = f"{name} bound to {subject} at revision {found['revision']}"
    previous = found["previous"]
    if previous is not None and previous != subject:
        text += f" (was bound to {previous})"
    said(output, found, text)


@app.command()
def unbind(
    topic: TopicPath, store: StoreURL = DEFAULT_STORE, output: OutputFormat = Output.TABLE
) -> None:
    """Unbind a topic from its subject."""
    name = topic_name_or_usage(topic)
    found = execute(store, lambda ops: schema_ops.unbind(ops.registry, name))
    said(output, found, f"{name} unbound at revision {found['revision']}")
