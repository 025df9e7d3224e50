#!/usr/bin/env bash
# Install everything mcpfleet needs on a fresh Debian 12 machine, idempotently (`--test`: also what the
# tests need: Debian's chromium and prometheus):
#   - Node.js (for the pinned MCP servers) from Debian if missing,
#   - the MCP servers at the versions pinned in servers/package-lock.json (npm ci; never fetched at run time),
#   - a project virtualenv in .venv with mcpfleet and its test dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

need_apt=()
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ "${1:-}" = "--test" ]; then
  # The tests also render reports in a real browser and scrape metrics with a real Prometheus.
  command -v chromium >/dev/null || need_apt+=(chromium)
  command -v prometheus >/dev/null || need_apt+=(prometheus)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"setup: mcpfleet needs Python >= 3.11, found {sys.version.split()[0]}")
PY

if [ ! -x servers/node_modules/.bin/mcp-server-filesystem ] || [ servers/package-lock.json -nt servers/node_modules/.package-lock.json ]; then
  echo "setup: npm ci (pinned MCP servers)"
  npm ci --prefix servers --no-audit --no-fund --loglevel=error
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  # From outside the repo: ensurepip starts Python without site, and the repo's operator/ folder
  # would then shadow the standard library's operator module.
  (cd / && python3 -m venv "$ROOT/.venv")
fi
stamp=.venv/.mcpfleet-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: pip install -e .[test] (first time takes a minute or two)"
  (cd / && "$ROOT/.venv/bin/python" -m pip install -q --upgrade pip)
  (cd / && "$ROOT/.venv/bin/python" -m pip install -q -e "$ROOT[test]")
  touch "$stamp"
fi
echo "setup: done (.venv/bin/mcpfleet)"
