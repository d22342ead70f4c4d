"""The naming rules of the layout: which names and numbers may stand in a key segment.

Names follow Danube's topic validation (letters, digits, '_', '-'; subjects may also hold '.'),
in ASCII only so that Python's and Java's regexes agree on them; 1 to 255 characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from metaplane.layout._errors import InvalidName, InvalidNumber, ReservedName

U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1
MAX_NAME_LENGTH = 255
OFFSET_DIGITS = 20
PARTITION_SUFFIX = "-part-"

_CANONICAL_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_PADDED_OFFSET = re.compile(rf"[0-9]{{{OFFSET_DIGITS}}}")


_KNOWN_NAMES = 1 << 16
"""Valid names each rule remembers, so that a key built again is not checked again."""


@dataclass(frozen=True)
class NameRule:
    """The rule for one kind of name: its characters (a regex class body) and reserved words."""

    what: str
    chars: str
    reserved: Mapping[str, str] = field(default_factory=dict)
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _known: dict[str, None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", re.compile(f"[{self.chars}]+"))
        object.__setattr__(self, "_known", {})

    def check(self, name: object) -> str:
        """Return `name` if it is a valid name of this kind, else raise `InvalidName`."""
        if type(name) is str and name in self._known:
            return name
        if type(name) is not str:
            raise InvalidName(self.what, name, f"a name is a str, not {type(name).__name__}")
        if not 1 <= len(name) <= MAX_NAME_LENGTH:
            raise InvalidName(self.what, name, f"length {len(name)} is not 1 to {MAX_NAME_LENGTH}")
        if self._pattern.fullmatch(name) is None:
            raise InvalidName(self.what, name, f"only ASCII [{self.chars}] are allowed")
        if name in self.reserved:
            raise ReservedName(self.what, name, f"reserved: {self.reserved[name]}")
        if len(self._known) >= _KNOWN_NAMES:
            self._known.clear()
        self._known[name] = None
        return name


def _reasons(**reasons: str) -> Mapping[str, str]:
    return MappingProxyType(reasons)


_CLUSTER_KEY = "'/cluster/{0}' is {1}"
NAMESPACE = NameRule(
    "namespace",
    "A-Za-z0-9_-",
    {
        "state": "'/cluster/brokers/{id}/state' is a broker's state key; the assignments of a "
        "namespace 'state' would sit under it and be caught by its prefix"
    },
)
TOPIC = NameRule("topic", "A-Za-z0-9_-")
SUBSCRIPTION = NameRule("subscription", "A-Za-z0-9_-")
LOCK = NameRule("lock", "A-Za-z0-9_-")
SUBJECT = NameRule(
    "subject",
    "A-Za-z0-9._-",
    {
        "_global": "'/schemas/_global' holds the registry's id counter",
        "_index": "'/schemas/_index' holds the registry's id index",
        ".": "'.' is not a path segment",
        "..": "'..' is not a path segment",
    },
)
CLUSTER_NAME = NameRule(
    "cluster",
    "A-Za-z0-9_-",
    {
        word: _CLUSTER_KEY.format(word, what)
        for word, what in {
            "register": "the prefix of broker registrations",
            "brokers": "the prefix of broker states and assignments",
            "unassigned": "the prefix of unassigned topics",
            "load": "the prefix of load reports",
            "leader": "the leader key",
            "leader_epoch": "the leader epoch key",
            "load_balance": "Danube's legacy load-balance decision key",
            "cluster-name": "Danube's legacy cluster-name key",
            "locks": "the prefix of fenced locks",
        }.items()
    },
)
NAME_RULES: Mapping[str, NameRule] = MappingProxyType(
    {
        "cluster_name": CLUSTER_NAME,
        "namespace": NAMESPACE,
        "topic": TOPIC,
        "subscription": SUBSCRIPTION,
        "subject": SUBJECT,
        "lock_name": LOCK,
    }
)


def check_namespace(name: object) -> str:
    """Return `name` if it is a valid namespace name, else raise `InvalidName`."""
    return NAMESPACE.check(name)


def check_topic(name: object) -> str:
    """Return `name` if it is a valid topic name (without its namespace)."""
    return TOPIC.check(name)


def check_subscription(name: object) -> str:
    """Return `name` if it is a valid subscription name."""
    return SUBSCRIPTION.check(name)


def check_subject(name: object) -> str:
    """Return `name` if it is a valid schema subject name."""
    return SUBJECT.check(name)


def check_lock_name(name: object) -> str:
    """Return `name` if it is a valid lock name."""
    return LOCK.check(name)


def check_cluster_name(name: object) -> str:
    """Return `name` if it is a valid cluster name."""
    return CLUSTER_NAME.check(name)


def check_number(what: str, value: object, low: int = 0, high: int = U64_MAX) -> int:
    """Return `value` if it is an int in [low, high] (u64 by default), else raise."""
    if type(value) is not int:
        raise InvalidNumber(what, value, f"a {what} is an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidNumber(what, value, f"out of range {low}..{high}")
    return value


def parse_decimal(what: str, text: str, low: int = 0, high: int = U64_MAX) -> int:
    """The number a key segment holds: a canonical decimal (no sign, no leading zeros)."""
    if _CANONICAL_DECIMAL.fullmatch(text) is None:
        raise InvalidNumber(what, text, "not a canonical decimal (digits, no leading zeros)")
    return check_number(what, int(text), low, high)


def padded_offset(offset: int) -> str:
    """An offset as the 20-digit zero-padded text that sorts like the number."""
    return f"{check_number('offset', offset):0{OFFSET_DIGITS}d}"


def parse_padded_offset(text: str) -> int:
    """The offset of a 20-digit zero-padded text, the inverse of `padded_offset`."""
    if type(text) is not str or _PADDED_OFFSET.fullmatch(text) is None:
        raise InvalidNumber("offset", text, f"not {OFFSET_DIGITS} decimal digits")
    return check_number("offset", int(text))


@dataclass(frozen=True, slots=True, order=True)
class TopicName:
    """A topic: its namespace and its name in it; `path` is Danube's "/namespace/topic"."""

    namespace: str
    topic: str
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_namespace(self.namespace)
        check_topic(self.topic)
        # Topics key many dicts on hot paths: the hash is made once.
        object.__setattr__(self, "_hash", hash((self.namespace, self.topic)))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def parse(cls, path: str) -> TopicName:
        """The topic of a "/namespace/topic" path."""
        parts = path.split("/") if type(path) is str else []
        if len(parts) != 3 or parts[0] != "":
            raise InvalidName("topic", path, "a topic path is '/namespace/topic'")
        return cls(parts[1], parts[2])

    @property
    def path(self) -> str:
        """The topic as Danube writes it in values: "/namespace/topic"."""
        return f"/{self.namespace}/{self.topic}"

    def __str__(self) -> str:
        return self.path

    def partition(self, index: int) -> TopicName:
        """Partition `index` of this topic: the topic named "{topic}-part-{index}"."""
        check_number("partition index", index, 0, U32_MAX)
        return TopicName(self.namespace, f"{self.topic}{PARTITION_SUFFIX}{index}")

    def partitions(self, count: int) -> tuple[TopicName, ...]:
        """The `count` partitions of this topic (none for 0, a non-partitioned topic)."""
        check_number("partition count", count, 0, U32_MAX)
        return tuple(self.partition(index) for index in range(count))

    @property
    def partition_index(self) -> int | None:
        """The index if this topic is a partition ("{topic}-part-{i}"), else None."""
        split = self._partition_split()
        return None if split is None else split[1]

    @property
    def partitioned_topic(self) -> TopicName | None:
        """The topic this one is a partition of, or None if it is not a partition."""
        split = self._partition_split()
        return None if split is None else TopicName(self.namespace, split[0])

    def _partition_split(self) -> tuple[str, int] | None:
        base, suffix, index = self.topic.rpartition(PARTITION_SUFFIX)
        if not base or not suffix or _CANONICAL_DECIMAL.fullmatch(index) is None:
            return None
        if int(index) > U32_MAX:
            return None
        return base, int(index)
