# The two entry points of the README. Each sets itself up from scratch (virtualenv + pip install).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DIR ?= demo-data

.PHONY: proto demo tour test lint bench clean venv zookeeper ceph jvm cluster-deps cluster chaos jdk nats fuse docs

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

## The write proxy's gRPC stubs (dl_proxy/proto/*_pb2*.py and their .pyi), generated from the .proto and kept in
## the repository; tests/proxy/test_proto.py checks they match a fresh generation.
proto: venv
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. \
	  --mypy_out=. --mypy_grpc_out=. dl_proxy/proto/distributedlog.proto

## ZooKeeper for the tests (Debian's package; the tests start private servers on loopback).
zookeeper:
	@dpkg -s zookeeper >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper)

## NATS JetStream for bench/bench_proxy.py's fan-in peer (Debian's nats-server; the benchmark starts a private
## server on loopback).
nats:
	@dpkg -s nats-server golang-go golang-github-nats-io-go-nats-dev >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server golang-go golang-github-nats-io-go-nats-dev)

## Ceph for the RADOS segment-store tests (Debian's Pacific packages; the tests start a private cluster on
## loopback with tools/ceph_cluster.py, no systemd, no mgr).
## Debian's Python binding of librados is one C extension, /usr/lib/python3/dist-packages/rados.cpython-311-*.so,
## which only Debian's /usr/bin/python3 sees (there is no PyPI package). The venv's interpreter has the same ABI,
## so it can load the file; it only has to find it. Adding all of dist-packages to the venv's sys.path would
## shadow the venv's own packages with Debian's, so only that .so is exposed: a symlink to it in
## $(VENV)/debian-rados/, and a debian_rados.pth file in the venv's site-packages naming that directory
## (site.py appends each directory named in a .pth file to sys.path at startup).
CEPH_PACKAGES := ceph-mon ceph-osd python3-rados uuid-runtime radosgw
ceph: $(BIN)/python
	@missing=; for p in $(CEPH_PACKAGES); do \
	  dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || missing="$$missing $$p"; done; \
	test -z "$$missing" || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing)
	@so=$$(dpkg -L python3-rados | grep 'rados.*\.so$$' | head -n 1); \
	test -n "$$so" || { echo "python3-rados holds no rados*.so" >&2; exit 1; }; \
	mkdir -p $(VENV)/debian-rados && rm -f $(VENV)/debian-rados/*.so && ln -s "$$so" $(VENV)/debian-rados/ && \
	site=$$($(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") && \
	echo "$(abspath $(VENV))/debian-rados" > "$$site/debian_rados.pth"
	@$(BIN)/python -c "import rados" || { echo "the venv cannot import Debian's rados module (another Python ABI?)" >&2; exit 1; }

## The jvm_shim jar, built in place (jvm_shim/lib/distributedlog-jvm-shim.jar) with the JDK's javac against
## py4j's jar; a no-op when it is newer than every Java source. `pip install .` builds it too when a JDK is there.
jvm: venv
	$(BIN)/python -m jvm_shim.build

## Simulated-cluster tests (tests/cluster, tools/cluster.py): firewall tools for the faults (added delay needs no
## package: tools/netsim/delayer.py speaks the kernel's NFQUEUE protocol itself).
CLUSTER_PACKAGES := iptables nftables iproute2 util-linux
cluster-deps:
	@missing=; for p in $(CLUSTER_PACKAGES); do \
	  dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || missing="$$missing $$p"; done; \
	test -z "$$missing" || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing)

## libfuse 3 for tools/crashfs.py, the file system of the machine-crash, full-disk and failing-disk tests
## (mfusepy, its Python binding, comes with the test extras).
fuse:
	@dpkg -s libfuse3-3 fuse3 >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libfuse3-3 fuse3)

## One machine, several hosts: ZooKeeper x3 + Ceph + Spark on network namespaces (root); prints the namespace URI.
## `.venv/bin/python -m tools.cluster down` removes it (`cleanup` after a crash).
cluster: venv zookeeper ceph cluster-deps
	$(BIN)/python -m tools.cluster up

## A long seeded nemesis on the simulated cluster (CHAOS_SECONDS of faults, default 20 minutes); prints the
## checker's line, the faults injected by kind and the longest unavailability per fault kind. Then the long fault
## schedules `make test` leaves out (tests marked `chaos`: the Spark pipeline SIGKILLed 20 times, ~17 min).
CHAOS_SECONDS ?= 1200
CHAOS_SEED ?= 20261125
chaos: venv zookeeper ceph cluster-deps fuse
	DLC_NEMESIS_SECONDS=$(CHAOS_SECONDS) DLC_NEMESIS_SEED=$(CHAOS_SEED) \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider --timeout $$(( $(CHAOS_SECONDS) + 900 )) \
	  tests/cluster/test_faults.py::test_random_nemesis
	$(BIN)/python -m pytest -q -s -p no:cacheprovider -m chaos tests

## A JDK for the jvm_shim tests (javac builds the jar): Debian's, when no javac is found the way jvm_shim.build finds it.
jdk: $(BIN)/python
	@$(BIN)/python -c "import importlib.util as u, sys; s = u.spec_from_file_location('b', 'jvm_shim/build.py'); \
	  m = u.module_from_spec(s); s.loader.exec_module(m); sys.exit(0 if m.find_tool('javac') else 1)" || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless)

## Lint, type-check, then the whole test suite as two pytest sessions side by side (tools/lanes.py): the simulated
## cluster's fault scenarios (which mostly wait through fault windows), the write proxies' process fleets, then the
## suites that start Spark JVMs of their own (the Java shim's, the examples', the install modes'), beside the shared
## SparkSession's suites, storage, the CLI and the rest. Heavy tests (whole Spark applications, long fault schedules)
## run one at a time across the lanes: the core lane runs its own first, the cluster lane its own last, so each meets
## the other's light tests. A third lane is faster on more cores; on two, three JVM-heavy sessions at once made
## PySpark's fixed 10 s worker connect-back time out. `$(BIN)/python -m pytest -q -m "not chaos"` runs the same tests
## one after another.
TEST_LANES ?= --lane cluster=tests/cluster,tests/proxy,tests/jvm,tests/test_examples.py,tests/test_install_modes.py --rest core --heavy-first core
test: venv lint zookeeper ceph cluster-deps jdk fuse
	$(BIN)/python -m tools.lanes $(TEST_LANES) -- -q -p no:cacheprovider --durations=30 -m "not chaos"

lint: venv
	$(BIN)/ruff check storage dl_spark jvm_shim dlog dl_proxy pyspark_distributedlog.py distributedlog_site.py setup.py tests examples bench tools
	$(BIN)/ruff format --check storage dl_spark jvm_shim dlog dl_proxy pyspark_distributedlog.py distributedlog_site.py setup.py tests examples bench tools
	$(BIN)/mypy
	$(BIN)/mypy --strict tools/

## The documentation site (mkdocs.yml, docs/) into build/site, once the generated reference pages
## (docs/reference/cli.md and configuration.md) are checked against the code: `$(BIN)/python -m tools.docgen`
## regenerates them. Open build/site/index.html, or serve the directory for search
## ($(BIN)/python -m http.server -d build/site); the pages load nothing from the network.
docs: venv
	$(BIN)/python -m tools.docgen --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d build/site

bench: venv zookeeper ceph nats
	$(BIN)/python bench/bench_storage.py
	$(BIN)/python bench/bench_zookeeper.py
	$(BIN)/python bench/bench_rados.py
	$(BIN)/python bench/bench_cold.py
	$(BIN)/python bench/bench_jvm.py
	$(BIN)/python bench/bench_positioning.py
	$(BIN)/python bench/bench_memory.py
	$(BIN)/python bench/bench_latency.py
	$(BIN)/python bench/bench_rtm_latency.py
	$(BIN)/python bench/bench_spark_source.py
	$(BIN)/python bench/bench_spark_sink.py
	$(BIN)/python bench/bench_stats.py
	$(BIN)/python bench/bench_proxy.py
	$(BIN)/python bench/bench_takeover.py
	$(BIN)/python bench/bench_time_range.py
	$(BIN)/python bench/bench_worker_start.py
	$(BIN)/python bench/bench_scale.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) $(DEMO_DIR)-tour build *.egg-info .pytest_cache .mypy_cache .ruff_cache
