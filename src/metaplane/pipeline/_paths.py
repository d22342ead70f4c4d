"""Keys and topic paths as Spark columns, rendered by the layout's own builders: a builder runs
once with stand-in values, and Spark puts each row's values in their place.

    key_column(layout.assignment, Number(col("broker_id")), Topic(col("namespace"), col("topic")))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from metaplane.layout import TopicName


@dataclass(frozen=True)
class Name:
    """A name segment (namespace, subscription, subject…) taken from a column."""

    column: Column


@dataclass(frozen=True)
class Number:
    """An id or number segment taken from a (decimal or integer) column."""

    column: Column


@dataclass(frozen=True)
class Topic:
    """A topic (a `TopicName` argument) taken from two columns."""

    namespace: Column
    topic: Column


Part = Name | Number | Topic

# Stand-ins no real key holds: letters for names (valid by every naming rule, and no stand-in
# a part of another), digits for numbers (replaced first, before any name brings digits in).
_NUMBER = 739_100_000_000
_NAME = "Zq{}vX{}"


def key_column(builder: Callable[..., str], *parts: Part) -> Column:
    """The key `builder` makes of each row's parts."""
    arguments: list[object] = []
    numbers: list[tuple[str, Column]] = []
    names: list[tuple[str, Column]] = []
    for index, part in enumerate(parts):
        if isinstance(part, Number):
            number = _NUMBER + index
            arguments.append(number)
            numbers.append((str(number), part.column.cast("string")))
        elif isinstance(part, Name):
            arguments.append(_NAME.format(index, "n"))
            names.append((_NAME.format(index, "n"), part.column))
        else:
            namespace, topic = _NAME.format(index, "s"), _NAME.format(index, "t")
            arguments.append(TopicName(namespace, topic))
            names += [(namespace, part.namespace), (topic, part.topic)]
    rendered = F.lit(builder(*arguments))
    for stand_in, column in (*numbers, *names):
        rendered = F.replace(rendered, F.lit(stand_in), column)
    return rendered


def _path(topic: TopicName) -> str:
    return topic.path


def topic_path(namespace: Column | str = "namespace", topic: Column | str = "topic") -> Column:
    """Danube's "/namespace/topic" (`TopicName.path`): how values (load reports, producers,
    plans) name a topic."""
    return key_column(_path, Topic(_col(namespace), _col(topic)))


def _col(column: Column | str) -> Column:
    return F.col(column) if isinstance(column, str) else column
