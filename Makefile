# Every target bootstraps .venv/ on a fresh machine that has only python3 (3.11+), git and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test bench lint install lock clean-data

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $(STAMP)

# Until the nightly job lands, the demo runs the warehouse end to end on the embedded samples.
DEMO_SESSION := 7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75
demo: $(STAMP)
	$(BIN)/pipeline ingest data/samples
	$(BIN)/pipeline sessions
	$(BIN)/pipeline search $(DEMO_SESSION) "ModuleNotFoundError" --context 40
	$(BIN)/pipeline sql "SELECT source, count(*) AS calls, sum(prompt_tokens) AS prompt, round(sum(cached_tokens) / sum(prompt_tokens), 3) AS cached_share FROM usage GROUP BY source ORDER BY source"
	@echo ""
	@echo "warehouse: $(CURDIR)/data/warehouse.duckdb  (explore: .venv/bin/pipeline sql \"SELECT * FROM messages LIMIT 5\")"

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

lint: $(STAMP)
	$(BIN)/ruff check pipeline tests data/samples bench

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean-data:
	rm -rf data/warehouse.duckdb data/warehouse.duckdb.wal data/corpus data/runs

lock: $(STAMP)
	{ echo '# Exact versions for a fresh machine (pip freeze of a working .venv). Regenerate with: make lock'; \
	  $(BIN)/python -m pip freeze --all --exclude-editable | grep -v '^pip=='; } > requirements.lock
