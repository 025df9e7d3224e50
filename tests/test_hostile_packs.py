"""Hostile task packs (review findings 1-3, 5, 7-9, 14): a state holding a device, pipe or socket, a sparse file,
a state or task file leading out of the pack, broken meta.json / description.md / times.json and odd CLI input
are refused up front, by `validate`, the run's preflight and `tasks validate`, with one line naming the file:
never a traceback, never an infra_error on every trial."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, make_tiny_pack
from hostile import SCRIPTED, assert_clean_error, cli, flat, write_run

from mcpfleet.runner.environment import states
from mcpfleet.runner.environment.states import copy_state, load_times
from mcpfleet.runner.services import get_service
from mcpfleet.runner.spec.task import PackCheckError, Task, TaskError
from mcpfleet.runner.tasks.checks import check_selected, check_task
from mcpfleet.runner.tasks.digest import task_digest
from mcpfleet.runner.tasks.discovery import discover, find_task


def tiny(tmp_path: Path) -> Task:
    return discover(make_tiny_pack(tmp_path / "pack"))[0]


def state_problems(task: Task) -> list[str]:
    return get_service("filesystem").check_state(task)


# --- finding 1: devices, pipes and sockets in a state ------------------------------------------------------


def make_special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        # AF_UNIX paths are limited to 107 bytes and a worker's tmp_path can be longer: bind in a short
        # folder, then move the socket file into place (a rename keeps it a socket).
        with tempfile.TemporaryDirectory(dir="/tmp") as short:
            s = socket.socket(socket.AF_UNIX)
            s.bind(f"{short}/s")
            s.close()
            os.replace(f"{short}/s", path)
    else:
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero: a copy never ends


@pytest.mark.parametrize(("kind", "said"), [("fifo", "named pipe"), ("socket", "socket"), ("chardev", "character")])
def test_a_special_file_in_a_state_is_refused_by_the_state_check(tmp_path: Path, kind: str, said: str) -> None:
    """Before: check_state looked only at is_dir(): `validate` said valid, and the copy read /dev/zero for ever
    (filling the disk) or failed every trial on a pipe."""
    task = tiny(tmp_path)
    make_special(task.state_dir / "notes" / "odd", kind)
    problems = state_problems(task)
    assert len(problems) == 1 and said in problems[0] and "notes/odd" in problems[0], problems
    assert "not a regular file or folder" in problems[0]


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_copy_state_refuses_a_special_file_with_a_task_error(tmp_path: Path, kind: str) -> None:
    """Before: shutil's SpecialFileError (an infra error on every try). (No device here: the old copy never ended.)"""
    task = tiny(tmp_path)
    make_special(task.state_dir / "odd", kind)
    with pytest.raises(TaskError, match="not a regular file"):
        copy_state(task.state_dir, tmp_path / "trial", task.state_times)


def test_validate_and_run_refuse_a_fifo_state_before_any_trial(tmp_path: Path) -> None:
    make_tiny_pack(tmp_path / "pack")
    os.mkfifo(tmp_path / "pack" / "filesystem" / "states" / "tiny" / "pipe")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})
    for command in ("validate", "run"):
        out = cli(command, str(path), cwd=tmp_path)
        assert_clean_error(out, "tiny/pipe: a named pipe", "cannot be used")
    assert not (tmp_path / "runs").exists()


# --- finding 2: sparse files, size and entry caps, chunked digest ---------------------------------------------


def test_a_state_over_the_size_cap_is_refused_naming_its_largest_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = tiny(tmp_path)
    monkeypatch.setattr(states, "MAX_STATE_BYTES", 4096)
    with open(task.state_dir / "big.img", "wb") as f:
        f.truncate(8192)  # sparse: no block on disk, 8 KiB apparent
    problems = state_problems(task)
    assert len(problems) == 1 and "larger than" in problems[0] and "big.img" in problems[0], problems
    with pytest.raises(TaskError, match="larger than"):
        copy_state(task.state_dir, tmp_path / "trial")
    assert not (tmp_path / "trial" / "big.img").exists()


def test_a_state_with_too_many_entries_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = tiny(tmp_path)
    monkeypatch.setattr(states, "MAX_STATE_ENTRIES", 10)
    for i in range(12):
        (task.state_dir / f"f{i}.txt").write_text("x")
    problems = state_problems(task)
    assert problems and "more than 10 files and folders" in problems[0]


def test_links_multiplying_a_folder_count_against_the_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-state folder links are copied as folders: two sibling folders linking to each other never end."""
    task = tiny(tmp_path)
    (task.state_dir / "a").mkdir()
    (task.state_dir / "b").mkdir()
    (task.state_dir / "a" / "to_b").symlink_to("../b")
    (task.state_dir / "b" / "to_a").symlink_to("../a")
    problems = state_problems(task)
    assert problems and "loop" in problems[0], problems


def test_the_digest_reads_files_in_chunks_and_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: read_bytes() held a sparse file's whole apparent size in memory (2 GB of RSS for a 48 KB pack)."""
    task = tiny(tmp_path)
    with open(task.state_dir / "sparse.img", "wb") as f:
        f.truncate(3 * 1024 * 1024 + 17)
    expected = hashlib.sha256()
    for base in (task.path, task.state_dir):
        for p in sorted(p for p in base.rglob("*") if p.is_file()):
            expected.update(str(p.relative_to(base)).encode())
            expected.update(p.read_bytes())
    expected.update(task.state_times.read_bytes())

    def no_whole_reads(self: Path) -> bytes:
        raise AssertionError(f"read whole: {self}")

    monkeypatch.setattr(Path, "read_bytes", no_whole_reads)
    assert task_digest(task) == expected.hexdigest()[:16]


# --- finding 3: paths leading out of the pack --------------------------------------------------------------


def test_a_states_folder_that_is_a_link_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    """Before: the state was bounded by its own resolved parent, so `states -> /host` passed and host files were
    copied into the agent's state."""
    root = make_tiny_pack(tmp_path / "pack")
    host = tmp_path / "host"
    (root / "filesystem" / "states").rename(host)
    (host / "tiny" / "secret.txt").write_text("host secret\n")
    (root / "filesystem" / "states").symlink_to(host)
    task = discover(root)[0]
    problems = state_problems(task)
    assert problems and "outside" in problems[0] and "self-contained" in problems[0], problems
    with pytest.raises(TaskError, match="outside"):
        get_service("filesystem").materialise(task, tmp_path / "trial")
    assert not (tmp_path / "trial" / "secret.txt").exists()


def test_a_states_path_bounds_a_foreign_state(tmp_path: Path) -> None:
    """With tasks.statesPath the state may live outside the pack (MCPMark's test_environments/), but not leave it."""
    root = make_tiny_pack(tmp_path / "pack")
    env = tmp_path / "test_environments"
    (root / "filesystem" / "states").rename(env)
    task = discover(root, env)[0]
    assert state_problems(task) == []
    assert get_service("filesystem").materialise(task, tmp_path / "trial") == 2
    (env / "tiny").rename(tmp_path / "elsewhere")
    (env / "tiny").symlink_to(tmp_path / "elsewhere")
    problems = state_problems(discover(root, env)[0])
    assert problems and "outside" in problems[0]


@pytest.mark.parametrize("name", ["description.md", "verify.py", "meta.json", "oracle.json"])
def test_a_task_file_linking_out_of_the_pack_is_refused(tmp_path: Path, name: str) -> None:
    """Before: a description.md -> host file was sent to the model; verify.py -> /etc/passwd was run."""
    task = tiny(tmp_path)
    host = tmp_path / f"host-{name}"
    host.write_bytes((task.path / name).read_bytes())
    (task.path / name).unlink()
    (task.path / name).symlink_to(host)
    with pytest.raises(PackCheckError, match=f"{name}: symbolic link to .*outside the pack"):
        check_selected([task])


def test_a_link_within_the_pack_is_fine(tmp_path: Path) -> None:
    task = tiny(tmp_path)
    shared = tmp_path / "pack" / "shared_verify.py"
    shared.write_bytes(task.verifier.read_bytes())
    task.verifier.unlink()
    task.verifier.symlink_to(shared)
    check_selected([task])


def test_a_task_folder_linking_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    root = make_tiny_pack(tmp_path / "pack")
    task_dir = root / "filesystem" / "standard" / "tiny" / "move_todo_0"
    task_dir.rename(tmp_path / "ext")
    task_dir.symlink_to(tmp_path / "ext")
    with pytest.raises(PackCheckError, match="outside the pack"):
        check_selected(discover(root))
    with pytest.raises(TaskError, match="outside the pack"):
        find_task(root, "filesystem/standard/tiny/move_todo_0")


@pytest.mark.parametrize("task_id", ["filesystem/../../evil", "filesystem/./tiny/move_todo_0", "filesystem//tiny/x"])
def test_find_task_refuses_dot_parts(tmp_path: Path, task_id: str) -> None:
    """Before: 'filesystem/../../evil' found a task outside the pack."""
    root = make_tiny_pack(tmp_path / "packs" / "good")
    evil = tmp_path / "packs" / "evil"
    evil.mkdir()
    (evil / "description.md").write_text("evil\n")
    (tmp_path / "packs" / "filesystem" / "tiny" / "move_todo_0").mkdir(parents=True)
    (tmp_path / "packs" / "filesystem" / "tiny" / "move_todo_0" / "description.md").write_text("x\n")
    with pytest.raises(TaskError, match=r"'\.' or '\.\.' part"):
        find_task(root, task_id)


# --- finding 5 (first half) and 8: meta.json and description.md ----------------------------------------------


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"[]", "not an array"),
        (b"null", "not null"),
        (b'{"task_id": "\xff"}', "not UTF-8"),
        (b'{"task_id": ' + b"1" * 5000 + b"}", "not valid JSON"),
        (b'{"mcpfleet": "sites-please"}', '"mcpfleet" must be an object'),
        (b'{"mcpfleet": ["sites"]}', '"mcpfleet" must be an object'),
    ],
)
def test_a_broken_meta_json_is_a_task_error(tmp_path: Path, content: bytes, said: str) -> None:
    """Before: a list or null meta.json raised AttributeError/TypeError in `tasks list` and `tasks validate`, a
    string "mcpfleet" value a TypeError in the playwright service (and a crash loop in the operator)."""
    task = tiny(tmp_path)
    (task.path / "meta.json").write_bytes(content)
    with pytest.raises(TaskError, match=said):
        _ = task.meta
    with pytest.raises(PackCheckError, match=said):
        check_selected([task])


def test_a_mcpfleet_object_in_meta_json_is_kept(tmp_path: Path) -> None:
    task = tiny(tmp_path)
    meta = json.loads((task.path / "meta.json").read_text())
    (task.path / "meta.json").write_text(json.dumps({**meta, "mcpfleet": {}}))
    assert task.meta["mcpfleet"] == {}
    check_selected([task])


@pytest.mark.parametrize(
    ("service", "given", "said"),
    [
        ("filesystem", {"isolation": "cluster"}, 'unknown key "isolation" (known: none)'),
        ("postgres", {"isolation": "cluster_owner"}, '{"isolation": "cluster_owner"} is not one of "database", '),
        ("postgres", {"isolaton": "cluster"}, 'unknown key "isolaton" (known: "isolation")'),
        ("playwright", {"site": ["shop"]}, 'unknown key "site" (known: "sites")'),
    ],
)
def test_a_misspelt_mcpfleet_key_or_value_is_refused(tmp_path: Path, service: str, given: dict, said: str) -> None:
    """Before: a misspelt isolation put a role-managing task on the shared cluster, a misspelt "sites" started no
    site and left the browser unconfined, each without a word. Refused by the run's preflight (check_selected)
    and by `tasks validate` (check_task), naming the task, the key and what it takes."""
    task = tiny(tmp_path)
    moved = task.path.parents[3] / service / "standard" / "tiny" / task.name
    if moved != task.path:
        moved.parent.mkdir(parents=True)
        task.path.rename(moved)
    meta = json.loads((moved / "meta.json").read_text())
    (moved / "meta.json").write_text(json.dumps({**meta, "mcp": [service], "mcpfleet": given}))
    [task] = [t for t in discover(task.path.parents[3]) if t.service == service]
    with pytest.raises(PackCheckError, match=re.escape(said)):
        check_selected([task])
    assert any(said in p for p in check_task(task)), check_task(task)


def test_a_description_that_is_not_utf8_is_refused_before_the_run(tmp_path: Path) -> None:
    """Before: `validate` said valid; the run died in the scripted model server with a traceback."""
    task = tiny(tmp_path)
    (task.path / "description.md").write_bytes(b"Move the \xff file.\n")
    with pytest.raises(TaskError, match="description.md: not UTF-8"):
        _ = task.description
    with pytest.raises(PackCheckError, match="description.md: not UTF-8"):
        check_selected([task])


def test_tasks_list_and_validate_report_broken_task_files_without_a_traceback(tmp_path: Path) -> None:
    root = make_tiny_pack(tmp_path / "pack", tasks=3)
    d = root / "filesystem" / "standard" / "tiny"
    (d / "move_todo_1" / "meta.json").write_text("[]")
    (d / "move_todo_2" / "description.md").write_bytes(b"\xff\xfe bad\n")
    listed = cli("tasks", "list", str(root), cwd=tmp_path)
    assert listed.returncode == 0 and "Traceback" not in listed.stdout + listed.stderr, listed.stderr
    assert "move_todo_1/meta.json: must hold a JSON object" in flat(listed.stderr)
    assert "move_todo_2/description.md: not UTF-8" in flat(listed.stderr)
    assert "move_todo_0" in listed.stdout
    checked = cli("tasks", "validate", str(d / "move_todo_1"), cwd=tmp_path)
    assert checked.returncode == 1 and "Traceback" not in checked.stdout + checked.stderr
    assert "must hold a JSON object" in flat(checked.stdout)
    checked = cli("tasks", "validate", str(d / "move_todo_2"), cwd=tmp_path)
    assert checked.returncode == 1 and "Traceback" not in checked.stdout + checked.stderr
    assert "not UTF-8" in flat(checked.stdout)


def test_an_unselected_broken_description_stops_the_scripted_server_in_one_line(tmp_path: Path) -> None:
    """The scripted model server reads every task of the pack: its start failure is one line, not a traceback."""
    root = make_tiny_pack(tmp_path / "pack", tasks=2)
    bad = root / "filesystem" / "standard" / "tiny" / "move_todo_1" / "description.md"
    bad.write_bytes(b"\xff\xfe bad\n")
    spec = {"models": [SCRIPTED], "tasks": {"path": "pack", "include": ["*/move_todo_0"]}, "retries": {"limit": 0}}
    out = cli("run", str(write_run(tmp_path, spec)), "--no-progress", cwd=tmp_path)
    assert_clean_error(out, "scripted model server", "move_todo_1/description.md: not UTF-8", "tasks validate")
    assert len(out.stderr.strip().splitlines()) <= 3, out.stderr


# --- finding 7 and 7b: concurrency, long names ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1"])
def test_tasks_validate_refuses_a_concurrency_below_one(tmp_path: Path, value: str) -> None:
    """Before: 0 hung for ever (Semaphore(0)); -1 was a ValueError traceback."""
    root = make_tiny_pack(tmp_path / "pack")
    start = time.monotonic()
    out = cli("tasks", "validate", str(root), "--concurrency", value, cwd=tmp_path)
    assert time.monotonic() - start < 60
    assert out.returncode == 2 and "Traceback" not in out.stderr and "--concurrency" in out.stderr


@pytest.mark.parametrize(
    ("difficulty", "category", "name", "said"),
    [
        ("standard", "c" * 120, "t", "has 120 characters"),
        ("standard", "c", "t" * 130, "has 130 characters"),
        ("d" * 64, "c" * 64, "t" * 40, "the task id has 181 characters"),
    ],
)
def test_names_too_long_for_a_trial_id_are_refused(
    tmp_path: Path, difficulty: str, category: str, name: str, said: str
) -> None:
    """Before: validate said valid, and no trial folder could be made (File name too long) on every try."""
    root = make_tiny_pack(tmp_path / "pack")
    src = root / "filesystem" / "standard" / "tiny" / "move_todo_0"
    dest = root / "filesystem" / difficulty / category / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    src.rename(dest)
    with pytest.raises(PackCheckError, match=f"{said}.*trial ids, which are file names"):
        check_selected(discover(root))


def test_names_of_ordinary_length_are_fine(tmp_path: Path) -> None:
    root = make_tiny_pack(tmp_path / "pack")
    src = root / "filesystem" / "standard" / "tiny" / "move_todo_0"
    dest = root / "filesystem" / "standard" / ("c" * 64) / ("t" * 64)
    dest.parent.mkdir(parents=True)
    src.rename(dest)
    check_selected(discover(root))


# --- finding 9: state links and times files found by the state check --------------------------------------


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda t: (t.state_dir / "passwd").symlink_to("/etc/passwd"), "outside"),
        (lambda t: (t.state_dir / "v.py").symlink_to(t.verifier), "outside"),
        (lambda t: (t.state_dir / "loop").symlink_to("."), "loop"),
        (lambda t: (t.state_dir / "gone").symlink_to("missing.txt"), "dangling"),
        (lambda t: t.state_times.write_text("{bad"), "not valid JSON"),
        (lambda t: t.state_times.write_text("[]"), "must hold a JSON object"),
        (lambda t: t.state_times.write_text('{"keep.txt": 5}'), "is not a time"),
        (lambda t: t.state_times.write_text('{"keep.txt": "2024-01-01T00:00:00"}'), "no timezone"),
        (lambda t: t.state_times.write_bytes(b'{"keep.txt": "\xff"}'), "not valid JSON"),
    ],
)
def test_the_state_check_finds_what_materialise_would_refuse(tmp_path: Path, make: object, said: str) -> None:
    """Before: these passed `validate` and the preflight, then every trial was an unscored infra_error."""
    task = tiny(tmp_path)
    make(task)  # type: ignore[operator]
    problems = state_problems(task)
    assert len(problems) == 1 and said in problems[0] and problems[0].startswith(task.id), problems
    with pytest.raises(TaskError, match=said):
        get_service("filesystem").materialise(task, tmp_path / "trial")


def test_load_times_is_type_checked(tmp_path: Path) -> None:
    path = tmp_path / "c.times.json"
    path.write_text('{"a": ["2024-01-01T00:00:00Z"]}')
    with pytest.raises(TaskError, match="is not a time"):
        load_times(path)


def test_validate_refuses_a_state_link_out_of_the_state(tmp_path: Path) -> None:
    make_tiny_pack(tmp_path / "pack")
    (tmp_path / "pack" / "filesystem" / "states" / "tiny" / "passwd").symlink_to("/etc/passwd")
    out = cli("validate", str(write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})), cwd=tmp_path)
    assert_clean_error(out, "tiny/passwd: symbolic link to /etc/passwd", "self-contained")


def test_the_bundled_suite_states_pass_the_state_check() -> None:
    tasks = [t for t in discover(REPO / "tasks") if t.service == "filesystem"]
    assert tasks
    assert [p for t in tasks for p in state_problems(t)] == []
    check_selected(discover(REPO / "tasks"))


# --- finding 14: CLI input ------------------------------------------------------------------------------------


def test_a_malformed_mcpfleet_trial_is_one_line(tmp_path: Path) -> None:
    out = cli("trial", cwd=tmp_path, env={"MCPFLEET_TRIAL": "{bad"})
    assert_clean_error(out, "MCPFLEET_TRIAL: not a trial")


def test_validate_reports_an_unreachable_s3_pack_in_one_line(tmp_path: Path) -> None:
    spec = {"models": [SCRIPTED], "tasks": {"path": "s3://bucket/pack", "endpointUrl": "http://127.0.0.1:9"}}
    env = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_MAX_ATTEMPTS": "1"}
    out = cli("validate", str(write_run(tmp_path, spec)), cwd=tmp_path, env=env)
    assert_clean_error(out, "s3://bucket/pack")


def test_discover_turns_an_unreadable_folder_into_a_task_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tiny_pack(tmp_path / "pack")

    def broken_glob(self: Path, pattern: str) -> object:
        raise FileNotFoundError(2, "No such file or directory", "/proc/123/task")

    monkeypatch.setattr(Path, "glob", broken_glob)
    with pytest.raises(TaskError, match="cannot be read"):
        discover(root)


# --- review leftovers: task files' sizes, oracles a run replays, scripted typos -------------------------------


def test_a_description_over_the_cap_is_refused_before_the_run(tmp_path: Path) -> None:
    """Before: any size was read whole and sent to the model with every call (a 300 KB one: ~75k tokens a call)."""
    task = tiny(tmp_path)
    (task.path / "description.md").write_text("Move the todo file. " * 16_000)  # 320 KB
    with pytest.raises(PackCheckError, match=r"description.md: larger than 256 KiB"):
        check_selected([task])


def test_a_sparse_meta_json_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    task = tiny(tmp_path)
    with open(task.path / "meta.json", "r+b") as f:
        f.truncate(1 << 30)  # 1 GiB apparent, no blocks
    with pytest.raises(PackCheckError, match=r"meta.json: larger than 16,384 KiB"):
        check_selected([task])


def broken_oracle_run(tmp_path: Path, **spec: object) -> Path:
    root = make_tiny_pack(tmp_path / "pack", tasks=3)
    tiny_dir = root / "filesystem" / "standard" / "tiny"
    (tiny_dir / "move_todo_1" / "oracle.json").write_text('{"steps": "move it"}')
    (tiny_dir / "move_todo_2" / "oracle.json").unlink()
    return write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}, **spec})


def test_a_run_replaying_oracles_refuses_tasks_without_a_usable_one(tmp_path: Path) -> None:
    """Before: `validate` said valid; each such trial failed and read as the task failing, not the pack."""
    out = cli("validate", str(broken_oracle_run(tmp_path)), cwd=tmp_path)
    assert_clean_error(out, "replays oracle solutions, and 2 selected tasks have none", "move_todo_1/oracle.json")
    assert "move_todo_2: no oracle.json" in flat(out.stderr), out.stderr
    out = cli("run", str(broken_oracle_run(tmp_path / "run")), "--no-progress", cwd=tmp_path / "run")
    assert_clean_error(out, "replays oracle solutions")
    assert not (tmp_path / "run" / "runs").exists(), "a trial ran"


def test_the_oracle_agent_needs_them_too_and_other_models_do_not(tmp_path: Path) -> None:
    noop = {"name": "idle", "model": "scripted/noop"}
    out = cli("validate", str(broken_oracle_run(tmp_path, models=[noop], agent="oracle")), cwd=tmp_path)
    assert_clean_error(out, "replays oracle solutions")
    out = cli("validate", str(broken_oracle_run(tmp_path / "noop", models=[noop])), cwd=tmp_path / "noop")
    assert out.returncode == 0, out.stderr
    assert "valid; 1 model x 3 tasks" in flat(out.stdout), out.stdout


def test_a_scripted_model_the_server_would_refuse_is_refused_up_front(tmp_path: Path) -> None:
    """Before: valid; every trial's first call got a 404 and the run scored the model 0 on llm_api_error."""
    make_tiny_pack(tmp_path / "pack")
    models = [{"name": "o", "model": "scripted/orcale"}, {"name": "n", "model": "scripted/noop?latnecy=1"}]
    out = cli("validate", str(write_run(tmp_path, {"models": models, "tasks": {"path": "pack"}})), cwd=tmp_path)
    assert_clean_error(out, "spec.models[0].model: unknown scripted model 'orcale'", "spec.models[1].model: ")
    assert "unknown option 'latnecy=1'" in flat(out.stderr), out.stderr


def test_plan_uses_the_selection_preflight_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack is read and its tasks hashed once per run (before: twice, by preflight and by plan)."""
    from mcpfleet.runner.launch.preflight import preflight
    from mcpfleet.runner.plan import expand as plan_module
    from mcpfleet.runner.spec.load import load_evalrun

    make_tiny_pack(tmp_path / "pack", tasks=2)
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})
    run = load_evalrun(path)
    tasks = preflight(run, tmp_path, {})
    assert [t.name for t in tasks] == ["move_todo_0", "move_todo_1"]

    def no_second_read(*_: object) -> None:
        raise AssertionError("the pack was read again")

    monkeypatch.setattr(plan_module, "load_selection", no_second_read)
    trials = plan_module.plan(run, tmp_path, tasks)
    assert sorted(t.task_id.rsplit("/", 1)[1] for t in trials) == ["move_todo_0", "move_todo_1"]


def test_validate_refuses_a_sidecar_image_key_that_names_nothing(tmp_path: Path) -> None:
    """Before: the operator refused it (InvalidSpec) while `validate` called the same spec valid. A key may name
    any service this build knows, a pod image a service declares (postgres-db), or a selected task's service."""
    make_tiny_pack(tmp_path / "pack")
    keys = ["filesystem", "playwright", "postgres", "postgres-db", "toolcall", "postgress"]
    pod = {"sidecarImages": dict.fromkeys(keys, "ghcr.io/me/img:1")}
    spec = {"models": [SCRIPTED], "tasks": {"path": "pack"}, "pod": pod}
    out = cli("validate", str(write_run(tmp_path, spec)), cwd=tmp_path)
    assert_clean_error(
        out,
        "spec.pod.sidecarImages.postgress: no service or pod image is named 'postgress' (known: filesystem, "
        "playwright, postgres, postgres-db, toolcall); correct the key or remove it",
    )
    del pod["sidecarImages"]["postgress"]
    out = cli("validate", str(write_run(tmp_path, spec)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr


# --- a second review: JSON nested past the parser, names with odd bytes ------------------------------------------

DEEP = b"[" * 200_000  # 200 KB: Python's JSON parser gives up with a RecursionError, not a ValueError


@pytest.mark.parametrize("name", ["meta.json", "oracle.json", "mutants.json"])
def test_json_nested_too_deeply_is_a_task_error(tmp_path: Path, name: str) -> None:
    """Before: RecursionError tracebacks from `tasks list`, `tasks validate`, `validate` and `run`."""
    task = tiny(tmp_path)
    (task.path / name).write_bytes(DEEP)
    with pytest.raises(TaskError, match=f"{name}: not valid JSON: nested too deeply"):
        _ = {"meta.json": lambda: task.meta, "oracle.json": lambda: task.oracle, "mutants.json": lambda: task.mutants}[
            name
        ]()


def test_times_json_nested_too_deeply_is_a_task_error(tmp_path: Path) -> None:
    path = tmp_path / "c.times.json"
    path.write_bytes(DEEP)
    with pytest.raises(TaskError, match="nested too deeply"):
        load_times(path)


def test_validate_reports_deep_json_in_one_line(tmp_path: Path) -> None:
    root = make_tiny_pack(tmp_path / "pack")
    (root / "filesystem" / "standard" / "tiny" / "move_todo_0" / "meta.json").write_bytes(DEEP)
    out = cli("validate", str(write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})), cwd=tmp_path)
    assert_clean_error(out, "meta.json: not valid JSON: nested too deeply")


def test_a_file_name_that_is_not_utf8_is_hashed_as_its_bytes(tmp_path: Path) -> None:
    """Before: Task.digest encoded names as UTF-8, and a name holding the byte 0xff (a surrogate escape in Python)
    raised UnicodeEncodeError in `validate` and `run` (while `tasks validate` said ok). Two such names differ."""
    task = tiny(tmp_path)
    before = task_digest(task)
    odd = task.path / os.fsdecode(b"notes\xff.txt")
    odd.write_text("x")
    first = task_digest(dataclasses.replace(task))  # a fresh Task: digest is cached per instance
    odd.rename(task.path / os.fsdecode(b"notes\xfe.txt"))
    second = task_digest(dataclasses.replace(task))
    assert len({before, first, second}) == 3
    out = cli("validate", str(write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})), cwd=tmp_path)
    assert out.returncode == 0 and "= 1 trial\n" in out.stdout, (out.stdout, out.stderr)


def test_a_folder_name_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    """Before: NAME_RE's `$` matched before a trailing newline, so a folder `move_todo_0\\n` ran as a second task
    with a newline in its record folder's name."""
    root = make_tiny_pack(tmp_path / "pack")
    tasks = root / "filesystem" / "standard" / "tiny"
    (tasks / "move_todo_0").rename(tasks / "move_todo_0\n")
    [task] = discover(root)
    with pytest.raises(PackCheckError, match=r"'move_todo_0\\n' must match"):
        check_selected([task])


def test_tasks_list_does_not_block_on_a_named_pipe(tmp_path: Path) -> None:
    """Before: `tasks list` opened a FIFO description.md and waited for a writer for ever (and a run's scripted
    server for 30 s, then failed naming no file). Task files are opened without blocking and must be regular."""
    root = make_tiny_pack(tmp_path / "pack", tasks=2)
    fifo = root / "filesystem" / "standard" / "tiny" / "move_todo_1" / "description.md"
    fifo.unlink()
    os.mkfifo(fifo)
    start = time.monotonic()
    out = cli("tasks", "list", str(root), cwd=tmp_path)
    assert out.returncode == 0 and time.monotonic() - start < 60
    assert "move_todo_1/description.md: not a regular file" in flat(out.stderr), out.stderr
    with pytest.raises(TaskError, match="not a regular file"):
        _ = discover(root)[1].description


def test_a_task_folder_over_the_cap_is_refused_before_its_digest_reads_it(tmp_path: Path) -> None:
    """Before: an 8 GiB sparse file in a task folder made `validate` read it whole for the task's digest (40 s,
    and longer for every larger one). A task folder is capped like a state, by apparent size, checked first."""
    task = tiny(tmp_path)
    with open(task.path / "reference.bin", "wb") as f:
        f.truncate(300 * 1024**2)  # sparse: no disk used
    start = time.monotonic()
    with pytest.raises(PackCheckError, match="the task folder holds more than 256 MiB"):
        check_selected([task])
    assert time.monotonic() - start < 5
    assert any("the task folder holds more than 256 MiB" in p for p in check_task(task))  # tasks validate
    (task.path / "reference.bin").unlink()
    for i in range(10_001):
        (task.path / f"n{i}").touch()
    with pytest.raises(PackCheckError, match="or 10,000 files"):
        check_selected([task])


# --- s28 audit: verify.py, blank descriptions, meta.json ids, links in a task folder --------------------------------


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def broken(:\n", r"verify.py: line \d+: invalid syntax"),
        ("return 0\n", r"verify.py: line \d+: 'return' outside function"),  # refused by the compiler, not the parser
        ("  x = 1\n", r"verify.py: line \d+: unexpected indent"),
        ("x = 1\x00\n", "verify.py: source code (string )?cannot contain null bytes"),
    ],
)
def test_a_verify_py_python_cannot_compile_is_refused_before_any_trial(tmp_path: Path, source: str, said: str) -> None:
    """Before: `validate` and `run` took it, and every trial was a verifier_failed scored against the model."""
    task = tiny(tmp_path)
    with task.verifier.open("a") as f:
        f.write(source)
    with pytest.raises(PackCheckError, match=f"{said}.*verifier_failed.*py_compile"):
        check_selected([task])
    assert any(re.search(said, p) for p in check_task(task)), check_task(task)  # tasks validate


@pytest.mark.parametrize(
    "source", ["", "\n\n  \n", "# TODO: write the checks\n#\n", '"""Checks nothing yet."""\n', "pass\n"]
)
def test_a_verify_py_with_no_statement_that_runs_is_refused(tmp_path: Path, source: str) -> None:
    """Before: it exited 0, so the no-op model scored pass@1 1.00 on the task."""
    task = tiny(tmp_path)
    task.verifier.write_text(source)
    with pytest.raises(PackCheckError, match="verify.py: holds no statement that runs.*pass every trial"):
        check_selected([task])
    assert any("holds no statement that runs" in p for p in check_task(task))


def test_a_verify_py_python_runs_is_accepted(tmp_path: Path) -> None:
    """What Python itself runs passes: a coding cookie, a byte order mark, an invalid escape (a SyntaxWarning, which
    the check does not print), a docstring followed by code, and a verifier holding its own reference data."""
    task = tiny(tmp_path)
    body = task.verifier.read_bytes()
    for source in (
        b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\n" + body,
        b"\xef\xbb\xbf" + body,
        b'"""Check the end state."""\nimport re\nPATTERN = re.compile("\\d+")\n' + body,
    ):
        task.verifier.write_bytes(source)
        check_selected([dataclasses.replace(task)])
        assert check_task(dataclasses.replace(task)) == []


def test_the_bundled_and_mcpmark_verifiers_compile(tmp_path: Path) -> None:
    mcpmark = REPO / "tests" / "fixtures" / "mcpmark_pack"
    tasks = discover(REPO / "tasks") + discover(mcpmark, REPO / "tests" / "fixtures" / "mcpmark_states")
    assert len([t for t in tasks if t.verifier.is_file()]) > 5
    check_selected(tasks)


@pytest.mark.parametrize("text", ["  \n\n", "\r\n\t \r\n", "\u00a0\n"])
def test_a_blank_description_is_refused_before_any_trial(tmp_path: Path, text: str) -> None:
    """Before: only `tasks validate` said so; `validate` and `run` scored the trial as the model's premature_stop."""
    task = tiny(tmp_path)
    (task.path / "description.md").write_text(text)
    with pytest.raises(PackCheckError, match="description.md is empty"):
        check_selected([task])
    assert any("description.md is empty" in p for p in check_task(task))


def test_validate_and_run_refuse_a_broken_verifier_in_one_line(tmp_path: Path) -> None:
    root = make_tiny_pack(tmp_path / "pack")
    (root / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py").write_text("def broken(:\n")
    path = write_run(tmp_path, {"models": [SCRIPTED], "tasks": {"path": "pack"}})
    for command in ("validate", "run"):
        out = cli(command, str(path), cwd=tmp_path)
        assert_clean_error(out, "move_todo_0/verify.py: line 1: invalid syntax", "nothing was run")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("value", "kind"), [(None, "null"), (5, "a number"), ("", "a blank string"), ([], "an array")])
@pytest.mark.parametrize("key", ["task_id", "category_id"])
def test_a_meta_json_id_that_is_not_a_string_is_refused(tmp_path: Path, key: str, value: object, kind: str) -> None:
    """Before: `"task_id": null` named the task `None__None` in its records and in the MCPMark export."""
    task = tiny(tmp_path)
    meta = json.loads((task.path / "meta.json").read_text())
    (task.path / "meta.json").write_text(json.dumps({**meta, key: value}))
    folder = task.name if key == "task_id" else task.category
    said = f'meta.json "{key}" must be a non-empty string (MCPMark names the task <category_id>__<task_id>), not {kind}'
    with pytest.raises(PackCheckError, match=re.escape(f'{said}; write "{folder}"')):
        check_selected([task])
    assert [p for p in check_task(task) if key in p] == [
        f'{task.id}: {said}; write "{folder}" (the folder\'s name) or remove the key'
    ]
    assert task.mcpmark_name == "tiny__move_todo_0"  # the folders, as when the key is left out


def test_a_string_id_other_than_the_folder_names_the_task_as_in_mcpmark(tmp_path: Path) -> None:
    """MCPMark's own meta.json files hold string ids, some other than their folder (`ai_data_analyst_easy`): the run
    takes them, names the task by them, and only `tasks validate` points out the difference."""
    task = tiny(tmp_path)
    meta = json.loads((task.path / "meta.json").read_text())
    (task.path / "meta.json").write_text(json.dumps({**meta, "task_id": "move_todo_easy"}))
    check_selected([task])
    assert task.mcpmark_name == "tiny__move_todo_easy"
    assert [p for p in check_task(task) if "task_id" in p] == [
        f"{task.id}: meta.json task_id 'move_todo_easy' differs from folder 'move_todo_0'"
    ]


@pytest.mark.parametrize(
    ("mcp", "said"),
    [
        (
            "filesystem",
            'meta.json mcp must be a list of services (MCPMark\'s form), e.g. ["filesystem"]; got "filesystem"',
        ),
        ({"filesystem": True}, "meta.json mcp must be a list of services"),
        (["postgres"], "meta.json mcp [\"postgres\"] does not list 'filesystem'"),
    ],
    ids=["string", "mapping", "other-service"],
)
def test_a_meta_json_mcp_that_is_no_list_of_the_tasks_service_says_what_to_write(
    tmp_path: Path, mcp: object, said: str
) -> None:
    """Before: `"mcp": "filesystem"` got "meta.json mcp filesystem does not list 'filesystem'", which contradicts
    itself."""
    task = tiny(tmp_path)
    meta = json.loads((task.path / "meta.json").read_text())
    (task.path / "meta.json").write_text(json.dumps({**meta, "mcp": mcp}))
    [problem] = [p for p in check_task(task) if "meta.json mcp" in p]
    assert problem.startswith(f"{task.id}: {said}"), problem


def test_a_link_in_a_task_folder_to_a_host_file_is_refused_before_it_is_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: `validate` took it, the digest hashed the host file (17 s through a link to a 4 GiB sparse file) and
    the link stayed in the folder the verifier runs from; `tasks validate` said ok."""
    task = tiny(tmp_path)
    host = tmp_path / "host.bin"
    with open(host, "wb") as f:
        f.truncate(4 * 1024**3)  # sparse: no disk used
    (task.path / "data.bin").symlink_to(host)
    (task.path / "pw").symlink_to("/etc/passwd")

    def no_digest(*_: object) -> None:
        raise AssertionError("a host file was hashed")

    monkeypatch.setattr("mcpfleet.runner.tasks.digest._hash_file", no_digest)
    start = time.monotonic()
    with pytest.raises(PackCheckError, match=r"move_todo_0/data.bin: symbolic link to .*host.bin, outside the pack"):
        check_selected([task])
    assert time.monotonic() - start < 5
    problems = check_task(task)
    assert len(problems) == 2 and all("self-contained" in p for p in problems), problems
    assert "pw: symbolic link to /etc/passwd, outside the pack" in problems[1]


def test_a_link_out_of_the_pack_inside_a_linked_folder_is_refused(tmp_path: Path) -> None:
    """A folder link within the pack is followed, as a copy of the task folder follows it."""
    task = tiny(tmp_path)
    shared = tmp_path / "pack" / "shared"
    shared.mkdir()
    (shared / "ref.txt").write_text("reference\n")
    (task.path / "shared").symlink_to(shared)
    check_selected([task])
    (shared / "pw").symlink_to("/etc/passwd")
    with pytest.raises(PackCheckError, match=r"move_todo_0/shared/pw: symbolic link to /etc/passwd, outside the pack"):
        check_selected([dataclasses.replace(task)])


def test_the_size_cap_counts_a_link_as_its_target(tmp_path: Path) -> None:
    """Before: the cap counted the link (a few bytes), so a link to a 300 MiB file within the pack passed it."""
    task = tiny(tmp_path)
    big = tmp_path / "pack" / "reference.bin"
    with open(big, "wb") as f:
        f.truncate(300 * 1024**2)  # sparse
    (task.path / "reference.bin").symlink_to(big)
    with pytest.raises(PackCheckError, match="the task folder holds more than 256 MiB"):
        check_selected([task])
    (task.path / "reference.bin").unlink()
    (big.parent / "bulk").mkdir()
    big.rename(big.parent / "bulk" / "reference.bin")
    (task.path / "bulk").symlink_to(big.parent / "bulk")  # a folder link: a copy holds its files
    with pytest.raises(PackCheckError, match="the task folder holds more than 256 MiB"):
        check_selected([task])


@pytest.mark.parametrize(("name", "target"), [("self", "."), ("up", ".."), ("again", "../move_todo_0"), ("me", "me")])
def test_a_looping_link_in_a_task_folder_is_refused(tmp_path: Path, name: str, target: str) -> None:
    """A copy following it would never end (`up -> ..` holds the task folder); `me -> me` cannot be resolved."""
    task = tiny(tmp_path)
    (task.path / name).symlink_to(target)
    said = "cannot be resolved" if name == "me" else "which holds the link itself"
    with pytest.raises(PackCheckError, match=f"move_todo_0/{name}: .*{said}"):
        check_selected([task])
    assert any(said in p for p in check_task(task))


def test_links_within_the_task_folder_and_dangling_ones_are_fine(tmp_path: Path) -> None:
    task = tiny(tmp_path)
    (task.path / "notes").mkdir()
    (task.path / "notes" / "a.txt").write_text("a\n")
    (task.path / "alias").symlink_to("notes")
    (task.path / "b.txt").symlink_to("notes/a.txt")
    (task.path / "gone").symlink_to("missing.txt")  # copies nothing, hashes nothing
    check_selected([task])
    assert check_task(task) == []


def test_a_state_link_that_cannot_be_resolved_is_a_task_error(tmp_path: Path) -> None:
    """Before: `me -> me` in a state raised RuntimeError (Symlink loop) out of the state check: a traceback."""
    task = tiny(tmp_path)
    (task.state_dir / "me").symlink_to("me")
    problems = state_problems(task)
    assert len(problems) == 1 and "cannot be resolved" in problems[0], problems
