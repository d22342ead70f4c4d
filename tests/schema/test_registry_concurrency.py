"""Eight processes register fifty schemas each into four subjects at once: no registration is
lost, no id and no version is given twice, and every subject's metadata equals its keys."""

from __future__ import annotations

from collections import Counter

import pytest

from metaplane.store import MetadataStore
from tests.schema.consistency import assert_consistent
from tests.schema.processes import Child

PROCESSES = 8
EACH = 50
SUBJECTS = ("load-a", "load-b", "load-c", "load-d")


async def run_registrations(store_url: str) -> list[list[str]]:
    """Start the processes, let them go at once, and return every registration they report
    as [subject, version, schema id, fingerprint, created]."""
    children = [
        await Child.start("register", store_url, str(process), str(EACH), *SUBJECTS)
        for process in range(PROCESSES)
    ]
    try:
        for child in children:
            await child.expect("ready")
        for child in children:
            child.say("go")
        reports = [await child.lines_until("done", timeout=60) for child in children]
    finally:
        for child in children:
            await child.kill()
    return [line.split()[1:] for said, _ in reports for line in said]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.backends("sqlite", "etcd", reason="several processes share the store")
async def test_eight_processes_lose_nothing_and_give_nothing_twice(
    store: MetadataStore, store_url: str
) -> None:
    registrations = await run_registrations(store_url)
    assert len(registrations) == PROCESSES * EACH
    assert {created for *_, created in registrations} == {"True"}
    claimed = Counter((subject, int(version)) for subject, version, *_ in registrations)
    assert max(claimed.values()) == 1, "a version was given to two registrations"
    keys = await assert_consistent(store)
    per_subject = Counter(subject for subject, *_ in registrations)
    assert per_subject == dict.fromkeys(SUBJECTS, PROCESSES * EACH // len(SUBJECTS))
    for subject in SUBJECTS:
        assert sorted(keys.versions[subject]) == list(range(1, per_subject[subject] + 1))
    assert sorted(metadata.id for metadata in keys.metadata.values()) == [1, 2, 3, 4]
    assert keys.counter == len(SUBJECTS) + 1
    for subject, version, schema_id, fingerprint, _ in registrations:
        assert keys.versions[subject][int(version)].fingerprint == fingerprint  # not lost
        assert keys.metadata[subject].id == int(schema_id)
