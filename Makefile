# The two commands: `make demo` and `make test`. Each creates or reuses .venv and installs what it needs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.podherd-installed

.PHONY: demo docs test test-noisy test-repeat lint typecheck unit integration fuzz bench chaos client-e2e clean \
	controlplane test-real test-koordinator

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "podherd needs Python >= 3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# uv installs in half of pip's time (bytecode compiled, as pip does: a service must not compile its
	@# imports on every start); where it cannot be had (no index it can reach), pip does it.
	$(PY) -m pip install --quiet uv \
		&& $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[embedded,dev]' \
		|| $(PY) -m pip install --quiet -e '.[embedded,dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/podherd demo

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_sizes.py
	$(PY) scripts/check_signatures.py
	$(PY) -m pylint -j 2 --disable=all --enable=duplicate-code --min-similarity-lines=6 --score=n services shared kubesim podherd

typecheck: $(STAMP)
	$(PY) -m mypy --num-workers 2

# The documentation, strictly: every page in the nav, every link and anchor resolving (mkdocs.yml).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(VENV)/site

# The services' bytecode is written once, before the tests start service processes by the dozen: a replica
# that compiles its imports on start (a fresh clone) starts slower, and a chaos run kills it every few seconds.
# The static checks run side by side (each one's output kept whole), the tests after them.
test: $(STAMP)
	@$(MAKE) --no-print-directory --output-sync=target -j 3 lint typecheck docs
	@scripts/install_tls_redis.sh $(VENV)/tls-redis
	@$(PY) -m compileall -q -j 0 services shared podherd kubesim
	$(PY) -m pytest

# The real engine: etcd, kube-apiserver, kube-controller-manager, kubectl, koord-scheduler and kwok built from
# the Go modules pinned in controlplane/, into a cache outside the clone keyed by those files, the Go version
# and the flags (a second clone on this machine builds nothing). Needs Go >= 1.26 (exit 2 without).
controlplane:
	@scripts/build_controlplane.sh >/dev/null

# The conformance set (tests/conformance) on one real control plane for the run, a namespace per test;
# `make test` runs the same tests on kubesim.
test-real: $(STAMP) controlplane
	$(PY) -m pytest tests/conformance --engine real -n 0

# The same jobs through Koordinator's own migration controller (koord-descheduler v1.8.0) and through
# Podherd, on the real engine, outcome by outcome.
test-koordinator: $(STAMP) controlplane
	$(PY) -m pytest tests/koordinator --koordinator -n 0

# `make test` with a noisy neighbour: a busy loop spins one core beside it (and stops by itself).
test-noisy: $(STAMP)
	@$(PY) scripts/cpu_hog.py 1800 & hog=$$!; \
	$(MAKE) test; status=$$?; kill $$hog 2>/dev/null; exit $$status

# `.ci/run` N times, each in a fresh clone of HEAD; MODES cycles per run (quiet, noisy, nohup).
N ?= 3
MODES ?= quiet
test-repeat:
	scripts/test_repeat.sh $(N) $(MODES)

# The full fuzzing counts (`make test` runs a smaller share of them).
fuzz: $(STAMP)
	$(PY) -m pytest tests/fuzz tests/unit/test_claim_model.py --fuzz=full

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP)
	$(PY) -m pytest -m integration

# Every benchmark beside its baseline, one run: bench/results/report.{json,md} and admission_latency.png.
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) -m bench.report

# The small chaos run on the production topology and the other runs left out of `make test` for their time
# (`-m full`: the long outages, deploy/ run whole on kubesim), then the full run (1,000 jobs, 3 replicas of
# each service); `make test` runs a small one on one server.
TOPOLOGY ?= single
chaos: $(STAMP)
	$(PY) -m pytest -m full tests
	$(PY) -m bench.chaos --topology $(TOPOLOGY)

# The official Kubernetes Python client's own end-to-end tests against kubesim, read from a git repository
# of kubernetes-client/python (a clone or a URL) at the revision scripts/client_e2e.py pins.
CLIENT_E2E_SOURCE ?= https://github.com/kubernetes-client/python
# ENGINE=real: against the real control plane (make controlplane) instead.
ENGINE ?= kubesim
client-e2e: $(STAMP)
	$(PY) scripts/client_e2e.py --source "$(CLIENT_E2E_SOURCE)" --engine $(ENGINE)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
