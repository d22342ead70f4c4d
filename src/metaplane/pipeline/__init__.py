"""The analysis and planning pipeline on PySpark: consistent snapshots of the store as Parquet,
keys parsed into typed tables with the layout's own patterns, and the outputs an operator
reads (summary, audit, backlog, storage, retention and rebalance plans, report.html).

    snapshot = read_snapshot(Path("snap"))
    analysis = analyze(spark_session(), snapshot, Path("out"))

Local mode by default; `spark_session("spark://host:7077")` or spark-submit runs the same
job on a cluster. The rebalance plan is the cluster's own planner (`BrokerLoad`, `Balance`,
`plan_quotas` are `metaplane.cluster`'s, re-exported). See docs/pipeline.md.
"""

from metaplane.cluster._rankings import Balance, BrokerLoad
from metaplane.cluster._rebalance import Quotas, plan_quotas
from metaplane.pipeline._analyze import (
    AUDIT,
    BACKLOG,
    REBALANCE_PLAN,
    REPORT,
    RETENTION_PLAN,
    STORAGE,
    SUMMARY,
    TABLES,
    Analysis,
    AnalyzeSettings,
    ParsedSnapshot,
    analyze,
    parse_snapshot,
    run_audit,
    write_tables,
)
from metaplane.pipeline._apply import (
    ApplyResult,
    Outcome,
    PlannedMove,
    RebalancePlan,
    Status,
    apply_plan,
    describe,
    parse_plan,
    read_plan,
    wait_placed,
)
from metaplane.pipeline._audit import CHECKS, Check, audit
from metaplane.pipeline._backlog import backlog
from metaplane.pipeline._errors import (
    EtcdctlOutputError,
    ImportConflict,
    InvalidSetting,
    KafkaDumpError,
    PipelineError,
    PlanError,
    SnapshotError,
    SparkJobFailed,
)
from metaplane.pipeline._export import export_snapshot, snapshot_from_etcdctl
from metaplane.pipeline._kafka_read import (
    KafkaNode,
    read_kafka_dump,
    read_kafka_zookeeper,
    write_kafka_dump,
)
from metaplane.pipeline._kafka_render import ImportPlan, plan_kafka_import
from metaplane.pipeline._kafka_transform import kafka_rows
from metaplane.pipeline._kafka_write import ImportResult, apply_import
from metaplane.pipeline._snapshot import Snapshot, SnapshotWriter, read_snapshot, snapshot_frame
from metaplane.pipeline._spark import java_runtime, spark_session, stop_spark
from metaplane.pipeline._storage import retention_plan, storage
from metaplane.pipeline._synth import FAULTS_FILE, SynthSpec, synth_snapshot, topics_for_keys
from metaplane.pipeline._tables import Tables, classify, parse_tables, read_tables
from metaplane.pipeline._values import U64_TYPE

__all__ = [
    "AUDIT",
    "BACKLOG",
    "CHECKS",
    "FAULTS_FILE",
    "REBALANCE_PLAN",
    "REPORT",
    "RETENTION_PLAN",
    "STORAGE",
    "SUMMARY",
    "TABLES",
    "U64_TYPE",
    "Analysis",
    "AnalyzeSettings",
    "ApplyResult",
    "Balance",
    "BrokerLoad",
    "Check",
    "EtcdctlOutputError",
    "ImportConflict",
    "ImportPlan",
    "ImportResult",
    "InvalidSetting",
    "KafkaDumpError",
    "KafkaNode",
    "Outcome",
    "ParsedSnapshot",
    "PipelineError",
    "PlanError",
    "PlannedMove",
    "Quotas",
    "RebalancePlan",
    "Snapshot",
    "SnapshotError",
    "SnapshotWriter",
    "SparkJobFailed",
    "Status",
    "SynthSpec",
    "Tables",
    "analyze",
    "apply_import",
    "apply_plan",
    "audit",
    "backlog",
    "classify",
    "describe",
    "export_snapshot",
    "java_runtime",
    "kafka_rows",
    "parse_plan",
    "parse_snapshot",
    "parse_tables",
    "plan_kafka_import",
    "plan_quotas",
    "read_kafka_dump",
    "read_kafka_zookeeper",
    "read_plan",
    "read_snapshot",
    "read_tables",
    "retention_plan",
    "run_audit",
    "snapshot_frame",
    "snapshot_from_etcdctl",
    "spark_session",
    "stop_spark",
    "storage",
    "synth_snapshot",
    "topics_for_keys",
    "wait_placed",
    "write_kafka_dump",
    "write_tables",
]
