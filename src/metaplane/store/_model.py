"""The values the store contract speaks in: entries, expectations, compares, operations,
transaction results, watch events and leases.

An operation is a value; a store executes it. `put()` and friends are thin wrappers.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, overload

from metaplane.store._errors import InvalidRequest, InvalidTxn, TxnTooLarge
from metaplane.store._keys import check_key, check_prefix, check_value, in_prefix

MAX_TXN_OPS = 128

MAX_INT64 = 2**63 - 1
"""The largest number the contract passes to a backend: etcd's revisions, versions, lease ids
and limits are int64, and every backend takes the same range."""


def check_int(value: object, what: str, low: int, high: int = MAX_INT64) -> int:
    """Return `value` if it is an int (not a bool) from `low` to `high`, else raise
    `InvalidRequest` naming the bounds."""
    if type(value) is not int or not low <= value <= high:
        bound = "etcd's int64" if high == MAX_INT64 else "the contract's limit"
        raise InvalidRequest(f"{what} is an int from {low} to {high} ({bound}), not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Entry:
    """A key as stored: its value and the revisions that describe its history.

    `version` counts writes since the key was created (1 on create); `create_revision` and
    `mod_revision` are the store revisions of its creation and last write; `lease` is 0 when
    the key is not attached to a lease.
    """

    key: str
    value: bytes
    version: int
    create_revision: int
    mod_revision: int
    lease: int = 0


class Expect(enum.Enum):
    """What a write expects of the key before it: anything, or that it does not exist."""

    ANY = "any"
    ABSENT = "absent"

    def __repr__(self) -> str:
        return self.name


ANY = Expect.ANY
ABSENT = Expect.ABSENT

Expectation: TypeAlias = Expect | int
"""ANY, ABSENT, or the version the key must have."""


class Target(enum.Enum):
    VERSION = "version"
    CREATE_REVISION = "create_revision"
    MOD_REVISION = "mod_revision"
    VALUE = "value"


CompareOp: TypeAlias = Literal["==", "!=", "<", ">"]
_COMPARE_OPS = ("==", "!=", "<", ">")


@dataclass(frozen=True, slots=True)
class Compare:
    """A condition of a transaction on one key, as etcd evaluates it; or, made by
    `Compare.empty(prefix)`, on a whole prefix.

    A missing key has version, create_revision and mod_revision 0; a compare on the value
    of a missing key is always false.
    """

    key: str
    target: Target
    op: CompareOp
    operand: int | bytes
    whole_prefix: bool = False

    def __post_init__(self) -> None:
        if self.whole_prefix:
            check_prefix(self.key)
            if (self.target, self.op, self.operand) != (Target.CREATE_REVISION, "==", 0):
                raise InvalidTxn("a prefix compare is Compare.empty(prefix) and nothing else")
        else:
            check_key(self.key)
        if self.op not in _COMPARE_OPS:
            raise InvalidTxn(f"compare operator {self.op!r} is not one of {_COMPARE_OPS}")
        if self.target is Target.VALUE:
            if type(self.operand) is not bytes:
                raise InvalidTxn(f"{self.key}: a value compare takes bytes")
        elif type(self.operand) is not int or not 0 <= self.operand <= MAX_INT64:
            raise InvalidTxn(
                f"{self.key}: a {self.target.value} compare takes an int from 0 to "
                f"{MAX_INT64} (etcd's int64), not {self.operand!r}"
            )

    @classmethod
    def version(cls, key: str, op: CompareOp, version: int) -> Compare:
        return cls(key, Target.VERSION, op, version)

    @classmethod
    def create_revision(cls, key: str, op: CompareOp, revision: int) -> Compare:
        return cls(key, Target.CREATE_REVISION, op, revision)

    @classmethod
    def mod_revision(cls, key: str, op: CompareOp, revision: int) -> Compare:
        return cls(key, Target.MOD_REVISION, op, revision)

    @classmethod
    def value(cls, key: str, op: CompareOp, value: bytes) -> Compare:
        return cls(key, Target.VALUE, op, value)

    @classmethod
    def exists(cls, key: str) -> Compare:
        return cls(key, Target.CREATE_REVISION, ">", 0)

    @classmethod
    def absent(cls, key: str) -> Compare:
        return cls(key, Target.CREATE_REVISION, "==", 0)

    @classmethod
    def empty(cls, prefix: str) -> Compare:
        """Nothing under `prefix` (nor the key itself). Its negation is the failure branch:
        "not empty" has no portable form (etcd compares the key and its children apart)."""
        return cls(prefix, Target.CREATE_REVISION, "==", 0, whole_prefix=True)

    @property
    def cost(self) -> int:
        """What the compare counts against MAX_TXN_OPS (a prefix compare is two ranges)."""
        return 2 if self.whole_prefix and self.key != "/" else 1

    def holds(self, entry: Entry | None) -> bool:
        """Evaluate the compare against the key's current entry (None when missing)."""
        if self.target is Target.VALUE:
            if entry is None:
                return False
            return _apply(self.op, entry.value, self.operand)
        if entry is None:
            actual = 0
        elif self.target is Target.VERSION:
            actual = entry.version
        elif self.target is Target.CREATE_REVISION:
            actual = entry.create_revision
        else:
            actual = entry.mod_revision
        return _apply(self.op, actual, self.operand)


def _apply(op: CompareOp, actual: int | bytes, operand: int | bytes) -> bool:
    if op == "==":
        return actual == operand
    if op == "!=":
        return actual != operand
    if op == "<":
        return actual < operand  # type: ignore[operator]
    return actual > operand  # type: ignore[operator]


@dataclass(frozen=True, slots=True)
class Get:
    """Read one key."""

    key: str

    def __post_init__(self) -> None:
        check_key(self.key)


@dataclass(frozen=True, slots=True)
class List:
    """Read a prefix: the key itself and every key under it, in key order (descending with
    `reverse`), only those after `start_after` and before `end_before`, at most `limit`."""

    prefix: str
    keys_only: bool = False
    limit: int | None = None
    start_after: str | None = None
    end_before: str | None = None
    reverse: bool = False

    def __post_init__(self) -> None:
        check_prefix(self.prefix)
        check_limit(self.limit)
        for bound in (self.start_after, self.end_before):
            if bound is not None:
                check_key(bound)

    def within(self, key: str) -> bool:
        """True if `key` lies between the bounds (not checking the prefix)."""
        return (self.start_after is None or key > self.start_after) and (
            self.end_before is None or key < self.end_before
        )


@dataclass(frozen=True, slots=True)
class Put:
    """Write one key, attached to a lease when `lease` is not 0."""

    key: str
    value: bytes
    lease: int = 0

    def __post_init__(self) -> None:
        check_key(self.key)
        object.__setattr__(self, "value", check_value(self.key, self.value))
        object.__setattr__(self, "lease", lease_id(self.lease))


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete one key (nothing happens if it is missing)."""

    key: str

    def __post_init__(self) -> None:
        check_key(self.key)


@dataclass(frozen=True, slots=True)
class DeletePrefix:
    """Delete a prefix: the key itself and every key under it."""

    prefix: str

    def __post_init__(self) -> None:
        check_prefix(self.prefix)


Operation: TypeAlias = Get | List | Put | Delete | DeletePrefix


def op_cost(op: Operation) -> int:
    """What an operation counts against MAX_TXN_OPS: a prefix operation other than on the
    root is two ranges (the key itself and the keys under it)."""
    if isinstance(op, List | DeletePrefix) and op.prefix != "/":
        return 2
    return 1


@dataclass(frozen=True, slots=True)
class Txn:
    """If every compare holds, run `on_success`, else `on_failure`; all or nothing."""

    compares: tuple[Compare, ...] = ()
    on_success: tuple[Operation, ...] = ()
    on_failure: tuple[Operation, ...] = ()

    def __post_init__(self) -> None:
        for name in ("compares", "on_success", "on_failure"):
            if type(getattr(self, name)) is not tuple:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        for compare in self.compares:
            if not isinstance(compare, Compare):
                raise InvalidTxn(f"not a Compare: {compare!r}")
        cost = sum(compare.cost for compare in self.compares)
        if cost > MAX_TXN_OPS:
            raise TxnTooLarge(f"{cost} compares (a prefix compare counts as two); at most 128")
        for branch in (self.on_success, self.on_failure):
            _check_branch(branch)

    @property
    def writes(self) -> bool:
        return any(isinstance(op, Put | Delete | DeletePrefix) for op in self.on_success) or any(
            isinstance(op, Put | Delete | DeletePrefix) for op in self.on_failure
        )


def _check_branch(ops: tuple[Operation, ...]) -> None:
    if len(ops) == 1 and isinstance(ops[0], Get | List | Put | Delete | DeletePrefix):
        return  # nothing to conflict with, and within the limit
    cost = 0
    for op in ops:
        if not isinstance(op, Get | List | Put | Delete | DeletePrefix):
            raise InvalidTxn(f"not an operation: {op!r}")
        cost += op_cost(op)
    if cost > MAX_TXN_OPS:
        raise TxnTooLarge(
            f"{cost} operations in one branch; at most {MAX_TXN_OPS} "
            "(a prefix operation counts as two)"
        )
    # etcd refuses a branch that writes a key twice; every backend refuses it alike.
    written: set[str] = set()
    prefixes: list[str] = []
    for op in ops:
        if isinstance(op, Put | Delete):
            if op.key in written:
                raise InvalidTxn(f"{op.key}: written twice in one transaction")
            written.add(op.key)
        elif isinstance(op, DeletePrefix):
            prefixes.append(op.prefix)
    for prefix in prefixes:
        for key in written:
            if in_prefix(key, prefix):
                raise InvalidTxn(f"{key}: written and deleted by prefix in one transaction")
    if len(prefixes) > len(set(prefixes)):
        raise InvalidTxn("the same prefix is deleted twice in one transaction")


@dataclass(frozen=True, slots=True)
class Listing(Sequence[Entry]):
    """The entries of a prefix in key order, read at one revision."""

    entries: tuple[Entry, ...]
    revision: int
    more: bool = False

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        return self.entries[index]

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def keys(self) -> list[str]:
        return [entry.key for entry in self.entries]


OpResult: TypeAlias = Entry | Listing | int | None
"""Get → Entry | None; List → Listing; Put → revision; Delete, DeletePrefix → keys deleted."""


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Which branch ran, the store revision after it, and one result per operation."""

    succeeded: bool
    revision: int
    results: tuple[OpResult, ...] = field(default=())

    def entry(self, index: int) -> Entry | None:
        result = self.results[index]
        if result is not None and not isinstance(result, Entry):
            raise TypeError(f"operation {index} is not a Get")
        return result

    def listing(self, index: int) -> Listing:
        result = self.results[index]
        if not isinstance(result, Listing):
            raise TypeError(f"operation {index} is not a List")
        return result

    def count(self, index: int) -> int:
        result = self.results[index]
        if type(result) is not int:
            raise TypeError(f"operation {index} is not a Delete or DeletePrefix")
        return result


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change of one key. A DELETE carries the key and the revision of the delete, with
    an empty value and version 0."""

    type: EventType
    entry: Entry

    @property
    def key(self) -> str:
        return self.entry.key

    @property
    def revision(self) -> int:
        return self.entry.mod_revision


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Every event of one revision under the watched prefix, delivered together. A batch
    without events is a progress notification: nothing under the prefix changed up to
    `revision`."""

    revision: int
    events: tuple[WatchEvent, ...]


def deleted_entry(key: str, revision: int) -> Entry:
    return Entry(key, b"", 0, 0, revision, 0)


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease granted by the store: keys put with it vanish when it expires or is revoked."""

    id: int
    ttl: int


def lease_id(lease: Lease | int | None) -> int:
    """The id of `lease` (0: no lease), checked: a Lease or an id from 0 to MAX_INT64."""
    if lease is None:
        return 0
    if isinstance(lease, Lease):
        return check_int(lease.id, "a lease id", 1)
    if type(lease) is not int or not 0 <= lease <= MAX_INT64:
        raise InvalidRequest(
            f"a lease is a Lease or a lease id from 0 to {MAX_INT64} (etcd's int64), not {lease!r}"
        )
    return lease


def check_limit(limit: int | None) -> None:
    if limit is not None:
        check_int(limit, "limit", 1)


def check_revision(revision: object, what: str = "revision") -> int:
    """A revision a caller names (to read, watch from or compact): 1 to MAX_INT64."""
    return check_int(revision, what, 1)


def check_expectation(expect: object) -> Expectation:
    if isinstance(expect, Expect):
        return expect
    if type(expect) is not int or not 1 <= expect <= MAX_INT64:
        raise InvalidRequest(
            f"expect is ANY, ABSENT or a version from 1 to {MAX_INT64} (etcd's int64), "
            f"not {expect!r}"
        )
    return expect
