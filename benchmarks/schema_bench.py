"""Schema registry throughput: registrations per second on a real etcd (and on sqlite, for
comparison), and compatibility checks and parses per second for each format.

    .venv/bin/python benchmarks/schema_bench.py [--duration 3] [--writers 16] [--out results.json]
    .venv/bin/python benchmarks/schema_bench.py --against REV [--rounds 5] [--duration 3]

Registrations: one writer adding versions to one subject; many writers, each on its own
subject (no contention); many on one subject, and many creating new subjects (all racing for
the id counter), either as tasks sharing one registry (a broker: they queue) or as separate
clients (they race); and re-registering an identical schema (a read, nothing written).
Subjects hold at most 50 versions. Checks: each
format's rules on realistic documents, Full against one version and FullTransitive against
ten, and parsing fresh documents; the JSON Schema check against ten versions is held to the
rate it had before every keyword was analysed as a constraint (365/s on the reference machine).

`--against REV` measures only the check and parse cells, for this code and for the code at git
revision REV (checked out in a temporary `git worktree`), in the same run: each cell of each
side in a fresh process of its own (`PYTHONPATH=<tree>/src`, which prints its figure as JSON),
the two sides of a cell one after the other, alternating which goes first from round to round.
Per cell it reports the median of each side, the median of the per-round ratios this/REV and
their spread (lowest–highest), in wall time and in CPU time (`time.process_time`), which
depends less on other jobs sharing the machine. Never the best round.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

# metaplane is imported where it is used: a worker of `--against` imports the code of another
# revision, and uses only what every version has (parse_schema, check, CompatibilityMode).
if TYPE_CHECKING:
    from metaplane.schema import SchemaRegistry
    from metaplane.store import MetadataStore

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


Register = Callable[["SchemaRegistry", int, int], Awaitable[object]]

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
    from metaplane.schema import SchemaRegistry

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
    from metaplane.schema import RegistryConflict

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


CELLS = {
    "full": "Full vs 1 version",
    "transitive": "FullTransitive vs 10",
    "parse": "parsing a new document",
}


def operations(name: str) -> dict[str, Callable[[int], object]]:
    """The check cells of format `name`, as `operation(n)`, on whichever metaplane `import`
    finds; only parse_schema, check and CompatibilityMode, which every version has."""
    from metaplane.resources import CompatibilityMode
    from metaplane.schema import check, parse_schema

    document = FORMATS[name]
    history = [parse_schema(name, document(extra)) for extra in range(11)]
    new, previous = history[-1], history[:-1]

    def full(_: int) -> object:
        return _ok(check(new, previous[-1:], CompatibilityMode.FULL))

    def transitive(_: int) -> object:
        return _ok(check(new, previous, CompatibilityMode.FULL_TRANSITIVE))

    def parse(n: int) -> object:
        return parse_schema(name, document(3, f"_{n}"))  # a fresh text: no cache helps

    return {"full": full, "transitive": transitive, "parse": parse}


def measure_checks(duration: float, console: Console) -> list[CheckCell]:
    cells = []
    for name in FORMATS:
        operation = operations(name)
        cell = CheckCell(
            name,
            rate(operation["full"], duration),
            rate(operation["transitive"], duration),
            rate(operation["parse"], duration),
        )
        console.log(f"{name}: {cell.full_checks_per_second:,.0f} Full checks/s")
        cells.append(cell)
    return cells


def _ok(result: Any) -> object:
    assert result.ok, result.reasons  # every version of the benchmark is compatible
    return result


# Against another revision -----------------------------------------------------------------

SIDES = ("this", "before")  # this code, and the code at --against REV


def measure_one(operation: Callable[[int], object], duration: float) -> dict[str, float]:
    """Calls of `operation(n)` for `duration` seconds of wall time, after a short warm-up: how
    many, the wall and CPU (process) time they took."""
    warm_until = time.perf_counter() + min(0.5, duration / 6)
    n = 0
    while time.perf_counter() < warm_until:
        operation(n)
        n += 1
    count = 0
    cpu_start, start = time.process_time(), time.perf_counter()
    while (elapsed := time.perf_counter() - start) < duration:
        operation(n + count)
        count += 1
    cpu = time.process_time() - cpu_start
    return {
        "calls": count,
        "wall_s": elapsed,
        "cpu_s": cpu,
        "per_second": count / elapsed,
        "per_cpu_second": count / cpu if cpu > 0 else 0.0,
    }


def worker(name: str, cell: str, duration: float) -> None:
    """One cell in this process, on the metaplane PYTHONPATH names; its figure as JSON."""
    import metaplane

    figure = measure_one(operations(name)[cell], duration)
    figure["metaplane"] = str(Path(metaplane.__file__).resolve())  # type: ignore[arg-type]
    print(json.dumps(figure))


def run_worker(src: Path, name: str, cell: str, duration: float) -> dict[str, Any]:
    environment = os.environ | {"PYTHONPATH": str(src)}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name, cell]
    done = subprocess.run(
        [*command, "--duration", str(duration)],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} {cell} on {src} failed:\n{done.stderr}")
    figure: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(figure["metaplane"]).is_relative_to(src.resolve()):
        raise RuntimeError(f"the worker for {src} imported {figure['metaplane']}")
    return figure


def git(root: Path, *arguments: str) -> str:
    command = ["git", "-C", str(root), *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "lowest": min(values),
        "highest": max(values),
        "values": values,
    }


def against(revision: str, rounds: int, duration: float, console: Console) -> dict[str, Any]:
    """Every check cell of this code and of the code at `revision`, `rounds` times, paired."""
    root = Path(git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))
    commit = git(root, "rev-parse", "--verify", f"{revision}^{{commit}}")
    head = git(root, "rev-parse", "HEAD")  # others may commit during the run: noted at the end
    figures: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    firsts: list[str] = []
    loads: list[list[float]] = []
    with tempfile.TemporaryDirectory(prefix="schema-bench-") as folder:
        tree = Path(folder) / "before"
        git(root, "worktree", "add", "--detach", str(tree), commit)
        sources = {"this": root / "src", "before": tree / "src"}
        try:
            for round_ in range(rounds):
                order = SIDES if round_ % 2 == 0 else SIDES[::-1]
                firsts.append(order[0])
                loads.append([round(load, 2) for load in os.getloadavg()])
                console.log(f"round {round_ + 1}/{rounds}, {order[0]} first, load {loads[-1]}")
                for name in FORMATS:
                    for cell in CELLS:
                        for side in order:
                            figure = run_worker(sources[side], name, cell, duration)
                            figures.setdefault((name, cell, side), []).append(figure)
                        this, before = (figures[name, cell, s][-1] for s in SIDES)
                        console.log(
                            f"  {name} {CELLS[cell]}: {this['per_second']:,.0f}/s against "
                            f"{before['per_second']:,.0f}/s "
                            f"(CPU {this['per_cpu_second']:,.0f} against "
                            f"{before['per_cpu_second']:,.0f})"
                        )
            loads.append([round(load, 2) for load in os.getloadavg()])
        finally:
            git(root, "worktree", "remove", "--force", str(tree))
    cells = []
    for name in FORMATS:
        for cell in CELLS:
            this, before = (figures[name, cell, side] for side in SIDES)
            summary: dict[str, Any] = {"format": name, "cell": CELLS[cell]}
            for key, measure in (("wall", "per_second"), ("cpu", "per_cpu_second")):
                summary[key] = {
                    "this": spread([f[measure] for f in this]),
                    "before": spread([f[measure] for f in before]),
                    "ratio": spread(
                        [t[measure] / b[measure] for t, b in zip(this, before, strict=True)]
                    ),
                }
            cells.append(summary)
    schema = "src/metaplane/schema"
    head_at_end = git(root, "rev-parse", "HEAD")
    return {
        "benchmark": "schema-against",
        "this": {
            "head": head,
            "head_at_end": head_at_end,
            "schema_code_changed_during_run": head != head_at_end
            and bool(git(root, "diff", "--name-only", head, head_at_end, "--", schema)),
            "schema_code_uncommitted": bool(git(root, "status", "--porcelain", "--", schema)),
        },
        "before": {"revision": revision, "commit": commit},
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count() or 0,
            "load_average_by_round": loads,
        },
        "rounds": rounds,
        "duration_per_cell": duration,
        "first_by_round": firsts,
        "cells": cells,
    }


def render_against(result: dict[str, Any], console: Console) -> None:
    def figure(values: dict[str, Any]) -> str:
        return f"{values['median']:,.0f} ({values['lowest']:,.0f}–{values['highest']:,.0f})"

    def ratio(values: dict[str, Any]) -> str:
        return f"{values['median']:.2f} ({values['lowest']:.2f}–{values['highest']:.2f})"

    revision = result["before"]["revision"]
    title = (
        f"checks per second, this code against {revision}: medians of {result['rounds']} "
        "paired rounds (lowest–highest)"
    )
    table = Table(title=title)
    columns = ["format", "cell", "this /s", f"{revision} /s", "ratio"]
    columns += ["this /CPU-s", f"{revision} /CPU-s", "CPU ratio"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("format", "cell") else "right")
    for cell in result["cells"]:
        wall, cpu = cell["wall"], cell["cpu"]
        table.add_row(
            cell["format"],
            cell["cell"],
            figure(wall["this"]),
            figure(wall["before"]),
            ratio(wall["ratio"]),
            figure(cpu["this"]),
            figure(cpu["before"]),
            ratio(cpu["ratio"]),
        )
    console.print(table)
    loads = result["machine"]["load_average_by_round"]
    console.print(f"load average (1, 5, 15 min) as each round started, then at the end: {loads}")
    json_schema = next(
        c
        for c in result["cells"]
        if c["format"] == "JsonSchema" and c["cell"] == CELLS["transitive"]
    )
    for key, label in (("wall", "wall time"), ("cpu", "CPU time")):
        r = json_schema[key]["ratio"]
        verdict = "at or above" if r["median"] >= 1 else "BELOW"
        console.print(
            f"JSON Schema, FullTransitive vs 10, {label}: {r['median']:.2f} times the code at "
            f"{revision} (rounds {r['lowest']:.2f}–{r['highest']:.2f}): {verdict} it"
        )


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
    parser.add_argument(
        "--against", metavar="REV", help="check cells only, paired with the code at git REV"
    )
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds with --against")
    parser.add_argument("--worker", nargs=2, metavar=("FORMAT", "CELL"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="JSON results (default: benchmarks/results/)")
    args = parser.parse_args()
    if args.worker is not None:
        worker(*args.worker, args.duration)
        return
    console = Console(width=max(Console().width, 150))
    if args.against is not None:
        console = Console(width=max(Console().width, 200))
        result = against(args.against, args.rounds, args.duration, console)
        render_against(result, console)
        out = args.out or Path("benchmarks/results/schema_bench_against.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        console.print(f"written to {out}")
        return
    checks = measure_checks(args.duration, console)
    with tempfile.TemporaryDirectory() as folder:
        registrations = await bench_stores(args, Path(folder), console)
    render(registrations, checks, console)
    out = args.out or Path("benchmarks/results/schema_bench.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
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
    console.print(f"written to {out}")


async def bench_stores(
    args: argparse.Namespace, folder: Path, console: Console
) -> list[RegistrationCell]:
    from metaplane.store import connect_store
    from metaplane.testing import EtcdMember

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


def pin_apart(member: Any, console: Console) -> None:
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
