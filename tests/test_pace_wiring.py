"""Where the pace store reaches a trial (issue 47): trial pods get the chart's store (a URL, or a Secret holding
one) and their namespace only when their model needs the pace; the chart passes pace.storeUrl to the operator;
a trial whose model needs the pace and has no store refuses to run unpaced; the budget keys are per run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import make_tiny_pack

from mcpfleet.operator.manifests import trial_pod
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.llm import pace
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.spec.load import parse_evalrun


def run_doc(pack: Path, **model: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "paced", "namespace": "evals", "uid": "u-1"},
        "spec": {
            "models": [{"name": "m", "model": "openai/gpt-5", "apiKeySecretRef": {"name": "k", "key": "k"}, **model}],
            "tasks": {"path": str(pack)},
            "output": {"uri": "s3://mcpfleet-results/runs"},
        },
    }


def runner_env(doc: dict[str, Any], settings: OperatorSettings) -> dict[str, Any]:
    run = parse_evalrun(doc)
    trial = plan(run, Path(doc["spec"]["tasks"]["path"]))[0]
    pod = trial_pod(run, trial, settings)
    runner = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in runner["env"]}


def test_trial_pods_get_the_store_only_when_their_model_needs_it(tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack")
    settings = OperatorSettings(pace_store_url="redis://pace.mcpfleet:6379/0")
    plain = runner_env(run_doc(pack), settings)
    assert pace.STORE_URL_ENV not in plain and plain[pace.NAMESPACE_ENV] == "evals"
    paced = runner_env(run_doc(pack, rateLimit={"requestsPerMinute": 60}), settings)
    assert paced[pace.STORE_URL_ENV] == "redis://pace.mcpfleet:6379/0"
    budgeted = copy.deepcopy(run_doc(pack))
    budgeted["spec"]["budget"] = {"usd": 5}
    assert runner_env(budgeted, settings)[pace.STORE_URL_ENV] == "redis://pace.mcpfleet:6379/0"
    secret = OperatorSettings(pace_store_url="redis://ignored", pace_store_url_secret="pace-redis")
    env = runner_env(run_doc(pack, rateLimit={"requestsPerMinute": 60}), secret)
    assert env[pace.STORE_URL_ENV] == {"secretKeyRef": {"name": "pace-redis", "key": "url"}}


def test_operator_settings_read_the_charts_variables() -> None:
    s = OperatorSettings.from_env(
        {"MCPFLEET_PACE_STORE_URL": "redis://r:6379/1", "MCPFLEET_PACE_STORE_URL_SECRET": "s"}
    )
    assert (s.pace_store_url, s.pace_store_url_secret, s.pace_store_url_secret_key) == ("redis://r:6379/1", "s", "url")


def test_the_chart_points_the_operator_at_the_store() -> None:
    import helm_python

    chart_dir = Path(__file__).resolve().parents[1] / "charts" / "mcpfleet"
    with helm_python.Chart.load(chart_dir) as chart:
        out = chart.render({"pace": {"storeUrl": "redis://pace:6379/0"}}, name="mcpfleet", namespace="mcpfleet")
        bare = chart.render({}, name="mcpfleet", namespace="mcpfleet")
    [deployment] = [t for p, t in out.items() if p.endswith("deployment.yaml")]
    [plain] = [t for p, t in bare.items() if p.endswith("deployment.yaml")]
    assert "MCPFLEET_PACE_STORE_URL" in deployment and "redis://pace:6379/0" in deployment
    assert "MCPFLEET_PACE_STORE_URL" not in plain


def test_a_paced_model_without_a_store_is_never_run_unpaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pace.STORE_URL_ENV, raising=False)
    run = parse_evalrun(run_doc(make_tiny_pack(tmp_path / "pack"), rateLimit={"requestsPerMinute": 60}))
    model = run.spec.models[0]
    with pytest.raises(RuntimeError, match="no pace store is configured"):
        pace.pace_config(model, model.model, None, run.name, None, {}, 60)
    assert pace.pace_config(model.model_copy(update={"rate_limit": None}), model.model, None, "r", None, {}, 60) is None


def test_budget_keys_are_per_run_and_account_keys_per_account(tmp_path: Path) -> None:
    run = parse_evalrun(run_doc(make_tiny_pack(tmp_path / "pack"), rateLimit={"requestsPerMinute": 60}))
    m = run.spec.models[0]
    a = pace.pace_config(m, m.model, None, "r", None, {pace.STORE_URL_ENV: "unix:///x", "MCPFLEET_RUN_UID": "1"}, 60)
    b = pace.pace_config(m, m.model, None, "r2", None, {pace.STORE_URL_ENV: "unix:///x", "MCPFLEET_RUN_UID": "2"}, 60)
    assert a is not None and b is not None
    assert a.account == b.account  # two sweeps on one key share its limit
    other_key = m.model_copy(update={"api_key_secret_ref": None, "api_key_env": "OTHER_KEY"})
    assert pace.account_key(other_key, m.model, None) != a.account
    assert pace.budget_key("ns", "r", None, "1") != pace.budget_key("ns", "r", None, "2")
    assert "sk-" not in a.account and len(a.account) == 24  # a hash of the reference, never the key


def test_status_shows_spend_so_far_and_the_projected_total(tmp_path: Path) -> None:
    """status.spend: the finished trials' priced cost and the total at that cost per trial; a budget_exhausted
    trial is run again once the model's stop is lifted (a spec edit: the budget raised)."""
    from conftest import trial_record

    from mcpfleet.operator.projection import figures
    from mcpfleet.operator.runstate import RunState

    doc = run_doc(make_tiny_pack(tmp_path / "pack", tasks=2))
    doc["spec"]["attempts"] = 2
    trials = plan(parse_evalrun(doc), tmp_path)
    st = RunState.plan(trials, retry_limit=1)
    st.finish_rebuild()
    assert figures(st)["spend"] is None
    first, second = trials[0], trials[1]
    st.finished(first.trial_id, trial_record(first.trial_id, spec_hash=first.spec_hash, totals={"cost_usd": 0.5}))
    cut = trial_record(
        second.trial_id, spec_hash=second.spec_hash, passed=False, failure="budget_exhausted", totals={"cost_usd": 0.3}
    )
    st.finished(second.trial_id, cut)
    assert figures(st)["spend"] == {"usd": 0.8, "projectedUsd": 1.6}  # 2 of 4 trials finished
    st.stop_model("m", "budget_exhausted: spec.budget of 1 USD leaves no room")
    st.resume_models()
    assert second.trial_id not in st.done and first.trial_id in st.done
