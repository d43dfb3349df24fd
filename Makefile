# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
# The torch build to install first. The default is the CPU wheel; on a GPU machine pass e.g.
# TORCH='torch==2.13.0' with PIP_INDEX_URL pointing at the CUDA wheel index.
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
# The constraints file holds $(TORCH); every install step below reads it, so no later step (an
# upgrade, an extra, a dependency asking for a newer torch) can swap the build. pip installs
# torch (it honours PIP_INDEX_URL and the machine's pip settings, where a local torch wheel may
# lie); uv installs the rest, the same versions as pip resolves, in far less time than pip
# (docs/development.md has the figures), which is most of a clean CI run's install.
# uv writes no bytecode unless told (pip does), and these machines set PYTHONDONTWRITEBYTECODE=1,
# so without --compile-bytecode every process compiled Lightning, MLflow and Ray from source
# again, at every start.
CONSTRAINTS := $(VENV)/constraints.txt
STAMP  := $(VENV)/.installed

.PHONY: setup bytecode demo test test-fast test-slow lint format bench bench-scale results browser clean

# pytest-xdist processes for the suite; each module's tests stay on one (--dist loadfile), so a
# module's fixtures are made once.
# Two on the project's 2-core machines, where the sweeps' waits leave a core idle otherwise.
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile
# The project's own modules as bytecode before a test run, for the same reason as the install's
# --compile-bytecode: every sweep, trial and Ray worker process imports them. Only changed files
# are compiled again.
SOURCES := nas trainers record stats reports search_spaces benchmarks tests

setup: $(STAMP)

# Re-runs only when pyproject.toml, this Makefile or $(TORCH) changed.
$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo '$(TORCH)' > $(CONSTRAINTS).new
	@cmp -s $(CONSTRAINTS).new $(CONSTRAINTS) || mv $(CONSTRAINTS).new $(CONSTRAINTS)
	@rm -f $(CONSTRAINTS).new
	$(BIN)/pip install --disable-pip-version-check -q -c $(CONSTRAINTS) '$(TORCH)' 'uv>=0.5'
	$(BIN)/uv pip install --python $(BIN)/python -q --compile-bytecode -c $(CONSTRAINTS) -e '.[dev]'
	@echo '$(TORCH)' > $@

# A changed TORCH forces a reinstall.
ifneq ($(shell cat $(STAMP) 2>/dev/null),$(TORCH))
$(STAMP): FORCE
endif
.PHONY: FORCE
FORCE:

# The demo sweep: standard pre-norm against Block AttnRes at 8 blocks, 6 seeds, two trials at a
# time, recorded in ./mlflow.db (`.venv/bin/nas ui` shows it); its time: docs/development.md.
demo: bytecode
	$(BIN)/nas sweep demo --concurrency 2
	$(BIN)/nas report demo

# Every CPU benchmark (docs/development.md: how long); rewrites docs/benchmarks.md's table.
bench: setup
	$(BIN)/python -m benchmarks.run_all

# A 200-trial sweep on SQLite and through a PostgreSQL-backed MLflow server, then `nas report`:
# too long for `make bench`'s budget with the rest. Needs PostgreSQL at
# NAS_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/postgres); 10 trials:
# `python -m benchmarks.harness.sweep_scale --quick`.
bench-scale: setup
	$(BIN)/python -m benchmarks.harness.sweep_scale

# The results gallery, docs/results/: each study's sweep (kept in ./gallery, so a settled one is
# only reported again) and its Markdown report (docs/development.md: how long; the Table 4
# ablation, 21 arms x 3 seeds, takes most of it).
results: setup
	$(BIN)/python -m benchmarks.harness.gallery

bytecode: setup
	@$(BIN)/python -m compileall -q -j 0 $(SOURCES) > /dev/null

# The whole suite, slow tests included: what CI runs.
test: bytecode
	$(PYTEST)

# The inner loop: unit and property tests only (no Ray, sweep, database, server or browser),
# kept short (docs/development.md: its time).
test-fast: bytecode
	$(PYTEST) -m "not slow"

# Headless Chromium for the browser tests (Debian's packages, as root). Elsewhere a missing
# Chromium skips those tests, naming this target; under CI=true `make test` installs it first
# and a missing one fails them.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends chromium chromium-driver || \
	  { apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver; }; }

ifeq ($(CI),true)
test test-slow: browser
endif

# Only the tests marked slow (sweeps, the loopback cluster, databases, servers, the browser);
# `make test` runs them too.
test-slow: bytecode
	$(PYTEST) -m slow

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
