"""A pack's programs besides its verifier run as its verifier does: a PostgreSQL state's generator, psql or
pg_restore reading its state, and MCPMark's prepare_environment.py get a clean environment (never the runner's
API keys or S3 credentials), their output is bounded (only its end is read, from a file), and nothing they start
outlives them, a setsid() daemon included. A review found a generator given the runner's keys and leaving a daemon
behind, and a prepare script's 1.5 GiB of output read into the worker's memory (3.3 GB peak)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from pgpack import write_task

from mcpfleet.runner.environment.verifier import run_program, verifier_env
from mcpfleet.runner.services.pgstate import run_prepare
from mcpfleet.runner.services.pgtrial import Login
from mcpfleet.runner.services.postgres import PostgresService
from mcpfleet.runner.tasks.discovery import discover

CANARY = "sk-canary-pack-programs"

# Records the secrets it sees, leaves a daemon in a session of its own (its pid in a file), prints a lot.
HOSTILE = """
import os, sys, time
out = sys.argv[1] if len(sys.argv) > 1 else None
here = os.environ["PROBE_DIR"] if "PROBE_DIR" in os.environ else {probe!r}
with open(os.path.join(here, "env.txt"), "w") as f:
    f.write("\\n".join(f"{{k}}={{v}}" for k, v in os.environ.items() if "KEY" in k or "SECRET" in k))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(os.path.join(here, "daemon.pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
while not os.path.exists(os.path.join(here, "daemon.pid")):
    time.sleep(0.01)
chunk = "y" * (1 << 20)
for _ in range({mib}):
    sys.stdout.write(chunk)
sys.stdout.write("\\nTHE END\\n")
sys.stdout.flush()
if out:
    open(out, "w").write("CREATE TABLE t (x int);\\n")
sys.exit({code})
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def daemon_gone(probe: Path) -> bool:
    pid = int((probe / "daemon.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY)


def test_run_program_keeps_the_end_of_the_output_and_leaves_nothing_running(tmp_path: Path) -> None:
    script = tmp_path / "p.py"
    script.write_text(HOSTILE.format(probe=str(tmp_path), mib=20, code=3))
    code, out = run_program([sys.executable, str(script)], verifier_env({}), tmp_path, 60)
    assert code == 3
    assert out.endswith("THE END\n") and len(out) <= 8192, len(out)  # 20 MiB written, 8 KiB read
    assert daemon_gone(tmp_path)


def test_run_program_times_out_and_kills_everything(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text(HOSTILE.format(probe=str(tmp_path), mib=0, code=0).replace("sys.exit(0)", "time.sleep(300)"))
    start = time.monotonic()
    code, _ = run_program([sys.executable, str(script)], verifier_env({}), tmp_path, 2)
    assert code is None and time.monotonic() - start < 15
    assert daemon_gone(tmp_path)


def test_a_state_generator_gets_no_secret_and_leaves_no_daemon(tmp_path: Path, secrets_in_env: None) -> None:
    root = tmp_path / "pack"
    write_task(root, "shop", "count", "Count.", "import sys\nsys.exit(0)\n", None)
    states = root / "postgres" / "states"
    states.mkdir(parents=True)
    (states / "shop.py").write_text(HOSTILE.format(probe=str(tmp_path), mib=1, code=0))
    [task] = discover(root)
    assert PostgresService().materialise(task, tmp_path / "state") == 1
    assert (tmp_path / "state" / "shop.sql").read_text() == "CREATE TABLE t (x int);\n"
    assert CANARY not in (tmp_path / "env.txt").read_text()
    assert daemon_gone(tmp_path)


def test_a_failing_state_generator_is_named_with_the_end_of_its_output(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    write_task(root, "shop", "count", "Count.", "import sys\nsys.exit(0)\n", None)
    (root / "postgres" / "states").mkdir(parents=True)
    (root / "postgres" / "states" / "shop.py").write_text(HOSTILE.format(probe=str(tmp_path), mib=8, code=1))
    [task] = discover(root)
    with pytest.raises(RuntimeError, match=r"state generator failed \(1\): y+\nTHE END$") as err:
        PostgresService().materialise(task, tmp_path / "state")
    assert len(str(err.value)) < 2100
    assert daemon_gone(tmp_path)


@pytest.mark.parametrize("code", [0, 2])
def test_prepare_environment_is_bounded_clean_and_leaves_nothing(
    tmp_path: Path, secrets_in_env: None, code: int
) -> None:
    """MCPMark's prepare_environment.py runs in its task folder with POSTGRES_* set (no server needed here: this
    one does not connect); its 16 MiB of output is not read into memory, its daemon dies with it."""
    root = tmp_path / "pack"
    folder = write_task(root, "security", "audit", "Audit.", "import sys\nsys.exit(0)\n", None)
    (folder / "prepare_environment.py").write_text(
        HOSTILE.format(probe=str(tmp_path), mib=16, code=code).replace(
            "sys.exit(", "open('cwd.txt', 'w').write(os.getcwd() + ' ' + os.environ['POSTGRES_DATABASE'])\nsys.exit("
        )
    )
    [task] = discover(root)
    login = Login("127.0.0.1", 5432, "audit_db", "someone", "pw")
    if code:
        with pytest.raises(RuntimeError, match=r"prepare_environment.py failed \(2\): y+") as err:
            asyncio.run(run_prepare(task, login))
        assert len(str(err.value)) < 2200
    else:
        asyncio.run(run_prepare(task, login))
    assert (folder / "cwd.txt").read_text() == f"{folder} audit_db"
    assert CANARY not in (tmp_path / "env.txt").read_text()
    assert daemon_gone(tmp_path)
