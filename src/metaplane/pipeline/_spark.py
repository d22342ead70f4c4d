"""The one Spark session of a process: local mode unless a master is given (or spark-submit
already chose one), quiet logs, no UI; every job of the pipeline reuses it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from metaplane.pipeline._errors import InvalidSetting, SparkJobFailed

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"

# Spark prints its INFO and WARN lines on the terminal unless told otherwise; the pipeline's
# own progress is what an operator needs to see. Errors still come through. The gateway's own
# logger is named, or Spark resets the level to WARN and says so (as a shell would).
_LOG4J2 = """\
rootLogger.level = error
logger.repl.name = org.apache.spark.api.python.PythonGatewayServer
logger.repl.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""

# The classification of keys and the checks of values compile into generated methods above
# HotSpot's 8,000-byte limit, which it leaves interpreted: deciding the kind of 1M keys took
# 1.6-2.3 s instead of 0.8-1.0 s (local[2]). Spark splits what it can; this lets the JIT
# compile the rest.
JIT_OPTIONS = "-XX:-DontCompileHugeMethods"
"""The options of every JVM of a session metaplane starts (the driver and executors)."""

# The throughput collector, not G1 (the default): these are batch jobs, where pauses matter
# less than the collector's own work. `analyze` of 10M keys in a JVM of its own took
# 188.1 s and 185.1 s against 208.8 s and 199.2 s with G1, alternated (docs/pipeline.md).
# Only where metaplane starts the one JVM that does the work (local mode): a cluster's JVMs
# may have a collector chosen by its operators (`spark.*.defaultJavaOptions`), and a JVM
# given two refuses to start.
LOCAL_GC_OPTIONS = "-XX:+UseParallelGC"
"""Added to the driver's options in local mode."""

_session: SparkSession | None = None
_master: str | None = None


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / f"metaplane-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return path


def _submitted() -> bool:
    """True under spark-submit: the JVM (and its master) exist before Python starts."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(
    master: str | None = None,
    *,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
) -> SparkSession:
    """The process's Spark session, created on first use and reused after.

    `master` is a Spark master URL (`local[2]`, `spark://host:7077`, `yarn`…); without one,
    the running session whatever its master, else local mode on every core (unless
    spark-submit already chose a master). Asking for another master than the running
    session's is an `InvalidSetting`.
    """
    global _session, _master
    if _session is not None:
        if master is not None and master != _master:
            raise InvalidSetting(
                f"a Spark session on {_master} is already running in this process; "
                f"it cannot also run on {master}"
            )
        return _session
    wanted = master or (None if _submitted() else DEFAULT_MASTER)
    _session = _build(wanted, shuffle_partitions, driver_memory)
    _master = wanted
    return _session


def java_runtime() -> str | None:
    """The Java that Spark would start (JAVA_HOME's, else the one on PATH), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def _build(master: str | None, shuffle_partitions: int | None, memory: str | None) -> SparkSession:
    if not _submitted() and java_runtime() is None:
        raise SparkJobFailed(
            "spark needs a Java runtime (17 or 21) and finds none: JAVA_HOME is unset or "
            "wrong and no java is on PATH (Debian/Ubuntu: apt-get install "
            "openjdk-17-jre-headless)"
        )
    builder = SparkSession.builder.appName("metaplane")
    if master is not None:
        builder = builder.master(master)
    local = master is not None and master.startswith("local")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{_log_config()} "
        + JIT_OPTIONS,
        "spark.executor.extraJavaOptions": JIT_OPTIONS,
    }
    if local:
        settings["spark.driver.extraJavaOptions"] += " " + LOCAL_GC_OPTIONS
        # A laptop's hostname often resolves to nothing useful; local mode needs no network.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions or 2 * _cores())
    elif shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if memory is not None:
        settings["spark.driver.memory"] = memory
    for name, value in settings.items():
        builder = builder.config(name, value)
    with spark_errors():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    log.info("spark session on %s", session.sparkContext.master)
    return session


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def stop_spark() -> None:
    """Stop the process's session (tests and short-lived tools; a CLI run just exits)."""
    global _session, _master
    if _session is not None:
        _session.stop()
        _session = None
        _master = None


@contextlib.contextmanager
def spark_errors() -> Iterator[None]:
    """Turn Spark's and py4j's exceptions into a `SparkJobFailed` with one clear line."""
    try:
        yield
    except (PySparkException, Py4JError) as error:
        first = next((line for line in str(error).splitlines() if line.strip()), repr(error))
        raise SparkJobFailed(f"spark: {first.strip()}") from error
