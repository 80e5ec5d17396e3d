# The two commands of the README: `make run` serves the app, `make test` runs every test.
# Each does its own set-up (a virtualenv in .venv, npm packages in frontend/, system packages).
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

.PHONY: run test setup system test-python test-js lint bench readme-diagram wheel clean reliability

run: setup
	$(PY) -m gradtrace serve --host $(HOST) --port $(PORT)

test: setup system
	$(PY) -m pytest
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

lint: setup
	$(VENV)/bin/ruff check backend tests
	$(VENV)/bin/ruff format --check backend tests
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy  # the whole package: [tool.mypy] in pyproject.toml

# The reliability proof (issue 10): every scenario of tests/reliability at full length (about
# 15 minutes); make test runs short versions. Figures in var/reliability/, summed up in RELIABILITY.md.
reliability: setup system
	GRADTRACE_RELIABILITY=full $(PY) -m pytest tests/reliability -q -s

# One interleaved run against the anchors (bare PyTorch, torchviz + Graphviz, TorchLens):
# the tables of BENCHMARKS.md. The anchors are installed here, not in the package's extras.
# torchvision's Python code (resnet18) goes apart from the venv, in var/bench-torchvision: beside
# this torch its C++ operators fail to load, and transformers would find it and fail with them.
bench: setup
	$(PY) -m pip install --quiet torchviz torchview torchlens pillow
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
