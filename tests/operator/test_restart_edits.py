"""An operator restart (a crash, a rollout, a peer taking over) gives a stored EvalRun the verdict the operator that
watched it gave: the spec a run was planned with is kept in status.plannedSpec, so an edit the running operator
refused stays refused after a restart (the run goes on as planned, Valid=False naming the fields) instead of being
applied silently (an output edit: finished trials paid twice, good records read as infra errors) or failing the run.
A run whose spec is unchanged but whose tasks changed under it (an operator image with another pack) fails saying
so, not as an edit nobody made. A review found all three; each test plays the sequence with the reconciler."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kopf
import pytest
from conftest import make_tiny_pack
from kubeemu import merge_patch
from test_outcomes import FakeKube, edit, evalrun, reconciler, record, tid_of

from mcpfleet.operator import deletes
from mcpfleet.operator.reconciler import Reconciler
from mcpfleet.runner.results.store import LocalStore


@pytest.fixture(autouse=True)
def prompt_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted tries' pods deleted in the step that counts them (deletes.py batches them for up to 1 s)."""
    monkeypatch.setattr(deletes, "DELETE_EVERY_SECONDS", 0.0)


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "info", lambda *a, **k: None)
    monkeypatch.setattr(kopf, "warn", lambda *a, **k: None)


class StatusKube(FakeKube):
    """Also keeps the status as the API server would: each write merged into the stored one (a JSON merge patch)."""

    def __init__(self) -> None:
        super().__init__()
        self.status: dict[str, Any] = {}

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.status = merge_patch(self.status, json.loads(json.dumps(status)))


def restarted(rec: Reconciler, kube: StatusKube) -> Reconciler:
    """A new operator incarnation: its body is the stored object (the spec as last edited, the status as written)."""
    raw: Any = {k: copy.deepcopy(v) for k, v in dict(rec.body).items() if k != "status"}
    raw["status"] = copy.deepcopy(kube.status)
    kube.pods = [
        {**p, "status": {"phase": "Running"}} for p in kube.created if p["metadata"]["name"] not in kube.deleted
    ]
    return reconciler(kopf.Body(raw), kube)


async def one_done_one_running(tmp_path: Path) -> tuple[Reconciler, StatusKube, str]:
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    kube = StatusKube()
    rec = reconciler(evalrun(pack, tmp_path / "out", 2, concurrency={"total": 1}), kube)
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    [first] = kube.created
    tid = tid_of(first)
    assert rec.store is not None and rec.state is not None
    rec.store.commit(tid, record(rec.state.trials[tid]))  # its runner stored a passing record
    rec.queue.put_nowait(("MODIFIED", {**first, "status": {"phase": "Succeeded"}}))
    await rec.step()
    assert tid in rec.state.done and len(kube.created) == 2  # the second trial is running now
    await rec.write_status(force=True)
    assert kube.status["counts"]["finished"] == 1 and json.loads(kube.status["plannedSpec"]) == rec.body["spec"]
    return rec, kube, tid


async def test_an_output_edit_refused_mid_run_stays_refused_after_a_restart(tmp_path: Path) -> None:
    rec, kube, done = await one_done_one_running(tmp_path)
    original = rec.body["spec"]["output"]["uri"]
    edit(rec, output={"uri": str(tmp_path / "elsewhere")})
    await rec.step()
    assert rec.conditions["Valid"]["reason"] == "ImmutableField"  # refused while this operator watches
    new = restarted(rec, kube)
    assert await new.load()
    valid = new.conditions["Valid"]
    assert valid["status"] == "False" and valid["reason"] == "ImmutableField" and "spec.output" in valid["message"]
    assert new.run is not None and new.run.spec.output.uri == original, "the refused output was applied"
    await new.rebuild()
    assert new.state is not None and done in new.state.done, "the finished trial was forgotten"
    created = len(kube.created)
    await new.step()
    assert [tid_of(p) for p in kube.created[created:]] == [], "a trial ran twice after the restart"
    # The second trial's runner stores its passing record where it was told; the restarted operator reads it there.
    [second] = [p for p in kube.created if tid_of(p) != done]
    rec.store.commit(tid_of(second), record(new.state.trials[tid_of(second)]))  # type: ignore[union-attr]
    new.queue.put_nowait(("MODIFIED", {**second, "status": {"phase": "Succeeded"}}))
    await new.step()
    assert new.state.counts()["passed"] == 2 and new.phase == "Succeeded", new.state.counts()
    assert json.loads(kube.status["plannedSpec"])["output"]["uri"] == original  # still the planned spec


async def test_a_result_edit_refused_mid_run_does_not_fail_the_run_after_a_restart(tmp_path: Path) -> None:
    rec, kube, _ = await one_done_one_running(tmp_path)
    edit(rec, attempts=2)
    await rec.step()
    assert rec.conditions["Valid"]["reason"] == "ImmutableField" and rec.phase == "Running"
    await rec.write_status(force=True)
    deleted = list(kube.deleted)  # the finished trial's pod
    new = restarted(rec, kube)
    assert await new.load(), f"the restarted operator stopped the run: {new.conditions}"
    assert new.phase != "Failed" and kube.deleted == deleted, kube.deleted
    assert (
        new.conditions["Valid"]["reason"] == "ImmutableField" and "spec.attempts" in new.conditions["Valid"]["message"]
    )
    assert new.run is not None and new.run.spec.attempts == 1 and new.state is not None and len(new.state.trials) == 2
    # Reverting the edit clears the condition, as it does for the operator that watched.
    edit(new, attempts=1)
    await new.rebuild()
    await new.step()
    assert new.conditions["Valid"]["status"] == "True", new.conditions["Valid"]


async def test_a_spec_edit_the_operator_accepted_is_kept_by_the_next_one(tmp_path: Path) -> None:
    """The other way round: an edit the running operator applied (more attempts, before any trial ran) is what a
    restarted one plans, with no refusal."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=1)
    kube = StatusKube()
    rec = reconciler(evalrun(pack, tmp_path / "out", 1), kube)
    assert await rec.load()
    await rec.rebuild()
    edit(rec, attempts=3)  # no trial launched yet: accepted
    await rec.step()
    assert rec.conditions["Valid"]["status"] == "True" and rec.state is not None and len(rec.state.trials) == 3
    await rec.write_status(force=True)
    assert json.loads(kube.status["plannedSpec"])["attempts"] == 3
    new = restarted(rec, kube)
    assert await new.load()
    assert new.conditions["Valid"]["status"] == "True" and new.run is not None and new.run.spec.attempts == 3


async def test_an_unedited_run_whose_tasks_changed_fails_saying_so(tmp_path: Path) -> None:
    rec, kube, _ = await one_done_one_running(tmp_path)
    # A new operator image bundling an updated copy of a task (or an s3:// pack updated mid-run): nobody edits the run.
    verify = tmp_path / "pack" / "filesystem" / "standard" / "tiny" / "move_todo_1" / "verify.py"
    verify.write_text(verify.read_text() + "\n# fixed a typo\n")
    new = restarted(rec, kube)
    assert not await new.load()
    failed = new.conditions["Failed"]
    assert new.phase == "Failed" and failed["reason"] == "PlanChanged", failed
    assert "is the one it was planned with" in failed["message"] and "generation" not in failed["message"]
    assert "create a new EvalRun" in failed["message"]


async def test_a_status_without_a_planned_spec_is_guarded_by_the_plan_hash_as_before(tmp_path: Path) -> None:
    """A run planned by an operator that did not write plannedSpec: an edit found after trials ran still fails it
    (its planned spec is unknown: the run cannot go on as it was planned)."""
    rec, kube, _ = await one_done_one_running(tmp_path)
    del kube.status["plannedSpec"]
    edit(rec, attempts=2)
    new = restarted(rec, kube)
    assert not await new.load()
    assert new.phase == "Failed" and new.conditions["Failed"]["reason"] == "ImmutableField"


async def test_an_output_edit_before_any_trial_ran_is_where_the_records_are_read(tmp_path: Path) -> None:
    """Created suspended with a wrong output, fixed (accepted: no trial exists yet), then resumed: the pods store
    their records under the new output, and the operator must read them there. Before, it kept the store it opened
    first, so the passing record was "missing": an infra error written to the old output, the trial paid again."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=1)
    kube = StatusKube()
    rec = reconciler(evalrun(pack, tmp_path / "outA", 1, suspend=True), kube)
    assert await rec.load()
    await rec.rebuild()
    await rec.step()
    assert not kube.created
    edit(rec, output={"uri": str(tmp_path / "outB")})
    await rec.step()
    assert rec.conditions["Valid"]["status"] == "True"
    edit(rec, suspend=False)
    await rec.step()
    [pod] = kube.created
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["MCPFLEET_OUTPUT_URI"] == str(tmp_path / "outB")
    tid = tid_of(pod)
    assert rec.state is not None
    LocalStore(tmp_path / "outB" / "batch" / "uid-1").commit(tid, record(rec.state.trials[tid]))  # where its pod says
    rec.queue.put_nowait(("MODIFIED", {**pod, "status": {"phase": "Succeeded"}}))
    await rec.step()
    assert tid in rec.state.done and rec.state.done[tid]["passed"], rec.state.done
    assert rec.state.retries == {} and rec.phase == "Succeeded"
    assert not (tmp_path / "outA").exists() or not any((tmp_path / "outA").rglob("result.json"))
    assert (tmp_path / "outB" / "batch" / "uid-1" / "summary.json").exists()


async def test_an_output_edit_adopts_the_records_already_under_the_new_output(tmp_path: Path) -> None:
    """The new output already holds a record of the run's trial (its pod was told that output, e.g. by an operator
    that restarted meanwhile): it is adopted, as a restarted operator would, not run again."""
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    kube = StatusKube()
    rec = reconciler(evalrun(pack, tmp_path / "outA", 2, suspend=True), kube)
    assert await rec.load()
    await rec.rebuild()
    assert rec.state is not None
    first = rec.state.order[0]
    LocalStore(tmp_path / "outB" / "batch" / "uid-1").commit(first, record(rec.state.trials[first]))
    edit(rec, output={"uri": str(tmp_path / "outB")}, suspend=False)
    await rec.step()
    assert first in rec.state.done
    assert [tid_of(p) for p in kube.created] == [t for t in rec.state.order if t != first]


async def test_suspend_and_concurrency_apply_while_a_refused_edit_stands(tmp_path: Path) -> None:
    """A refused edit (attempts) stands; the user then suspends the run and raises its concurrency. As a Job's,
    suspend deletes the pods and concurrency applies, while Valid stays False naming the refused field. Before,
    every later edit was refused with it: the pods kept running."""
    rec, kube, _ = await one_done_one_running(tmp_path)
    edit(rec, attempts=2)
    await rec.step()
    refused = rec.conditions["Valid"]
    assert (refused["status"], refused["reason"]) == ("False", "ImmutableField")
    edit(rec, suspend=True, concurrency={"total": 7})
    await rec.step()
    assert rec.run is not None and rec.run.spec.suspend and rec.run.spec.concurrency.total == 7
    assert rec.run.spec.attempts == 1 and rec.state is not None and len(rec.state.trials) == 2
    [running] = [p for p in kube.created if p["metadata"]["name"] not in kube.deleted[:1]]
    assert running["metadata"]["name"] in kube.deleted, "the suspend did not delete the running pod"
    assert rec.conditions["Suspended"]["status"] == "True"
    valid = rec.conditions["Valid"]
    assert (valid["status"], valid["reason"]) == ("False", "ImmutableField") and "spec.attempts" in valid["message"]
    assert valid["lastTransitionTime"] == refused["lastTransitionTime"]
    await rec.write_status(force=True)
    kept = json.loads(kube.status["plannedSpec"])
    assert (kept["attempts"], kept["suspend"], kept["concurrency"]["total"]) == (1, True, 7)


async def test_a_restarted_operator_applies_suspend_while_a_refused_edit_stands(tmp_path: Path) -> None:
    """The same after a restart: the stored object holds the refused attempts and suspend: true; the restarted
    operator keeps the planned attempts and suspends the run (before, it took the whole planned spec: running)."""
    rec, kube, _ = await one_done_one_running(tmp_path)
    edit(rec, attempts=2)
    await rec.step()
    await rec.write_status(force=True)
    edit(rec, suspend=True)  # made while no operator watched
    new = restarted(rec, kube)
    assert await new.load()
    assert new.run is not None and new.run.spec.suspend and new.run.spec.attempts == 1
    valid = new.conditions["Valid"]
    assert (valid["status"], valid["reason"]) == ("False", "ImmutableField") and "spec.attempts" in valid["message"]
    await new.rebuild()
    await new.step()
    [running] = kube.pods
    assert running["metadata"]["name"] in kube.deleted[1:] and new.conditions["Suspended"]["status"] == "True"
