# Plain verbs. `make test` on a fresh machine builds its own virtualenv, installs exactly what
# uv.lock names and runs lint, types and the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# uv itself is pinned: the lock's format and resolution are uv's. Installed once under .tools/
# by the machine's pip; the infra extra pins the same version for the layer build
# (tests/unit/test_dependency_lock.py holds the two together).
UV_VERSION := 0.13.9
UV := .tools/uv-$(UV_VERSION)/bin/uv
export UV_PYTHON_DOWNLOADS := never
# Python caches what it compiles (__pycache__, git-ignored) for every command and subprocess here:
# with PYTHONDONTWRITEBYTECODE set, as some images set it, each pytest worker and each
# subprocess the suite starts compiled every module it imports from source again (~2 s of CPU
# per process for boto3, moto and langorch; aws-cdk-lib's modules far more).
unexport PYTHONDONTWRITEBYTECODE
# Folders that hold Python today (an empty folder is not in git).
PY_DIRS := $(wildcard shared functions tests bench infra)

CDK := npx --yes aws-cdk@2.1148.1

.PHONY: install lock dev test test-cpu lint types unit bench bench-pipeline bench-flow capacity synth deploy destroy clean chromium

$(UV):
	$(PYTHON) -m pip install --quiet --disable-pip-version-check \
		--target .tools/uv-$(UV_VERSION) uv==$(UV_VERSION)

# --locked: refuse a lock that no longer matches pyproject.toml (run `make lock`), never re-resolve.
$(STAMP): pyproject.toml uv.lock $(UV)
	$(UV) sync --locked --all-extras --python $(PYTHON) --quiet
	touch $(STAMP)

install: $(STAMP)

# Resolve again within pyproject.toml's ranges, newest first; review the diff of uv.lock.
lock: $(UV)
	$(UV) lock --upgrade

lint: $(STAMP)
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)
	PYTHONPATH=. $(BIN)/lint-imports --no-cache

types: $(STAMP)
	$(BIN)/mypy

# Two processes (the machines here have two cores); a file's tests stay in one process, so
# module-scoped emulators and stacks are shared as written. The 15 slowest tests are listed, to
# keep an eye on the suite's time (PERFORMANCE P8). Time limits only stop a hung test: they are
# doubled (LANGORCH_TEST_PATIENCE, tests/conftest.py) so a busy machine is slow, not red.
test: $(STAMP) lint types chromium
	LANGORCH_TEST_PATIENCE=$${LANGORCH_TEST_PATIENCE:-2} $(BIN)/pytest -q -n 2 --dist loadfile --durations=15

# CPU seconds per test file (each worker's and the children it waited for) appended to
# .pytest_cache/cpu-report.jsonl, for P8's budget (tests/support/cpu_report.py);
# TESTS=tests/infra measures one tier.
test-cpu: $(STAMP)
	PYTHONPATH=. $(BIN)/pytest -q -n 2 --dist loadfile -p tests.support.cpu_report $(or $(TESTS),tests)

# The browser tests (tests/browser) drive Debian's chromium with Playwright; Playwright's own
# browser download needs the network, the distribution's package does not. Quiet, idempotent.
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

# `make dev PORT=4600 EMULATOR_PORT=4601 CONSOLE_PORT=0 LANGORCH_HOME=/tmp/stack2`: another
# stack beside the first (every langorch command finds it with the same LANGORCH_HOME);
# CONSOLE_EMAIL=you@example.com: the console decides the approvals that name you, as you;
# SLACK=1: a fake Slack on loopback, and approval requests posted there too.
dev: $(STAMP)
	$(BIN)/langorch dev $(if $(PORT),--port $(PORT)) \
		$(if $(EMULATOR_PORT),--emulator-port $(EMULATOR_PORT)) \
		$(if $(CONSOLE_PORT),--console-port $(CONSOLE_PORT)) \
		$(if $(CONSOLE_EMAIL),--console-email $(CONSOLE_EMAIL)) \
		$(if $(SLACK),--slack)

bench: $(STAMP)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/deploy.py
	$(BIN)/python bench/llm.py
	$(BIN)/python bench/console.py

bench-pipeline: $(STAMP)
	$(BIN)/python bench/pipeline.py

# Which AWS quota binds first for a stated mix (README "Capacity"); MIX="--runs-per-hour 7200
# --llm-calls 5" states another.
capacity: $(STAMP)
	$(BIN)/python bench/capacity.py $(MIX)

# Issue 31: 500 webhook deliveries, 5 keys, concurrency 2 per key, on `langorch dev`.
bench-flow: $(STAMP)
	$(BIN)/python bench/flow.py

# Offline: no AWS account, no CDK CLI, no Docker.
synth: $(STAMP)
	$(BIN)/python -m infra.app $(CDK_ARGS)

# The CDK CLI is pinned: its cloud-assembly schema must match aws-cdk-lib's.
deploy: $(STAMP)
	$(CDK) deploy -c bundle=true $(CDK_ARGS)

destroy: $(STAMP)
	$(CDK) destroy --force $(CDK_ARGS)

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache .langorch cdk.out build/infra
