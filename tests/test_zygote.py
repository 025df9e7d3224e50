"""The server zygote (runner/services/prefork.py, zygote.py, zygote_stub.py): a Python stdio MCP server forked
from an image that imported it once answers as a directly started one, with each trial's own environment, and
no forked server outlives its stub or its zygote; without a zygote servers start directly."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import TextContent
from pgpack import make_pg_pack, run_cluster_in, scratch_runs_root
from proctree import children, processes_naming

from mcpfleet.runner.environment import mcp_client
from mcpfleet.runner.environment.mcp_client import connect_stdio, server_env
from mcpfleet.runner.environment.server import Prefork, ServerCommand
from mcpfleet.runner.services import pgcluster
from mcpfleet.runner.services.pgtrial import Login
from mcpfleet.runner.services.postgres import PostgresService, server_executable
from mcpfleet.runner.services.prefork import Zygote, console_script, route, run_zygote
from mcpfleet.runner.tasks.discovery import find_task

PG = PostgresService()
PYTHON = server_executable().with_name("python")  # the server's own interpreter (its venv, mcp 1.x)

ENV_SERVER = """
import json, os, sys
from mcp.server.fastmcp import FastMCP

app = FastMCP("env")
BUMPS = 0  # module state: a forked server must start from the image, never from an earlier server's


@app.tool()
def whoami() -> str:
    mask = os.umask(0)
    os.umask(mask)
    return json.dumps({"env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(),
                       "ppid": os.getppid(), "bumps": BUMPS, "umask": mask})


@app.tool()
def bump() -> str:
    global BUMPS
    BUMPS += 1
    return str(BUMPS)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--exit-now":
        sys.exit(int(sys.argv[2]))
    app.run()


if __name__ == "__main__":
    main()
"""


def wait_for(cond: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := cond():
            return value
        time.sleep(0.02)
    return cond()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def env_server(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Prefork]:
    """A generic Python stdio server (not postgres-mcp): an executable script, and how to pre-fork it."""
    folder = tmp_path_factory.mktemp("envserver")
    script = folder / "envserver.py"
    script.write_text(f"#!{PYTHON}\n{ENV_SERVER}")
    script.chmod(0o755)
    return script, Prefork(python=str(PYTHON), entry="envserver:main", path=(str(folder),))


@pytest.fixture(scope="module")
def zygote(env_server: tuple[Path, Prefork]) -> Iterator[Zygote]:
    folder = Path(tempfile.mkdtemp(prefix="zyg-", dir="/tmp"))
    with run_zygote(env_server[1], folder, "envserver") as z:
        assert z is not None and z.wait_ready(60), z and z.failure
        yield z
    assert not folder.joinpath("zygote.sock").exists()  # removed by the zygote as it stops
    shutil.rmtree(folder)


def command(env_server: tuple[Path, Prefork], **env: str) -> ServerCommand:
    script, prefork = env_server
    return ServerCommand(str(script), ["--name", env.get("NAME", "x")], env, prefork=prefork)


async def whoami(session: Any) -> dict[str, Any]:
    block = (await session.call_tool("whoami", {})).content[0]
    assert isinstance(block, TextContent)
    return dict(json.loads(block.text))


async def test_servers_forked_at_once_see_only_their_own_environment(
    env_server: tuple[Path, Prefork], zygote: Zygote, tmp_path: Path
) -> None:
    cmds = [command(env_server, NAME=n, SECRET_DSN=f"postgresql://u:{n}-pw@h/db", TZ="UTC") for n in ("a", "b")]
    routed = [route(c, zygote.socket) for c in cmds]
    assert all("-pw" not in " ".join(r.argv()) for r in routed)  # secrets travel in the environment only
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()

    async def serve(cmd: ServerCommand, cwd: Path) -> dict[str, Any]:
        with open(tmp_path / f"{cwd.name}.log", "wb") as log:
            async with connect_stdio(cmd, log, cwd=cwd) as session:
                seen = await whoami(session)
                await session.call_tool("bump", {})
                await session.call_tool("bump", {})
                return seen

    a, b = await asyncio.gather(serve(routed[0], tmp_path / "a"), serve(routed[1], tmp_path / "b"))
    direct = await asyncio.gather(serve(cmds[0], tmp_path / "a"), serve(cmds[1], tmp_path / "b"))
    for seen, started, name in ((a, direct[0], "a"), (b, direct[1], "b")):
        # Exactly what the same server started directly sees (the SDK's defaults and the trial's variables),
        # nothing of the zygote's or the other server's.
        assert seen["env"] == started["env"] and seen["env"]["NAME"] == name
        assert seen["env"]["SECRET_DSN"] == f"postgresql://u:{name}-pw@h/db"
        assert seen["argv"] == started["argv"] == [str(env_server[0]), "--name", name]
        assert seen["cwd"] == started["cwd"] == str(tmp_path / name) and seen["umask"] == started["umask"]
        assert seen["ppid"] == zygote.proc.pid and seen["bumps"] == 0
    # A third server starts from the image too: the two before bumped their own copies of the module.
    with open(tmp_path / "c.log", "wb") as log:
        async with connect_stdio(routed[0], log, cwd=tmp_path) as session:
            assert (await whoami(session))["bumps"] == 0
    assert "-pw" not in zygote.log.read_text()
    assert not children(zygote.proc.pid)  # every forked server is gone with its session


def stub(cmd: ServerCommand, **kw: Any) -> subprocess.Popen[bytes]:
    """A routed command started as the SDK starts it (pipes, a session of its own), without the SDK."""
    return subprocess.Popen(
        cmd.argv(),
        env=server_env(cmd.env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **kw,
    )


def test_the_stub_exits_with_its_servers_status_and_forwards_sigterm(
    env_server: tuple[Path, Prefork], zygote: Zygote
) -> None:
    script, prefork = env_server
    quits = stub(route(ServerCommand(str(script), ["--exit-now", "7"], {}, prefork=prefork), zygote.socket))
    assert quits.wait(30) == 7
    serving = stub(route(command(env_server), zygote.socket))
    server = wait_for(lambda: children(zygote.proc.pid), 30)
    assert len(server) == 1
    serving.send_signal(signal.SIGTERM)  # what the SDK sends its server's group after the stop grace
    assert serving.wait(10) == -signal.SIGTERM  # the server died of it, and so did the stub
    assert not alive(server[0])


def test_sigkill_of_the_stub_kills_its_server(env_server: tuple[Path, Prefork], zygote: Zygote) -> None:
    proc = stub(route(command(env_server), zygote.socket))
    server = wait_for(lambda: children(zygote.proc.pid), 30)
    assert len(server) == 1 and alive(server[0])
    proc.kill()
    proc.wait()
    assert wait_for(lambda: not alive(server[0]), 5), "the server outlived its stub"
    assert zygote.proc.poll() is None  # the zygote goes on serving


def test_the_zygote_gone_its_servers_are_gone(
    env_server: tuple[Path, Prefork], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with run_zygote(env_server[1], tmp_path, "envserver") as z:
        assert z is not None and z.wait_ready(60)
        proc = stub(route(command(env_server), z.socket))
        server = wait_for(lambda: children(z.proc.pid), 30)
        assert len(server) == 1
        z.proc.kill()
        assert wait_for(lambda: not alive(server[0]), 5), "a forked server outlived its zygote"
        assert proc.wait(30) == 1  # (10 s timed out once in CI, at load ~10)
        assert proc.stderr is not None and b"the server zygote is gone" in proc.stderr.read()
        wait_for(lambda: z.failure is not None, 5)
    err = capfd.readouterr().err
    assert err.count("the envserver server zygote exited") == 1, err  # said once, by the run


async def test_without_a_zygote_the_stub_starts_the_server_directly(
    env_server: tuple[Path, Prefork], tmp_path: Path
) -> None:
    cmd = command(env_server, MARK="direct")
    missing = route(cmd, str(tmp_path / "gone.sock"))
    assert missing.command == str(PYTHON)  # a stub, which finds no zygote
    with open(tmp_path / "server.log", "w+b") as log:
        async with connect_stdio(missing, log, cwd=tmp_path) as session:
            seen = await whoami(session)
            # The stub became the server: our child's (the reaper every stdio server runs under), as a server
            # started directly.
            stat = Path(f"/proc/{seen['ppid']}/stat").read_text()
            assert int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()
        log.seek(0)
        assert b"server zygote unavailable (No such file or directory); starting envserver.py directly" in log.read()
    assert seen["env"]["MARK"] == "direct" and seen["argv"] == [str(env_server[0]), "--name", "x"]
    assert route(ServerCommand("node", ["server.js"], {}), str(tmp_path / "gone.sock")).argv() == ["node", "server.js"]


@pytest.mark.parametrize(
    ("module", "why"),
    [
        ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n", "thread"),
        ("raise ImportError('no such dependency')\n", "importing the server failed: ImportError"),
    ],
)
async def test_a_zygote_that_cannot_serve_says_so_once_and_servers_start_directly(
    tmp_path: Path, module: str, why: str, capfd: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "broken.py"
    script.write_text(f"#!{PYTHON}\n{module}\n{ENV_SERVER}")
    script.chmod(0o755)
    prefork = Prefork(python=str(PYTHON), entry="broken:main", path=(str(tmp_path),))
    cmd = ServerCommand(str(script), [], {}, prefork=prefork)
    with run_zygote(prefork, tmp_path, "broken") as z:
        assert z is not None and not z.wait_ready(60)
        with open(tmp_path / "server.log", "w+b") as log:
            if why == "thread":  # the module itself is fine, only not forkable: the stub starts it
                async with connect_stdio(route(cmd, z.socket), log, cwd=tmp_path) as session:
                    assert (await whoami(session))["bumps"] == 0
                log.seek(0)
                assert b"starting broken.py directly" in log.read()
        assert wait_for(lambda: z.failure, 5) and why in str(z.failure)
    err = capfd.readouterr().err
    assert err.count("the broken server zygote exited") == 1 and why in err, err


def test_console_scripts_are_found_by_their_shebang(tmp_path: Path) -> None:
    exe = server_executable()
    assert console_script(exe, {"TZ": "UTC"}) == Prefork(python=str(PYTHON), script=exe.name, env={"TZ": "UTC"})
    shell = tmp_path / "bin" / "server"
    shell.parent.mkdir()
    shell.write_text("#!/bin/sh\nexec node server.js\n")
    assert console_script(shell) is None  # not Python: started directly
    assert console_script(tmp_path / "missing") is None


# --- postgres-mcp -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[pgcluster.ClusterHandle]:
    """The run's cluster as `mcpfleet run` starts it: with the postgres-mcp zygote."""
    with scratch_runs_root("mcpfleet-pg-zyg-") as d, run_cluster_in(d, ["postgres"], prefork=True) as handle:
        yield handle
    assert not processes_naming(str(d))  # the zygote went with the run's resources


async def test_a_forked_postgres_mcp_answers_as_a_started_one(cluster: pgcluster.ClusterHandle, tmp_path: Path) -> None:
    assert cluster.zygote is not None and Path(cluster.zygote).parent == Path(cluster.base)
    zygote = next(pid for pid in children(os.getpid()) if cluster.zygote in _cmdline(pid))
    pack = make_pg_pack(tmp_path / "pack")
    task = find_task(pack, "postgres/standard/shop/add_total")
    async with PG.environment(task, tmp_path / "state", cluster) as env:
        forked, v = env.server, env.verifier_env
        login = Login(
            v["POSTGRES_HOST"],
            int(v["POSTGRES_PORT"]),
            v["POSTGRES_DATABASE"],
            v["POSTGRES_USERNAME"],
            v["POSTGRES_PASSWORD"],
        )
        direct = PG.server_command(login)  # as `mcpfleet trial` and `tasks validate` start it
        assert forked.command == str(PYTHON) and forked.args[2].endswith("zygote_stub.py")
        assert direct.argv() == [str(server_executable()), "--access-mode=unrestricted"] and direct.prefork is None
        assert login.password not in " ".join(forked.argv()) and forked.env == direct.env
        answers = []
        for cmd in (forked, direct):
            with open(tmp_path / "server.log", "w+b") as log:
                async with connect_stdio(cmd, log, cwd=env.state_dir) as session:
                    tools = [t.model_dump() for t in (await session.list_tools()).tools]
                    rows = await session.call_tool("execute_sql", {"sql": "SELECT id, qty FROM orders ORDER BY id"})
                    objects = await session.call_tool("list_objects", {"schema_name": "public", "object_type": "table"})
                    forks = children(zygote)
                    closing = time.perf_counter()
                took = time.perf_counter() - closing
            # The SDK's stop (stdin closed, SIGTERM after the grace) reaches a forked server through its stub.
            assert took < mcp_client.STOP_GRACE_S + 0.8, f"stopping {cmd.command} took {took:.2f} s"
            assert len(forks) == (1 if cmd is forked else 0)
            answers.append((tools, rows.model_dump(), objects.model_dump()))
    assert len(answers[0][0]) == 9 and answers[0] == answers[1]
    assert not children(zygote)
    assert login.password not in (Path(cluster.base) / "zygote.log").read_text()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


async def test_a_zygote_that_cannot_start_says_so_and_servers_start_directly(
    env_server: tuple[Path, Prefork], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    broken = Prefork(python=str(tmp_path / "no-python"), entry="envserver:main")
    with run_zygote(broken, tmp_path, "envserver") as z:
        assert z is None
    err = capfd.readouterr().err
    assert err.count("no envserver server zygote") == 1, err
    assert route(command(env_server), None) == command(env_server)  # no socket: the command itself
