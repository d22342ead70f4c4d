"""Schema registry throughput: registrations per second on a real etcd (and on sqlite, for
comparison), and compatibility checks and parses per second for each format.

    .venv/bin/python benchmarks/schema_bench.py [--duration 3] [--writers 16] [--out results.json]

Registrations: one writer adding versions to one subject; many writers, each on its own
subject (no contention); many on one subject, and many creating new subjects (all racing for
the id counter), either as tasks sharing one registry (a broker: they queue) or as separate
clients (they race); and re-registering an identical schema (a read, nothing written).
Subjects hold at most 50 versions. Checks: each
format's rules on realistic documents, Full against one version and FullTransitive against
ten, and parsing fresh documents; the JSON Schema check against ten versions is held to the
rate it had before every keyword was analysed as a constraint (365/s on the reference machine).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from metaplane.resources import CompatibilityMode
from metaplane.schema import RegistryConflict, Schema, SchemaRegistry, check, parse_schema
from metaplane.store import MetadataStore, connect_store
from metaplane.testing import EtcdMember

# Documents ------------------------------------------------------------------------------------


def avro_document(extra: int, tag: str = "") -> str:
    """An order record (nested record, enum, array, map, union) with `extra` optional fields."""
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "string"},
        {"name": "customer", "type": "long"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "labels", "type": {"type": "map", "values": "string"}, "default": {}},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "quantity", "type": "int"},
                        {"name": "price", "type": "double"},
                    ],
                },
            },
        },
    ]
    fields += [{"name": f"extra_{i}{tag}", "type": "string", "default": ""} for i in range(extra)]
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": fields})


def json_schema_document(extra: int, tag: str = "") -> str:
    """The same order as a JSON Schema (open content model), with `extra` free properties."""
    line = {
        "type": "object",
        "properties": {
            "sku": {"type": "string", "minLength": 1},
            "quantity": {"type": "integer", "minimum": 1},
            "price": {"type": "number", "minimum": 0},
        },
        "required": ["sku", "quantity"],
    }
    properties: dict[str, Any] = {
        "id": {"type": "string"},
        "customer": {"type": "integer"},
        "created_at": {"type": "string", "format": "date-time"},
        "status": {"enum": ["NEW", "PAID"]},
        "amount": {"type": "number"},
        "note": {"type": ["string", "null"]},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "lines": {"type": "array", "items": line},
    }
    # Under an open content model only an unconstrained property keeps Full compatibility.
    properties |= {f"extra_{i}{tag}": {"description": f"extra {i}"} for i in range(extra)}
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": ["id", "customer", "status"],
    }
    return json.dumps(document)


def protobuf_document(extra: int, tag: str = "") -> str:
    """The same order in proto3, with `extra` more fields."""
    extras = "".join(f"  string extra_{i}{tag} = {20 + i};\n" for i in range(extra))
    return (
        'syntax = "proto3";\npackage shop;\n'
        'import "google/protobuf/timestamp.proto";\n'
        "enum Status { NEW = 0; PAID = 1; }\n"
        "message Line { string sku = 1; int32 quantity = 2; double price = 3; }\n"
        "message Order {\n"
        "  string id = 1;\n  int64 customer = 2;\n"
        "  google.protobuf.Timestamp created_at = 3;\n  Status status = 4;\n"
        "  double amount = 5;\n  optional string note = 6;\n"
        "  map<string, string> labels = 7;\n  repeated Line lines = 8;\n"
        f"{extras}}}\n"
    )


FORMATS: dict[str, Callable[..., str]] = {
    "Avro": avro_document,
    "JsonSchema": json_schema_document,
    "Protobuf": protobuf_document,
}

# Registrations --------------------------------------------------------------------------------


@dataclass
class RegistrationCell:
    backend: str
    scenario: str
    writers: int
    registrations: int
    per_second: float
    p50_ms: float
    p99_ms: float
    conflicts_per_registration: float
    gave_up: int


Register = Callable[[SchemaRegistry, int, int], Awaitable[object]]

# Seed 001's metadata holds every version of its subject, so a registration's cost grows with
# the subject's history: writers move on to a fresh subject every so many versions, so that the
# rates do not depend on how long a cell runs.
VERSIONS_PER_SUBJECT = 50


@dataclass(frozen=True)
class Scenario:
    """Writers doing `register(registry, writer, n)` over and over; `shared`: as tasks of one
    process sharing one registry (a broker), else as clients with a registry each."""

    name: str
    many: bool
    shared: bool
    register: Register


def scenarios(run: str) -> list[Scenario]:
    shared = itertools.count()  # registrations into the shared subjects, by every writer

    def one_subject(registry: SchemaRegistry, writer: int, n: int) -> Awaitable[object]:
        subject = f"{run}-shared-{next(shared) // VERSIONS_PER_SUBJECT}"
        return registry.register(subject, "Avro", avro_document(1, f"_{writer}_{n}"))

    def own_subject(registry: SchemaRegistry, writer: int, n: int) -> Awaitable[object]:
        subject = f"{run}-own-{writer}-{n // VERSIONS_PER_SUBJECT}"
        return registry.register(subject, "Avro", avro_document(1, f"_{n}"))

    def new_subject(registry: SchemaRegistry, writer: int, n: int) -> Awaitable[object]:
        return registry.register(f"{run}-new-{id(registry)}-{writer}-{n}", "Avro", avro_document(0))

    def identical(registry: SchemaRegistry, writer: int, n: int) -> Awaitable[object]:
        return registry.register(f"{run}-identical", "Avro", avro_document(0))

    return [
        Scenario("new versions, one subject", False, False, one_subject),
        Scenario("new versions, a subject per writer", True, False, own_subject),
        Scenario("new versions, one subject, one registry", True, True, one_subject),
        Scenario("new versions, one subject, separate clients", True, False, one_subject),
        Scenario("new subjects, one registry", True, True, new_subject),
        Scenario("new subjects, separate clients", True, False, new_subject),
        Scenario("identical schema (nothing written)", True, True, identical),
    ]


async def measure_registrations(
    store: MetadataStore, backend: str, writers: int, duration: float, console: Console
) -> list[RegistrationCell]:
    cells = []
    await SchemaRegistry(store).register(f"{backend}-identical", "Avro", avro_document(0))
    for scenario in scenarios(backend):
        count = writers if scenario.many else 1
        one = SchemaRegistry(store)
        registries = [one if scenario.shared else SchemaRegistry(store) for _ in range(count)]
        timings, gave_up, elapsed = await drive(registries, scenario.register, duration)
        conflicts = sum(registry.conflicts for registry in set(registries))
        cell = RegistrationCell(
            backend,
            scenario.name,
            count,
            len(timings),
            len(timings) / elapsed,
            percentile(timings, 0.50) * 1000,
            percentile(timings, 0.99) * 1000,
            conflicts / max(len(timings), 1),
            gave_up,
        )
        console.log(f"{backend}: {scenario.name}, {count} writer(s): {cell.per_second:,.0f}/s")
        cells.append(cell)
    return cells


async def drive(
    registries: list[SchemaRegistry], register: Register, duration: float
) -> tuple[list[float], int, float]:
    """How long each registration of every writer took in `duration` seconds, how many gave
    up (RegistryConflict), and the time they all took."""
    timings: list[float] = []
    gave_up = 0
    stop_at = time.perf_counter() + duration

    async def writer(index: int, registry: SchemaRegistry) -> None:
        nonlocal gave_up
        for n in itertools.count():
            started = time.perf_counter()
            if started >= stop_at:
                return
            try:
                await register(registry, index, n)
            except RegistryConflict:
                gave_up += 1
            else:
                timings.append(time.perf_counter() - started)

    start = time.perf_counter()
    await asyncio.gather(*(writer(i, r) for i, r in enumerate(registries)))
    return timings, gave_up, time.perf_counter() - start


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else 0.0


# Checks ---------------------------------------------------------------------------------------

JSON_SCHEMA_TRANSITIVE_TARGET = 365.0
"""FullTransitive checks per second against ten JSON Schema versions, measured on the reference
machine when keywords were still compared as text: the analysis must not be slower."""


@dataclass
class CheckCell:
    format: str
    full_checks_per_second: float
    transitive_checks_per_second: float
    parses_per_second: float


def rate(operation: Callable[[int], object], duration: float) -> float:
    """Calls of `operation(n)` per second, for `duration` seconds."""
    count = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < duration:
        operation(count)
        count += 1
    return count / elapsed


def measure_checks(duration: float, console: Console) -> list[CheckCell]:
    cells = []
    for name, document in FORMATS.items():
        history: list[Schema] = [parse_schema(name, document(extra)) for extra in range(11)]
        new, previous = history[-1], history[:-1]

        def full(_: int, new: Schema = new, old: Schema = previous[-1]) -> object:
            return _ok(check(new, [old], CompatibilityMode.FULL))

        def transitive(_: int, new: Schema = new, old: list[Schema] = previous) -> object:
            return _ok(check(new, old, CompatibilityMode.FULL_TRANSITIVE))

        def parse(n: int, name: str = name, document: Callable[..., str] = document) -> object:
            return parse_schema(name, document(3, f"_{n}"))  # a fresh text: no cache helps

        cell = CheckCell(
            name, rate(full, duration), rate(transitive, duration), rate(parse, duration)
        )
        console.log(f"{name}: {cell.full_checks_per_second:,.0f} Full checks/s")
        cells.append(cell)
    return cells


def _ok(result: Any) -> object:
    assert result.ok, result.reasons  # every version of the benchmark is compatible
    return result


# Report ---------------------------------------------------------------------------------------


def render(
    registrations: list[RegistrationCell], checks: list[CheckCell], console: Console
) -> None:
    table = Table(title="registrations per second")
    columns = ("backend", "scenario", "writers", "registrations/s", "p50 ms", "p99 ms")
    for column in (*columns, "conflicts/registration", "gave up"):
        table.add_column(column, justify="left" if column in ("backend", "scenario") else "right")
    for cell in registrations:
        table.add_row(
            cell.backend,
            cell.scenario,
            str(cell.writers),
            f"{cell.per_second:,.0f}",
            f"{cell.p50_ms:,.1f}",
            f"{cell.p99_ms:,.1f}",
            f"{cell.conflicts_per_registration:.2f}",
            str(cell.gave_up),
        )
    console.print(table)
    table = Table(title="compatibility checks per second (one core)")
    for column in ("format", "Full vs 1 version", "FullTransitive vs 10", "parse (fresh)"):
        table.add_column(column, justify="left" if column == "format" else "right")
    for check_cell in checks:
        table.add_row(
            check_cell.format,
            f"{check_cell.full_checks_per_second:,.0f}",
            f"{check_cell.transitive_checks_per_second:,.0f}",
            f"{check_cell.parses_per_second:,.0f}",
        )
    console.print(table)
    json_schema = next((c for c in checks if c.format == "JsonSchema"), None)
    if json_schema is not None:
        measured = json_schema.transitive_checks_per_second
        target = JSON_SCHEMA_TRANSITIVE_TARGET
        verdict = "met" if measured >= target else "NOT met"
        console.print(
            f"JSON Schema, FullTransitive vs 10: {measured:,.0f}/s "
            f"(target >= {target:,.0f}/s on the reference machine: {verdict})"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per cell")
    parser.add_argument("--writers", type=int, default=16, help="concurrent writers")
    parser.add_argument("--etcd", help="an existing etcd endpoint host:port (default: start one)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/schema_bench.json"))
    args = parser.parse_args()
    console = Console(width=max(Console().width, 150))
    checks = measure_checks(args.duration, console)
    with tempfile.TemporaryDirectory() as folder:
        registrations = await bench_stores(args, Path(folder), console)
    render(registrations, checks, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "schema",
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count() or 0},
                "duration_per_cell": args.duration,
                "registrations": [asdict(cell) for cell in registrations],
                "checks": [asdict(cell) for cell in checks],
            },
            indent=2,
        )
    )
    console.print(f"written to {args.out}")


async def bench_stores(
    args: argparse.Namespace, folder: Path, console: Console
) -> list[RegistrationCell]:
    member = None
    if args.etcd is None:
        member = EtcdMember(folder / "etcd")
        member.start()
        member.wait_ready()
        pin_apart(member, console)
    urls = {
        "etcd": f"etcd://{args.etcd or member.endpoint}",  # type: ignore[union-attr]
        "sqlite": f"sqlite://{folder}/bench.db",
    }
    cells: list[RegistrationCell] = []
    try:
        for backend, url in urls.items():
            async with await connect_store(url) as store:
                cells += await measure_registrations(
                    store, backend, args.writers, args.duration, console
                )
    finally:
        if member is not None:
            member.kill()
    return cells


def pin_apart(member: EtcdMember, console: Console) -> None:
    """etcd on the last core, this process on the others, where there are two or more."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2 or member.process is None:
        console.log("one core: etcd and the benchmark share it")
        return
    os.sched_setaffinity(member.process.pid, {cores[-1]})
    os.sched_setaffinity(0, set(cores[:-1]))
    console.log(f"etcd pinned to core {cores[-1]}, the benchmark to {cores[:-1]}")


if __name__ == "__main__":
    asyncio.run(main())
