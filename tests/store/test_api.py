"""The public surface of metaplane.store: `__all__` names exactly what it exports, and
importing it loads the contract only, no backend."""

from __future__ import annotations

import subprocess
import sys
import types

import metaplane.store


def test_all_is_complete() -> None:
    public = {
        name
        for name in dir(metaplane.store)
        if not name.startswith("_")
        and not isinstance(getattr(metaplane.store, name), types.ModuleType)
        and name != "annotations"
    }
    assert set(metaplane.store.__all__) == public
    assert len(metaplane.store.__all__) == len(set(metaplane.store.__all__))


def test_import_loads_no_backend() -> None:
    """A fresh interpreter: `import metaplane.store` leaves grpc, aetcd, kazoo and sqlite3
    unloaded; naming a backend's class loads its module then."""
    code = (
        "import sys, metaplane.store\n"
        "loaded = {'aetcd', 'grpc', 'kazoo', 'sqlite3'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
        "from metaplane.store import EtcdStore, SqliteStore\n"
        "assert 'aetcd' in sys.modules and 'sqlite3' in sys.modules\n"
        "assert metaplane.store.EtcdStore is EtcdStore\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
