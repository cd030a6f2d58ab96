# Every target installs what it needs first, so a fresh machine needs nothing but Python 3.11.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export MLFLOW_DISABLE_TELEMETRY := true
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-heavy test-all eval ledger check-ledger bench bench-retrievers reliability serve lint notebooks reader clean

# pip -qq: its errors only (its warnings here were about the machine's pip configuration,
# an index folder that does not exist: "Location ... is ignored"); and setuptools warns on
# every editable install of a flat layout (memkit/, server/) that a folder named like a
# package in the working directory could shadow it: expected, so not shown.
$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null || { echo "need $(PY) on PATH (or make PY=/path/to/python3.11)"; exit 1; }
	test -d $(VENV) || $(PY) -m venv $(VENV)
	@echo "installing memkit and its dependencies into $(VENV) (a few minutes the first time)"
	$(BIN)/pip install -qq --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install -qq -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# pytest exits 5 when it collected no tests: that is a broken suite, not a pass.
# `make test`: every test but the heavy ones (a few minutes); `make test-heavy`: the tests
# marked heavy (training, whole data sets, several processes, fuzzing, a wheel) and the
# notebooks; CI runs both (`make test-all`).
test: $(STAMP)
	@$(BIN)/python -m pytest tests -m "not heavy"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: failing"; exit 1; fi; exit $$rc

test-heavy: $(STAMP)
	@for args in "tests -m heavy" "notebooks"; do \
	  $(BIN)/python -m pytest $$args; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest ran no tests in $$args: failing"; exit 1; fi; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	done

test-all: test test-heavy

eval: $(STAMP)
	$(BIN)/memkit eval --all

# The ledger as data (docs/EVAL.md): `make ledger` scores everything and writes
# eval/ledger.toml, then its table into eval/RESULTS.md; `make check-ledger` scores everything and fails on any cell that moved
# (float rows exactly, int8 rows within the file's tolerance).
ledger: $(STAMP)
	$(BIN)/memkit eval --all --no-mlflow --write-ledger eval/ledger.toml
	$(BIN)/python -m memkit.evaluation.ledger --ledger eval/ledger.toml --results eval/RESULTS.md

check-ledger: $(STAMP)
	$(BIN)/memkit eval --all --no-mlflow --check eval/ledger.toml

serve: $(STAMP)
	$(BIN)/memkit serve

# The speed guard: a short service benchmark printed against the recorded figures
# (eval/bench/guard.py); the 100,000-post retriever benchmark is `make bench-retrievers`.
bench: $(STAMP)
	$(BIN)/python eval/bench/guard.py

bench-retrievers: $(STAMP)
	$(BIN)/python eval/bench/retrievers.py

# The service's correctness under load, the short form (a few minutes, SQLite, each in a
# temporary folder; exit status 1 on any failure): writers and readers at once against 3
# gunicorn workers, every acknowledged write then stored exactly once and found by a query;
# then gunicorn SIGKILLed during 300 writes and restarted, no acknowledged write lost or
# half-written; both run, and the exit status is 1 if either failed. The longer runs,
# PostgreSQL and the floods and stalls: eval/reliability/*.py and SECURITY.md.
reliability: $(STAMP)
	@rc=0; \
	$(BIN)/python eval/reliability/concurrency.py --seconds 20 --writers 4 --readers 4 || rc=1; \
	$(BIN)/python eval/reliability/durability.py --writes 300 --clients 8 || rc=1; \
	exit $$rc

# Train the reader again from ../shared/training and the conversation suites (models cached
# in ~/.cache/memkit/models/reader-*), report it held out, ship it into memkit/models/reader/
# with the fusion its config reads (memkit/models/reader/fusion.json).
reader: $(STAMP)
	$(BIN)/memkit train reader --write

# Lint and formatting: both must be clean (ruff's rules and line length are in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check memkit server tests eval notebooks/run.py
	$(BIN)/ruff format --check memkit server tests eval notebooks/run.py

# Run the tutorials in place, so their committed outputs are those of this code.
notebooks: $(STAMP)
	$(BIN)/python notebooks/run.py notebooks/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
