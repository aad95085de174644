# Tiiny Hub. `make up` runs the hub; `make test` runs every test. Both set up what they need first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up test lint bench chaos venv clean fuzz

$(STAMP): requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; sys.exit("tiiny-hub needs Python 3.11+, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

venv: $(STAMP)

up: $(STAMP)
	@$(PY) scripts/up.py

test: $(STAMP)
	@bash scripts/test.sh

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=long $(PY) -m pytest hub/tests/test_fuzz.py -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check hub devices jobs

bench: $(STAMP)
	@$(PY) scripts/bench.py

chaos: $(STAMP)
	$(PY) scripts/chaos.py --long

clean:
	rm -rf $(VENV) staticfiles var/run var/test-logs test-artifacts
