"""Task packs kept in S3: mirrored by ETag, planned exactly like the same pack on disk, one task (and its
state) fetched by a pod's init container, and a pack that changed since planning refused."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.config import Config
from conftest import REPO, make_tiny_pack
from s3server import new_bucket

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.results import store as store_mod
from mcpfleet.runner.results.store import S3Tuning
from mcpfleet.runner.spec.load import load_evalrun, parse_evalrun
from mcpfleet.runner.spec.task import TaskError
from mcpfleet.runner.tasks.packs import MANIFEST, PackError, mirror_path, sync

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
FAST = S3Tuning(max_attempts=2, op_attempts=2, backoff_s=0.01, connect_timeout=0.5, read_timeout=2)
TASK0 = "filesystem/standard/tiny/move_todo_0"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in store_mod.AWS_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAMCPFLEETPACKS001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "packs/Secret+0123456789")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MCPFLEET_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def s3(s3_endpoint: str) -> Any:  # noqa: F811
    return boto3.client("s3", endpoint_url=s3_endpoint, config=Config(s3={"addressing_style": "path"}))


def upload(s3: Any, bucket: str, folder: Path, prefix: str) -> list[str]:
    keys = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = f"{prefix}/{f.relative_to(folder).as_posix()}"
        s3.put_object(Bucket=bucket, Key=key, Body=f.read_bytes())
        keys.append(key)
    return keys


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".mcpfleet-sync")
    }


def evalrun(path: str, endpoint: str, out: Path, **tasks: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "packs"},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": path, "endpointUrl": endpoint, **tasks},
            "attempts": 2,
            "concurrency": {"total": 2},
            "output": {"uri": str(out)},
        },
    }


def test_sync_mirrors_the_prefix_and_follows_changes_by_etag(s3_endpoint: str, s3: Any, tmp_path: Path) -> None:  # noqa: F811
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    bucket = new_bucket(s3)
    upload(s3, bucket, pack, "packs/tiny")
    s3.put_object(Bucket=bucket, Key="packs/tiny2/other.txt", Body=b"a sibling prefix, not part of the pack")
    dest = tmp_path / "mirror"
    sync(f"s3://{bucket}/packs/tiny", dest, endpoint_url=s3_endpoint, tuning=FAST)
    assert files(dest) == files(pack)

    # Changed, added and deleted objects: only the changed one is fetched again, the deleted one goes.
    keep = dest / "filesystem/states/tiny/keep.txt"
    keep_mtime = keep.stat().st_mtime_ns
    todo_key = "packs/tiny/filesystem/states/tiny/notes/todo.txt"
    s3.put_object(Bucket=bucket, Key=todo_key, Body=b"changed\n")
    s3.put_object(Bucket=bucket, Key="packs/tiny/filesystem/states/tiny/new.txt", Body=b"new\n")
    s3.delete_object(Bucket=bucket, Key="packs/tiny/filesystem/standard/tiny/move_todo_1/oracle.json")
    sync(f"s3://{bucket}/packs/tiny", dest, endpoint_url=s3_endpoint, tuning=FAST)
    assert (dest / "filesystem/states/tiny/notes/todo.txt").read_bytes() == b"changed\n"
    assert (dest / "filesystem/states/tiny/new.txt").read_bytes() == b"new\n"
    assert not (dest / "filesystem/standard/tiny/move_todo_1/oracle.json").exists()
    assert keep.stat().st_mtime_ns == keep_mtime
    assert "filesystem/standard/tiny/move_todo_1/oracle.json" not in json.loads((dest / MANIFEST).read_text())


def test_an_empty_prefix_and_an_escaping_key_are_refused(s3_endpoint: str, s3: Any, tmp_path: Path) -> None:  # noqa: F811
    bucket = new_bucket(s3)
    with pytest.raises(PackError, match=r"spec\.tasks\.path: nothing found under s3://.*/nowhere"):
        sync(f"s3://{bucket}/nowhere", tmp_path / "m", endpoint_url=s3_endpoint, tuning=FAST)
    s3.put_object(Bucket=bucket, Key="evil/../../outside.txt", Body=b"x")
    with pytest.raises(PackError, match="must stay inside its prefix"):
        sync(f"s3://{bucket}/evil", tmp_path / "m2", endpoint_url=s3_endpoint, tuning=FAST)
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        (["t/description.md", "t/description.md/x"], "'t/description.md' both as an object and as a folder"),
        (["t/.mcpfleet-sync.lock"], "is the name of the mirror's own files"),
        (["t/" + "n" * 250 + ".md"], "longer than the mirror can name a file (249 bytes)"),
    ],
)
def test_keys_a_folder_cannot_mirror_are_refused_naming_the_key(
    s3_endpoint: str,  # noqa: F811
    s3: Any,
    tmp_path: Path,
    keys: list[str],
    said: str,
) -> None:
    """Before: a FileExistsError or ENAMETOOLONG traceback from `validate` and `run`, or a key overwriting the
    mirror's own lock or manifest."""
    bucket = new_bucket(s3)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=f"pack/{key}", Body=b"x")
    with pytest.raises(PackError, match=re.escape(said)):
        sync(f"s3://{bucket}/pack", tmp_path / "m", endpoint_url=s3_endpoint, tuning=FAST)


def test_a_large_object_is_mirrored_without_holding_it_in_memory(
    s3_endpoint: str,  # noqa: F811
    s3: Any,
    tmp_path: Path,
) -> None:
    """Before: each object was read whole into memory (a 1 GiB state: 1.13 GB peak); now it is written in chunks."""
    bucket = new_bucket(s3)
    body = bytes(range(256)) * (48 * 4096)  # 48 MiB
    s3.put_object(Bucket=bucket, Key="pack/filesystem/states/big/blob.bin", Body=body)
    tracemalloc.start()
    try:
        sync(f"s3://{bucket}/pack", tmp_path / "m", endpoint_url=s3_endpoint, tuning=FAST)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "m/filesystem/states/big/blob.bin").read_bytes() == body
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB allocated at once for a 48 MiB object"


def test_a_file_that_became_a_folder_is_replaced_on_the_next_sync(
    s3_endpoint: str,  # noqa: F811
    s3: Any,
    tmp_path: Path,
) -> None:
    bucket = new_bucket(s3)
    s3.put_object(Bucket=bucket, Key="pack/t/notes", Body=b"a file")
    sync(f"s3://{bucket}/pack", tmp_path / "m", endpoint_url=s3_endpoint, tuning=FAST)
    s3.delete_object(Bucket=bucket, Key="pack/t/notes")
    s3.put_object(Bucket=bucket, Key="pack/t/notes/a.txt", Body=b"now a folder")
    sync(f"s3://{bucket}/pack", tmp_path / "m", endpoint_url=s3_endpoint, tuning=FAST)
    assert (tmp_path / "m/t/notes/a.txt").read_bytes() == b"now a folder"
    s3.delete_object(Bucket=bucket, Key="pack/t/notes/a.txt")
    s3.put_object(Bucket=bucket, Key="pack/t/notes", Body=b"a file again")
    sync(f"s3://{bucket}/pack", tmp_path / "m", endpoint_url=s3_endpoint, tuning=FAST)
    assert (tmp_path / "m/t/notes").read_bytes() == b"a file again"


def test_planning_an_s3_pack_equals_planning_it_on_disk(s3_endpoint: str, s3: Any, tmp_path: Path) -> None:  # noqa: F811
    pack = make_tiny_pack(tmp_path / "pack", tasks=3)
    bucket = new_bucket(s3)
    upload(s3, bucket, pack, "mcpmark")
    remote = plan(parse_evalrun(evalrun(f"s3://{bucket}/mcpmark", s3_endpoint, tmp_path / "out")), tmp_path)
    local = plan(parse_evalrun(evalrun(str(pack), s3_endpoint, tmp_path / "out")), tmp_path)
    assert [(t.trial_id, t.spec_hash, t.task_digest) for t in remote] == [
        (t.trial_id, t.spec_hash, t.task_digest) for t in local
    ]
    assert len(remote) == 6
    assert Path(remote[0].tasks_root) == mirror_path(f"s3://{bucket}/mcpmark", s3_endpoint)

    # A verifier edited in S3 is a different trial: the next plan sees it.
    s3.put_object(Bucket=bucket, Key=f"mcpmark/{TASK0}/verify.py", Body=b"import sys\nsys.exit(0)\n")
    again = plan(parse_evalrun(evalrun(f"s3://{bucket}/mcpmark", s3_endpoint, tmp_path / "out")), tmp_path)
    changed = {t.trial_id for t, u in zip(again, remote, strict=True) if t.spec_hash != u.spec_hash}
    assert changed == {f"oracle.filesystem.standard.tiny.move_todo_0.{a}" for a in (1, 2)}


def test_states_path_in_s3_and_a_missing_pack_names_the_field(s3_endpoint: str, s3: Any, tmp_path: Path) -> None:  # noqa: F811
    pack = make_tiny_pack(tmp_path / "pack", tasks=1)
    bucket = new_bucket(s3)
    # MCPMark's own layout: tasks in one place, states in another.
    upload(s3, bucket, pack / "filesystem" / "standard", "tasks/filesystem/standard")
    upload(s3, bucket, pack / "filesystem" / "states", "states/filesystem")
    trials = plan(
        parse_evalrun(
            evalrun(f"s3://{bucket}/tasks", s3_endpoint, tmp_path / "out", statesPath=f"s3://{bucket}/states")
        ),
        tmp_path,
    )
    local = plan(parse_evalrun(evalrun(str(pack), s3_endpoint, tmp_path / "out")), tmp_path)
    assert [t.task_digest for t in trials] == [t.task_digest for t in local]
    with pytest.raises(TaskError, match=r"spec\.tasks\.statesPath: nothing found"):
        plan(
            parse_evalrun(
                evalrun(f"s3://{bucket}/tasks", s3_endpoint, tmp_path / "out", statesPath=f"s3://{bucket}/no-states")
            ),
            tmp_path,
        )


def materialise(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [str(MCPFLEET), "materialise", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env or dict(os.environ),
        cwd="/",
    )


def test_the_init_container_fetches_one_task_and_refuses_a_changed_one(
    s3_endpoint: str,
    s3: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=3)
    bucket = new_bucket(s3)
    upload(s3, bucket, pack, "p")
    planned = {
        t.task_id: t.task_digest
        for t in plan(parse_evalrun(evalrun(str(pack), s3_endpoint, tmp_path / "out")), tmp_path)
    }
    digest = planned[TASK0]
    assert digest is not None  # plan() records every task's digest
    task_dir, state_dir = tmp_path / "task", tmp_path / "state"
    out = materialise(
        "--task",
        TASK0,
        "--tasks-root",
        f"s3://{bucket}/p",
        "--task-dest",
        str(task_dir),
        "--dest",
        str(state_dir),
        "--endpoint-url",
        s3_endpoint,
        "--digest",
        digest,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["files"] == 2
    assert files(state_dir) == files(pack / "filesystem/states/tiny")
    # Only this task's folder and its category's state were fetched, not the whole pack.
    assert sorted({k.split("/")[3] for k in files(task_dir) if "/states/" not in k}) == ["move_todo_0"]
    assert files(task_dir / TASK0) == files(pack / TASK0)

    s3.put_object(Bucket=bucket, Key=f"p/{TASK0}/description.md", Body=b"Edited after the run was planned.\n")
    shutil.rmtree(state_dir)
    out = materialise(
        "--task",
        TASK0,
        "--tasks-root",
        f"s3://{bucket}/p",
        "--task-dest",
        str(task_dir),
        "--dest",
        str(state_dir),
        "--endpoint-url",
        s3_endpoint,
        "--digest",
        digest,
    )
    assert out.returncode == 2
    assert "not the one this run was planned with" in " ".join(out.stderr.split())
    assert not state_dir.exists() or not any(state_dir.iterdir())

    out = materialise("--task", TASK0, "--tasks-root", f"s3://{bucket}/p", "--dest", str(state_dir))
    assert out.returncode == 2 and "--task-dest is required" in " ".join(out.stderr.split())


def test_a_local_run_from_an_s3_pack(s3_endpoint: str, s3: Any, tmp_path: Path) -> None:  # noqa: F811
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    bucket = new_bucket(s3)
    upload(s3, bucket, pack, "team/pack")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(evalrun(f"s3://{bucket}/team/pack", s3_endpoint, tmp_path / "out")))
    summary, where = execute(load_evalrun(path), tmp_path, show_progress=False)
    assert summary["complete"] and summary["trials_recorded"] == 4
    assert [r["pass_at_1"] for r in summary["rows"]] == [1.0]
    rec = json.loads(
        (Path(where) / "trials" / "oracle.filesystem.standard.tiny.move_todo_1.2" / "result.json").read_text()
    )
    assert rec["passed"] is True
