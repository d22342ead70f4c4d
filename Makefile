# metaplane: every step a fresh machine needs is here, so that `make demo` and `make test`
# work on a clean checkout.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test check chaos lint typecheck unit bench system-deps clean

CHAOS_SECONDS ?= 600

# The demo's cluster needs nothing but Python; its last step, the analysis on Spark, needs a
# Java runtime: installed where it is missing and we are root, else the demo says so and
# skips that step.
demo: $(STAMP)
	@./.ci/system-deps java || echo "note: no Java runtime: the demo will skip its Spark analysis"
	$(VENV)/bin/metaplane demo

test: $(STAMP) system-deps lint typecheck
	$(PY) -m pytest

# The inner loop: lint, types and every test not marked slow (no Spark, no chaos, no
# ensemble or browser), in a few minutes.
check: $(STAMP) system-deps lint typecheck
	$(PY) -m pytest -m "not slow"

# Chaos on sqlite, then on a 3-member etcd, for CHAOS_SECONDS each (make chaos
# CHAOS_SECONDS=600); prints what was done, the faults and the invariant counts.
chaos: $(STAMP) system-deps
	$(PY) -m metaplane.testing.chaos --backend sqlite --seconds $(CHAOS_SECONDS) --json benchmarks/results/chaos-sqlite.json
	$(PY) -m metaplane.testing.chaos --backend etcd --seconds $(CHAOS_SECONDS) --json benchmarks/results/chaos-etcd.json

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# Every benchmark in turn (about an hour on 2 cores: the 10M-key pipeline run and the 1M-key
# scale runs are most of it). Each prints its table and writes JSON under benchmarks/results/.
bench: $(STAMP) system-deps
	$(PY) benchmarks/store_bench.py
	$(PY) benchmarks/cache_bench.py
	$(PY) benchmarks/schema_bench.py
	$(PY) benchmarks/cluster_bench.py
	$(PY) benchmarks/failover_bench.py
	$(PY) benchmarks/zk_failover_bench.py
	$(PY) benchmarks/pipeline_bench.py
	$(PY) benchmarks/api_bench.py
	$(PY) benchmarks/scale_bench.py
	$(PY) benchmarks/scale_sim.py

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The tests run against real servers. Where one is missing and we are root, install it from
# the OS packages; otherwise say so and fail: the etcd cases are never skipped silently.
system-deps:
	@./.ci/system-deps

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
