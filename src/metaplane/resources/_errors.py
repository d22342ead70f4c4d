"""The errors of the resources layer, rooted in the store's tree.

InvalidValue (metaplane.store)
└── MalformedValue      a value without its kind's format: broken JSON, a wrong type, a
                        missing field, a negative or above-u64 number, an unknown enum value
"""

from __future__ import annotations

from metaplane.store import InvalidValue


class MalformedValue(InvalidValue):
    """A value that does not have the format of its kind; never a raw msgspec exception."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"malformed {what} value: {reason}")
        self.what = what
        self.reason = reason
