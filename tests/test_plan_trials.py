"""runner/plan/trials.py: a ``Plan`` computes trial i, its id, hash and index from the expansion's inputs, and gives
exactly what ``expand`` builds (every trial, in order) on plans that vary every factor: models, attempts, task
weights, services with pod params (playwright's sites), sharded toolcall tasks with a judge, server variants."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TASKS

from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.plan.trials import Listed, Plan, lazy_plan
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.tasks.toolcall_pack import make_task

DATA = Path(__file__).parent / "data" / "toolcalls_200.jsonl"


def evalrun(pack: Path, out: Path, **spec: Any) -> Any:
    body = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "lazy"},
        "spec": {"tasks": {"path": str(pack)}, "output": {"uri": str(out)}, **spec},
    }
    return parse_evalrun(body)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Filesystem and playwright tasks (oracles of different lengths: varied weights) and a sharded toolcall task."""
    pack = tmp_path_factory.mktemp("mixed") / "pack"
    shutil.copytree(TASKS / "filesystem", pack / "filesystem")
    shutil.copytree(TASKS / "playwright", pack / "playwright")
    make_task(pack, DATA, "limbic", "set200")
    return pack


def declared_pack(root: Path) -> Path:
    """A declared service (two of the bundled filesystem tasks), for server variants."""
    folder = root / "decl" / "files"
    category = "team_project"
    for name in sorted(p.name for p in (TASKS / "filesystem/standard" / category).iterdir())[:2]:
        shutil.copytree(TASKS / "filesystem/standard" / category / name, folder / "standard" / category / name)
    shutil.copytree(TASKS / "filesystem/states" / category, folder / "states" / category)
    shutil.copy(TASKS / "filesystem/states" / f"{category}.times.json", folder / "states")
    declaration = {
        "server": {"command": "mcp-server-filesystem", "args": ["{state}"]},
        "state": {"kind": "folder"},
        "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
    }
    (folder / "service.yaml").write_text(yaml.safe_dump(declaration))
    return root / "decl"


def same_as_expand(run: Any, base: Path) -> Plan:
    """Every trial of the lazy plan equals expand's, in order; every id maps back to its index."""
    listed = plan(run, base)
    lazy = lazy_plan(run, base)
    assert len(lazy) == len(listed) > 0
    for i, trial in enumerate(listed):
        assert lazy.spec_at(i) == trial, i
        assert lazy.id_at(i) == trial.trial_id and lazy.hash_at(i) == trial.spec_hash
        assert lazy.task_at(i) == trial.task_id and lazy.model_at(i) == trial.model.name
        assert lazy.index(trial.trial_id) == i
        assert lazy[trial.trial_id] == trial
    assert list(lazy.ids) == [t.trial_id for t in listed]
    assert [tuple(p) for p in lazy.planned()] == [(t.trial_id, t.spec_hash) for t in listed]
    assert {(t.service, t.variant) for t in lazy.samples()} == {(t.service, t.variant) for t in listed}
    firsts = list(Listed(listed).firsts())  # every trial's (task, model): the same first places
    assert [p for i, p in enumerate(firsts) if p not in firsts[:i]] == list(dict.fromkeys(lazy.firsts()))
    return lazy


def test_a_lazy_plan_is_expand_trial_for_trial(tmp_path: Path, mixed: Path) -> None:
    pack = mixed
    judge = {"model": "openai/gpt-5-mini", "apiKeySecretRef": {"name": "judge", "key": "token"}}
    run = evalrun(
        pack,
        tmp_path / "out",
        models=[
            {"name": "a", "model": "scripted/oracle"},
            {"name": "b", "model": "openai/gpt-5", "params": {"temperature": 0.2}, "apiBase": "http://x:1/v1"},
            {"name": "c", "model": "scripted/noop"},
        ],
        attempts=3,
        toolcalls={"shardSize": 60, "judge": judge},
        limits={"maxTurns": 7},
    )
    lazy = same_as_expand(run, tmp_path)
    assert {t.shard for t in lazy.values()} >= {0, 1, 2, 3} and any(t.service_params for t in lazy.values())


def test_server_variants_and_attempts_expand_alike(tmp_path: Path) -> None:
    pack = declared_pack(tmp_path)
    servers = [
        {"name": "v1", "service": "files", "command": "mcp-server-filesystem"},
        {"name": "v2", "service": "files", "command": "mcp-server-filesystem", "args": ["--x"]},
    ]
    run = evalrun(
        pack, tmp_path / "out", models=[{"name": "m", "model": "scripted/oracle"}], attempts=4, servers=servers
    )
    lazy = same_as_expand(run, tmp_path)
    assert {t.variant for t in lazy.values()} == {"v1", "v2"}


def test_ids_not_in_the_plan_have_no_index(tmp_path: Path, mixed: Path) -> None:
    pack = mixed
    run = evalrun(pack, tmp_path / "out", models=[{"name": "a", "model": "scripted/oracle"}], attempts=2)
    lazy = lazy_plan(run, tmp_path)
    tid = next(t for t in lazy if ".filesystem." in t)
    rng = random.Random(5)
    known = set(lazy)
    others = [
        tid.rsplit(".", 1)[0] + ".3",  # an attempt past spec.attempts
        tid.rsplit(".", 1)[0] + ".0",
        "z" + tid,  # another model
        tid + ".1",
        tid.replace("filesystem", "postgres"),
        tid[: len(tid) // 2],
        "",
        "a.toolcall.standard.limbic.set200-s9999.1",  # a shard the task does not have
        "a.filesystem@v1" + tid[len("a.filesystem") :],  # a variant the plan does not have
        *(s for s in ("".join(rng.sample(tid, len(tid))) for _ in range(20)) if s not in known),
    ]
    for other in others:
        assert lazy.index(other) is None and other not in lazy and lazy.spec_hash(other) is None, other
    with pytest.raises(KeyError):
        lazy[others[0]]
    with pytest.raises(IndexError):
        lazy.id_at(len(lazy))


def test_listed_trials_answer_as_a_plan(tmp_path: Path, mixed: Path) -> None:
    pack = mixed
    run = evalrun(pack, tmp_path / "out", models=[{"name": "a", "model": "scripted/oracle"}], attempts=2)
    trials = plan(run, tmp_path)
    listed, lazy = Listed(trials), lazy_plan(run, tmp_path)
    assert list(listed) == list(lazy) and list(listed.planned()) == list(lazy.planned())
    assert listed.ids[3] == lazy.ids[3] and listed.ids[-1] == lazy.ids[-1] and listed.ids.index(trials[5].trial_id) == 5
    assert [listed.task_of(t) for t in listed] == [lazy.task_of(t) for t in lazy]
