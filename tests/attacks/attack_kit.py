"""The attack kit's machinery: canary listeners, the kit's own small task pack, one real `mcpfleet run` per group
of attacks (one EvalRun, one scripted hostile model per attack), and the records it wrote, read back as a user
would read them. What each attack is and what BLOCKED means is in ``attack_catalog.py``; how to add one in README.md.

A group's run happens once per test session, whichever xdist worker asks first: the others wait on a file lock
and read what the first one saved (records, listener hits, what was left on the host), so parametrized cases
spread over workers never run the same EvalRun twice."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
MCPFLEET = Path(sys.executable).with_name("mcpfleet")
CANARY_KEY_ENV = "MCPFLEET_ATTACK_CANARY_KEY"
WORK_ROOT = "/var/lib"  # not /tmp, /var/tmp or /dev/shm, which a sandbox replaces whole


class Listeners:
    """A UDP socket and a TCP listener on 127.0.0.1 that record whatever reaches them (a TCP peer's first bytes
    too): the judges of whether an attack aimed at a loopback port got through."""

    def __init__(self) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(64)
        self.tcp.settimeout(0.2)
        self.datagrams: list[str] = []
        self.connections: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._read_udp, self._accept_tcp)]
        for t in self._threads:
            t.start()

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])

    @property
    def tcp_port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def _read_udp(self) -> None:
        while not self._stop.is_set():
            try:
                self.datagrams.append(self.udp.recv(65536)[:80].hex())
            except TimeoutError:
                continue
            except OSError:
                return

    def _accept_tcp(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(0.5)
                try:
                    first = conn.recv(200)
                except OSError:
                    first = b""
                self.connections.append(first.decode(errors="replace"))

    def hits(self) -> dict[str, list[str]]:
        return {"udp": list(self.datagrams), "tcp": list(self.connections)}

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        self.udp.close()
        self.tcp.close()


@dataclass
class Trial:
    """One attack's trial as its run recorded it: result.json, the other record files as text, the listeners'
    hits for the ports its script was given, and what the group's run left on the host."""

    attack: str
    result: dict[str, Any]
    files: dict[str, str]
    hits: dict[str, list[str]]
    host: dict[str, Any]
    ctx: dict[str, str]

    @property
    def verifier(self) -> dict[str, Any]:
        return self.result.get("verifier") or {}

    @property
    def report(self) -> dict[str, Any]:
        """The kit verifier's ``KIT-REPORT {...}`` line: what the verifier itself saw while it graded."""
        for line in (self.verifier.get("stdout") or "").splitlines():
            if line.startswith("KIT-REPORT "):
                return dict(json.loads(line[len("KIT-REPORT ") :]))
        return {}

    @property
    def everything(self) -> str:
        """Every record file of the trial, and the run's own output, as one text: where a canary must not be."""
        return "\n".join(self.files.values()) + "\n" + self.host.get("run_output", "")

    def tool_results(self) -> list[str]:
        """The outputs of the trial's tool calls, in order, from messages.json."""
        items = json.loads(self.files.get("messages.json") or "[]")
        return [str(m.get("output", "")) for m in items if m.get("type") == "function_call_output"]

    def outcome(self) -> str:
        v = self.verifier
        return (
            f"passed={self.result.get('passed')} failure={self.result.get('failure')} error={self.result.get('error')}"
            f"\nverifier stdout: {(v.get('stdout') or '')[-1500:]}\nverifier stderr: {(v.get('stderr') or '')[-800:]}"
        )


@dataclass
class Group:
    """A group of attacks sharing one EvalRun: its service's pack, tasks and what its verifier is told."""

    name: str
    write_pack: Callable[[Path, dict[str, str]], Path]  # (folder, ctx) -> tasks.path
    tasks: dict[str, Any]  # spec.tasks besides path
    spec: dict[str, Any] = field(default_factory=dict)  # more of spec (limits, concurrency)
    controls: list[dict[str, Any]] = field(default_factory=list)  # honest models beside the attacks
    prepare: Callable[[Path, dict[str, str]], Any] | None = None  # host set-up before the run (canary files)
    after: Callable[[dict[str, str]], dict[str, Any]] | None = None  # host checks right after the run
    task_dir: str = ""  # the task's folder in the pack, given to the scripts as @@TASK_DIR@@
    pg: bool = False  # PostgreSQL clusters under a scratch runs root the throwaway uids can reach


def render(script: str, ctx: dict[str, str], dest: Path) -> Path:
    """``scripts/<script>.json`` with every ``@@NAME@@`` replaced by ``ctx[NAME]`` (ports, paths, the run's mark),
    written under ``dest``: the script a hostile model plays."""
    text = (SCRIPTS / f"{script}.json").read_text()
    for key, value in ctx.items():
        text = text.replace(f"@@{key}@@", value)
    if "@@" in text:
        raise ValueError(f"{script}.json: unknown placeholder near {text[text.index('@@') :][:40]!r}")
    json.loads(text)  # a script must stay JSON after its values are put in
    out = dest / f"{script}.json"
    out.write_text(text)
    return out


def _read_trials(trials: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for folder in sorted(p for p in trials.iterdir() if (p / "result.json").is_file()):
        files = {f.name: f.read_text(errors="replace") for f in folder.iterdir() if f.is_file()}
        result = json.loads(files["result.json"])
        out[result["model"]] = {"result": result, "files": files}
    return out


def run_group(
    group: Group, attacks: dict[str, str], work: Path, scripted_url: str, extra_ctx: dict[str, str]
) -> dict[str, Any]:
    """One `mcpfleet run` of ``attacks`` (model name -> script) plus the group's controls, as a user runs it; what
    it recorded, read back, with each attack's listener hits and the host's state after it."""
    mark = uuid.uuid4().hex[:12]
    listeners = {name: Listeners() for name in attacks}
    ctx_base = {
        "MARK": mark,
        "MODEL_PORT": scripted_url.rsplit(":", 1)[1].split("/")[0],
        "OUTPUT": str(work / "runs"),
        "PY": f"python{sys.version_info.major}.{sys.version_info.minor}",
        **extra_ctx,
    }
    scripts = work / "scripts"
    scripts.mkdir(parents=True)
    canary_process = None
    try:
        pack = group.write_pack(work / "pack", ctx_base)
        ctx_base.update(plant_canaries(work, mark))
        ctx_base["TASK_DIR"] = str(pack / group.task_dir)
        # A process of the run's user whose command line is a secret: what /proc must not show a trial.
        canary_process = subprocess.Popen(["sh", "-c", "sleep 600; : " + ctx_base["CANARY_CMDLINE"]])
        if group.prepare is not None:
            group.prepare(work, ctx_base)
        ctxs: dict[str, dict[str, str]] = {}
        models = []
        for name, script in attacks.items():
            ls = listeners[name]
            ctxs[name] = {**ctx_base, "UDP_PORT": str(ls.udp_port), "TCP_PORT": str(ls.tcp_port)}
            path = render(script, ctxs[name], scripts)
            models.append(
                {"name": name, "model": f"openai/script={path}", "apiBase": scripted_url, "apiKeyEnv": CANARY_KEY_ENV}
            )
        doc = {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": f"kit-{group.name}"},
            "spec": {
                "models": models + group.controls,
                "tasks": {"path": str(pack), **group.tasks},
                "attempts": 1,
                "retries": {"limit": 1, "backoffSeconds": 0},
                "output": {"uri": str(work / "runs")},
                **group.spec,
            },
        }
        spec = work / "run.yaml"
        spec.write_text(yaml.safe_dump(doc))
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        with _pg_root(group.pg) as pg_env:
            proc = subprocess.run(
                [str(MCPFLEET), "run", str(spec), "--no-progress"],
                capture_output=True,
                text=True,
                timeout=600,
                cwd=work,
                env={**os.environ, CANARY_KEY_ENV: extra_ctx["CANARY_KEY"], **pg_env},
                stdin=subprocess.DEVNULL,
            )
        trials = _read_trials(work / "runs" / f"kit-{group.name}" / "trials")
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        host = {
            "returncode": proc.returncode,
            "run_output": proc.stdout + proc.stderr,
            "cpu_seconds": round(used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime, 1),
        }
        if group.after is not None:
            host.update(group.after(ctx_base))
    finally:
        if canary_process is not None:
            canary_process.kill()
            canary_process.wait()
        hits = {}
        for name, ls in listeners.items():
            ls.close()
            hits[name] = ls.hits()
    return {"trials": trials, "hits": hits, "host": host, "ctx": ctxs}


def plant_canaries(work: Path, mark: str) -> dict[str, str]:
    """What the attacks aim at on the host, each holding a text that must appear in no record: a file outside the
    trial's reach, another run's transcript in the run's output folder (world-readable, as a user's old runs
    are). Their paths and texts, for the scripts and the checks."""
    canary_file = work / "canary-secret.txt"
    canary_file.write_text(f"canary-file-{mark}\n")
    canary_file.chmod(0o644)
    other = work / "runs" / "other-run" / "trials" / "kit.1" / "messages.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps([{"role": "user", "content": f"transcript-of-another-run-{mark}"}]))
    for p in (work / "runs", other.parents[2], other.parents[1], other.parent):
        p.chmod(0o755)
    other.chmod(0o644)
    return {
        "WORK": str(work),
        "CANARY_FILE": str(canary_file),
        "CANARY_FILE_TEXT": f"canary-file-{mark}",
        "CANARY_TRANSCRIPT": f"transcript-of-another-run-{mark}",
        "CANARY_CMDLINE": f"canary-cmdline-{mark}",
    }


@contextlib.contextmanager
def _pg_root(pg: bool) -> Iterator[dict[str, str]]:
    if not pg:
        yield {}
        return
    sys.path.insert(0, str(REPO / "tests"))
    from pgpack import scratch_runs_root

    from mcpfleet.runner.services import pgcluster

    with scratch_runs_root("mcpfleet-attack-kit-") as d:
        yield {pgcluster.PG_DIR_ENV: str(d)}


def shared_folder(basetemp: Path) -> Path:
    """A folder all xdist workers of this test session share (``basetemp`` is a worker's own), and no other
    session: where a group's saved run and its lock live."""
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"
    parent = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    return parent / f"attack-kit-{session}"


def shared_run(
    shared: Path, group: Group, attacks: dict[str, str], servers: Callable[[], tuple[str, dict[str, str]]]
) -> dict[str, Any]:
    """``run_group`` once per test session: the first caller runs it and saves what it saw under ``shared``; the
    others wait for that and read it. The run's own folder is outside every temp folder (as ``./runs`` is), so
    only the rule that hides a run's output from its trials' servers keeps them out of it; removed after.
    ``servers()``: the scripted model server's URL and the scripts' other values (started only if needed)."""
    shared.mkdir(parents=True, exist_ok=True)
    saved = shared / f"{group.name}.json"
    with FileLock(str(shared / f"{group.name}.lock")):
        if not saved.exists():
            work = Path(tempfile.mkdtemp(prefix=f"mcpfleet-attack-kit-{group.name}-", dir=WORK_ROOT))
            work.chmod(0o755)
            try:
                scripted_url, extra_ctx = servers()  # (started only by the worker that runs the group)
                saved.write_text(json.dumps(run_group(group, attacks, work, scripted_url, extra_ctx)))
            finally:
                subprocess.run(["rm", "-rf", str(work)], check=False)
        return dict(json.loads(saved.read_text()))


def trial_of(run: dict[str, Any], attack: str) -> Trial:
    rec = run["trials"].get(attack)
    assert rec is not None, f"the run recorded no trial for {attack}:\n{run['host']['run_output'][-3000:]}"
    return Trial(attack, rec["result"], rec["files"], run["hits"][attack], run["host"], run["ctx"][attack])


def pids_naming(text: str) -> list[int]:
    """Live processes whose command line holds ``text`` (not zombies)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if state != "Z" and text.encode() in cmd:
                out.append(int(d.name))
    return out
