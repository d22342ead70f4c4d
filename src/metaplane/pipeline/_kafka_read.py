"""Reading Kafka 0.8's ZooKeeper tree (seed 002): from a dump file (JSON Lines, see
`read_kafka_dump`) or a live ZooKeeper, into znodes; and saving what was read as a dump. The
import's first step: `_kafka_transform` turns the znodes into rows of our layout in Spark,
`_kafka_render` into keys and values, `_kafka_write` writes them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import KazooException, NoNodeError  # type: ignore[import-untyped]
from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]

from metaplane.pipeline._errors import KafkaDumpError
from metaplane.store import Unavailable

# The Kafka roots that matter; the rest of its tree (admin, config, owners) is not read.
KAFKA_ROOTS = ("/brokers/ids", "/brokers/topics", "/controller", "/controller_epoch", "/consumers")


@dataclass(frozen=True)
class KafkaNode:
    """One znode: its path and its data (None when it holds none)."""

    path: str
    data: bytes | None


# Reading ------------------------------------------------------------------------------------


def read_kafka_dump(path: Path) -> list[KafkaNode]:
    """The znodes of a dump file: JSON Lines, one znode a line, {"path": "/brokers/ids/0",
    "data": "<UTF-8 text>"} (`data` null for a znode without data; "data_base64" instead of
    "data" for bytes that are not UTF-8). Blank lines and lines starting with # are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise KafkaDumpError(f"{path}: cannot read the dump: {error}") from None
    nodes = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            nodes.append(_dump_line(path, number, text))
    if not nodes:
        raise KafkaDumpError(f"{path}: the dump holds no znode")
    return nodes


def _dump_line(path: Path, number: int, text: str) -> KafkaNode:
    where = f"{path}:{number}"
    try:
        item = json.loads(text)
    except json.JSONDecodeError as error:
        raise KafkaDumpError(f"{where}: not JSON: {error.msg}") from None
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        raise KafkaDumpError(f'{where}: each line is an object with a "path" string')
    if not item["path"].startswith("/"):
        raise KafkaDumpError(f"{where}: {item['path']!r} is not an absolute znode path")
    return KafkaNode(item["path"], _dump_data(where, item))


def _dump_data(where: str, item: dict[str, Any]) -> bytes | None:
    if "data_base64" in item:
        try:
            return base64.b64decode(item["data_base64"], validate=True)
        except (ValueError, TypeError):
            raise KafkaDumpError(f'{where}: "data_base64" is not base64') from None
    data = item.get("data")
    if data is not None and not isinstance(data, str):
        raise KafkaDumpError(f'{where}: "data" is a string or null')
    return None if data is None else data.encode("utf-8")


def write_kafka_dump(nodes: Iterable[KafkaNode], path: Path) -> int:
    """Write `nodes` as a dump file; the number of lines."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for node in nodes:
            out.write(json.dumps(_dump_item(node)) + "\n")
            count += 1
    return count


def _dump_item(node: KafkaNode) -> dict[str, str | None]:
    if node.data is None:
        return {"path": node.path, "data": None}
    try:
        return {"path": node.path, "data": node.data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"path": node.path, "data_base64": base64.b64encode(node.data).decode()}


def read_kafka_zookeeper(hosts: str, timeout: float = 10.0) -> list[KafkaNode]:
    """The znodes under Kafka's roots in a live ZooKeeper (`host:port[,…][/chroot]`);
    consumers only as far as their offsets."""
    client = KazooClient(hosts=hosts, timeout=timeout, read_only=True)
    try:
        client.start(timeout=timeout)
    except (KazooTimeoutError, KazooException) as error:
        client.close()
        raise Unavailable(f"ZooKeeper at {hosts} is not reachable: {error}") from None
    try:
        return list(_walk_kafka(client))
    except KazooException as error:
        raise KafkaDumpError(
            f"ZooKeeper at {hosts}: reading Kafka's tree failed: {error}"
        ) from None
    finally:
        client.stop()
        client.close()


def _walk_kafka(client: KazooClient) -> Iterator[KafkaNode]:
    for root in KAFKA_ROOTS:
        if root == "/consumers":
            for group in _children(client, root):
                yield from _walk(client, f"{root}/{group}/offsets")
        else:
            yield from _walk(client, root)


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def _walk(client: KazooClient, path: str) -> Iterator[KafkaNode]:
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return
    yield KafkaNode(path, data or None)
    for child in _children(client, path):
        yield from _walk(client, f"{path}/{child}")
