# The two commands of the README: `make run` serves the app, `make test` runs every test.
# Each does its own set-up (a virtualenv in .venv, npm packages in frontend/, system packages).
# `make check` is the contributor's loop: lint and the tests that start no process (minutes).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
JS_STAMP := frontend/node_modules/.installed
SYS_STAMP := $(VENV)/.system-installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The PyTorch the project is tested with: pinned here, not in the package (it asks for torch>=2.4).
TORCH_VERSION := 2.13.0

.PHONY: run test check setup system test-python test-js lint bench readme-diagram wheel clean reliability

run: setup
	$(PY) -m gradtrace serve --host $(HOST) --port $(PORT)

# The tiers of tests/conftest.py: the quick tier starts no process, browser or service.
QUICK := not process and not browser and not services

# Every test. All but the `alone` ones on three pytest-xdist workers: a module that starts processes
# runs whole on one worker (its own server starts once, its tests keep their order; the
# PostgreSQL/Redis/nginx tests share one worker), the quick tier's tests fill the gaps. Three on
# 2 cores, as that stage mostly waits (servers starting, browsers, deadlines): with three it used
# 1-1.25 cores on average and took 9.2-11.9 min where two took 16.7-17 min on the same shared
# machine at the same load.
# Then the `alone` ones (load, faults, slow clients: their figures assume a machine of their
# own), one at a time.
test: setup system
	$(PY) -m pytest -n 3 --dist loadgroup -m "not alone"
	$(PY) -m pytest -m alone
	$(MAKE) test-js

test-js: $(JS_STAMP)
	cd frontend && npm test

setup: $(PY_STAMP) $(JS_STAMP)

$(PY_STAMP): backend/pyproject.toml backend/setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet 'torch==$(TORCH_VERSION)' -e 'backend[server,dev]'
	touch $@

$(JS_STAMP): frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

# Chromium (browser tests), PostgreSQL, Redis and nginx (scale-out tests), from Debian.
system: $(SYS_STAMP)
$(SYS_STAMP): scripts/install-system-deps.sh | $(PY_STAMP)
	bash scripts/install-system-deps.sh
	touch $@

# ruff, the layering (import-linter) and the types of the whole package ([tool.mypy] in pyproject.toml).
define LINT
	$(VENV)/bin/ruff check backend tests
	$(VENV)/bin/ruff format --check backend tests
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
endef

lint: setup
	$(LINT)

# Lint, then every test that starts no server, CLI, browser, service or venv, then the viewer's
# unit tests: under 3 minutes on 2 cores. It installs nothing: it uses what `make setup` (or
# `make test`, `make run`) installed, and this checkout's package (PYTHONPATH) whatever the venv
# points at.
check: export PYTHONPATH := $(CURDIR)/backend
check:
	@test -f $(PY_STAMP) -a -f $(JS_STAMP) || { echo "make check: run make setup once first"; exit 1; }
	$(LINT)
	$(PY) -m pytest -q -n 2 -m "$(QUICK)"
	cd frontend && npm test

# The reliability proof (issue 10): every scenario of tests/reliability at full length (about
# 15 minutes); make test runs short versions. Figures in var/reliability/, summed up in RELIABILITY.md.
reliability: setup system
	GRADTRACE_RELIABILITY=full $(PY) -m pytest tests/reliability -q -s

# One interleaved run against the anchors (bare PyTorch, torchviz + Graphviz, TorchLens, wandb
# offline beside gradtrace.watch):
# the tables of BENCHMARKS.md. The anchors are installed here, not in the package's extras.
# torchvision's Python code (resnet18) goes apart from the venv, in var/bench-torchvision: beside
# this torch its C++ operators fail to load, and transformers would find it and fail with them.
bench: setup
	$(PY) -m pip install --quiet torchviz torchview torchlens pillow wandb
	test -d var/bench-torchvision/torchvision || $(PY) -m pip install --quiet --no-deps --target var/bench-torchvision 'torchvision==0.29.1'
	command -v dot >/dev/null || { s=$$([ $$(id -u) -eq 0 ] || echo sudo); $$s apt-get update -qq && $$s apt-get install -y -qq graphviz; }
	$(PY) tests/perf/bench.py --write BENCHMARKS.md

# The README's animated diagram: the two-layer example's backward pass, drawn by gradtrace itself.
readme-diagram: setup
	$(PY) -m gradtrace examples two-layer-linear | $(PY) -m gradtrace render - -o frontend/assets/readme-backward.svg --animated --phase backward
	$(PY) -m gradtrace examples two-layer-linear | $(PY) -m gradtrace render - -o frontend/assets/readme-backward-dark.svg --animated --phase backward --theme dark

# The release files in dist/: the sdist and the wheel built from it, the viewer and its vendored JS inside.
wheel: setup
	$(PY) -m build --outdir dist backend

clean:
	rm -rf $(VENV) frontend/node_modules var dist
