# kubeloop — every target creates or refreshes .venv itself; only python3, make and git are needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck docs unit bench clean manifests

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kubeloop demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict src
	for example in examples/*/main.py; do $(BIN)/mypy --strict $$example || exit 1; done

docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs build/docs

unit: $(STAMP)
	$(BIN)/python -m tests.kubectl_finder --ensure
	$(BIN)/python -m tests.syscall_trace --ensure
	$(BIN)/python -m tests.debian_packages curl
	$(BIN)/pytest -q -p no:cacheprovider

test: lint typecheck docs unit

bench: $(STAMP)
	$(BIN)/python bench/b1_workqueue.py
	$(BIN)/python bench/event_to_queue.py
	$(BIN)/python bench/b5_startup.py
	$(BIN)/python bench/b4_apiserver_writes.py
	$(BIN)/python bench/stall.py
	$(BIN)/python bench/client_throughput.py
	$(BIN)/python bench/reconcile_latency.py
	$(BIN)/python bench/b3_cache.py
	$(BIN)/python bench/openapi_documents.py

clean:
	rm -rf $(VENV) build src/*.egg-info

# The agent platform's generated deployment files (CRDs and ClusterRole); a test keeps them current.
manifests: $(STAMP)
	$(BIN)/kubeloop crd examples/agents > examples/agents/config/crd/agents.kubeloop.dev.yaml
	$(BIN)/kubeloop rbac examples/agents > examples/agents/config/rbac/role.yaml
