#!/usr/bin/env bash
# Install everything mcpfleet needs on a fresh Debian 12 machine, idempotently (`--test`: also what the
# tests need: Debian's chromium and prometheus):
#   - Node.js (for the pinned MCP servers) from Debian if missing,
#   - the MCP servers at the versions pinned in servers/package-lock.json (npm ci; never fetched at run time),
#   - PostgreSQL 15 from Debian (no default cluster: mcpfleet starts private ones per run),
#   - mcpfleet-fifo-exec and mcpfleet-sandbox-exec (servers/bridge, static: gcc from Debian if missing),
#   - postgres-mcp in its own virtualenv, servers/postgres-mcp/.venv, pinned by hash (it needs mcp<2),
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
# The pace store of a local run whose models set rateLimit or a budget (runner/launch/pacestore.py); the tests'.
command -v redis-server >/dev/null || need_apt+=(redis-server)
# The static bridge helper (servers/bridge) is compiled here: gcc and glibc's static library.
command -v gcc >/dev/null || need_apt+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || need_apt+=(libc6-dev)
PG_BIN="${MCPFLEET_PG_BIN:-/usr/lib/postgresql/15/bin}"
if [ ! -x "$PG_BIN/initdb" ] || ! command -v pg_restore >/dev/null; then
  need_apt+=(postgresql-15 postgresql-client-15)
  # Debian's package would create and start a "main" cluster on port 5432; mcpfleet needs none.
  if [ ! -f /etc/postgresql-common/createcluster.conf ]; then
    $SUDO mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
fi
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

# mcpfleet-fifo-exec: what a declared stdio server's trial-pod sidecar runs (the runner image builds the same
# source); here for the test kubelet and `mcpfleet pods`' users. Rebuilt only when its source is newer.
BRIDGE=servers/bridge/bin/mcpfleet-fifo-exec
if [ ! -x "$BRIDGE" ] || [ servers/bridge/fifo-exec.c -nt "$BRIDGE" ]; then
  echo "setup: gcc -static servers/bridge/fifo-exec.c"
  mkdir -p servers/bridge/bin
  gcc -static -O2 -s -Wall -Wextra -o "$BRIDGE.tmp" servers/bridge/fifo-exec.c && mv "$BRIDGE.tmp" "$BRIDGE"
fi

# mcpfleet-sandbox-exec: what a sandboxed trial server's `unshare` runs to make its mounts (sandbox.py's main in C,
# ~17 ms sooner than Python per server start); without it the sandbox runs sandbox.py. Rebuilt the same way.
SANDBOX_EXEC=servers/bridge/bin/mcpfleet-sandbox-exec
if [ ! -x "$SANDBOX_EXEC" ] || [ servers/bridge/sandbox-exec.c -nt "$SANDBOX_EXEC" ]; then
  echo "setup: gcc -static servers/bridge/sandbox-exec.c"
  mkdir -p servers/bridge/bin
  gcc -static -O2 -s -Wall -Wextra -o "$SANDBOX_EXEC.tmp" servers/bridge/sandbox-exec.c && mv "$SANDBOX_EXEC.tmp" "$SANDBOX_EXEC"
fi

# postgres-mcp 0.3.0 (what MCPMark runs) declares Python >= 3.12 and needs mcp<2, so it gets a virtualenv of
# its own, installed from hash-pinned wheels only. Its interpreter is python3 (3.11 on Debian 12, where
# py311_compat supplies the one 3.12-only import), or MCPFLEET_PG_MCP_PYTHON (e.g. a Python 3.12).
PG_VENV=servers/postgres-mcp/.venv
PG_PY="${MCPFLEET_PG_MCP_PYTHON:-python3}"
pg_stamp="$PG_VENV/.mcpfleet-installed"
if [ ! -f "$pg_stamp" ] || [ servers/postgres-mcp/requirements.txt -nt "$pg_stamp" ] \
  || [ servers/postgres-mcp/py311_compat.py -nt "$pg_stamp" ]; then
  echo "setup: postgres-mcp (hash-pinned, own virtualenv, $("$PG_PY" -V 2>&1))"
  rm -rf "$PG_VENV"
  (cd / && "$PG_PY" -m venv "$ROOT/$PG_VENV")
  (cd / && "$ROOT/$PG_VENV/bin/python" -m pip install -q --require-hashes --no-deps --only-binary :all: \
    --ignore-requires-python -r "$ROOT/servers/postgres-mcp/requirements.txt")
  if ! "$ROOT/$PG_VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    site=$("$ROOT/$PG_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    cp servers/postgres-mcp/py311_compat.py servers/postgres-mcp/py311_compat.pth "$site/"
  fi
  (cd / && "$ROOT/$PG_VENV/bin/postgres-mcp" --help >/dev/null)  # imports the whole server: fails loudly here
  touch "$pg_stamp"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  # From outside the repo: ensurepip starts Python without site, and the repo's operator/ folder
  # would then shadow the standard library's operator module.
  (cd / && python3 -m venv "$ROOT/.venv")
fi
stamp=.venv/.mcpfleet-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements.lock -nt "$stamp" ]; then
  echo "setup: pip install -e .[test] (first time takes a minute or two)"
  (cd / && "$ROOT/.venv/bin/python" -m pip install -q --upgrade pip)
  # The runtime dependencies at the versions the images install (requirements.lock), not whatever is newest
  # today: a new major of a transitive dependency (openai 3 under litellm) must not change a run or the checks.
  (cd / && "$ROOT/.venv/bin/python" -m pip install -q -c "$ROOT/requirements.lock" -e "$ROOT[test]")
  # pip never removes: what mcpfleet[test] no longer requires (a pin the lock dropped, left by an older
  # checkout's setup) is uninstalled, since an installed package can still change behaviour (scripts/prune_venv.py).
  (cd / && "$ROOT/.venv/bin/python" "$ROOT/scripts/prune_venv.py")
  touch "$stamp"
fi
# mcpfleet's own modules compiled once: with PYTHONDONTWRITEBYTECODE set (as on CI's machines) every process
# would otherwise compile them again from source (~0.35 s of CPU per `mcpfleet` process; the tests start
# thousands). A stale file is only ignored: Python checks each source's mtime.
(cd / && "$ROOT/.venv/bin/python" -m compileall -q "$ROOT/runner" "$ROOT/operator" "$ROOT/sites" >/dev/null)
echo "setup: done (.venv/bin/mcpfleet)"
