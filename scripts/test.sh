#!/usr/bin/env bash
# Everything the test suite needs, then the whole suite (in three pytest runs, below). Exits with the first failing run's status.
# The suite starts its own private Redis (hub/pytest_env.py) and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/need-chromium.sh "make test"
scripts/need-nginx.sh "make test"

mkdir -p var test-artifacts
if [ "$#" -gt 0 ]; then  # make test ARGS=…, or by hand: one pytest run as asked
  exec .venv/bin/python -m pytest "$@"
fi
# The whole suite in three runs. The unit tests, then those that start real processes (worker, web server,
# emulator, Chromium), each on two processes (pytest-xdist): each xdist process has its own Redis and database
# (hub/pytest_env.py) and starts its own servers, so no two tests running at once share a key, a row or a queue.
# Last, alone, the rhythm tests: they time the hub's own requests to the emulated device, and a neighbour's load
# on the other core is no part of what they measure. Every run runs; the status is the first failure's.
status=0
run() { "$@" || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }; }
echo "== unit tests (2 processes)"
run .venv/bin/python -m pytest -m "not integration and not browser" -n 2
echo "== integration and browser tests (2 processes)"
run .venv/bin/python -m pytest -m "(integration or browser) and not rhythm" -n 2
echo "== rhythm tests (alone)"
run .venv/bin/python -m pytest -m "rhythm"
exit "$status"
