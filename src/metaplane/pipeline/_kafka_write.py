"""Writing a Kafka import's plan to a store: all or nothing per key set, in transactions that
each insist their keys are still absent; keys that already hold the same value are left
alone, so that running the import again changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metaplane.pipeline._errors import ImportConflict
from metaplane.pipeline._kafka_render import ImportPlan
from metaplane.store import Compare, Get, MetadataStore, Put

BATCH = 64
"""Keys per transaction (each with a compare that it is still absent)."""


@dataclass(frozen=True)
class ImportResult:
    """Keys written, and keys that already held the same value (a re-run writes nothing)."""

    written: int
    unchanged: int


async def apply_import(
    store: MetadataStore,
    plan: ImportPlan,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Write the plan: nothing if any key holds another value already (`ImportConflict`);
    else the missing keys, in transactions of `BATCH` that each insist the keys are still
    absent. A batch that loses that race fails with `ImportConflict`; the batches before it
    stay written, and running the import again completes it."""
    existing = await _existing(store, [key for key, _ in plan.entries])
    conflicts = [key for key, value in plan.entries if key in existing and existing[key] != value]
    if conflicts:
        raise ImportConflict(conflicts)
    missing = [(key, value) for key, value in plan.entries if key not in existing]
    written = 0
    for start in range(0, len(missing), BATCH):
        batch = missing[start : start + BATCH]
        result = await store.txn(
            [Compare.absent(key) for key, _ in batch], [Put(key, value) for key, value in batch], []
        )
        if not result.succeeded:
            raise ImportConflict([key for key, _ in batch])
        written += len(batch)
        if progress is not None:
            progress(written)
    return ImportResult(written, len(plan.entries) - len(missing))


async def _existing(store: MetadataStore, keys: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for start in range(0, len(keys), BATCH):
        result = await store.txn([], [Get(key) for key in keys[start : start + BATCH]], [])
        for index in range(len(result.results)):
            entry = result.entry(index)
            if entry is not None:
                found[entry.key] = entry.value
    return found
