#!/usr/bin/env bash
# Debian's Chromium, which the browser tests and bench_progress.py drive (Playwright, /usr/bin/chromium): installed
# once when missing and we are root with apt-get, else a clear message. $1 names who needs it ("make test").
set -euo pipefail
who="${1:-this}"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "$who: installing Debian's chromium for the browser (once)…"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "$who: needs Chromium: run 'sudo apt-get install -y chromium' and try again." >&2
    exit 1
  fi
fi
