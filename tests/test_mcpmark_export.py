"""``mcpfleet export --format mcpmark``: MCPMark's aggregation reads the exported folder and finds the same
pass@1 (mean and std), pass@k and pass^k as mcpfleet's summary.

MCPMark's aggregation script (src/aggregators/aggregate_results.py) is not installable here (it is no
package on any registry this project can reach), so ``mcpmark_aggregate`` below is an INDEPENDENT
RE-IMPLEMENTATION, written for this test from a reading of that script (commit in
runner/spec/mcpmark_protocol.json), not a copy of it. What it does, as the script does:
  - tasks are ``<category>__<task>`` folder names under ``tasks/<service>/<task set>/``;
  - results are read from ``<exp>/<model>__<service>/run-1..k/<category>__<task>/meta.json``;
  - a model counts only when every task has a meta.json in every run and no failed task carries a
    retryable error (rate limits, "agent execution failed", "state duplication error", ...);
  - pass@1 per run = successes / tasks, rounded to 6 places; pass@1 = their mean and population std,
    rounded to 4; pass@k = share of tasks with any success over the k runs, pass^k = with all, rounded to 4.
Left out: the script also insists on results for all five of MCPMark's services before it reports a
model; the per-service numbers compared here are the ones it computes for each service, and the ones its
one-folder aggregator (aggregate_specific_results.py, the command ``mcpfleet export`` prints) computes too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, make_tiny_pack

from mcpfleet.runner.report.export import export_mcpmark, model_folder, service_folder
from mcpfleet.runner.report.scoring import summarize
from mcpfleet.runner.results.records import (
    MCPMarkFacts,
    Timings,
    Totals,
    TrialResult,
    VerifierRecord,
    dumps,
    dumps_mcpmark,
    mcpmark_meta,
    to_mcpmark_messages,
)
from mcpfleet.runner.results.store import LocalStore

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
# MCPMark's RETRYABLE_PATTERNS (src/errors.py) as pinned beside its strings, read from the data file directly
# (tests/test_mcpmark_retryable.py checks them against MCPMark's source).
RETRYABLE = tuple(
    json.loads((REPO / "runner" / "spec" / "mcpmark_protocol.json").read_text())["retryable_patterns"]["patterns"]
)


def discover_task_names(pack: Path, service: str, task_set: str = "standard") -> list[str]:
    root = pack / service / task_set
    return sorted(
        f"{c.name}__{t.name}"
        for c in root.iterdir()
        if c.is_dir() and not c.name.startswith("__")
        for t in c.iterdir()
        if t.is_dir() and not t.name.startswith("__")
    )


def mcpmark_aggregate(exp_dir: Path, all_tasks: dict[str, list[str]], k: int) -> dict[str, dict[str, Any]]:
    """Independent re-implementation of MCPMark's per-service metrics (see the module docstring)."""
    results: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for model_dir in exp_dir.iterdir():
        if not model_dir.is_dir() or "__" not in model_dir.name:
            continue
        model, service = model_dir.name.split("__", 1)
        for n in range(1, k + 1):
            run_dir = model_dir / f"run-{n}"
            if run_dir.is_dir():
                for task_dir in run_dir.iterdir():
                    if task_dir.is_dir() and "__" in task_dir.name and (task_dir / "meta.json").exists():
                        results[model][f"{service}/run-{n}"][task_dir.name] = json.loads(
                            (task_dir / "meta.json").read_text()
                        )
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for model, runs in results.items():
        for service, tasks in all_tasks.items():
            metas = [runs.get(f"{service}/run-{n}", {}) for n in range(1, k + 1)]
            if any(t not in m for m in metas for t in tasks):
                continue  # incomplete
            failed = [m[t]["execution_result"] for m in metas for t in tasks]
            if any(
                not r["success"] and r.get("error_message") and any(p in r["error_message"].lower() for p in RETRYABLE)
                for r in failed
            ):
                continue  # invalid: a retryable error
            rates = [
                round(sum(bool(m[t]["execution_result"]["success"]) for t in tasks) / len(tasks), 6) for m in metas
            ]
            mean = sum(rates) / len(rates)
            std = (sum((r - mean) ** 2 for r in rates) / len(rates)) ** 0.5
            per_task = [[bool(m[t]["execution_result"]["success"]) for m in metas] for t in tasks]
            out[service][model] = {
                "pass@1": {"avg": round(mean, 4), "std": round(std, 4)},
                f"pass@{k}": round(sum(any(s) for s in per_task) / len(tasks), 4),
                f"pass^{k}": round(sum(all(s) for s in per_task) / len(tasks), 4),
            }
    return dict(out)


def assert_same_numbers(rows: list[dict[str, Any]], aggregated: dict[str, dict[str, Any]], k: int) -> None:
    fs = aggregated["filesystem"]
    compared = 0
    for row in rows:
        if row["service"] != "filesystem":
            continue
        theirs = fs[row["mcpmark_model"]] if "mcpmark_model" in row else fs[row["model"]]
        assert theirs["pass@1"] == {"avg": round(row["pass_at_1"], 4), "std": round(row["pass_at_1_std"], 4)}
        assert theirs[f"pass@{k}"] == round(row["pass_at_k"], 4)
        assert theirs[f"pass^{k}"] == round(row["pass_hat_k"], 4)
        compared += 1
    assert compared == len(fs) and compared > 0


# -- a synthetic run with uneven outcomes ----------------------------------------------------------------

PATTERN = {  # model -> task -> passed per attempt 1..3
    "flaky": {"a": [True, False, True], "b": [False, False, False], "c": [True, True, True], "d": [False, True, True]},
    "steady": {"a": [True, True, True], "b": [True, True, True], "c": [False, False, False], "d": [True, True, False]},
}


def write_run(root: Path, pack: Path) -> list[dict[str, Any]]:
    store = LocalStore(root)
    records = []
    for model, tasks in PATTERN.items():
        effort = "high" if model == "steady" else None
        for task, outcomes in tasks.items():
            for attempt, passed in enumerate(outcomes, 1):
                trial_id = f"{model}.filesystem.standard.cat.{task}.{attempt}"
                result = TrialResult(
                    run="synthetic",
                    trial_id=trial_id,
                    spec_hash="h",
                    model=model,
                    litellm_model=f"openai/{model}",
                    service="filesystem",
                    task_id=f"filesystem/standard/cat/{task}",
                    attempt=attempt,
                    agent="mcpmark",
                    passed=passed,
                    failure=None if passed else "verifier_failed",
                    verifier=VerifierRecord(exit_code=0 if passed else 1, stdout="v"),
                    timings=Timings(mcp_start=0.1, agent=1.0, total=2.0),
                    totals=Totals(turns=2, input_tokens=10, output_tokens=5),
                )
                facts = MCPMarkFacts(
                    task_name=f"cat__{task}", timeout=3600, started=1e9, finished=1e9 + 2, turn_count=2, run_model=None,
                    agent_error=None,
                )  # fmt: skip
                params = {"reasoning_effort": effort} if effort else {}
                store.write_files(
                    trial_id,
                    {
                        "meta.json": dumps_mcpmark(mcpmark_meta(result, facts, params)),
                        "messages.json": dumps_mcpmark(to_mcpmark_messages([{"role": "user", "content": task}])),
                    },
                )
                store.commit(trial_id, dumps(result.model_dump(mode="json")))
                records.append(result.model_dump(mode="json"))
                (pack / "filesystem" / "standard" / "cat" / task).mkdir(parents=True, exist_ok=True)
    return records


def test_mcpmarks_aggregation_of_the_export_matches_mcpfleets_summary(tmp_path: Path) -> None:
    pack = tmp_path / "tasks"
    records = write_run(tmp_path / "runs" / "synthetic", pack)
    rows = summarize(records, 3)
    done = export_mcpmark(LocalStore(tmp_path / "runs" / "synthetic"), tmp_path / "results")
    assert done.root == tmp_path / "results" / "synthetic" and done.trials == 24 and done.attempts == 3
    assert done.folders == {"flaky__filesystem", "steady-high__filesystem"}
    meta = json.loads((done.root / "steady-high__filesystem" / "run-2" / "cat__d" / "meta.json").read_text())
    assert meta["execution_result"]["success"] is True and meta["task_name"] == "cat__d"
    aggregated = mcpmark_aggregate(done.root, {"filesystem": discover_task_names(pack, "filesystem")}, 3)
    for row in rows:
        if row["model"] == "steady":
            row["mcpmark_model"] = "steady-high"
    assert_same_numbers(rows, aggregated, 3)
    # the numbers are not trivially equal: runs differ, so std, pass@3 and pass^3 all carry information
    flaky = aggregated["filesystem"]["flaky"]
    assert flaky == {"pass@1": {"avg": 0.5833, "std": 0.1179}, "pass@3": 0.75, "pass^3": 0.25}


def test_folder_names_follow_mcpmarks_evaluator() -> None:
    assert model_folder("gpt-4.1", "default") == "gpt-4-1" and model_folder("o3", "high") == "o3-high"
    assert model_folder("gpt-5", None) == "gpt-5"
    assert service_folder("filesystem", "standard") == "filesystem"
    assert service_folder("filesystem", "easy") == "filesystem-easy"


def test_a_retryable_error_makes_mcpmark_set_the_model_aside(tmp_path: Path) -> None:
    """Infra errors are written as MCPMark words them, so its aggregator treats them as it treats its own."""
    pack = tmp_path / "tasks"
    write_run(tmp_path / "runs" / "synthetic", pack)
    done = export_mcpmark(LocalStore(tmp_path / "runs" / "synthetic"), tmp_path / "results")
    meta_path = done.root / "flaky__filesystem" / "run-1" / "cat__b" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["execution_result"]["error_message"] = "State Duplication Error"
    meta_path.write_text(json.dumps(meta))
    aggregated = mcpmark_aggregate(done.root, {"filesystem": discover_task_names(pack, "filesystem")}, 3)
    assert set(aggregated["filesystem"]) == {"steady-high"}


def test_unscored_trials_are_exported_with_a_note_that_the_numbers_differ(tmp_path: Path) -> None:
    """MCPMark has no unscored outcome: its aggregators count an exported infra or provider error as a failure,
    which mcpfleet's summary leaves out. The export says so, naming how many and which kinds."""
    pack, root = tmp_path / "tasks", tmp_path / "runs" / "synthetic"
    write_run(root, pack)
    for trial_id, kind in (
        ("flaky.filesystem.standard.cat.b.2", "provider_error"),
        ("steady.filesystem.standard.cat.c.1", "infra_error"),
    ):
        path = root / "trials" / trial_id / "result.json"
        rec = json.loads(path.read_text())
        path.write_text(json.dumps(rec | {"failure": kind}))
    done = export_mcpmark(LocalStore(root), tmp_path / "results")
    assert done.trials == 24 and done.unscored == {"infra_error": 1, "provider_error": 1}
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run(
        [str(MCPFLEET), "export", str(root), str(tmp_path / "again")], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "note: 2 trials mcpfleet does not score (1 infra_error, 1 provider_error)" in text, out.stdout
    assert "count them as failures" in text
    write_run(tmp_path / "runs" / "clean", tmp_path / "t2")
    assert export_mcpmark(LocalStore(tmp_path / "runs" / "clean"), tmp_path / "r2").unscored == {}


# -- end to end: mcpfleet run, then mcpfleet export -----------------------------------------------------


def test_run_then_export_from_the_command_line(tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    (tmp_path / "specs").mkdir()
    spec_path = tmp_path / "specs" / "e2e.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "mcpfleet.io/v1alpha1",
                "kind": "EvalRun",
                "metadata": {"name": "e2e"},
                "spec": {
                    "models": [
                        {"name": "oracle", "model": "scripted/oracle"},
                        {"name": "idle", "model": "scripted/noop"},
                    ],
                    "tasks": {"path": str(pack)},
                    "attempts": 2,
                    "concurrency": {"total": 2},
                    "output": {"uri": "../runs"},  # relative to the spec's folder: printed normalised
                },
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    run = subprocess.run(
        [str(MCPFLEET), "run", str(spec_path), "--no-progress"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.stderr
    assert "records: runs/e2e/trials   summary: runs/e2e/summary.json" in run.stdout and ".." not in run.stdout
    header = next(line for line in run.stdout.splitlines() if "pass@1" in line)
    assert "pass@2" in header and "pass^2" in header and "k=2" in run.stdout

    out = subprocess.run(
        [str(MCPFLEET), "export", "--format", "mcpmark", "runs/e2e", "results"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "exported 8 trials of idle__filesystem, oracle__filesystem to results/e2e" in out.stdout
    # The printed commands are MCPMark's one-folder aggregator, one per folder written (its whole-experiment one
    # reports a model only with all five services).
    for folder in ("idle__filesystem", "oracle__filesystem"):
        assert f"aggregate_specific_results --result-dir results/e2e/{folder} --k 2" in out.stdout
    assert "--exp-name" not in out.stdout
    root = tmp_path / "results" / "e2e"
    assert sorted(p.name for p in (root / "oracle__filesystem" / "run-2").iterdir()) == [
        "tiny__move_todo_0",
        "tiny__move_todo_1",
    ]
    trial = root / "oracle__filesystem" / "run-1" / "tiny__move_todo_0"
    assert json.loads((trial / "messages.json").read_text())[-1]["content"][0]["text"] == "Done."
    summary = json.loads((tmp_path / "runs" / "e2e" / "summary.json").read_text())
    aggregated = mcpmark_aggregate(root, {"filesystem": discover_task_names(pack, "filesystem")}, 2)
    assert_same_numbers(summary["rows"], aggregated, 2)
    assert aggregated["filesystem"]["oracle"]["pass^2"] == 1.0 and aggregated["filesystem"]["idle"]["pass@2"] == 0.0


def test_export_stays_inside_dest_and_ships_no_stale_or_damaged_meta(tmp_path: Path) -> None:
    """meta.json is a file anyone (or a failed try) may have left: a task_name or model_name that would leave
    DEST, a truncated file, or one saying ``success: true`` beside a record that scored nothing (an operator's
    infra record after the pod's commit failed) is rebuilt from the record; a run name '..' is refused."""
    import pytest

    from mcpfleet.runner.report.export import ExportError

    pack, root = tmp_path / "tasks", tmp_path / "runs" / "synthetic"
    write_run(root, pack)
    trials = root / "trials"
    hostile, cut, stale = "flaky.filesystem.standard.cat.a.1", "flaky.filesystem.standard.cat.b.1", ""
    meta = json.loads((trials / hostile / "meta.json").read_text())
    (trials / hostile / "meta.json").write_text(json.dumps(meta | {"task_name": "../../../../escaped"}))
    (trials / cut / "meta.json").write_text((trials / cut / "meta.json").read_text()[:40])
    for d in sorted(trials.iterdir()):
        rec = json.loads((d / "result.json").read_text())
        if rec["passed"] and not stale and d.name not in (hostile, cut):
            stale = d.name
            (d / "result.json").write_text(json.dumps(rec | {"passed": False, "failure": "infra_error"}))
    dest = tmp_path / "dest" / "inner"
    done = export_mcpmark(LocalStore(root), dest)
    outside = [
        p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(root) and not p.is_relative_to(pack)
    ]
    assert outside and all(p.is_relative_to(dest) for p in outside), outside
    assert done.trials == 24 and done.rebuilt == 3
    assert (done.root / "flaky__filesystem" / "run-1" / "cat__a" / "meta.json").is_file()
    _, _, _, _, task, attempt = stale.split(".")
    folder = "steady-high__filesystem" if stale.startswith("steady") else "flaky__filesystem"
    shipped = json.loads((done.root / folder / f"run-{attempt}" / f"cat__{task}" / "meta.json").read_text())
    assert shipped["execution_result"]["success"] is False  # as the record says, not as the failed try wrote
    (root / "summary.json").write_text(json.dumps({"run": ".."}))
    with pytest.raises(ExportError, match="cannot be an experiment folder name"):
        export_mcpmark(LocalStore(root), tmp_path / "dest2")


def test_a_rebuilt_meta_says_the_runs_own_timeout(tmp_path: Path) -> None:
    """meta.json rebuilt from an old record carries the run's spec.limits.timeoutSeconds from run.json, as the
    trial's own meta.json would; 3600 (the default) when run.json is missing or does not say."""
    pack, root = tmp_path / "tasks", tmp_path / "runs" / "synthetic"
    write_run(root, pack)
    for meta in (root / "trials").glob("*/meta.json"):
        meta.unlink()

    def timeouts(dest: Path) -> set[object]:
        done = export_mcpmark(LocalStore(root), dest)
        assert done.rebuilt == done.trials == 24
        return {json.loads(m.read_text())["timeout"] for m in done.root.rglob("meta.json")}

    assert timeouts(tmp_path / "d1") == {3600}
    evalrun = {"spec": {"limits": {"timeoutSeconds": 900}}}
    (root / "run.json").write_text(json.dumps({"run": "synthetic", "evalrun": evalrun}))
    assert timeouts(tmp_path / "d2") == {900}
    (root / "run.json").write_text(json.dumps({"evalrun": {"spec": {"limits": {"timeoutSeconds": "soon"}}}}))
    assert timeouts(tmp_path / "d3") == {3600}


def test_a_narrowed_run_exports_and_reports_only_the_trials_its_summary_counts(tmp_path: Path) -> None:
    """After `tasks.include` is narrowed and the run resumed, the dropped task's records stay in the folder (a
    run's records are never deleted) but summary.json no longer counts them, so neither may the export (MCPMark's
    aggregator would count them) nor the report. Before, both filtered by model and attempt only."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    spec_path = tmp_path / "narrow.yaml"

    def run(include: list[str]) -> None:
        spec = {"models": [{"name": "oracle", "model": "scripted/oracle"}], "tasks": {"path": str(pack)}}
        spec["tasks"]["include"] = include  # type: ignore[index]
        body = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "narrow"}, "spec": spec}
        spec_path.write_text(yaml.safe_dump(body))
        done = subprocess.run(
            [str(MCPFLEET), "run", str(spec_path), "--no-progress"], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr

    run([])
    run(["*/move_todo_0"])
    root = tmp_path / "runs" / "narrow"
    assert len(list(root.glob("trials/*/result.json"))) == 2
    summary = json.loads((root / "summary.json").read_text())
    assert (summary["trials_planned"], summary["rows"][0]["trials"]) == (1, 1)

    done = export_mcpmark(LocalStore(root), tmp_path / "results")
    assert done.trials == 1
    assert [p.name for p in (done.root / "oracle__filesystem" / "run-1").iterdir()] == ["tiny__move_todo_0"]
    report = subprocess.run(
        [str(MCPFLEET), "report", str(root), "--output", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert report.returncode == 0, report.stderr
    assert "1 record(s) of trials no longer planned are left out" in " ".join(report.stdout.split())


def test_an_unfinished_run_is_exported_with_a_note_that_mcpmark_counts_missing_trials_as_failures(
    tmp_path: Path,
) -> None:
    """The s29 parity audit: MCPMark's aggregate_specific_results divides each run folder's passes by every task
    of the export, so a task without a record in one run counts as a failure there; mcpfleet's summary counts
    only recorded trials. An unfinished run's export said nothing of the difference."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    spec = {"models": [{"name": "oracle", "model": "scripted/oracle"}], "tasks": {"path": str(pack)}}
    body = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "half"}, "spec": spec}
    (tmp_path / "half.yaml").write_text(yaml.safe_dump(body))
    done = subprocess.run(
        [str(MCPFLEET), "run", str(tmp_path / "half.yaml"), "--no-progress"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    root = tmp_path / "runs" / "half"
    assert export_mcpmark(LocalStore(root), tmp_path / "complete").missing == 0
    shutil.rmtree(sorted((root / "trials").iterdir())[0])  # one planned trial without a record
    assert export_mcpmark(LocalStore(root), tmp_path / "r1").missing == 1
    out = subprocess.run(
        [str(MCPFLEET), "export", str(root), str(tmp_path / "r2")], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    said = " ".join(out.stdout.split())
    assert "1 planned trial has no record yet" in said and "counts a task missing" in said, said


def test_exporting_again_replaces_the_model_folders_it_writes(tmp_path: Path) -> None:
    """An earlier export's task folders (a task since dropped, another run under the same --exp-name) must not
    stay beside this one's: MCPMark's aggregators read every task folder they find, and would report numbers
    mcpfleet's summary does not. The experiment's other model folders are left alone."""
    root = tmp_path / "runs" / "synthetic"
    write_run(root, tmp_path / "tasks")
    first = export_mcpmark(LocalStore(root), tmp_path / "results")
    stale = first.root / "flaky__filesystem" / "run-1" / "cat__dropped"
    stale.mkdir()
    (stale / "meta.json").write_text(json.dumps({"execution_result": {"success": False}}))
    other = first.root / "someone-else__filesystem" / "run-1" / "cat__a"
    other.mkdir(parents=True)
    (other / "meta.json").write_text("{}")
    again = export_mcpmark(LocalStore(root), tmp_path / "results")
    assert again.trials == 24 and not stale.exists() and (other / "meta.json").read_text() == "{}"
    assert sorted(p.name for p in again.root.iterdir()) == [
        "flaky__filesystem",
        "someone-else__filesystem",
        "steady-high__filesystem",
    ]  # nothing staged or replaced is left behind
    assert len(list(again.root.glob("flaky__filesystem/run-*/*/meta.json"))) == 12


def test_two_models_with_one_mcpmark_folder_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Model 'steady' at reasoning effort high and a model named 'steady-high' share MCPMark's folder name: the
    export names the two models and writes nothing (before, it stopped half-way and blamed the task ids, leaving
    one model's result filed under the other's folder)."""
    import pytest

    from mcpfleet.runner.report.export import ExportError

    root = tmp_path / "runs" / "synthetic"
    write_run(root, tmp_path / "tasks")
    source = root / "trials" / "steady.filesystem.standard.cat.a.1"
    twin = root / "trials" / "steady-high.filesystem.standard.cat.a.1"
    twin.mkdir()
    rec = json.loads((source / "result.json").read_text())
    (twin / "result.json").write_text(json.dumps(rec | {"trial_id": twin.name, "model": "steady-high"}))
    meta = json.loads((source / "meta.json").read_text())
    (twin / "meta.json").write_text(json.dumps(meta | {"model_name": "steady-high", "reasoning_effort": "default"}))
    (twin / "messages.json").write_text("[]")
    dest = tmp_path / "results"
    with pytest.raises(ExportError) as refused:
        export_mcpmark(LocalStore(root), dest)
    assert "models 'steady' (reasoning effort high) and 'steady-high' both map to MCPMark's model folder " in str(
        refused.value
    )
    assert not [p for p in dest.rglob("*") if p.is_file()]


def test_a_single_attempt_export_warns_of_mcpmarks_k1_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MCPMark's aggregate_specific_results writes summary.json and then fails printing it at --k 1 (its
    "pass@1" is a dict there); the export's hint for a single-attempt run says so."""
    import sys

    from typer.testing import CliRunner

    from mcpfleet.runner.cli.app import app

    monkeypatch.setattr(sys.modules[__name__], "PATTERN", {"steady": {"a": [True], "b": [False]}})
    write_run(tmp_path / "runs" / "synthetic", tmp_path / "tasks")
    out = CliRunner().invoke(app, ["export", str(tmp_path / "runs" / "synthetic"), str(tmp_path / "results")])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "--k 1" in text and "fails printing it: read that file" in text


def test_an_export_into_or_over_the_run_folder_is_refused(tmp_path: Path) -> None:
    """DEST inside the run folder, DEST/<exp> being the run folder, or a ``<model>__<service>`` folder (replaced
    whole) that holds the run: all refused before anything is written, the run's files unchanged."""
    from mcpfleet.runner.report.export import ExportError

    root = tmp_path / "runs" / "synthetic"
    write_run(root, tmp_path / "tasks")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for dest, exp in [(root, None), (root / "trials", "x"), (tmp_path / "runs", None), (root / "..", "synthetic")]:
        with pytest.raises(ExportError, match=r"would be written in the run folder .*; export to a folder outside"):
            export_mcpmark(LocalStore(root), dest, exp)
    moved = tmp_path / "results" / "e" / "flaky__filesystem"  # a copy of the run named like an export folder
    moved.parent.mkdir(parents=True)
    root.rename(moved)
    with pytest.raises(ExportError, match="would be written over the run folder"):
        export_mcpmark(LocalStore(moved), tmp_path / "results", "e")
    assert {p.relative_to(moved): p.read_bytes() for p in moved.rglob("*") if p.is_file()} == {
        p.relative_to(root): b for p, b in before.items()
    }
    done = export_mcpmark(LocalStore(moved), tmp_path / "elsewhere")
    assert done.trials == len(before) // 3
