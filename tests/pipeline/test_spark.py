"""The JVM of the session metaplane starts runs with the options it is given."""

from __future__ import annotations

from pyspark.sql import SparkSession

from metaplane.pipeline._spark import JIT_OPTIONS, LOCAL_GC_OPTIONS


def test_the_local_session_jvm_runs_the_throughput_collector_and_compiles_huge_methods(
    spark: SparkSession,
) -> None:
    """In local mode the driver is the one JVM: it gets the JIT option every JVM of a
    session gets, and the throughput collector (a cluster's JVMs keep their own)."""
    assert spark.sparkContext.master.startswith("local")
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    arguments = set(management.getRuntimeMXBean().getInputArguments())
    assert {*JIT_OPTIONS.split(), *LOCAL_GC_OPTIONS.split()} <= arguments
    assert {"-XX:+UseParallelGC", "-XX:-DontCompileHugeMethods"} <= arguments
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
    assert LOCAL_GC_OPTIONS not in spark.conf.get("spark.executor.extraJavaOptions", "")
