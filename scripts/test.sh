#!/usr/bin/env bash
# Everything the test suite needs, then the whole suite. Exits with pytest's status.
# The suite starts its own private Redis (hub/pytest_env.py) and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "make test: installing Debian's chromium for the browser tests (once)…"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "make test: the browser tests need Chromium: run 'sudo apt-get install -y chromium' and try again." >&2
    exit 1
  fi
fi

mkdir -p var test-artifacts
exec .venv/bin/python -m pytest "$@"
