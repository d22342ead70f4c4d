"""The public surface of metaplane.layout: `__all__` lists exactly what the package exports."""

from __future__ import annotations

from metaplane import layout


def test_all_is_complete_and_exact() -> None:
    exported = {name for name in vars(layout) if not name.startswith("_")}
    assert set(layout.__all__) == exported
    assert len(layout.__all__) == len(set(layout.__all__))


def test_all_names_resolve() -> None:
    for name in layout.__all__:
        assert getattr(layout, name) is not None
