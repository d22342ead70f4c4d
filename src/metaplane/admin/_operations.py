"""The one set of operations behind both faces of metaplane's operator surface: the CLI
(`metaplane …`) and the HTTP API (`metaplane serve`) call these and nothing else, so that a
command and an endpoint are the same operation shown two ways. Reads go through a LocalCache
when one is given (the API server keeps one), writes through the managers' one write path;
after a write, a cached read waits for that write's revision (read your writes).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import httpx

from metaplane.admin import _cluster_ops as cluster_ops
from metaplane.admin import _namespace_ops as namespace_ops
from metaplane.admin import _schema_ops as schema_ops
from metaplane.admin import _subscription_ops as subscription_ops
from metaplane.admin import _topic_ops as topic_ops
from metaplane.admin._errors import BrokerUnreachable
from metaplane.admin._schema_ops import stored_json
from metaplane.cache import LocalCache
from metaplane.layout import TopicName
from metaplane.resources import (
    ClusterManager,
    Delivery,
    NamespaceManager,
    NamespacePolicy,
    NoSubscription,
    Reader,
    SubscriptionManager,
    SubscriptionType,
    TopicManager,
    TopicNotOwned,
)
from metaplane.schema import SchemaRegistry
from metaplane.store import Entry, InvalidRequest, MetadataStore, NotFound

BROKER_TIMEOUT = 10.0
"""Seconds a broker's admin endpoint has to answer a cursor reset."""


class HttpBrokerAdmin:
    """Cursor resets sent to the owning broker's admin endpoint (`admin_addr`)."""

    def __init__(self) -> None:
        self._client = httpx.AsyncClient(timeout=BROKER_TIMEOUT)

    async def reset_cursor(
        self, broker_id: int, address: str, topic: TopicName, subscription: str, offset: int
    ) -> int:
        body = {"topic": topic.path, "subscription": subscription, "offset": offset}
        url = address.rstrip("/") + "/admin/v1/cursors/reset"
        try:
            response = await self._client.post(url, json=body)
        except httpx.HTTPError as error:
            raise BrokerUnreachable(
                broker_id, address, str(error) or type(error).__name__
            ) from None
        answer: dict[str, Any] = response.json() if response.content else {}
        if response.status_code == 200:
            revision: int = answer["revision"]
            return revision
        if response.status_code == 409 and answer.get("error") == "topic_not_owned":
            raise TopicNotOwned(topic, broker_id)
        if response.status_code == 404 and answer.get("error") == "no_subscription":
            raise NoSubscription(topic, subscription)
        if response.status_code == 400:
            raise InvalidRequest(str(answer.get("detail", "refused by the broker")))
        raise BrokerUnreachable(broker_id, address, f"HTTP {response.status_code}")

    async def aclose(self) -> None:
        await self._client.aclose()


def entry_document(entry: Entry, *, with_value: bool = True) -> dict[str, Any]:
    """An entry as scripts read it; a value that is not UTF-8 comes in base64, flagged."""
    document: dict[str, Any] = {"key": entry.key}
    if with_value:
        try:
            document.update(value=entry.value.decode("utf-8"), base64=False)
        except UnicodeDecodeError:
            document.update(value=base64.b64encode(entry.value).decode("ascii"), base64=True)
    document.update(
        version=entry.version,
        create_revision=entry.create_revision,
        mod_revision=entry.mod_revision,
        lease=entry.lease,
    )
    return document


class Operations:
    """Every operation of the CLI and the API, on one store (and its cache, if any)."""

    def __init__(
        self,
        store: MetadataStore,
        cache: LocalCache | None = None,
        brokers: subscription_ops.BrokerAdmin | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.reader = Reader(store, cache)
        self.cluster = ClusterManager(store, cache)
        self.namespace_manager = NamespaceManager(store, cache)
        self.topic_manager = TopicManager(store, cache)
        self.subscription_manager = SubscriptionManager(store, cache)
        self.registry = SchemaRegistry(store, created_by="metaplane-admin")
        self._http = HttpBrokerAdmin() if brokers is None else None
        self._status_memo = None if cache is None else cluster_ops.StatusMemo(cache)
        self.brokers: subscription_ops.BrokerAdmin = brokers or self._http  # type: ignore[assignment]

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def written(self, document: dict[str, Any]) -> dict[str, Any]:
        """`document` of a write, once the cache (if any) shows that write."""
        revision = document.get("revision")
        if self.cache is not None and isinstance(revision, int):
            await self.cache.wait_for(revision)
        return document

    # -- cluster -------------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        return await cluster_ops.status(self.cluster, self._status_memo)

    async def list_brokers(self) -> dict[str, Any]:
        return cluster_ops.brokers_document(await cluster_ops.read_brokers(self.reader))

    async def broker_state(self, broker_id: int) -> dict[str, Any]:
        return cluster_ops.state_document(broker_id, await self.cluster.state(broker_id))

    async def drain(self, broker_id: int, reason: str, expect: int | None = None) -> dict[str, Any]:
        return await self.written(await cluster_ops.drain(self.cluster, broker_id, reason, expect))

    async def undrain(
        self, broker_id: int, reason: str, expect: int | None = None
    ) -> dict[str, Any]:
        document = await cluster_ops.undrain(self.cluster, broker_id, reason, expect)
        return await self.written(document)

    # -- namespaces ----------------------------------------------------------------------

    async def list_namespaces(self) -> list[dict[str, Any]]:
        return await namespace_ops.namespaces(self.namespace_manager)

    async def namespace_policy(self, namespace: str) -> dict[str, Any]:
        return await namespace_ops.read_policy(self.namespace_manager, namespace)

    async def create_namespace(self, namespace: str, policy: NamespacePolicy) -> dict[str, Any]:
        document = await namespace_ops.create(self.namespace_manager, namespace, policy)
        return await self.written(document)

    async def change_policy(
        self,
        namespace: str,
        changes: Mapping[str, int | None],
        expect: int | None = None,
        *,
        replace: NamespacePolicy | None = None,
    ) -> dict[str, Any]:
        document = await namespace_ops.change_policy(
            self.namespace_manager, namespace, changes, expect, replace=replace
        )
        return await self.written(document)

    async def delete_namespace(self, namespace: str, expect: int | None = None) -> dict[str, Any]:
        document = await namespace_ops.delete(self.namespace_manager, namespace, expect)
        return await self.written(document)

    # -- topics --------------------------------------------------------------------------

    async def list_topics(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return await topic_ops.list_topics(self.reader, namespace)

    async def overview(self) -> dict[str, Any]:
        """Every topic with its owner and backlogs: what the dashboard shows."""
        return await topic_ops.overview(self.reader)

    async def describe_topic(self, topic: TopicName) -> dict[str, Any]:
        return topic_ops.describe(await topic_ops.read_topic(self.reader, topic))

    async def create_topic(
        self, topic: TopicName, partitions: int = 0, delivery: Delivery = Delivery.RELIABLE
    ) -> dict[str, Any]:
        document = await topic_ops.create(self.topic_manager, topic, partitions, delivery)
        return await self.written(document)

    async def delete_topic(
        self, topic: TopicName, *, force: bool = False, if_match: str | None = None
    ) -> dict[str, Any]:
        document = await topic_ops.delete(self.topic_manager, topic, force=force, if_match=if_match)
        return await self.written(document)

    async def move_topic(
        self,
        topic: TopicName,
        *,
        to_broker: int | None = None,
        unload: bool = False,
        if_match: str | None = None,
    ) -> dict[str, Any]:
        document = await topic_ops.move(
            self.store, self.reader, topic, to_broker=to_broker, unload=unload, if_match=if_match
        )
        return await self.written(document)

    # -- subscriptions -------------------------------------------------------------------

    async def list_subscriptions(self, topic: TopicName) -> list[dict[str, Any]]:
        return await subscription_ops.subscriptions(self.subscription_manager, topic)

    async def subscription(self, topic: TopicName, name: str) -> dict[str, Any]:
        return await subscription_ops.read(self.subscription_manager, topic, name)

    async def create_subscription(
        self,
        topic: TopicName,
        name: str,
        kind: SubscriptionType = SubscriptionType.EXCLUSIVE,
        consumer_name: str | None = None,
    ) -> dict[str, Any]:
        document = await subscription_ops.create(
            self.subscription_manager, topic, name, kind, consumer_name
        )
        return await self.written(document)

    async def delete_subscription(
        self, topic: TopicName, name: str, expect: int | None = None
    ) -> dict[str, Any]:
        document = await subscription_ops.delete(self.subscription_manager, topic, name, expect)
        return await self.written(document)

    async def reset_cursor(
        self, topic: TopicName, name: str, offset: int, expect: int | None = None
    ) -> dict[str, Any]:
        document = await subscription_ops.reset(
            self.subscription_manager, self.brokers, topic, name, offset, expect
        )
        return await self.written(document)

    async def skip(
        self, topic: TopicName, name: str, count: int, expect: int | None = None
    ) -> dict[str, Any]:
        document = await subscription_ops.skip(
            self.subscription_manager, self.brokers, topic, name, count, expect
        )
        return await self.written(document)

    # -- raw keys ------------------------------------------------------------------------

    async def get_key(self, key: str) -> dict[str, Any]:
        entry = await self.store.get(key)
        if entry is None:
            raise NotFound(key)
        return entry_document(entry)

    async def list_keys(
        self,
        prefix: str,
        *,
        keys_only: bool = False,
        limit: int | None = None,
        start_after: str | None = None,
        revision: int | None = None,
    ) -> dict[str, Any]:
        listing = await self.store.list(
            prefix, keys_only=keys_only, limit=limit, start_after=start_after, revision=revision
        )
        return {
            "prefix": prefix,
            "revision": listing.revision,
            "more": listing.more,
            "keys": [entry_document(entry, with_value=not keys_only) for entry in listing],
        }

    # -- schemas -------------------------------------------------------------------------

    @property
    def schemas(self) -> SchemaOperations:
        return SchemaOperations(self)


class SchemaOperations:
    """The registry's operations, with read-your-writes through the owner's cache."""

    def __init__(self, owner: Operations) -> None:
        self.owner = owner
        self.registry = owner.registry
        self.store = owner.store

    async def subjects(self) -> list[dict[str, Any]]:
        return await schema_ops.subjects(self.registry)

    async def subject(self, name: str) -> dict[str, Any]:
        return await schema_ops.subject(self.registry, self.store, name)

    async def versions(self, name: str) -> list[dict[str, Any]]:
        found = await self.registry.versions(name)
        return [stored_json(version) for version in found]

    async def version(self, name: str, version: int | None) -> dict[str, Any]:
        return schema_ops.version_document(await self.registry.get(name, version))

    async def by_id(self, schema_id: int) -> dict[str, Any]:
        return schema_ops.version_document(await self.registry.get_by_id(schema_id))

    async def register(
        self, name: str, schema_type: str, document: str, **more: Any
    ) -> dict[str, Any]:
        found = await schema_ops.register(self.registry, name, schema_type, document, **more)
        return await self.owner.written(found)

    async def check(
        self, name: str, schema_type: str, document: str, **more: Any
    ) -> dict[str, Any]:
        return await schema_ops.check(self.registry, name, schema_type, document, **more)

    async def compatibility(self, name: str | None) -> dict[str, Any]:
        return await schema_ops.compatibility(self.registry, self.store, name)

    async def set_compatibility(
        self, name: str | None, mode: str, expect: int | None = None
    ) -> dict[str, Any]:
        found = await schema_ops.set_compatibility(self.registry, self.store, name, mode, expect)
        return await self.owner.written(found)

    async def delete(self, name: str, version: int | None = None) -> dict[str, Any]:
        return await self.owner.written(await schema_ops.delete(self.registry, name, version))

    async def bind(self, topic: TopicName, name: str, *, replace: bool = False) -> dict[str, Any]:
        found = await schema_ops.bind(self.registry, topic, name, replace=replace)
        return await self.owner.written(found)

    async def unbind(self, topic: TopicName) -> dict[str, Any]:
        return await self.owner.written(await schema_ops.unbind(self.registry, topic))
