"""The public surface of metaplane.resources: `__all__` lists exactly what it exports."""

from __future__ import annotations

from metaplane import resources


def test_all_is_complete_and_exact() -> None:
    exported = {name for name in vars(resources) if not name.startswith("_")}
    assert set(resources.__all__) == exported
    assert len(resources.__all__) == len(set(resources.__all__))
