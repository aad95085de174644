#!/usr/bin/env bash
# Debian's nginx and Caddy, which the reverse-proxy tests serve the hub through (hub/tests/test_proxy_deploy.py,
# with docs/deploy/nginx.conf and docs/deploy/Caddyfile): installed once when missing and we are root with apt-get,
# else a clear message. $1 names who needs them ("make test").
# Installed for the tests only: the tests run their own nginx and Caddy on loopback ports, so the packages' system
# services are neither started by the install nor enabled at boot (a machine that had no web server on port 80
# still has none).
set -euo pipefail
who="${1:-this}"
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "$who: needs ${missing[*]} for the reverse-proxy tests: run 'sudo apt-get install -y ${missing[*]}' and try again." >&2
  exit 1
fi
echo "$who: installing Debian's ${missing[*]} for the reverse-proxy tests (once)…"
# policy-rc.d answering 101 tells the packages' scripts not to start their services (only when none is there).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
for package in "${missing[@]}"; do
  systemctl disable --quiet "$package.service" >/dev/null 2>&1 || true
done
