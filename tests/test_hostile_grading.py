"""Grading the agent cannot change (issue 48, section 1), for the parts that are no service's: a verifier runs in
Python's isolated mode with a HOME and TMPDIR of its own, fresh for each run, so nothing planted where an
agent-driven process could write (the runner's HOME, a PYTHONPATH entry, the temp folder) is imported into it;
and an MCP server's processes, even those that left its process group, are gone once the server is stopped, so
none outlives the agent into its verifier. (PostgreSQL's grading: the attack kit, tests/attacks/.)"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.environment.server import ServerCommand, servers_bin
from mcpfleet.runner.environment.verifier import run_verifier

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def plant(root: Path, marker: Path) -> dict[str, Path]:
    """What an agent-driven process could leave where a verifier looked for code before: a HOME whose user
    site-packages hold a usercustomize module and a .pth file, a PYTHONPATH folder with a sitecustomize and a
    module named like one of the standard library's, all of them writing ``marker`` when imported."""
    home, path = root / "home", root / "pythonpath"
    site = home / ".local" / "lib" / PY / "site-packages"
    site.mkdir(parents=True)
    path.mkdir()
    touch = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (site / "usercustomize.py").write_text(touch)
    (site / "planted.pth").write_text(f"import os; open({str(marker)!r}, 'a').write('pth\\n')\n")
    (path / "sitecustomize.py").write_text(touch)
    (path / "json.py").write_text(touch + "PLANTED = True\n")
    return {"HOME": home, "PYTHONPATH": path}


CHECKS = """\
import json, os, stat, sys
from pathlib import Path
import helper  # a module beside verify.py, as MCPMark's verifiers import theirs
assert helper.ANSWER == 42
assert not hasattr(json, "PLANTED"), json.__file__
home, tmp = Path(os.environ["HOME"]), Path(os.environ["TMPDIR"])
print(json.dumps({
    "isolated": sys.flags.isolated, "no_bytecode": sys.dont_write_bytecode, "path0": sys.path[0],
    "home": str(home), "tmp": str(tmp), "home_mode": stat.S_IMODE(home.stat().st_mode),
    "tmp_mode": stat.S_IMODE(tmp.stat().st_mode), "home_empty": not any(home.iterdir()),
    "tempdir": __import__("tempfile").gettempdir(), "cwd": os.getcwd(), "argv": sys.argv,
    "pythonpath": os.environ.get("PYTHONPATH"), "user_site": __import__("site").ENABLE_USER_SITE,
}))
"""


def write_task(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "helper.py").write_text("ANSWER = 42\n")
    (folder / "verify.py").write_text(CHECKS)
    return folder / "verify.py"


@pytest.mark.parametrize("in_task_folder", [False, True], ids=["verify.py", "prepare_environment.py"])
def test_nothing_planted_in_home_pythonpath_or_the_temp_folder_reaches_a_verifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_task_folder: bool
) -> None:
    """Before: the verifier ran as ``python verify.py`` with the runner's HOME (in a pod, /tmp: the volume the
    sidecars share) and PYTHONPATH, so a usercustomize, a .pth or a sitecustomize planted there ran inside it,
    and a planted json.py shadowed the standard library's. (MCPMark's prepare_environment.py runs the same way,
    in its task folder.)"""
    marker = tmp_path / "imported"
    planted = plant(tmp_path / "planted", marker)
    for name, value in planted.items():
        monkeypatch.setenv(name, str(value))
    shared_tmp = tmp_path / "shared-tmp"
    shared_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared_tmp))
    verify = write_task(tmp_path / "pack" / "task")
    cwd = verify.parent if in_task_folder else None
    result = asyncio.run(run_verifier(verify, {"EXTRA": "1"}, ["trial_db"], 60, cwd=cwd))
    assert result.exit_code == 0, result.stderr
    assert not marker.exists(), f"planted code ran in the verifier: {marker.read_text()}"
    seen = json.loads(result.stdout)
    assert seen["isolated"] == 1 and seen["no_bytecode"] and seen["user_site"] is False
    assert Path(seen["path0"]) == verify.parent  # MCPMark's `python verify.py`: its own folder first, nothing else
    assert seen["argv"] == [str(verify), "trial_db"]
    assert seen["pythonpath"] is None
    home, tmp = Path(seen["home"]), Path(seen["tmp"])
    assert home != planted["HOME"] and seen["home_empty"] and seen["home_mode"] == seen["tmp_mode"] == 0o700
    assert Path(seen["tempdir"]) == tmp and tmp != shared_tmp
    assert not home.exists() and not tmp.exists(), "the verifier's private folders outlived it"
    assert not list(verify.parent.glob("__pycache__")), "bytecode was written into the pack"


def test_each_verification_gets_fresh_private_folders(tmp_path: Path) -> None:
    """What one verifier (or prepare_environment.py) leaves in its HOME is not there for the next one."""
    verify = tmp_path / "task" / "verify.py"
    verify.parent.mkdir(parents=True)
    verify.write_text(
        "import os, sys\nfrom pathlib import Path\n"
        "home = Path(os.environ['HOME'])\n"
        "print(home, sorted(p.name for p in home.iterdir()))\n"
        "(home / 'left-by-the-last-one').write_text('x')\n"
    )
    first = asyncio.run(run_verifier(verify, {}, [], 30))
    second = asyncio.run(run_verifier(verify, {}, [], 30))
    assert first.passed and second.passed, (first.stderr, second.stderr)
    assert first.stdout.split()[0] != second.stdout.split()[0]
    assert second.stdout.strip().endswith("[]"), second.stdout


# --- whatever an MCP server started is gone once it is stopped ------------------------------------------------

# A stand-in for a server that starts a helper which leaves its process group (a daemon: setsid, double fork),
# then becomes the real filesystem server. The SDK's stop (EOF, then SIGTERM and SIGKILL to the server's group)
# never reached such a helper.
SPAWNING_SERVER = """\
import os, sys, time
pidfile = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(pidfile + ".tmp", "w").write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        os.closerange(0, 1024)
        time.sleep(600)
        os._exit(0)
    os._exit(0)
os.wait()
deadline = time.monotonic() + 10
while not os.path.exists(pidfile) and time.monotonic() < deadline:
    time.sleep(0.01)
os.execv(sys.argv[2], sys.argv[2:])
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_what_an_mcp_server_started_is_gone_when_it_is_stopped(tmp_path: Path) -> None:
    exe = servers_bin() / "mcp-server-filesystem"
    if not exe.exists():
        pytest.skip("the pinned filesystem server is not installed (scripts/setup.sh)")
    script = tmp_path / "server.py"
    script.write_text(SPAWNING_SERVER)
    pidfile = tmp_path / "helper.pid"
    root = tmp_path / "root"
    root.mkdir()
    cmd = ServerCommand(sys.executable, ["-I", str(script), str(pidfile), str(exe), str(root)])

    async def session() -> None:
        with open(tmp_path / "server.log", "w+b") as log:
            async with connect_stdio(cmd, log, cwd=root) as s:
                assert (await s.list_tools()).tools

    pid = 0
    try:
        asyncio.run(session())
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 3
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(pid), f"the server's daemon {pid} outlived the server"
    finally:
        if pid and alive(pid):
            os.kill(pid, 9)


def test_the_verifiers_private_folders_are_not_others_to_enter(tmp_path: Path) -> None:
    """0700 and the runner's own: a trial cluster's throwaway uid (or any other user) cannot plant in them."""
    verify = tmp_path / "task" / "verify.py"
    verify.parent.mkdir(parents=True)
    verify.write_text(
        "import os, stat\nfor k in ('HOME', 'TMPDIR'):\n"
        "    st = os.stat(os.environ[k])\n"
        "    print(k, st.st_uid, oct(stat.S_IMODE(st.st_mode)))\n"
        "    st = os.stat(os.path.dirname(os.environ[k]))\n"
        "    print(k + '_parent', st.st_uid, oct(stat.S_IMODE(st.st_mode)))\n"
    )
    result = asyncio.run(run_verifier(verify, {}, [], 30))
    assert result.passed, result.stderr
    for line in result.stdout.splitlines():
        _, uid, mode = line.split()
        assert int(uid) == os.geteuid() and int(mode, 8) & 0o077 == 0, line
