"""The rules for keys and values, and segment-aware prefix matching.

A key is an absolute path of `/`-separated segments, none empty, none `.` or `..`, without
control characters or lone surrogates, at most 4 KiB in UTF-8. A prefix is `/` or a key; it
covers the key itself and every key under it, never a sibling that merely shares its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from metaplane.store._errors import InvalidKey, InvalidValue, ValueTooLarge

MAX_KEY_BYTES = 4096
MAX_VALUE_BYTES = 1024 * 1024
ROOT = "/"

# One segment: anything but "/", control characters (Unicode Cc) and lone surrogates,
# and not "." or "..".
_SEGMENT = r"(?!\.\.?(?:/|$))[^/\x00-\x1f\x7f-\x9f\ud800-\udfff]+"
_KEY = re.compile(rf"(?:/{_SEGMENT})+")


def check_key(key: object) -> str:
    """Return `key` if it is a valid key, else raise `InvalidKey` saying why."""
    if type(key) is not str:
        raise InvalidKey(key, f"a key is a str, not {type(key).__name__}")
    if _KEY.fullmatch(key) is None:
        raise InvalidKey(key, _why_not(key))
    # A character takes at most 4 bytes in UTF-8: most keys skip the encoding.
    if len(key) * 4 > MAX_KEY_BYTES and len(key.encode()) > MAX_KEY_BYTES:
        raise InvalidKey(key[:64] + "…", f"longer than {MAX_KEY_BYTES} bytes in UTF-8")
    return key


def check_prefix(prefix: object) -> str:
    """Return `prefix` if it is `/` or a valid key."""
    if prefix == ROOT:
        return ROOT
    return check_key(prefix)


def check_value(key: str, value: object) -> bytes:
    """Return `value` as bytes if it is bytes within the size limit."""
    if type(value) is not bytes:
        if isinstance(value, bytearray | memoryview):
            value = bytes(value)
        else:
            raise InvalidValue(f"{key}: a value is bytes, not {type(value).__name__}")
    if len(value) > MAX_VALUE_BYTES:
        raise ValueTooLarge(key, len(value), MAX_VALUE_BYTES)
    return value


def _why_not(key: str) -> str:
    if not key.startswith("/"):
        return "a key is an absolute path starting with '/'"
    for segment in key[1:].split("/"):
        if segment == "":
            return "empty segment (a key has no '//' and does not end with '/')"
        if segment in (".", ".."):
            return f"segment {segment!r} is not allowed"
        for char in segment:
            if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F:
                return f"control character {char!r}"
            if 0xD800 <= ord(char) <= 0xDFFF:
                return f"lone surrogate {char!r}"
    return "not a valid path"


def in_prefix(key: str, prefix: str) -> bool:
    """True if `key` is `prefix` itself or lies under it."""
    if prefix == ROOT:
        return True
    return key.startswith(prefix) and (len(key) == len(prefix) or key[len(prefix)] == "/")


def children_prefix(prefix: str) -> str:
    """The text every key strictly under `prefix` starts with."""
    return ROOT if prefix == ROOT else prefix + "/"


def prefix_end(prefix: str) -> str:
    """The smallest key above every key under `prefix`: `/a` → `/a0` ('0' follows '/')."""
    return "0" if prefix == ROOT else prefix + "0"


def child_segment(key: str, prefix: str) -> str | None:
    """The segment right below `prefix` on the way to `key`, or None for the prefix itself."""
    start = len(children_prefix(prefix))
    if len(key) < start:
        return None
    end = key.find("/", start)
    return key[start:] if end < 0 else key[start:end]


def ancestors(key: str) -> Iterator[str]:
    """`key` itself, then every prefix it lies under, up to and including `/`."""
    yield key
    end = key.rfind("/")
    while end > 0:
        key = key[:end]
        yield key
        end = key.rfind("/")
    if key != ROOT:
        yield ROOT


def covering(prefixes: Iterable[str]) -> tuple[str, ...]:
    """The prefixes without those another one of them covers, sorted."""
    wanted = set(prefixes)
    if ROOT in wanted:
        return (ROOT,)
    kept = []
    for prefix in wanted:
        end = prefix.rfind("/")
        while end > 0 and prefix[:end] not in wanted:
            end = prefix.rfind("/", 0, end)
        if end <= 0:  # no ancestor below the root is wanted (nor the root)
            kept.append(prefix)
    kept.sort()
    return tuple(kept)


def ranges_in_key_order(prefixes: Iterable[str]) -> list[tuple[str, str | None]]:
    """The key ranges that make `prefixes` (none covering another), in key order: for each,
    the prefix's own key as `(key, None)` and its children as `[start, end)`. Sorting the
    prefixes is not enough: `/a`'s children come after `/a-b` and all of its keys (`-` and
    `.` sort before `/`). The ranges of prefixes that do not cover each other are disjoint,
    so in order of their starts they are in key order."""
    ranges: list[tuple[str, str | None]] = []
    for prefix in prefixes:
        if prefix != ROOT:
            ranges.append((prefix, None))
        ranges.append((children_prefix(prefix), prefix_end(prefix)))
    ranges.sort(key=lambda found: found[0])
    return ranges
