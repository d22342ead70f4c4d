"""The namespace manager: a namespace is its policy key; its topics are listed under it, and
it cannot be deleted while it lists any.
"""

from __future__ import annotations

from functools import partial

from metaplane import layout
from metaplane.layout import TopicName, parse
from metaplane.resources._change import Change, at_version, key_absent, key_exists, prefix_empty
from metaplane.resources._errors import NamespaceExists, NamespaceNotEmpty, NoNamespace
from metaplane.resources._reader import Manager, Reader, Versioned
from metaplane.resources._values import NamespacePolicy, encode
from metaplane.store import DeletePrefix, Get, List, Put


class NamespaceManager(Manager):
    """Create, read, update and delete namespaces; list them and their topics.

    Every write has a `…_change` form that returns the change unapplied.
    """

    def create_change(self, namespace: str, policy: NamespacePolicy | None = None) -> Change:
        key = layout.namespace_policy(namespace)
        value = NamespacePolicy() if policy is None else policy
        return Change(
            (key_absent(key, partial(NamespaceExists, namespace)),), (Put(key, encode(value)),)
        )

    async def create(self, namespace: str, policy: NamespacePolicy | None = None) -> int:
        """Create `namespace` with `policy` (default: every limit off); `NamespaceExists`."""
        return await self.writer.apply(self.create_change(namespace, policy))

    async def policy(self, namespace: str) -> Versioned[NamespacePolicy]:
        """The namespace's policy and its version; `NoNamespace`."""
        found = await self.reader.get(layout.namespace_policy(namespace), NamespacePolicy)
        if found is None:
            raise NoNamespace(namespace)
        return found

    def set_policy_change(self, namespace: str, policy: NamespacePolicy, version: int) -> Change:
        key = layout.namespace_policy(namespace)
        return Change(
            (at_version(key, version, lambda: NoNamespace(namespace)),),
            (Put(key, encode(policy)),),
        )

    async def set_policy(self, namespace: str, policy: NamespacePolicy, version: int) -> int:
        """Replace the policy read at `version`; `BadVersion`, `NoNamespace`."""
        return await self.writer.apply(self.set_policy_change(namespace, policy, version))

    async def namespaces(self) -> list[str]:
        """Every namespace, sorted."""
        return await self.reader.children(layout.namespaces_prefix())

    async def topics(self, namespace: str) -> list[TopicName]:
        """The topics listed in `namespace`, sorted; `NoNamespace`."""
        return await namespace_topics(self.reader, namespace)

    def delete_change(self, namespace: str, version: int | None = None) -> Change:
        key = layout.namespace_policy(namespace)
        missing = partial(NoNamespace, namespace)
        exists = key_exists(key, missing) if version is None else at_version(key, version, missing)
        not_empty = prefix_empty(
            layout.namespace_topics_prefix(namespace), lambda: NamespaceNotEmpty(namespace)
        )
        return Change((exists, not_empty), (DeletePrefix(layout.namespace_prefix(namespace)),))

    async def delete(self, namespace: str, version: int | None = None) -> int:
        """Delete the namespace, at `version` of its policy if given; refused atomically with
        `NamespaceNotEmpty` while it lists a topic. `NoNamespace`, `BadVersion`."""
        return await self.writer.apply(self.delete_change(namespace, version))


async def namespace_topics(reader: Reader, namespace: str) -> list[TopicName]:
    """The topics listed in `namespace`, read with its policy at one revision; `NoNamespace`."""
    policy = layout.namespace_policy(namespace)
    listed = List(layout.namespace_topics_prefix(namespace), keys_only=True)
    view = await reader.read(Get(policy), listed)
    if view.entry(policy) is None:
        raise NoNamespace(namespace)
    topics = (parse(entry.key).topic_name for entry in view.entries(listed))
    return [topic for topic in topics if topic is not None]
