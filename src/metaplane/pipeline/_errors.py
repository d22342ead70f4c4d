"""The errors of the pipeline, rooted in the store's tree so that every command handles them
with one `except MetadataError`.

    MetadataError (metaplane.store)
    └── PipelineError
        ├── SnapshotError        a snapshot folder that is missing, incomplete or not ours
        ├── EtcdctlOutputError   not the JSON that `etcdctl get / --prefix -w json` prints
        ├── KafkaDumpError       a Kafka ZooKeeper dump (or tree) that cannot be read
        ├── ImportConflict       the target store holds other values where an import writes
        ├── InvalidSetting       an option out of range: a threshold, a retention, a size
        ├── PlanError            a rebalance plan that cannot be read or is not one
        └── SparkJobFailed       Spark refused or failed a job (its first error line kept)

Bad keys and values inside a snapshot are never errors: they are audit findings.
"""

from __future__ import annotations

from collections.abc import Sequence

from metaplane.store import MetadataError


class PipelineError(MetadataError):
    """The base of every error of the pipeline."""


class SnapshotError(PipelineError):
    """A snapshot folder that is missing, incomplete, or not in the snapshot format."""


class EtcdctlOutputError(PipelineError):
    """A file that is not the JSON `etcdctl get / --prefix -w json` prints."""


class KafkaDumpError(PipelineError):
    """A Kafka 0.8 ZooKeeper dump with a broken line, or a tree that cannot be read."""


class ImportConflict(PipelineError):
    """The target store already holds other values at keys the import would write."""

    def __init__(self, keys: Sequence[str]) -> None:
        shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
        super().__init__(
            f"{len(keys)} key(s) already hold other values: {shown}; nothing was written"
        )
        self.keys = tuple(keys)


class InvalidSetting(PipelineError, ValueError):
    """An option the pipeline cannot work with (a negative threshold, a bad duration…)."""


class PlanError(PipelineError):
    """A rebalance plan file that cannot be read, is not a plan, or names bad moves."""


class SparkJobFailed(PipelineError):
    """Spark failed a job; the message is the first line of its error."""
