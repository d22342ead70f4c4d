"""The HTTP admin API's resources, modelled on pulsar-admin's REST paths (under /admin/v2):
cluster status, brokers, namespaces and policies, topics, subscriptions, schemas and the raw
keys. Each endpoint calls one of the `Operations` the CLI calls: the CLI and the API are two
faces of one set of operations."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, Response, Router, delete, get, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from msgspec import Meta

from metaplane.admin._errors import MAX_PARTITIONS
from metaplane.admin._http import (
    creation_expectation,
    if_match_tag,
    if_match_version,
    version_tag,
    with_tag,
)
from metaplane.admin._operations import Operations
from metaplane.admin._subscription_ops import subscription_type
from metaplane.layout import TopicName
from metaplane.resources import Delivery, NamespaceExists, NamespacePolicy, SubscriptionExists
from metaplane.store import ABSENT, MAX_KEY_BYTES, InvalidRequest

PREFIX = "/admin/v2"

U32 = Annotated[int, Meta(ge=0, le=2**32 - 1)]
U64 = Annotated[int, Meta(ge=0)]
"""An unsigned 64-bit id; the bound above is checked by the layout (OpenAPI's schema
generation takes no bound beyond int64)."""
Json = dict[str, Any]
Ops = NamedDependency[Operations]
"""The operations every endpoint calls (the same the CLI calls)."""


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A request body: an unknown field is a bad request, not something silently dropped."""


class ReasonBody(Strict):
    reason: Annotated[str, Meta(min_length=1, max_length=1024)] = "operator"


class PolicyBody(Strict):
    """A namespace policy; a field left out takes its default (0: unlimited)."""

    max_consumers_per_subscription: U32 | None = None
    max_consumers_per_topic: U32 | None = None
    max_dispatch_rate: U32 | None = None
    max_message_size: U32 | None = None
    max_producers_per_topic: U32 | None = None
    max_publish_rate: U32 | None = None
    max_subscription_dispatch_rate: U32 | None = None
    max_subscriptions_per_topic: U32 | None = None

    def limits(self) -> dict[str, int | None]:
        return msgspec.structs.asdict(self)


class TopicBody(Strict):
    partitions: Annotated[int, Meta(ge=0, le=MAX_PARTITIONS)] = 0
    delivery: Literal["reliable", "non-reliable"] = "reliable"


class MoveBody(Strict):
    to_broker: U64 | None = None


class SubscriptionBody(Strict):
    type: Literal["exclusive", "shared", "failover"] = "exclusive"
    consumer_name: Annotated[str, Meta(min_length=1, max_length=1024)] | None = None


class ResetBody(Strict):
    offset: Annotated[int, Meta(ge=-1)]


class SkipBody(Strict):
    count: Annotated[int, Meta(ge=1, le=2**63 - 1)]


class SchemaBody(Strict):
    schema: Annotated[str, Meta(max_length=1024 * 1024)] = ""
    schema_type: Annotated[str, Meta(min_length=1, max_length=64)] = "Avro"
    message_name: Annotated[str, Meta(min_length=1, max_length=1024)] | None = None
    description: Annotated[str, Meta(max_length=4096)] = ""
    tags: list[Annotated[str, Meta(max_length=256)]] = msgspec.field(default_factory=list)


class CheckBody(Strict):
    schema: Annotated[str, Meta(max_length=1024 * 1024)] = ""
    schema_type: Annotated[str, Meta(min_length=1, max_length=64)] = "Avro"
    message_name: Annotated[str, Meta(min_length=1, max_length=1024)] | None = None
    mode: Annotated[str, Meta(min_length=1, max_length=64)] | None = None


class ModeBody(Strict):
    mode: Annotated[str, Meta(min_length=1, max_length=64)]


class BindBody(Strict):
    subject: Annotated[str, Meta(min_length=1, max_length=1024)]
    replace: bool = False


def topic_of(namespace: str, topic: str) -> TopicName:
    return TopicName(namespace, topic)


def provide_operations(state: State) -> Operations:
    operations: Operations = state.operations
    return operations


# cluster ------------------------------------------------------------------------------------


@get("/status")
async def cluster_status(ops: Ops) -> Json:
    """Leader, epoch, brokers (state, load, liveness), unassigned topics, store health."""
    return await ops.status()


@get("/brokers")
async def list_brokers(ops: Ops) -> Json:
    return await ops.list_brokers()


@get("/brokers/{broker_id:int}/state")
async def broker_state(ops: Ops, broker_id: FromPath[int]) -> Response[Json]:
    """A broker's state; its version is the ETag."""
    document = await ops.broker_state(broker_id)
    return with_tag(document, version_tag(document["version"]))


@post("/brokers/{broker_id:int}/drain", status_code=200)
async def drain_broker(
    ops: Ops,
    request: Request[Any, Any, Any],
    broker_id: FromPath[int],
    data: JSONBody[ReasonBody | None] = None,
) -> Json:
    """Set the broker draining (If-Match: its state's version); the leader moves its topics."""
    expect = if_match_version(request, f"broker {broker_id}'s state")
    return await ops.drain(broker_id, (data or ReasonBody()).reason, expect)


@post("/brokers/{broker_id:int}/undrain", status_code=200)
async def undrain_broker(
    ops: Ops,
    request: Request[Any, Any, Any],
    broker_id: FromPath[int],
    data: JSONBody[ReasonBody | None] = None,
) -> Json:
    """Set a draining or drained broker active again."""
    expect = if_match_version(request, f"broker {broker_id}'s state")
    return await ops.undrain(broker_id, (data or ReasonBody()).reason, expect)


# namespaces ---------------------------------------------------------------------------------


@get("/namespaces")
async def list_namespaces(ops: Ops) -> list[Json]:
    return await ops.list_namespaces()


@put("/namespaces/{namespace:str}", status_code=201)
async def create_namespace(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    data: JSONBody[PolicyBody | None] = None,
) -> Response[Json]:
    """Create a namespace with a policy (If-None-Match: * is what a create expects)."""
    creation_expectation(request)
    policy = (data or PolicyBody()).limits()
    from metaplane.admin._namespace_ops import with_limits

    document = await ops.create_namespace(namespace, with_limits(NamespacePolicy(), policy))
    return with_tag(document, version_tag(1), status=201)


@get("/namespaces/{namespace:str}/policy")
async def namespace_policy(ops: Ops, namespace: FromPath[str]) -> Response[Json]:
    """The policy; its version is the ETag."""
    document = await ops.namespace_policy(namespace)
    return with_tag(document, version_tag(document["version"]))


@put("/namespaces/{namespace:str}/policy", status_code=200)
async def set_namespace_policy(
    ops: Ops, request: Request[Any, Any, Any], namespace: FromPath[str], data: JSONBody[PolicyBody]
) -> Response[Json]:
    """Replace the policy (fields left out: their defaults), over If-Match's version or the
    version read."""
    expect = if_match_version(request, f"namespace {namespace}'s policy")
    document = await ops.change_policy(namespace, data.limits(), expect, replace=NamespacePolicy())
    return with_tag(document, version_tag(document["version"]))


@delete("/namespaces/{namespace:str}", status_code=200)
async def delete_namespace(
    ops: Ops, request: Request[Any, Any, Any], namespace: FromPath[str]
) -> Json:
    """Delete an empty namespace (If-Match: its policy's version)."""
    expect = if_match_version(request, f"namespace {namespace}'s policy")
    return await ops.delete_namespace(namespace, expect)


@get("/namespaces/{namespace:str}/topics")
async def namespace_topics(ops: Ops, namespace: FromPath[str]) -> list[Json]:
    return await ops.list_topics(namespace)


# topics -------------------------------------------------------------------------------------


@get("/topics")
async def list_topics(
    ops: Ops,
    namespace: FromQuery[str | None] = None,
) -> list[Json]:
    """Every topic with its owner (and whether that broker is live) or why it waits."""
    return await ops.list_topics(namespace)


@get("/topics/{namespace:str}/{topic:str}")
async def describe_topic(
    ops: Ops, namespace: FromPath[str], topic: FromPath[str]
) -> Response[Json]:
    """Owner, producers, subscriptions with cursors and backlog, storage, sealed state, bound
    schema. The ETag is the highest mod_revision among the topic's keys."""
    document = await ops.describe_topic(topic_of(namespace, topic))
    return with_tag(document, document["etag"])


@put("/topics/{namespace:str}/{topic:str}", status_code=201)
async def create_topic(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    data: JSONBody[TopicBody | None] = None,
) -> Json:
    creation_expectation(request)
    body = data or TopicBody()
    delivery = Delivery.RELIABLE if body.delivery == "reliable" else Delivery.NON_RELIABLE
    return await ops.create_topic(topic_of(namespace, topic), body.partitions, delivery)


@delete("/topics/{namespace:str}/{topic:str}", status_code=200)
async def delete_topic(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    force: FromQuery[bool] = False,
) -> Json:
    """Delete a topic; refused (409) while it has subscriptions unless ?force=true. If-Match
    compares every key of the topic in the same transaction."""
    name = topic_of(namespace, topic)
    return await ops.delete_topic(name, force=force, if_match=if_match_tag(request))


@post("/topics/{namespace:str}/{topic:str}/unload", status_code=200)
async def unload_topic(
    ops: Ops, request: Request[Any, Any, Any], namespace: FromPath[str], topic: FromPath[str]
) -> Json:
    name = topic_of(namespace, topic)
    return await ops.move_topic(name, unload=True, if_match=if_match_tag(request))


@post("/topics/{namespace:str}/{topic:str}/move", status_code=200)
async def move_topic(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    data: JSONBody[MoveBody | None] = None,
) -> Json:
    """Move the topic away from its owner (to `to_broker`, else where the ranking says)."""
    target = (data or MoveBody()).to_broker
    name = topic_of(namespace, topic)
    return await ops.move_topic(name, to_broker=target, if_match=if_match_tag(request))


# subscriptions ------------------------------------------------------------------------------

SUBSCRIPTION = "/topics/{namespace:str}/{topic:str}/subscriptions/{subscription:str}"


@get("/topics/{namespace:str}/{topic:str}/subscriptions")
async def list_subscriptions(
    ops: Ops, namespace: FromPath[str], topic: FromPath[str]
) -> list[Json]:
    return await ops.list_subscriptions(topic_of(namespace, topic))


@get(SUBSCRIPTION)
async def read_subscription(
    ops: Ops, namespace: FromPath[str], topic: FromPath[str], subscription: FromPath[str]
) -> Response[Json]:
    """A subscription with its cursor; its version is the ETag."""
    document = await ops.subscription(topic_of(namespace, topic), subscription)
    return with_tag(document, version_tag(document["version"]))


@put(SUBSCRIPTION, status_code=201)
async def create_subscription(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    subscription: FromPath[str],
    data: JSONBody[SubscriptionBody | None] = None,
) -> Response[Json]:
    creation_expectation(request)
    body = data or SubscriptionBody()
    kind = subscription_type(body.type)
    name = topic_of(namespace, topic)
    document = await ops.create_subscription(name, subscription, kind, body.consumer_name)
    return with_tag(document, version_tag(1), status=201)


@delete(SUBSCRIPTION, status_code=200)
async def delete_subscription(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    subscription: FromPath[str],
) -> Json:
    expect = if_match_version(request, f"subscription {subscription}")
    return await ops.delete_subscription(topic_of(namespace, topic), subscription, expect)


@post(SUBSCRIPTION + "/reset", status_code=200)
async def reset_cursor(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    subscription: FromPath[str],
    data: JSONBody[ResetBody],
) -> Json:
    """Set the cursor (the last acknowledged offset) through the broker serving the topic,
    or guarded while none does."""
    expect = if_match_version(request, f"subscription {subscription}")
    name = topic_of(namespace, topic)
    return await ops.reset_cursor(name, subscription, data.offset, expect)


@post(SUBSCRIPTION + "/skip", status_code=200)
async def skip_messages(
    ops: Ops,
    request: Request[Any, Any, Any],
    namespace: FromPath[str],
    topic: FromPath[str],
    subscription: FromPath[str],
    data: JSONBody[SkipBody],
) -> Json:
    expect = if_match_version(request, f"subscription {subscription}")
    name = topic_of(namespace, topic)
    return await ops.skip(name, subscription, data.count, expect)


# schemas ------------------------------------------------------------------------------------


@get("/schemas/subjects")
async def list_subjects(ops: Ops) -> list[Json]:
    return await ops.schemas.subjects()


@get("/schemas/subjects/{subject:str}")
async def read_subject(ops: Ops, subject: FromPath[str]) -> Response[Json]:
    document = await ops.schemas.subject(subject)
    return with_tag(document, version_tag(document["version"]))


@get("/schemas/subjects/{subject:str}/versions")
async def subject_versions(ops: Ops, subject: FromPath[str]) -> list[Json]:
    return await ops.schemas.versions(subject)


@get("/schemas/subjects/{subject:str}/versions/{version:str}")
async def subject_version(ops: Ops, subject: FromPath[str], version: FromPath[str]) -> Json:
    """A version by number, or `latest`."""
    if version != "latest" and not version.isdigit():
        raise InvalidRequest(f"version {version!r} is a number or latest")
    return await ops.schemas.version(subject, None if version == "latest" else int(version))


@post("/schemas/subjects/{subject:str}/versions", status_code=200)
async def register_schema(ops: Ops, subject: FromPath[str], data: JSONBody[SchemaBody]) -> Json:
    """Register a schema: a new version, or the existing one if identical (`created`)."""
    return await ops.schemas.register(
        subject,
        data.schema_type,
        data.schema,
        message_name=data.message_name,
        description=data.description,
        tags=data.tags,
    )


@post("/schemas/subjects/{subject:str}/check", status_code=200)
async def check_schema(ops: Ops, subject: FromPath[str], data: JSONBody[CheckBody]) -> Json:
    return await ops.schemas.check(
        subject, data.schema_type, data.schema, mode=data.mode, message_name=data.message_name
    )


@delete("/schemas/subjects/{subject:str}", status_code=200)
async def delete_subject(
    ops: Ops, subject: FromPath[str], version: FromQuery[int | None] = None
) -> Json:
    """Delete a version (?version=N), or the subject with every version and its id."""
    return await ops.schemas.delete(subject, version)


@get("/schemas/subjects/{subject:str}/compatibility")
async def subject_mode(ops: Ops, subject: FromPath[str]) -> Response[Json]:
    """The subject's compatibility mode; the version of its metadata is the ETag."""
    document = await ops.schemas.compatibility(subject)
    return with_tag(document, version_tag(document["version"]))


@put("/schemas/subjects/{subject:str}/compatibility", status_code=200)
async def set_subject_mode(
    ops: Ops, request: Request[Any, Any, Any], subject: FromPath[str], data: JSONBody[ModeBody]
) -> Json:
    expect = if_match_version(request, f"subject {subject}")
    return await ops.schemas.set_compatibility(subject, data.mode, expect)


@get("/schemas/compatibility")
async def default_mode(ops: Ops) -> Json:
    return await ops.schemas.compatibility(None)


@put("/schemas/compatibility", status_code=200)
async def set_default_mode(ops: Ops, data: JSONBody[ModeBody]) -> Json:
    return await ops.schemas.set_compatibility(None, data.mode)


@get("/schemas/ids/{schema_id:int}")
async def schema_by_id(ops: Ops, schema_id: FromPath[int]) -> Json:
    return await ops.schemas.by_id(schema_id)


@put("/topics/{namespace:str}/{topic:str}/schema", status_code=200)
async def bind_schema(
    ops: Ops, namespace: FromPath[str], topic: FromPath[str], data: JSONBody[BindBody]
) -> Json:
    """Bind the topic to a subject; a topic bound to another subject is refused (409)
    unless `replace` is true."""
    return await ops.schemas.bind(topic_of(namespace, topic), data.subject, replace=data.replace)


@delete("/topics/{namespace:str}/{topic:str}/schema", status_code=200)
async def unbind_schema(ops: Ops, namespace: FromPath[str], topic: FromPath[str]) -> Json:
    return await ops.schemas.unbind(topic_of(namespace, topic))


# raw keys (read-only) -----------------------------------------------------------------------


@get("/keys")
async def read_keys(
    ops: Ops,
    prefix: Annotated[str, QueryParameter(max_length=MAX_KEY_BYTES)] = "/",
    keys_only: FromQuery[bool] = False,
    limit: Annotated[int, QueryParameter(ge=1, le=10_000)] = 1000,
    start_after: Annotated[str | None, QueryParameter(max_length=MAX_KEY_BYTES)] = None,
    revision: Annotated[int | None, QueryParameter(ge=1)] = None,
) -> Json:
    """The keys under a prefix (a page of them, at one revision: page on with
    `start_after` = the last key and `revision` = the page's)."""
    return await ops.list_keys(
        prefix, keys_only=keys_only, limit=limit, start_after=start_after, revision=revision
    )


@get("/key")
async def read_key(
    ops: Ops, key: Annotated[str, QueryParameter(max_length=MAX_KEY_BYTES)]
) -> Response[Json]:
    """One key's entry; its version is the ETag."""
    document = await ops.get_key(key)
    return with_tag(document, version_tag(document["version"]))


ROUTES = [
    cluster_status,
    list_brokers,
    broker_state,
    drain_broker,
    undrain_broker,
    list_namespaces,
    create_namespace,
    namespace_policy,
    set_namespace_policy,
    delete_namespace,
    namespace_topics,
    list_topics,
    describe_topic,
    create_topic,
    delete_topic,
    unload_topic,
    move_topic,
    list_subscriptions,
    read_subscription,
    create_subscription,
    delete_subscription,
    reset_cursor,
    skip_messages,
    list_subjects,
    read_subject,
    subject_versions,
    subject_version,
    register_schema,
    check_schema,
    delete_subject,
    subject_mode,
    set_subject_mode,
    default_mode,
    set_default_mode,
    schema_by_id,
    bind_schema,
    unbind_schema,
    read_keys,
    read_key,
]


def admin_router() -> Router:
    return Router(
        path=PREFIX,
        route_handlers=ROUTES,
        dependencies={"ops": Provide(provide_operations, sync_to_thread=False)},
    )


__all__ = ["ABSENT", "NamespaceExists", "SubscriptionExists", "admin_router"]
