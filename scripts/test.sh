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
# Each run has a budget in minutes, several times what it takes (3, 12 and 2 minutes on two cores): a run stuck
# past it is stopped, says which tests it had started and not finished (conftest.py notes them), and the suite
# goes on, so a hang costs minutes, not CI's whole time.
status=0
run() {
  local minutes=$1 rc=0
  shift
  timeout --foreground --kill-after=30 "${minutes}m" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "== stopped after ${minutes} minutes; started and not finished:"
    awk '$1 == "+" { s[$2] = 1 } $1 == "-" { delete s[$2] } END { for (t in s) print "   " t }' \
      var/test-logs/started.log
  fi
  [ "$rc" -eq 0 ] || [ "$status" -ne 0 ] || status=$rc
}
echo "== unit tests (2 processes)"
run 12 .venv/bin/python -m pytest -m "not integration and not browser" -n 2
echo "== integration and browser tests (2 processes)"
run 30 .venv/bin/python -m pytest -m "(integration or browser) and not rhythm" -n 2 --durations=10
echo "== rhythm tests (alone)"
run 8 .venv/bin/python -m pytest -m "rhythm"
exit "$status"
