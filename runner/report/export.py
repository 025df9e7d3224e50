"""``mcpfleet export --format mcpmark``: a run's records in MCPMark's results layout, for MCPMark's tools.

MCPMark's evaluator writes ``<results>/<exp>/<model>__<service>/run-N/<category>__<task>/`` with
``meta.json`` and ``messages.json``, and its aggregators read them there: ``aggregate_specific_results
--result-dir results/<exp>/<model>__<service>`` one folder (pass@1 per run-N, pass@k and pass^k per task over
run-1..k); ``aggregate_results --exp-name <exp>`` the whole experiment, but it reports a model only once it
has results for all five of MCPMark's services. The export
puts attempt N of every recorded trial in run-N, under MCPMark's model folder name (dots as dashes, the
reasoning effort appended unless "default") and service folder (``<service>-<difficulty>`` for a suite
other than standard), with the meta.json and messages.json the trial wrote (already MCPMark's format).
Each ``<model>__<service>`` folder it writes is replaced whole (written beside it, then swapped in), so an
earlier export's task folders never stay to be counted; the experiment's other folders are left alone.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.runner._util.filemodes import folder_mode
from mcpfleet.runner._util.overlap import inside, resolved
from mcpfleet.runner.report.summary import planned as planned_trials
from mcpfleet.runner.report.summary import still_planned
from mcpfleet.runner.results.outcome import is_scored
from mcpfleet.runner.results.records import MCPMarkFacts, TrialResult, dumps_mcpmark, epoch_seconds, mcpmark_meta
from mcpfleet.runner.results.store import LocalStore, ResultStore
from mcpfleet.runner.spec.evalrun import Limits


class ExportError(ValueError):
    """The run cannot be exported as asked; the message says why."""


@dataclass
class Exported:
    root: Path  # <dest>/<exp>
    trials: int = 0
    attempts: int = 0
    folders: set[str] = field(default_factory=set)  # <model>__<service>
    rebuilt: int = 0  # trials whose meta.json predates MCPMark's format and was rebuilt from result.json
    # Trials mcpfleet does not score (infra, provider, config errors) by kind: exported as MCPMark records them
    # (success false), so MCPMark's aggregators count them as failures where mcpfleet's summary leaves them out.
    unscored: dict[str, int] = field(default_factory=dict)
    # Planned trials (plan.json) without a record: MCPMark's aggregate_specific_results counts a task missing from
    # a run folder as a failure (its pass@1 divides by every task of the export), mcpfleet's summary does not.
    missing: int = 0


def model_folder(model_name: str, reasoning_effort: str | None) -> str:
    """MCPMark's model slug: dots become dashes, a reasoning effort other than 'default' is appended."""
    slug = model_name.replace(".", "-")
    return slug if reasoning_effort in (None, "default") else f"{slug}-{reasoning_effort}"


def service_folder(service: str, difficulty: str) -> str:
    """MCPMark's service folder: the service, with '-<suite>' for a suite other than standard."""
    return service if difficulty in ("standard", "") else f"{service}-{difficulty}"


def run_timeout(store: ResultStore) -> float:
    """The run's whole-run limit (``spec.limits.timeoutSeconds``) as its run.json records it; MCPMark's and
    mcpfleet's default (3600) when run.json is missing, damaged or silent (an operator's run keeps none)."""
    run_json = store.read_json("run.json")
    value: Any = run_json
    for key in ("evalrun", "spec", "limits", "timeoutSeconds"):
        value = value.get(key) if isinstance(value, dict) else None
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
    return float(value) if ok else float(Limits().timeout_seconds)


def _rebuilt_meta(rec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """meta.json for a trial recorded before mcpfleet wrote MCPMark's exact format."""
    result = TrialResult.model_validate(rec)
    _, _, category, name = result.task_id.split("/")
    infra = result.failure == "infra_error"
    facts = MCPMarkFacts(
        task_name=f"{category}__{name}",
        timeout=timeout,
        started=epoch_seconds(result.started_at) or 0.0,
        finished=epoch_seconds(result.finished_at) or 0.0,
        turn_count=result.totals.turns,
        run_model=result.provider_model,
        agent_error=result.error,
        state_failed=infra and result.verifier.exit_code is None,
        verifier_ran=result.verifier.exit_code is not None or result.verifier.timed_out,
    )
    return mcpmark_meta(result, facts, {})


# One folder name of MCPMark's layout (models, services, <category>__<task>): nothing that leaves DEST.
_SAFE_PART = re.compile(r"[A-Za-z0-9_.@:+=-]{1,255}")


def _stored_meta(raw: bytes | None, rec: dict[str, Any]) -> dict[str, Any] | None:
    """The trial's meta.json when it can be shipped as it is, else None (rebuilt from the record): missing,
    damaged, or left by a try whose record was replaced (an operator's infra record after the pod's commit
    failed leaves that pod's ``success: true`` beside a record that scored nothing)."""
    try:
        meta = json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(meta, dict)
        or "time" not in meta
        or not all(_safe(meta.get(k)) for k in ("task_name", "model_name"))
    ):
        return None  # (names that would leave DEST are taken from the record instead)
    verdict = meta.get("execution_result")
    return meta if isinstance(verdict, dict) and verdict.get("success") is bool(rec.get("passed")) else None


def _record_problem(rec: dict[str, Any]) -> str | None:
    """Why a stored record cannot be exported (a field of the wrong shape), else None."""
    task_id, attempt = rec.get("task_id"), rec.get("attempt")
    if not isinstance(task_id, str) or len(task_id.split("/")) != 4:
        return f"task_id {str(task_id)[:80]!r} is not <service>/<difficulty>/<category>/<task>"
    if isinstance(attempt, bool) or not isinstance(attempt, (int, str)) or not str(attempt).isdigit():
        return f"attempt {str(attempt)[:80]!r} is not a whole number"
    if not all(isinstance(rec.get(k), str) for k in ("trial_id", "model", "service")):
        return "trial_id, model and service must be strings"
    return None


def _clash(other: dict[str, Any], mine: dict[str, Any], folder: str, target: tuple[str, int, str], root: Path) -> str:
    """Why two records cannot both be exported: two models named alike, or two tasks with one MCPMark name."""
    if other["model"] != mine["model"]:
        named = [
            f"'{r['model']}'" + (f" (reasoning effort {r['effort']})" if r["effort"] not in (None, "default") else "")
            for r in (other, mine)
        ]
        return (
            f"models {named[0]} and {named[1]} both map to MCPMark's model folder '{folder}' (its model slug: dots "
            "as dashes, the reasoning effort appended): export each model's run to its own --exp-name, or rename "
            "one model"
        )
    return (
        f"{other['trial_id']} and {mine['trial_id']} both map to {root / folder / f'run-{target[1]}' / target[2]}: "
        "MCPMark names tasks <category_id>__<task_id> from meta.json, and these two share those ids"
    )


def _staging(root: Path, folder: str, dest: Path) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder}.export-", dir=root))
        staging.chmod(folder_mode())  # it becomes <model>__<service>: not mkdtemp's 0700 (filemodes.py)
        return staging
    except OSError as exc:
        raise ExportError(f"DEST {dest}: cannot write {root} ({exc.strerror or exc})") from None


def _swap_in(new: Path, final: Path, dest: Path) -> None:
    """``final`` replaced whole by ``new``: an earlier export's task folders must not stay beside this one's
    (MCPMark's aggregators read every task folder they find)."""
    old = final.with_name(f".{final.name}.replaced-{uuid.uuid4().hex[:8]}")
    try:
        if final.is_symlink() or final.exists():
            final.rename(old)
        new.rename(final)
    except OSError as exc:
        raise ExportError(f"DEST {dest}: cannot replace {final} ({exc.strerror or exc})") from None
    if old.is_symlink() or old.is_file():
        old.unlink()
    elif old.exists():
        shutil.rmtree(old, ignore_errors=True)


def _safe(part: object) -> bool:
    return isinstance(part, str) and bool(_SAFE_PART.fullmatch(part)) and part not in (".", "..")


def _refuse_overlap(store: ResultStore, target: Path, dest: Path, replaced: bool) -> None:
    """Refuse writing ``target`` inside the local run folder being exported (its records must stay the run's
    alone), or, when ``target`` is ``replaced`` whole (a ``<model>__<service>`` folder), a target holding it."""
    if not isinstance(store, LocalStore):
        return  # an S3 run cannot be reached by a local path
    run = resolved(store.root)
    over = replaced and inside(run, target)
    if over or inside(target, run):
        raise ExportError(
            f"DEST {dest}: {target} would be written {'over' if over else 'in'} the run folder {run}; "
            "export to a folder outside it"
        )


def export_mcpmark(store: ResultStore, dest: Path, exp_name: str | None = None) -> Exported:
    """Write the run's finished trials under ``dest/<exp>`` in MCPMark's layout."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"DEST {dest}: is a file; give a folder to export into (it is created if missing)")
    records = list(filter(still_planned(store), store.iter_results()))
    if not records:
        raise ExportError(f"{store.location()}: no finished trial to export")
    for rec in records:  # a damaged record is named, not a traceback half-way through the export
        if problem := _record_problem(rec):
            raise ExportError(f"{store.location()}: trial record {rec.get('trial_id')!r}: {problem}")
    summary = store.read_json("summary.json")  # rewritten from the records: a damaged one is ignored
    summary = summary if isinstance(summary, dict) else {}
    exp = exp_name or summary.get("run") or records[0].get("run")
    if not isinstance(exp, str) or not _safe(exp):
        raise ExportError(f"'{exp}' cannot be an experiment folder name; pass --exp-name")
    out = Exported(root=Path(dest) / exp)
    if (plan := planned_trials(store)) is not None:
        out.missing = len(plan) - len({r["trial_id"] for r in records})
    _refuse_overlap(store, out.root, dest, replaced=False)
    # Every target is planned before anything is written: a clash leaves DEST as it was.
    planned: list[tuple[dict[str, Any], str, str, dict[str, Any], bytes | None]] = []
    seen: dict[tuple[str, int, str], dict[str, Any]] = {}
    timeout = run_timeout(store)  # for meta.json rebuilt from an old record
    for rec in sorted(records, key=lambda r: (r["model"], r["task_id"], int(r["attempt"]))):
        raw_meta = store.read_trial_file(rec["trial_id"], "meta.json")
        meta = _stored_meta(raw_meta, rec)
        if meta is None:
            meta, raw_meta = _rebuilt_meta(rec, timeout), None
            out.rebuilt += 1
        service, difficulty = rec["service"], rec["task_id"].split("/")[1]
        effort = meta.get("reasoning_effort")
        model = model_folder(meta["model_name"], effort)
        if isinstance(rec.get("variant"), str) and rec["variant"]:  # a server variant: a "model" of its own there
            model = f"{model}@{rec['variant']}"
        folder = f"{model}__{service_folder(service, difficulty)}"
        for part in (folder, meta["task_name"]):
            if not _safe(part):
                raise ExportError(f"{rec['trial_id']}: '{part}' cannot be a folder name in MCPMark's layout")
        target = (folder, int(rec["attempt"]), meta["task_name"])
        mine = {"trial_id": rec["trial_id"], "model": rec["model"], "effort": effort}
        if (other := seen.get(target)) is not None:
            raise ExportError(_clash(other, mine, folder, target, out.root))
        seen[target] = mine
        planned.append((rec, folder, meta["task_name"], meta, raw_meta))
    for folder in sorted({p[1] for p in planned}):
        _refuse_overlap(store, out.root / folder, dest, replaced=True)
    staged: dict[str, Path] = {}  # <model>__<service> -> its new contents, swapped in once all are written
    try:
        for rec, folder, task_name, meta, raw_meta in planned:
            if folder not in staged:
                staged[folder] = _staging(out.root, folder, dest)
            task_dir = staged[folder] / f"run-{int(rec['attempt'])}" / task_name
            messages = store.read_trial_file(rec["trial_id"], "messages.json")
            try:
                task_dir.mkdir(parents=True, exist_ok=True)
                (task_dir / "meta.json").write_bytes(raw_meta or dumps_mcpmark(meta))
                (task_dir / "messages.json").write_bytes(messages if messages is not None else dumps_mcpmark([]))
            except OSError as exc:
                shown = out.root / folder / task_dir.relative_to(staged[folder])
                raise ExportError(f"DEST {dest}: cannot write {shown} ({exc.strerror or exc})") from None
            out.trials += 1
            if not is_scored(rec.get("failure")):
                out.unscored[rec["failure"]] = out.unscored.get(rec["failure"], 0) + 1
            out.attempts = max(out.attempts, int(rec["attempt"]))
            out.folders.add(folder)
        for folder, new in sorted(staged.items()):
            _swap_in(new, out.root / folder, dest)
    finally:
        for new in staged.values():
            shutil.rmtree(new, ignore_errors=True)  # gone already once swapped in
    return out
