"""The cluster: what a broker embeds (BrokerNode), the leader's placement of topics
(LoadManager, its rankings and rebalancer), topic moves, and local clusters of node
processes for development and demonstrations."""

from metaplane.cluster._broker import BrokerConfig, BrokerNode, TopicHost
from metaplane.cluster._cursors import CursorBatcher
from metaplane.cluster._load_manager import LoadManager, LoadManagerConfig, broker_loads
from metaplane.cluster._local import LocalCluster, NodeProcess
from metaplane.cluster._moves import BROKER_LOST, UNLOAD, move_topic, unload_topic
from metaplane.cluster._node import Node, NodeSettings, QuietTopics, run_node
from metaplane.cluster._rankings import (
    DEFAULT_TOPIC_WEIGHT,
    BrokerLoad,
    Ranking,
    choose_targets,
    imbalance,
    rank,
)
from metaplane.cluster._rebalance import (
    Move,
    MoveReason,
    RebalanceConfig,
    RebalancePlan,
    Rebalancer,
)
from metaplane.cluster._simulation import SimulatedTopics
from metaplane.cluster._view import ClusterView, read_view

__all__ = [
    "BROKER_LOST",
    "DEFAULT_TOPIC_WEIGHT",
    "UNLOAD",
    "BrokerConfig",
    "BrokerLoad",
    "BrokerNode",
    "ClusterView",
    "CursorBatcher",
    "LoadManager",
    "LoadManagerConfig",
    "LocalCluster",
    "Move",
    "MoveReason",
    "Node",
    "NodeProcess",
    "NodeSettings",
    "QuietTopics",
    "Ranking",
    "RebalanceConfig",
    "RebalancePlan",
    "Rebalancer",
    "SimulatedTopics",
    "TopicHost",
    "broker_loads",
    "choose_targets",
    "imbalance",
    "move_topic",
    "rank",
    "read_view",
    "run_node",
    "unload_topic",
]
