"""A declared service's environment, made in-process as a worker makes it (issue 46 §5: declaring must cost no
more than the bundled path): the state and the server's command in one worker thread, a spare's command made
off the event loop, the sandbox that hides the pack kept, a backing service's port still in the command."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from mcpfleet.runner.environment import sandbox
from mcpfleet.runner.services import service_of
from mcpfleet.runner.services.declared import DeclaredService
from mcpfleet.runner.tasks.discovery import discover

CATEGORY = "team_project"
DECLARATION: dict[str, Any] = {
    "server": {"command": "mcp-server-filesystem", "args": ["{state}"], "env": {"TZ": "UTC"}, "warmStart": True},
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
}


def pack_with(root: Path, declaration: dict[str, Any]) -> Path:
    """A pack declaring ``files`` with one bundled filesystem task and its category's state and file times."""
    folder = root / "pack" / "files"
    task = sorted((REPO / "tasks/filesystem/standard" / CATEGORY).iterdir())[0]
    shutil.copytree(task, folder / "standard" / CATEGORY / task.name)
    shutil.copytree(REPO / "tasks/filesystem/states" / CATEGORY, folder / "states" / CATEGORY)
    shutil.copy(REPO / "tasks/filesystem/states" / f"{CATEGORY}.times.json", folder / "states")
    (folder / "service.yaml").write_text(yaml.safe_dump(declaration))
    return root / "pack"


def hides(launcher: str, pack: Path) -> bool:
    """Whether the sandbox launcher ``launcher`` starts its server with ``pack`` covered (hidden, or under a fresh
    scratch folder such as the temp folder) and nothing of it bound back."""
    line = next(ln for ln in Path(launcher).read_text().splitlines() if ln.startswith("exec unshare"))
    argv = shlex.split(line)
    entry = argv[argv.index("--") + 1 :]  # after unshare's own flags: the helper, or Python running sandbox.py
    assert entry[0] == sandbox.helper() or entry[1:4] == ["-I", "-S", os.path.realpath(sandbox.__file__)], entry
    plan, _ = sandbox.Plan.from_args(entry[1:] if entry[0] == sandbox.helper() else entry[4:])
    real = str(pack.resolve())
    covered = any(real == c or real.startswith(c.rstrip("/") + "/") for c in (*plan.hide, *plan.scratch))
    return covered and not any(k == real or k.startswith(real + "/") for k in plan.keep)


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions handed to a worker thread (``asyncio.to_thread``), in order."""
    seen: list[str] = []
    real = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        seen.append(func.__name__)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return seen


async def test_a_cold_declared_environment_copies_its_state_and_makes_its_command_in_one_thread_hop(
    tmp_path: Path, hops: list[str]
) -> None:
    """The bundled module makes its command on the loop; the declaration's (a sandbox plan and launcher) is made
    right after the copy in the copy's own worker thread, not in a second one whose hand-off the trial waits for.
    The command is still the sandbox's, hiding the pack."""
    pack = pack_with(tmp_path, DECLARATION)
    [task] = discover(pack)
    service = service_of(task.service, pack)
    assert isinstance(service, DeclaredService)
    state = tmp_path / "trial" / "state"
    async with service.environment(task, state, None) as env:
        assert len(hops) == 1, hops
        assert any(state.iterdir())  # the state is there
        assert env.server.args == [str(state)]
        assert sandbox.available()
        assert hides(env.server.command, pack), Path(env.server.command).read_text()


async def test_a_declared_spare_makes_its_sandboxed_command_off_the_event_loop(tmp_path: Path) -> None:
    """A spare boots while the worker's current trial runs its agent on the same loop: the command (a sandbox plan
    and a launcher file) is made in a worker thread, and it still hides the pack."""
    pack = pack_with(tmp_path, DECLARATION)
    [task] = discover(pack)
    service = service_of(task.service, pack)
    assert isinstance(service, DeclaredService) and service.spare_servers
    made_in: list[threading.Thread] = []
    real = service.server_command

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made_in.append(threading.current_thread())
        return real(*args, **kwargs)

    service.server_command = recorded  # type: ignore[method-assign]
    state = tmp_path / "spare" / "state"
    state.mkdir(parents=True)
    async with service.spare(state, None) as spare:
        assert made_in and made_in[0] is not threading.current_thread()
        assert spare.server.args == [str(state)]
        assert hides(spare.server.command, pack), Path(spare.server.command).read_text()
        async with spare.claim(task) as env:  # the claim copies the state in and makes no command
            assert len(made_in) == 1
            assert env.state_dir == state and any(state.iterdir())


async def test_a_declared_servers_command_gets_its_backing_services_port(tmp_path: Path) -> None:
    """With a backing service the command is made once that service is up, so its ``{port:NAME}`` is known."""
    declaration = {
        **DECLARATION,
        "server": {**DECLARATION["server"], "args": ["{state}", "--site=http://127.0.0.1:{port:web}/"]},
        "backing": [
            {
                "name": "web",
                "command": [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port:web}"],
                "readiness": {"httpGet": "/"},
            }
        ],
    }
    pack = pack_with(tmp_path, declaration)
    [task] = discover(pack)
    service = service_of(task.service, pack)
    state = tmp_path / "trial" / "state"
    async with service.environment(task, state, None) as env:
        [_, site] = env.server.args
        port = int(site.removeprefix("--site=http://127.0.0.1:").rstrip("/"))
        assert port > 0
        assert env.verifier_env["FILESYSTEM_TEST_DIR"] == str(state)
