"""The JVM of the session metaplane starts runs with the options it is given."""

from __future__ import annotations

from pyspark.sql import SparkSession

from metaplane.pipeline._spark import JVM_OPTIONS


def test_the_session_jvm_runs_the_throughput_collector_and_compiles_huge_methods(
    spark: SparkSession,
) -> None:
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    arguments = set(management.getRuntimeMXBean().getInputArguments())
    assert set(JVM_OPTIONS.split()) <= arguments
    assert {"-XX:+UseParallelGC", "-XX:-DontCompileHugeMethods"} <= arguments
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
