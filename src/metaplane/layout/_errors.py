"""The errors of the layout: a name, a number or a key that has no place in the key space.

    InvalidKey (metaplane.store)    a key the store refuses
    └── LayoutError                 a key, or a segment meant for one, that the layout refuses
        ├── InvalidName             a namespace, topic, subscription, subject or cluster name
        │   └── ReservedName        a name that would make some key ambiguous
        ├── InvalidNumber           an id, version, offset or partition index out of range
        │                           or not canonical
        └── UnknownKey              a path that is no kind of key of the layout

`LayoutError` subclasses `InvalidKey` rather than the broader `InvalidRequest`: every layout
error says "this cannot be a key (or a segment of one)", so code that maps a refused key to a
client error (the admin API's 400) handles both with one `except InvalidKey`.
"""

from __future__ import annotations

from metaplane.store import InvalidKey


class LayoutError(InvalidKey):
    """A key, or a name or number meant for a key segment, that the layout refuses."""

    def __init__(self, message: str, key: object = None) -> None:
        # InvalidKey's own constructor words its message for a whole key; ours may be a name.
        Exception.__init__(self, message)
        self.key = key
        self.reason = message

    def in_key(self, key: str) -> LayoutError:
        """Name the key this error was found in, unless it names one already; returns self."""
        if self.key is None:
            self.key = key
            self.args = (f"{self.args[0]} (in key {key!r})",)
        return self


class InvalidName(LayoutError):
    """A name that breaks the naming rules of its kind (`what`: "namespace", "topic", …)."""

    def __init__(self, what: str, name: object, reason: str) -> None:
        super().__init__(f"invalid {what} name {name!r}: {reason}")
        self.what = what
        self.name = name


class ReservedName(InvalidName):
    """A name the layout reserves, because a key built from it would be ambiguous."""


class InvalidNumber(LayoutError):
    """An id, version, offset or partition index that is out of range or not canonical."""

    def __init__(self, what: str, value: object, reason: str) -> None:
        super().__init__(f"invalid {what} {value!r}: {reason}")
        self.what = what
        self.value = value


class UnknownKey(LayoutError):
    """A path that is no kind of key of the layout."""

    def __init__(self, key: object, reason: str) -> None:
        super().__init__(f"{key!r} is not a key of the layout: {reason}", key)
