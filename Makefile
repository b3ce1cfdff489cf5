# Two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 6443
DATABASE_URL ?= sqlite:///./data/dra.sqlite
# pytest-xdist workers: the suite waits on servers and workers a quarter of the time, so three
# workers on two cores keep both busy (make test's pytest: 9 min 51 s with two, 8 min 36 s with
# three; TEST_WORKERS=0 runs it in one process). Whole files go to one worker, so a module's tests
# keep the order they were written in.
TEST_WORKERS ?= 3

.PHONY: venv run test test-fast test-image test-pure lint typecheck fuzz protobuf-schema bench bench-memory bench-scheduler bench-simulator bench-scale bench-dradriver bench-faults bench-httpfloor clean

# The install compiles the hot modules with mypyc (setup.py; list in kube/compiled.py; about two
# minutes of CPU) once the dependencies are in. DRA_PURE_PYTHON=1 skips that, at install or at run time.
$(BIN)/.installed: pyproject.toml setup.py kube/compiled.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip 'setuptools>=68'
	DRA_PURE_PYTHON=1 $(BIN)/pip install --quiet -e '.[test]'
	# Now with every dependency's types in the venv, which mypyc needs to compile (mypy is a test dependency).
	$(BIN)/pip install --quiet --no-build-isolation --no-deps -e .
	touch $@

venv: $(BIN)/.installed

# make run EXAMPLE_DRIVER=1: the example DRA driver on every node instead of built-in devices.
# make run REPLICAS=2 SHARDS=4 DATABASE_URL=postgresql://...: two API servers on one Postgres (ports
# PORT and PORT+1), the kubelet simulator as four processes, the workers spread over the replicas.
run: venv
	$(BIN)/python -m devtools.devstack --port $(PORT) --database-url '$(DATABASE_URL)' $(if $(EXAMPLE_DRIVER),--example-driver) \
		$(if $(NODES),--nodes $(NODES)) $(if $(REPLICAS),--replicas $(REPLICAS)) $(if $(SHARDS),--shards $(SHARDS))

# Every run prints its 30 slowest tests, so a test that grows slow shows up where it is run.
DURATIONS := --durations=30

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m mypy app kube kubeletapi schedulers controllers kubeletsim exampledriver devtools kubectl_dra bench tests
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(DURATIONS) -m "not image" --ignore=tests/interop

# The compose stack run from the container image's own file set, installed as the Dockerfile
# installs it (pip and mypyc: 5 to 20 minutes on 2 cores), so CI runs it beside `make test`.
test-image: venv
	$(BIN)/pytest -q $(DURATIONS) -m image tests/deploy

# The edit loop (a few minutes): the unit tests, without server processes or Postgres (marker
# "server", set from the fixtures in tests/conftest.py), browsers, benchmarks or end-to-end stacks.
FAST_IGNORE := --ignore=tests/interop --ignore=tests/e2e --ignore=tests/fuzz --ignore=tests/bench --ignore=tests/deploy \
	--ignore=tests/devtools --ignore=tests/kubectl_dra/test_dashboard_browser.py
test-fast: venv
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(DURATIONS) -m "not server" $(FAST_IGNORE)

# The compiled modules' unit tests again on their Python source (CI runs both; kube/compiled.py).
PURE_TESTS := tests/kube/test_compiled.py tests/kube/test_labels.py tests/kube/test_fields.py tests/kube/test_gatedfields.py \
	tests/app/api/test_apply.py tests/app/api/test_schemas.py tests/app/api/test_routing.py \
	tests/app/api/test_generic.py tests/app/registry/test_objectmeta.py tests/app/test_protobuf.py \
	tests/app/storage/test_storage.py
test-pure: venv
	DRA_PURE_PYTHON=1 $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(DURATIONS) $(PURE_TESTS)

lint: venv
	$(BIN)/ruff check .

typecheck: venv
	$(BIN)/python -m mypy app kube kubeletapi schedulers controllers kubeletsim exampledriver devtools kubectl_dra bench tests

# A longer schemathesis run than the one in `make test` (random seed, many examples per operation).
fuzz: venv
	DRA_FUZZ_EXAMPLES=300 DRA_FUZZ_SEED=$${DRA_FUZZ_SEED:-$$RANDOM} $(BIN)/pytest -q tests/fuzz -k sqlite

bench: venv
	$(BIN)/python -m bench.api

bench-memory: venv
	$(BIN)/python -m bench.memory

# Three cluster sizes, as README's table: 100, 500 and 1,000 nodes of 10 devices, 1,000 pods each.
bench-scheduler: venv
	$(BIN)/python -m bench.scheduler --nodes 100,500,1000

bench-simulator: venv
	$(BIN)/python -m bench.simulator

# 10,000 simulated GPU nodes as 8 simulator shards on 2 API server replicas on one Postgres, with a
# 1,000-node run of the same command first (per-node ratios); long (registering 10,000 nodes took 12.5 min at load 20-30). bench/README.md.
bench-scale: venv
	$(BIN)/python -m bench.scale

# Pod starts/s with the example DRA driver over gRPC against built-in devices, 100 nodes.
bench-dradriver: venv
	$(BIN)/python -m bench.dradriver

# SIGKILL under writers, a Postgres outage, 2,000 watches, idle and slowloris clients, a 20,000-claim LIST.
bench-faults: venv
	$(BIN)/python -m bench.faults

# The HTTP layer's floor: uvicorn + httptools against granian, a bare app and the real one.
bench-httpfloor: venv
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.httpfloor

# The protobuf messages of every Kubernetes kind, from the Go types (needs Go and the module proxy).
protobuf-schema: venv
	$(BIN)/python -m devtools.protobufschema

# Upstream's etcd v3.7.3 and kube-apiserver, kube-scheduler, kube-controller-manager v1.37.2, built
# from the Go module proxy into .gobin/upstream-v1.37.2/ once (devtools/upstream.py; needs Go).
.PHONY: upstream interop e2e
upstream: venv
	$(BIN)/python -m devtools.upstream build

# This project beside upstream's binaries, each figure from the same run: bench.api at 16
# clients against kube-apiserver + etcd and this server + Postgres (JSON, then protobuf), then bench.scheduler at 500 nodes x
# 10 devices and 1,000 pods on three stacks (bench/README.md, "Side by side with upstream").
.PHONY: bench-upstream
bench-upstream: upstream
	$(BIN)/python -m bench.api --against-upstream --clients 16 --duration 5 --rounds 2
	$(BIN)/python -m bench.api --against-upstream --clients 16 --duration 5 --rounds 2 --protobuf
	$(BIN)/python -m bench.scheduler --against-upstream --nodes 500 --pods 1000

# Upstream's own DRA e2e suite (k8s.io/kubernetes v1.37.2 test/e2e/dra, built from interop/e2e into
# .gobin/) against make run's stack, then against upstream's control plane with the kubelet simulator
# as the reference: every spec that needs no real kubelet, one line per spec and stack (devtools/e2e.py).
e2e: upstream
	$(BIN)/python -m devtools.e2e run

# The interop tests (tests/interop: Go programs and upstream's binaries, so not in `make test`),
# and kubectl's protobuf-speaking create commands again; without Go they fail here, not skip.
interop: upstream
	DRA_REQUIRE_GO=1 $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(DURATIONS) tests/interop tests/clients/test_kubectl_create.py

clean:
	rm -rf $(VENV) data build *.egg-info *__mypyc*.so .mypyc-sources.json
	find app kube -name "*.so" -delete
