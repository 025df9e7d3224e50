"""The shipped filesystem suite: every task is well-formed, solvable, not solved by doing nothing nor by any of its
plausible wrong end states (mutants.json), and its verifier checks the whole end state independently of the
timezone."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from conftest import TASKS

from mcpfleet.runner.agent.loop import run_oracle_agent
from mcpfleet.runner.environment.mcp_client import connect_stdio
from mcpfleet.runner.environment.states import DEFAULT_TIME, copy_state, load_times
from mcpfleet.runner.environment.verifier import run_verifier
from mcpfleet.runner.launch.taskcheck import TaskReport, validate
from mcpfleet.runner.services import get_service
from mcpfleet.runner.services.filesystem import FilesystemService
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.tasks.checks import check_task
from mcpfleet.runner.tasks.discovery import discover
from mcpfleet.runner.tasks.materialise import materialise

# The filesystem suite (the PostgreSQL suite's tasks are checked by their own tests and `tasks validate`).
SUITE = [t for t in discover(TASKS) if t.service == "filesystem"]
IDS = [t.id for t in SUITE]


def test_suite_size_and_depth() -> None:
    fs = [t for t in SUITE if t.service == "filesystem"]
    assert len(fs) >= 12
    assert len({t.category for t in fs}) >= 3
    for t in fs:
        words = len(t.description.split())
        assert 200 <= words <= 400, f"{t.id}: {words} words; MCPMark's instructions average ~290"
        assert len(t.oracle) >= 8, f"{t.id}: an oracle of {len(t.oracle)} calls is a toy task"
        assert len(t.verifier.read_text().splitlines()) >= 100, f"{t.id}: verifier too shallow"


@pytest.mark.parametrize("task", SUITE, ids=IDS)
def test_task_folder_is_well_formed(task: Task) -> None:
    assert check_task(task) == []


@pytest.fixture(scope="module")
def suite_reports() -> list[TaskReport]:
    """One ``tasks validate`` run over the whole suite (oracle, no-op and every mutant), shared by the tests below:
    the trials run through taskcheck's own concurrency, so CI pays for each replay once."""
    return asyncio.run(validate(SUITE, TASKS, concurrency=2))


def test_oracle_passes_and_noop_fails_every_task(suite_reports: list[TaskReport]) -> None:
    bad = {r.task.id: r.problems for r in suite_reports if not r.ok}
    assert bad == {}
    assert all(r.oracle_passed and r.noop_failed for r in suite_reports)
    assert not [w for r in suite_reports for w in r.warnings]


def test_every_task_has_plausible_wrong_end_states() -> None:
    fs = [t for t in SUITE if t.service == "filesystem"]
    assert all(t.has_mutants for t in fs), [t.id for t in fs if not t.has_mutants]
    few = {t.id: len(t.mutants) for t in SUITE if t.has_mutants and len(t.mutants) < 2}
    assert few == {}, "every task with mutants.json needs at least two wrong end states"
    for t in SUITE:
        for m in t.mutants:
            assert m.steps or m.answer is not None, f"{t.id}: mutant '{m.name}' changes nothing"


def test_every_mutant_is_rejected_by_its_verifier(suite_reports: list[TaskReport]) -> None:
    accepted = {r.task.id: r.mutants_accepted for r in suite_reports if r.mutants_accepted}
    assert accepted == {}
    for r in suite_reports:
        assert sorted(r.mutants_rejected) == sorted(m.name for m in r.task.mutants), r.task.id


def test_materialised_state_keeps_times_in_utc(tmp_path: Path) -> None:
    task = next(t for t in SUITE if t.state_times.is_file() and load_times(t.state_times))
    times = load_times(task.state_times)
    assert times.pop("*") == DEFAULT_TIME  # bundled states pin every unlisted path: identical on every machine
    copy_state(task.state_dir, tmp_path / "s", task.state_times)
    rel, ts = next(iter(times.items()))
    assert os.stat(tmp_path / "s" / rel).st_mtime == ts
    unlisted = [
        p for p in (tmp_path / "s").rglob("*") if p.is_file() and p.relative_to(tmp_path / "s").as_posix() not in times
    ]
    for p in unlisted:
        assert p.stat().st_mtime == DEFAULT_TIME
    assert os.stat(tmp_path / "s").st_mtime == DEFAULT_TIME


def test_foreign_state_keeps_its_times_and_the_times_file_only_overrides(tmp_path: Path) -> None:
    """As MCPMark's copytree: every file and folder keeps its time; a times file changes only what it lists."""
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "old.txt").write_text("x")
    (src / "a" / "b" / "new.txt").write_text("y")
    stamps = {"old.txt": 1_557_000_000, "a/b/new.txt": 1_700_000_000, "a/b": 1_650_000_000, "a": 1_600_000_000}
    for rel, t in stamps.items():
        os.utime(src / rel, (t, t))
    os.utime(src, (1_500_000_000, 1_500_000_000))

    def mtimes(root: Path) -> dict[str, float]:
        return {rel: os.stat(root / rel).st_mtime for rel in [*stamps, "."]}

    assert copy_state(src, tmp_path / "plain") == 2
    assert mtimes(tmp_path / "plain") == {**stamps, ".": 1_500_000_000}

    times = tmp_path / "src.times.json"
    times.write_text('{"a/b/new.txt": "2023-01-02T03:04:05Z"}')
    copy_state(src, tmp_path / "listed", times)
    assert mtimes(tmp_path / "listed") == {**stamps, "a/b/new.txt": 1_672_628_645, ".": 1_500_000_000}

    times.write_text('{"*": "2025-01-01T00:00:00Z", "a": "2020-01-01T00:00:00Z"}')
    copy_state(src, tmp_path / "pinned", times)
    assert mtimes(tmp_path / "pinned") == {**dict.fromkeys([*stamps, "."], DEFAULT_TIME), "a": 1_577_836_800}


def _digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _filesystem() -> FilesystemService:
    service = get_service("filesystem")
    assert isinstance(service, FilesystemService)
    return service


async def _oracle_end_state(task: Task, dest: Path) -> None:
    materialise(task, dest)
    with tempfile.TemporaryFile() as log:
        async with connect_stdio(_filesystem().server_command(dest), log) as session:
            run = await run_oracle_agent(session, task, str(dest), tool_timeout_s=60)
    assert not [c for c in run.tool_calls if c.is_error]


@pytest.mark.parametrize("task", SUITE, ids=IDS)
async def test_verifier_is_timezone_independent_and_checks_collateral_damage(task: Task, tmp_path: Path) -> None:
    state = tmp_path / "state"
    await _oracle_end_state(task, state)
    env = _filesystem().verifier_env(state)
    for tz in ("UTC", "Pacific/Kiritimati", "America/Los_Angeles"):
        v = await run_verifier(task.verifier, {**env, "TZ": tz}, [], 120)
        assert v.passed, f"{task.id} fails its own oracle under TZ={tz}:\n{v.stdout[-1500:]}{v.stderr[-1500:]}"

    # Collateral damage: change one file the task had no reason to touch -> must fail.
    initial = _digest(task.state_dir)
    final = _digest(state)
    untouched = sorted(
        p for p, h in initial.items() if final.get(p) == h and initial[p] != hashlib.sha256(b"").hexdigest()
    )
    assert untouched, f"{task.id}: the oracle touched every file"
    victim = state / untouched[len(untouched) // 2]
    original = victim.read_bytes()
    victim.write_bytes(original + b"\nedited by mistake\n")
    v = await run_verifier(task.verifier, env, [], 120)
    assert not v.passed, f"{task.id}: verifier accepts damage to {victim.relative_to(state)}"
    victim.write_bytes(original)

    # A stray file anywhere in the working directory is also a wrong end state.
    (state / "scratch_notes.txt").write_text("temporary\n")
    v = await run_verifier(task.verifier, env, [], 120)
    assert not v.passed, f"{task.id}: verifier accepts a stray file"


def test_a_description_saved_with_windows_line_ends_reads_as_mcpmark_reads_it(tmp_path: Path) -> None:
    """MCPMark reads description.md with universal newlines: CRLF (and a lone CR) reach the model as LF."""
    import shutil

    from mcpfleet.runner.agent.conversation import MCPMARK

    task = SUITE[0]
    pack = tmp_path / "pack"
    shutil.copytree(TASKS / task.service, pack / task.service, symlinks=True)
    desc = pack / task.service / task.difficulty / task.category / task.name / "description.md"
    text = desc.read_text()
    assert "\n" in text and "\r" not in text
    desc.write_bytes(text.replace("\n", "\r\n").encode() + b"one more\rline\r\n")
    [copied] = [t for t in discover(pack) if t.id == task.id]
    assert copied.description == text + "one more\nline\n"
    assert "\r" not in str(MCPMARK.opening(copied))
