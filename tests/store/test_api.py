"""The public surface of metaplane.store: `__all__` names exactly what it exports."""

from __future__ import annotations

import types

import metaplane.store


def test_all_is_complete() -> None:
    public = {
        name
        for name, value in vars(metaplane.store).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert set(metaplane.store.__all__) == public
    assert len(metaplane.store.__all__) == len(set(metaplane.store.__all__))
