# Tiiny Hub. `make up` runs the hub; `make test` runs every test. Both set up what they need first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up logs test lint bench chaos venv clean fuzz install-service uninstall-service worker

$(STAMP): requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; sys.exit("tiiny-hub needs Python 3.11+, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

venv: $(STAMP)

up: $(STAMP)
	@$(PY) scripts/up.py

# Follow the logs `make up` writes (one file per process under the data dir: HUB_DATA_DIR, else var/).
# tail -F follows each file by its name, so it carries on across make up's rotations (web.log -> web.log.1).
logs:
	@d="$${HUB_DATA_DIR:-$$(sed -n 's/^HUB_DATA_DIR=//p' .env 2>/dev/null | tail -n 1)}"; d="$${d:-var}/logs"; \
	mkdir -p "$$d"; echo "following $$d/*.log (Ctrl-C to stop)"; trap 'exit 0' INT; \
	tail -n 20 -F "$$d/web.log" "$$d/worker.log" "$$d/beat.log" "$$d/emulator.log" $$(ls "$$d"/emulator-*.log 2>/dev/null) \
		"$$d/redis.log" "$$d/up.log" 2>/dev/null

test: $(STAMP)
	@bash scripts/test.sh

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=long $(PY) -m pytest hub/tests/test_fuzz.py -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check hub devices jobs notify backups
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/check_structure.py

bench: $(STAMP)
	@scripts/need-chromium.sh "make bench"
	@$(PY) scripts/bench.py

chaos: $(STAMP)
	$(PY) scripts/chaos.py --long

clean:
	rm -rf $(VENV) staticfiles var/run var/test-logs var/xdist test-artifacts

# Run the hub as a systemd service (scripts/service.py): a user unit (~/.config/systemd/user/tiiny-hub.service),
# or a system unit with SYSTEM=1 (or ARGS=--system; then as root: sudo make install-service SYSTEM=1).
install-service: $(STAMP)
	@$(PY) scripts/service.py install $(if $(SYSTEM),--system) $(ARGS)

uninstall-service:
	@$(PYTHON) scripts/service.py uninstall $(if $(SYSTEM),--system) $(ARGS)

# A Celery worker alone, for a machine beside a device (scripts/worker.py): the hub's DATABASE_URL, REDIS_URL,
# HUB_MEDIA_STORAGE and HUB_SECRET_KEY from the environment or .env; HUB_WORKER_DEVICES=name,… limits it to those
# devices. Logs in <data dir>/logs/worker.log (make logs).
worker: $(STAMP)
	@$(PY) scripts/worker.py
