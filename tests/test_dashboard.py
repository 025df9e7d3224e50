"""Every metric a Grafana panel uses exists in code, and every metric follows Prometheus naming."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcpfleet.operator import metrics as operator_metrics
from mcpfleet.runner.agent import metrics as runner_metrics

DASHBOARD = Path(__file__).resolve().parents[1] / "charts" / "mcpfleet" / "dashboards" / "mcpfleet.json"
SUFFIXES = ("_bucket", "_sum", "_count", "_created")


def exposed_names() -> dict[str, str]:
    """Metric family name -> type, as the registries expose them (counters get _total)."""
    out = {}
    for registry in (operator_metrics.REGISTRY, runner_metrics.REGISTRY):
        for family in registry.collect():
            name = family.name + ("_total" if family.type == "counter" else "")
            out[name] = family.type
    return out


def dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in d["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


def referenced(expr: str) -> set[str]:
    names = set()
    for name in re.findall(r"\bmcpfleet_[a-z0-9_]+", expr):
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        names.add(name)
    return names


def test_every_dashboard_metric_exists_in_code() -> None:
    names = exposed_names()
    used = set().union(*(referenced(e) for e in dashboard_exprs()))
    assert used, "the dashboard queries no mcpfleet metric"
    missing = sorted(n for n in used if n not in names)
    assert missing == []


def test_dashboard_covers_the_required_views() -> None:
    titles = " | ".join(p["title"].lower() for p in json.loads(DASHBOARD.read_text())["panels"])
    views = (
        "progress",
        "pass@1",
        "failure",
        "token",
        "cost",
        "duration",
        "in flight",
        "retries",
        "tool-call class",
        "pass rate over time by model",
        "not scored: causes",
    )
    for view in views:
        assert view in titles, f"no panel for {view}"


def test_metric_names_follow_prometheus_conventions() -> None:
    for name, kind in exposed_names().items():
        assert name.startswith("mcpfleet_"), name
        assert (kind == "counter") == name.endswith("_total"), name
        if kind == "histogram":
            assert name.endswith("_seconds"), f"{name}: durations are in base units (seconds)"


def test_no_metric_is_labelled_by_trial() -> None:
    for registry in (operator_metrics.REGISTRY, runner_metrics.REGISTRY):
        for collector in list(registry._collector_to_names):  # noqa: SLF001
            labels = getattr(collector, "_labelnames", ())
            assert not {"trial", "trial_id", "pod", "task_id", "attempt"} & set(labels), collector


OPERATOR_WIDE = {"mcpfleet_api_requests_total"}  # the operator's own API requests: of no run, no namespace


def label_names() -> dict[str, set[str]]:
    """Metric family name (as exposed) -> its label names, for every metric of both registries."""
    out: dict[str, set[str]] = {}
    for registry in (operator_metrics.REGISTRY, runner_metrics.REGISTRY):
        for collector in list(registry._collector_to_names):  # noqa: SLF001
            labels = set(getattr(collector, "_labelnames", ()))
            for name in registry._collector_to_names[collector]:  # noqa: SLF001
                out[name] = labels
    return out


def test_every_metric_carries_namespace_and_run_but_the_operators_own_requests() -> None:
    """Two same-named runs in two namespaces must be two series, or the dashboard adds them up."""
    names = label_names()
    assert names, "no metric registered"
    missing = sorted(n for n, labels in names.items() if not {"namespace", "run"} <= labels)
    assert [n for n in missing if not any(n.startswith(w.removesuffix("_total")) for w in OPERATOR_WIDE)] == []


SELECTOR = re.compile(r"\b(mcpfleet_[a-z0-9_]+)(\{[^}]*\})?")


def test_every_query_selects_by_the_namespace_and_the_run_variables() -> None:
    d = json.loads(DASHBOARD.read_text())
    names = [v["name"] for v in d["templating"]["list"]]
    assert names.index("namespace") < names.index("run"), names  # picked first: the runs listed are its
    run_var = next(v for v in d["templating"]["list"] if v["name"] == "run")
    assert 'namespace=~"$namespace"' in run_var["query"]["query"]
    checked = 0
    for expr in [t["expr"] for p in d["panels"] for t in p.get("targets", [])]:
        for name, matchers in SELECTOR.findall(expr):
            if name in OPERATOR_WIDE:
                continue
            assert 'namespace=~"$namespace"' in matchers and 'run=~"$run"' in matchers, f"{name} in {expr}"
            checked += 1
    assert checked > 30
