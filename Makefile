# The two entry points of the README. Each sets itself up from scratch (virtualenv + pip install).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DIR ?= demo-data

.PHONY: demo tour test lint bench clean venv zookeeper

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# A plain editable install: setup.py makes it visible to Spark's data-source lookup and installs
# distributedlog_pyspark.pth (Spark's Python workers run this interpreter), as `pip install .` does.
venv: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

## Main job, on the embedded default (no server): a producer process appends events to a log while a
## Spark Structured Streaming query transforms them into another log, exactly once; then it checks.
demo: venv
	rm -rf $(DEMO_DIR)
	$(BIN)/python examples/pipeline.py --uri distributedlog-local://$(CURDIR)/$(DEMO_DIR)/ns \
	  --checkpoint $(CURDIR)/$(DEMO_DIR)/checkpoint

## The storage tour: write, read by DLSN and txid, truncate, purge, tail, end of stream.
tour: venv
	rm -rf $(DEMO_DIR)-tour
	$(BIN)/python examples/log_tour.py --uri distributedlog-local://$(CURDIR)/$(DEMO_DIR)-tour

## ZooKeeper for the tests (Debian's package; the tests start private servers on loopback).
zookeeper:
	@dpkg -s zookeeper >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper)

## Lint, type-check, then the whole test suite.
test: venv lint zookeeper
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check storage dl_spark pyspark_distributedlog.py setup.py tests examples bench
	$(BIN)/ruff format --check storage dl_spark pyspark_distributedlog.py setup.py tests examples bench
	$(BIN)/mypy

bench: venv zookeeper
	$(BIN)/python bench/bench_storage.py
	$(BIN)/python bench/bench_zookeeper.py
	$(BIN)/python bench/bench_spark_source.py
	$(BIN)/python bench/bench_spark_sink.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) $(DEMO_DIR)-tour build *.egg-info .pytest_cache .mypy_cache .ruff_cache
