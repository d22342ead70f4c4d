"""Namespaces and their policies as operations: list, read (with the policy's version),
create, change over a version, delete. The documents are what the CLI's -o json prints and
the HTTP API returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from metaplane import layout
from metaplane.admin._cluster_ops import check_expected
from metaplane.layout import KeyKind, LayoutError
from metaplane.resources import (
    MalformedValue,
    NamespaceManager,
    NamespacePolicy,
    Versioned,
    decode,
)
from metaplane.store import Entry, InvalidValue, List

POLICY_FIELDS = NamespacePolicy.__struct_fields__
NAMESPACES = List(layout.namespaces_prefix())


def policy_document(policy: NamespacePolicy) -> dict[str, Any]:
    """The policy as stored (a field Danube leaves out stays out)."""
    document: dict[str, Any] = msgspec.to_builtins(policy)
    return document


def with_limits(policy: NamespacePolicy, limits: Mapping[str, int | None]) -> NamespacePolicy:
    """`policy` with the limits that were given (not None) replaced; an unknown field or a
    value out of range is `InvalidValue`."""
    given = {name: value for name, value in limits.items() if value is not None}
    unknown = sorted(set(given) - set(POLICY_FIELDS))
    if unknown:
        raise InvalidValue(f"no such policy field: {', '.join(unknown)}")
    try:
        changed = msgspec.structs.replace(policy, **given)
        return decode(NamespacePolicy, msgspec.json.encode(changed))
    except MalformedValue as error:
        raise InvalidValue(str(error)) from None


def policy_at(entry: Entry) -> NamespacePolicy:
    """The policy `entry` holds; a malformed one is named by its key, for the operator."""
    try:
        return decode(NamespacePolicy, entry.value)
    except MalformedValue as error:
        raise InvalidValue(f"{entry.key}: {error}") from None


async def namespaces(manager: NamespaceManager) -> list[dict[str, Any]]:
    """Every namespace with its number of topics and its policy, from one read."""
    view = await manager.reader.read(NAMESPACES)
    policies: dict[str, NamespacePolicy] = {}
    topics: dict[str, int] = {}
    for entry in view.entries(NAMESPACES):
        try:
            key = layout.parse(entry.key)
        except LayoutError:
            continue
        if key.namespace is None:
            continue
        if key.kind is KeyKind.NAMESPACE_POLICY:
            policies[key.namespace] = policy_at(entry)
        elif key.kind is KeyKind.NAMESPACE_TOPIC:
            topics[key.namespace] = topics.get(key.namespace, 0) + 1
    return [
        {"namespace": name, "topics": topics.get(name, 0), "policy": policy_document(policy)}
        for name, policy in sorted(policies.items())
    ]


def versioned_policy(namespace: str, policy: Versioned[NamespacePolicy]) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "version": policy.version,
        "policy": policy_document(policy.value),
    }


async def read_policy(manager: NamespaceManager, namespace: str) -> dict[str, Any]:
    """A namespace's policy and its version (the ETag of the API); `NoNamespace`."""
    layout.namespace_policy(namespace)  # a bad name is a bad request, not "no namespace"
    return versioned_policy(namespace, await manager.policy(namespace))


async def create(
    manager: NamespaceManager, namespace: str, policy: NamespacePolicy
) -> dict[str, Any]:
    """Create a namespace with `policy`; `NamespaceExists`."""
    revision = await manager.create(namespace, policy)
    return {
        "namespace": namespace,
        "version": 1,
        "policy": policy_document(policy),
        "revision": revision,
    }


async def change_policy(
    manager: NamespaceManager,
    namespace: str,
    changes: Mapping[str, int | None],
    expect: int | None = None,
    *,
    replace: NamespacePolicy | None = None,
) -> dict[str, Any]:
    """Write the policy with `changes` (or the whole `replace`) over the version read, or
    the one `expect` names: a concurrent change makes it fail instead of being lost."""
    current = await manager.policy(namespace)
    check_expected(current, expect)
    changed = with_limits(replace or current.value, changes)
    revision = await manager.set_policy(namespace, changed, current.version)
    return {
        "namespace": namespace,
        "version": current.version + 1,
        "policy": policy_document(changed),
        "revision": revision,
    }


async def delete(
    manager: NamespaceManager, namespace: str, expect: int | None = None
) -> dict[str, Any]:
    """Delete an empty namespace (at version `expect` of its policy, if given), atomically
    refused while it lists a topic; `NamespaceNotEmpty`, `NoNamespace`, `BadVersion`."""
    revision = await manager.delete(namespace, expect)
    return {"namespace": namespace, "revision": revision}
