# autoui: two commands matter — `make demo` and `make test`. Both set up from scratch.
SHELL := /bin/bash
.DEFAULT_GOAL := demo

# The Python used for scripts/ (export, fixtures, peers): pyenv's CPython 3.11 on this
# machine class. Its venv lives in .venv with exact pins from scripts/requirements.txt.
PYTHON_BOOT ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
ORT_DIR := third_party/onnxruntime
ORT_LIB := $(ORT_DIR)/lib/libonnxruntime.so.1.29.0
BIN := build/autoui
GO ?= go
GOTEST_FLAGS ?=
DEMO_MODEL ?= models/default
DEMO_SCREEN ?= models/default/sample_screen.png
DEMO_GOAL ?= Open Calendar

export ORT_DISABLE_TELEMETRY := 1
export ONNXRUNTIME_SHARED_LIBRARY_PATH ?= $(CURDIR)/$(ORT_LIB)

.PHONY: setup setup-go setup-ort setup-python setup-adb setup-slurm build demo test test-go test-python test-client lint fixtures testdata-fp16 clean bench bench-models bench-node setup-cuda

setup: setup-go setup-ort setup-python setup-adb

setup-go:
	$(GO) mod download

setup-ort: $(ORT_LIB)
$(ORT_LIB): scripts/fetch_onnxruntime.sh
	./scripts/fetch_onnxruntime.sh $(ORT_DIR)

setup-python: $(VENV)/.installed
$(VENV)/.installed: scripts/requirements.txt
	@$(PYTHON_BOOT) -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
	  || { echo "need CPython 3.11 as $(PYTHON_BOOT)"; exit 1; }
	@start=$$(date +%s); \
	$(PYTHON_BOOT) -m venv $(VENV) && \
	$(VENV)/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt && \
	echo "python env installed in $$(( $$(date +%s) - start ))s"
	touch $@

# Debian's adb server: the device tests drive the real server against a fake device.
setup-adb:
	@command -v adb >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq adb >/dev/null; \
	  else echo "adb not found: sudo apt-get install adb"; exit 1; fi; }

# Debian's Slurm and munge: cmd/autoui's Slurm test runs a private single-node cluster
# (as root; elsewhere it is skipped).
setup-slurm:
	@for b in sbatch sinfo scancel slurmctld slurmd munged; do PATH=$$PATH:/usr/sbin command -v $$b >/dev/null || missing=1; done; \
	[ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; \
	  else echo "slurm not found (the Slurm test will be skipped): sudo apt-get install slurm-wlm munge"; fi; }

# Optional: the CUDA build of ONNX Runtime 1.29 and its CUDA 13 libraries (see docs/cuda.md).
setup-cuda:
	./scripts/setup_cuda.sh .venv-cuda

build: setup-go
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/autoui

demo: setup-go setup-ort build
	$(BIN) predict --model $(DEMO_MODEL) --screen $(DEMO_SCREEN) --goal "$(DEMO_GOAL)" --annotate build/demo_annotated.png
	@echo "annotated screen: build/demo_annotated.png"

lint: setup-go
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet ./...

test: setup lint test-go test-python test-client

test-go: setup-go setup-ort setup-adb setup-slurm testdata-fp16
	$(GO) test -race -count=1 $(GOTEST_FLAGS) ./...
	@# The patched onnxruntime_go (go.mod's replace) is its own module: its suite and the
	@# patch's tests. TestStringTensor needs the en_US.UTF-8 locale, which CI lacks.
	cd third_party/onnxruntime_go && $(GO) test -race -count=1 -skip '^TestStringTensor$$' .

test-python: setup-python
	$(PY) -m pytest -q scripts/tests

# The Python client (clients/python) in .venv, editable, built by the backend pinned in its
# requirements-dev.txt (no build isolation: nothing unpinned is fetched); its tests start real
# `autoui serve` processes from $(BIN) on the tiny test model.
CLIENT_DIR := clients/python
test-client: setup-python setup-ort build $(VENV)/.client-installed
	AUTOUI_BIN=$(CURDIR)/$(BIN) $(PY) -m pytest -q $(CLIENT_DIR)/tests

$(VENV)/.client-installed: $(VENV)/.installed $(CLIENT_DIR)/pyproject.toml $(CLIENT_DIR)/requirements-dev.txt
	$(VENV)/bin/pip install -q --disable-pip-version-check -r $(CLIENT_DIR)/requirements-dev.txt
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e $(CLIENT_DIR)
	touch $@

fixtures: setup-python
	$(PY) -m scripts.fixtures

# The tiny bundle in fp16 everywhere, with float32 graph IO and with its K/V cache float16
# too: the engine's TestFP16Cache compares the two (scripts.half, ~10 s).
# Remade when any script, the tiny bundle or the calibration screens change.
FP16_TESTDATA := build/testdata
testdata-fp16: $(FP16_TESTDATA)/tiny-fp16/manifest.json $(FP16_TESTDATA)/tiny-fp16cache/manifest.json
$(FP16_TESTDATA)/tiny-fp16/manifest.json $(FP16_TESTDATA)/tiny-fp16cache/manifest.json &: $(VENV)/.installed \
    $(wildcard scripts/*.py) $(wildcard models/testdata/tiny/*) $(wildcard models/testdata/screens/*)
	rm -rf $(FP16_TESTDATA)/tiny-fp16 $(FP16_TESTDATA)/tiny-fp16cache
	$(PY) -m scripts.half --in models/testdata/tiny --out $(FP16_TESTDATA)/tiny-fp16 --roles all --fp32-ops ''
	$(PY) -m scripts.half --in models/testdata/tiny --out $(FP16_TESTDATA)/tiny-fp16cache --roles all --fp32-ops '' --fp16-cache

# Benchmarks: random-weight bundles at real sizes (cached in bench-models/, not in git),
# then ours vs PyTorch, ONNX Runtime Python and transformers.js on the same bundle.
BENCH_MODELS_DIR := bench-models
# The text path at base size (vision is a tiny tower): what the decoding targets are about.
BENCH_MODEL ?= $(BENCH_MODELS_DIR)/base-vtiny
BENCH_THREADS ?= 2
BENCH_RUNS ?= 3
BENCH_WARMUP ?= 1
# Ours decodes a replayed typical action (realistic speculative acceptance); the peers the
# same number of tokens. BENCH_REPLAY= gives the fixed-length mode (BENCH_TOKENS each).
BENCH_REPLAY ?= typical
BENCH_TOKENS ?= 80
# A sentence printed under the table's heading (e.g. the load average while it ran).
BENCH_NOTE ?=

bench-models: setup-python
	$(PY) -m scripts.bench_models --out $(BENCH_MODELS_DIR)

bench-node: bench/node/node_modules/.package-lock.json
bench/node/node_modules/.package-lock.json: bench/node/package.json bench/node/package-lock.json
	cd bench/node && npm ci --ignore-scripts --no-audit --no-fund

# CTranslate2 and OpenVINO, for `make bench` only (not setup/test/CI): pinned in
# scripts/peers/requirements.txt, constrained by the project's pins.
bench-peers: $(VENV)/.peers-installed
$(VENV)/.peers-installed: scripts/peers/requirements.txt $(VENV)/.installed
	$(VENV)/bin/pip install -q --disable-pip-version-check -c scripts/requirements.txt -r scripts/peers/requirements.txt
	touch $@

bench: setup-ort setup-python build bench-node bench-peers
	$(PY) -m scripts.bench_models --out $(BENCH_MODELS_DIR) $(notdir $(BENCH_MODEL))
	@test $(BENCH_MODEL)-int8/manifest.json -nt $(BENCH_MODEL)/manifest.json || $(PY) -m scripts.quantize --in $(BENCH_MODEL) --out $(BENCH_MODEL)-int8
	$(PY) -m scripts.peers.compare --model $(BENCH_MODEL) --threads $(BENCH_THREADS) --runs $(BENCH_RUNS) \
	  --warmup $(BENCH_WARMUP) --tokens $(BENCH_TOKENS) --replay "$(BENCH_REPLAY)" --ours-greedy \
	  --int8 $(BENCH_MODEL)-int8 --autoui $(BIN) --note "$(BENCH_NOTE)" --docs

clean:
	rm -rf build
