"""Shared fixtures: the repo's task pack, a tiny task pack, a scripted model server and S3 per session, and for
the operator tests a realistic Kubernetes API emulator (tests/kubeemu.py) with the EvalRun CRD.

``kube`` is a :class:`kubeemu.RunningEmulator`: ``.url``, ``.kubeconfig_path``, ``.emulator`` (the
RealisticEmulator: ``objects()``, ``request_counts``, ``set_pod_log()``...), ``.call()``, loop-routed
``create/get/patch/delete/objects``, ``.request()`` for raw HTTP and ``.kubectl()`` for the real kubectl.
Run an operator against it with ``kubeemu.run_kopf_in_thread(module, kube.kubeconfig_path, namespace=...)``.
One conftest for the whole tree: two files named conftest.py would both be the module ``conftest``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import boto3
import pytest

# A background job of a non-interactive shell (`cmd &` in a script, CI's runners, `nohup`) starts with SIGINT
# ignored, Python keeps it so, and every child inherits it: the Ctrl-C tests' runs then exited 0, deaf to the key.
# They test what a terminal user gets, so the suite's own process takes the default back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:  # s3server.py and friends live here; tests/ is not a package on purpose
    sys.path.insert(0, _TESTS)

from kubeemu import RunningEmulator, operator_crds, running_emulator  # noqa: E402
from s3server import moto_endpoint  # noqa: E402

NS = "default"  # the operator tests' namespace
CREDS = {
    "AWS_ACCESS_KEY_ID": "AKIAMCPFLEETTEST",
    "AWS_SECRET_ACCESS_KEY": "mcpfleet-test-secret-key-123",
    "AWS_DEFAULT_REGION": "us-east-1",
}

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"

TINY_DESCRIPTION = (
    "In the working directory, read notes/todo.txt. Create a folder named done. Write done/summary.txt "
    "containing the number of lines of notes/todo.txt followed by a newline, then move notes/todo.txt into "
    "done/todo.txt. Leave every other file untouched.\n"
)
TINY_VERIFY = """
import os, sys
from pathlib import Path
root = Path(os.environ["FILESYSTEM_TEST_DIR"])
problems = []
if (root / "notes" / "todo.txt").exists():
    problems.append("notes/todo.txt still in place")
moved = root / "done" / "todo.txt"
if not moved.is_file() or moved.read_text() != "a\\nb\\nc\\n":
    problems.append("done/todo.txt missing or changed")
summary = root / "done" / "summary.txt"
if not summary.is_file() or summary.read_text().strip() != "3":
    problems.append("done/summary.txt must hold 3")
if (root / "keep.txt").read_text() != "keep me\\n":
    problems.append("keep.txt was damaged")
print("\\n".join(problems) or "all good")
sys.exit(1 if problems else 0)
"""
TINY_ORACLE = {
    "steps": [
        {"tool": "read_text_file", "arguments": {"path": "{root}/notes/todo.txt"}},
        {"tool": "create_directory", "arguments": {"path": "{root}/done"}},
        {"tool": "write_file", "arguments": {"path": "{root}/done/summary.txt", "content": "3\n"}},
        {"tool": "move_file", "arguments": {"source": "{root}/notes/todo.txt", "destination": "{root}/done/todo.txt"}},
    ]
}


def trial_record(trial_id: str, **fields: object) -> dict[str, object]:
    """A whole trial record (every field a TrialResult requires), for tests that write records by hand: readers
    take only records that validate (records.usable_record)."""
    from mcpfleet.runner.results.records import TrialResult

    base: dict[str, object] = {
        "run": "r",
        "trial_id": trial_id,
        "spec_hash": "h",
        "model": "m",
        "litellm_model": "scripted/oracle",
        "service": "filesystem",
        "task_id": "filesystem/standard/t/x",
        "attempt": 1,
        "agent": "mcpmark",
        "passed": True,
    }
    return TrialResult.model_validate({**base, **fields}).model_dump(mode="json")


def make_tiny_pack(root: Path, tasks: int = 1) -> Path:
    """A pack in MCPMark layout with ``tasks`` copies of one small, real filesystem task."""
    state = root / "filesystem" / "states" / "tiny"
    (state / "notes").mkdir(parents=True, exist_ok=True)
    (state / "notes" / "todo.txt").write_text("a\nb\nc\n")
    (state / "keep.txt").write_text("keep me\n")
    (root / "filesystem" / "states" / "tiny.times.json").write_text(
        json.dumps({"notes/todo.txt": "2024-03-05T09:12:00Z"})
    )
    for i in range(tasks):
        name = f"move_todo_{i}"
        d = root / "filesystem" / "standard" / "tiny" / name
        d.mkdir(parents=True, exist_ok=True)
        # Each copy gets a distinct description so the scripted oracle can tell them apart.
        (d / "description.md").write_text(TINY_DESCRIPTION + ("" if i == 0 else f"(variant {i})\n"))
        (d / "verify.py").write_text(TINY_VERIFY)
        (d / "oracle.json").write_text(json.dumps(TINY_ORACLE))
        (d / "meta.json").write_text(
            json.dumps(
                {
                    "task_id": name,
                    "task_name": "Move Todo",
                    "category_id": "tiny",
                    "category_name": "Tiny",
                    "description": "Move a todo file and summarise it.",
                    "author": "tests",
                    "created_at": "2026-11-22",
                    "difficulty": "L1",
                    "tags": [],
                    "mcp": ["filesystem"],
                    "meta_data": {"stateType": "text", "stateContent": "", "stateUrl": ""},
                }
            )
        )
    return root


@pytest.fixture
def tiny_pack(tmp_path: Path) -> Path:
    return make_tiny_pack(tmp_path / "pack")


@pytest.fixture(scope="session")
def session_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_pack(tmp_path_factory.mktemp("session") / "pack", tasks=3)


@pytest.fixture(scope="session")
def scripted_url(session_pack: Path) -> Iterator[str]:
    """One scripted model server for the session, knowing the repo's tasks and the session's tiny pack."""
    with ScriptedServerProcess([TASKS, session_pack]) as url:
        yield url


@pytest.fixture(autouse=True)
def _private_pack_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mirrors of S3 packs and the viewer's indexes go to the test's own folder, never the user's ~/.cache (tests
    may override)."""
    monkeypatch.setenv("MCPFLEET_CACHE_DIR", str(tmp_path / "pack-cache"))
    monkeypatch.setenv("MCPFLEET_VIEWER_CACHE_DIR", str(tmp_path / "viewer-cache"))  # and the viewer's indexes


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One moto_server for the test session; its URL (http://127.0.0.1:PORT)."""
    with moto_endpoint() as url:
        yield url


PEERING_NAME = "mcpfleet"  # the operator's default (MCPFLEET_PEERING_NAME)


@pytest.fixture
def kube() -> Iterator[RunningEmulator]:
    """A fresh emulator per test, served from its own thread, with every CRD the chart installs (crds/*.yaml: the
    EvalRun and kopf's peering resources) stored and served, and the operator's KopfPeering object in the test
    namespace, as the chart creates it (an operator started with peering finds it)."""
    with running_emulator(crds=operator_crds()) as running:
        running.create(
            {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING_NAME, "namespace": NS}}
        )
        yield running


def _signal_state() -> tuple[object, ...]:
    return (
        signal.getsignal(signal.SIGINT),
        signal.getsignal(signal.SIGTERM),
        frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    )


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    """A child inherits the signal mask and the ignored signals of the thread that starts it: a test that left
    SIGINT blocked or ignored here made every later test's `mcpfleet run` deaf to Ctrl-C (they exited 0, as if
    the key was never pressed). Fail the test that leaves them changed, and put them back for the next one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = _signal_state()
    yield
    after = _signal_state()
    if after != before:
        signal.signal(signal.SIGINT, before[0])  # type: ignore[arg-type]
        signal.signal(signal.SIGTERM, before[1])  # type: ignore[arg-type]
        signal.pthread_sigmask(signal.SIG_SETMASK, before[2])  # type: ignore[arg-type]
        pytest.fail(f"the test left the signal state changed: {before} -> {after}")


@pytest.fixture(autouse=True)
def no_operator_errors(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """kopf retries a crashed daemon after a minute, so a crash can hide behind a passing test: fail on it."""
    yield
    if request.node.path.parent.name != "operator":
        return
    bad = [
        r for r in caplog.get_records("call") if r.levelno >= logging.ERROR and r.name.startswith(("kopf", "mcpfleet"))
    ]
    assert not bad, "the operator logged errors:\n" + "\n".join(
        f"{r.name}: {r.getMessage()}\n{r.exc_text or ''}" for r in bad[:5]
    )


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with moto_endpoint() as url:
        yield url


@pytest.fixture
def bucket(s3: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    name = f"runs-{int(time.time() * 1000) % 10**9}"
    boto3.client("s3", endpoint_url=s3, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture
def operator_env(kube: RunningEmulator, scripted_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig_path))
    monkeypatch.setenv("MCPFLEET_SCRIPTED_URL", scripted_url)
    monkeypatch.setenv("MCPFLEET_STATUS_INTERVAL", "0.3")
    monkeypatch.setenv("MCPFLEET_CREATE_RATE", "50")
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s3-credentials", "namespace": NS},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in CREDS.items()},
        }
    )


@pytest.fixture
def image_pack() -> Iterator[Path]:
    """A task pack "in the image": outside /tmp, which trial pods mount over with an emptyDir."""
    base = REPO / ".test-image"
    base.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=base))
    yield make_tiny_pack(root / "pack", tasks=3)
    shutil.rmtree(root, ignore_errors=True)
