"""The images cannot be built here (no Docker engine); these checks keep their recipes pinned and
consistent with the project: pinned bases, the lock file installed as is, and every runtime dependency locked."""

from __future__ import annotations

import importlib.util
import os
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = [
    REPO / "runner" / "Dockerfile",
    REPO / "operator" / "Dockerfile",
    REPO / "servers" / "Dockerfile.filesystem",
    REPO / "servers" / "Dockerfile.playwright",
    REPO / "servers" / "Dockerfile.postgres",
    REPO / "servers" / "Dockerfile.postgres-db",
]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_base_images_are_pinned(path: Path) -> None:
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", path.read_text(), re.M)
    assert stages
    for i, (base, _) in enumerate(stages):
        if base in {name for _, name in stages[:i]}:
            continue  # an earlier stage of the same file
        point_release = re.fullmatch(r"debian:\d+\.\d+-slim", base)  # Debian's images are tagged by point release
        pinned = re.search(r":\d+\.\d+\.\d+", base) or "@sha256:" in base or point_release
        assert pinned, f"{path.name}: {base} is not pinned"


def test_python_images_install_the_lock_without_resolving() -> None:
    for path in DOCKERFILES[:2]:
        text = path.read_text()
        assert "pip install --no-deps -r requirements.lock" in text
        assert "pip install --no-deps ." in text
        assert "COPY tasks ./tasks" in text and "MCPFLEET_APP_DIR=/opt/mcpfleet" in text
        assert "USER 10001" in text


def test_every_runtime_dependency_is_locked_to_one_version() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    locked = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: '{line}' is not pinned with =="
            locked[_norm(name)] = version
    for dep in deps:
        name = _norm(re.split(r"[<>=!~\[ ;]", dep, maxsplit=1)[0])
        assert name in locked, f"{name} is a runtime dependency missing from requirements.lock"


@pytest.mark.parametrize("name", ["Dockerfile.filesystem", "Dockerfile.playwright", "Dockerfile.postgres"])
def test_sidecar_uses_the_npm_lock(name: str) -> None:
    text = (REPO / "servers" / name).read_text()
    assert "npm ci" in text and "package-lock.json" in text and "USER 10001" in text
    assert (REPO / "servers" / "package-lock.json").is_file()


@pytest.mark.parametrize("name", ["Dockerfile.filesystem", "Dockerfile.playwright", "Dockerfile.postgres"])
def test_sidecar_images_have_the_commands_their_pod_containers_run(name: str) -> None:
    """Each server image has, on its PATH, every command its trial-pod containers and their startup probes name
    (mcpfleet-gateway: supergateway on 127.0.0.1 only; mcpfleet-probe: the exec probes), from servers/gateway."""
    from mcpfleet.runner.services.base import GATEWAY, PROBE

    text = (REPO / "servers" / name).read_text()
    assert "COPY gateway/ ./gateway/" in text and "WORKDIR /opt/servers" in text
    assert re.search(r"PATH=/opt/servers/gateway:", text), "servers/gateway is not on the image's PATH"
    for command in (GATEWAY, PROBE):
        assert os.access(REPO / "servers" / "gateway" / command, os.X_OK), command
    assert (REPO / "servers" / "gateway" / "listen-host.cjs").is_file()


def test_playwright_sidecar_pins_chromium_and_never_downloads_a_browser() -> None:
    text = (REPO / "servers" / "Dockerfile.playwright").read_text()
    assert re.search(r"chromium=\d+\.\d+\.\d+\.\d+-\S+", text), "Debian's chromium is not pinned"
    assert "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1" in text and "PLAYWRIGHT_MCP_EXECUTABLE_PATH=/usr/bin/chromium" in text


def test_postgres_images_install_what_the_tests_ran() -> None:
    """The MCP image installs postgres-mcp from the same hash-pinned list as setup.sh; the database image carries
    the scripts the test kubelet runs from servers/postgres/bin, and no default cluster."""
    mcp = (REPO / "servers" / "Dockerfile.postgres").read_text()
    assert "--require-hashes" in mcp and "postgres-mcp/requirements.txt" in mcp and "py311_compat" in mcp
    db = (REPO / "servers" / "Dockerfile.postgres-db").read_text()
    scripts = sorted(p.name for p in (REPO / "servers" / "postgres" / "bin").iterdir())
    assert scripts == ["mcpfleet-pg-init", "mcpfleet-pg-serve"]
    assert f"COPY servers/postgres/bin/{scripts[0]} servers/postgres/bin/{scripts[1]} /usr/local/bin/" in db
    assert "create_main_cluster = false" in db and "USER 10001" in db and "--uid 10001" in db
    assert re.search(r"postgresql-15=15\.\d+", db)


def test_the_database_image_prebuilds_the_bundled_states_as_pods_use_them() -> None:
    """Its first stage makes the dumps with the runner image's Python (a pod's dump comes from there), its plan
    names the database and login each bundled task's pod gets, and the prebuilt root is where pg-init looks."""
    from mcpfleet.runner.services.base import PodContext
    from mcpfleet.runner.services.pgpod import pod_containers
    from mcpfleet.runner.services.postgres import PostgresService
    from mcpfleet.runner.tasks.discovery import discover

    db = (REPO / "servers" / "Dockerfile.postgres-db").read_text()
    # The runner image's final stage (an earlier one builds the bridge helper).
    runner_base = re.findall(r"^FROM\s+(\S+)", (REPO / "runner" / "Dockerfile").read_text(), re.M)[-1:]
    assert runner_base and re.search(rf"^FROM {re.escape(runner_base[0])} AS dumps$", db, re.M)
    assert "docker build -f servers/Dockerfile.postgres-db -t ghcr.io/mcpfleet/postgres-db:0.1.0 .\n" in db
    assert "RUN python /build/state_dumps.py /build/tasks /dumps" in db
    assert 'mcpfleet-pg-init --prebuild "/dumps/$dump" /opt/mcpfleet/pg-prebuilt' in db
    assert "ENV MCPFLEET_PG_PREBUILT=/opt/mcpfleet/pg-prebuilt" in db
    init = (REPO / "servers" / "postgres" / "bin" / "mcpfleet-pg-init").read_text()
    assert "${MCPFLEET_PG_PREBUILT:-/opt/mcpfleet/pg-prebuilt}" in init
    spec = importlib.util.spec_from_file_location("state_dumps", REPO / "servers" / "postgres" / "state_dumps.py")
    assert spec and spec.loader
    state_dumps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(state_dumps)
    planned = set(state_dumps.plan(REPO / "tasks"))
    pod = PodContext("runner", "mcp", 8000, "/state", images={"postgres-db": "db", "postgres": "mcp"})
    used = set()
    for task in discover(REPO / "tasks"):
        if task.service == "postgres":
            [init_container, *_] = pod_containers(PostgresService().trial_params(task), pod)
            env = {e["name"]: e["value"] for e in init_container["env"]}
            used.add((Path(env["STATE_DUMP"]).name, env["DB_NAME"], env["DB_USER"]))
    # Every bundled task's pod finds its prebuilt directory, and nothing is prebuilt that no pod uses.
    assert planned == used and len({dump for dump, _, _ in used}) == 4, (planned, used)


@pytest.mark.parametrize("source", ["fifo-exec", "sandbox-exec"])
def test_the_runner_image_builds_the_static_bridge_helper_onto_its_path(source: str) -> None:
    """The FIFO bridge's init container runs mcpfleet-fifo-exec from the runner image (services/bridge.py), and a
    sandboxed server's ``unshare`` runs mcpfleet-sandbox-exec (environment/sandbox.py finds it on PATH): each built
    static from servers/bridge in a stage of its own, copied onto the final stage's PATH."""
    from mcpfleet.runner.environment import sandbox
    from mcpfleet.runner.services import bridge

    helper = {"fifo-exec": bridge.HELPER, "sandbox-exec": sandbox.HELPER}[source]
    assert helper == f"mcpfleet-{source}"
    text = (REPO / "runner" / "Dockerfile").read_text()
    assert f"COPY servers/bridge/{source}.c /src/" in text
    assert re.search(rf"^RUN gcc-12 -static .* -o /{helper} /src/{source}.c$", text, re.M)
    assert f"COPY --from=bridge /{helper} /usr/local/bin/{helper}" in text
    assert text.index("AS bridge") < text.rindex("FROM ") < text.index("COPY --from=bridge")
