"""The browser's file-reading attacks of ``test_sandbox.py``, as a function and as a script: the tests run it in
their own process as root, and as a script under another user (``setpriv``) for a run that is not root.

    python tests/sandbox_attacks.py MARKER OUTPUT   # prints what each attack saw, as JSON
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcpfleet.runner.environment.mcp_client import connect_stdio, result_text
from mcpfleet.runner.services import get_service
from mcpfleet.runner.spec.task import Task

REPO = Path(__file__).resolve().parents[1]
VERIFY = REPO / "tasks" / "postgres" / "standard" / "hr" / "vp_org_payroll" / "verify.py"
TRANSCRIPT = "transcript-of-another-trial"


def site_task(root: Path) -> Task:
    path = root / "pack" / "playwright" / "standard" / "probe" / "probe"
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"task_id": "probe", "mcpfleet": {"sites": ["shop"]}}))
    return Task("playwright", "standard", "probe", "probe", path, path.parent.parent / "states" / "probe")


def environ_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def pids_under(marker: str) -> list[int]:
    """The server's and browser's processes: their environment or command line names the test's folder (this
    process aside, which was given it)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd + environ_of(int(entry.name)):
                out.append(int(entry.name))
    return out


def browser_attacks(marker: Path, output: Path) -> dict[str, Any]:
    """Start the playwright service's server as a trial does (the temp folder: ``marker``) and open, through it,
    the verifiers, the pack, another trial's transcript in ``output`` and in a neighbouring trial folder, and
    the same through ``/proc/<pid>/root``. What each page showed, the server's processes' environments, and
    whether the server was wrapped in the sandbox."""
    os.environ["TMPDIR"] = str(marker)
    tempfile.tempdir = str(marker)
    task = site_task(marker)
    state = marker / "mcpfleet-trial-1-x" / "state"
    neighbour = marker / "mcpfleet-trial-2-y" / "messages.json"  # a concurrent trial's folder
    neighbour.parent.mkdir()
    neighbour.write_text(TRANSCRIPT)

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with open(marker / "server.log", "w+b") as log:
            async with get_service("playwright").environment(task, state, None) as env:
                seen["wrapped"] = Path(env.server.command).name == "server"
                async with connect_stdio(env.server, log, cwd=state) as session:

                    async def page(url: str) -> str:
                        nav = await session.call_tool("browser_navigate", {"url": url})
                        snap = await session.call_tool("browser_snapshot", {})
                        return result_text(nav) + "\n" + result_text(snap)

                    for name, url in {
                        "verify": f"view-source:file://{VERIFY}",
                        "pack": f"view-source:file://{task.path / 'meta.json'}",
                        "transcript": f"view-source:file://{output / 'trials' / 'other' / 'messages.json'}",
                        "neighbour": f"view-source:file://{neighbour}",
                        "via_proc": f"view-source:file:///proc/{os.getpid()}/root{VERIFY}",
                        "environ": "view-source:file:///proc/self/environ",
                        "plain": f"file://{VERIFY}",
                        "shop": "http://shop.test/",
                    }.items():
                        seen[name] = await page(url)
                    seen["environs"] = [environ_of(p).decode(errors="replace") for p in pids_under(str(marker))]
        return seen

    return asyncio.run(scenario())


if __name__ == "__main__":
    print(json.dumps(browser_attacks(Path(sys.argv[1]), Path(sys.argv[2]))))
