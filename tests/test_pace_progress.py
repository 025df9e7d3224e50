"""The progress line of `mcpfleet run` shows spend so far and the projected total whenever prices are known, with
or without a budget (issue 47 §4): projected = spend so far / trials done x trials planned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import make_tiny_pack

from mcpfleet.runner.launch import launcher
from mcpfleet.runner.launch.progress import Progress
from mcpfleet.runner.spec.load import parse_evalrun


def test_the_projection_counts_resumed_trials_and_their_cost() -> None:
    p = Progress(total=4, already=2, enabled=False, cost=0.5)  # two finished trials of an earlier invocation
    assert p.spend == ""
    p.advance({"passed": True, "cost_usd": 0.25})
    assert "$0.75 spent, ~$1.00 projected" in p.spend and " of $" not in p.spend  # 0.75 / 3 done x 4 planned
    p.advance({"passed": False, "failure": "infra_error"})  # no cost known: the spend stays, the projection drops
    assert "$0.75 spent, ~$0.75 projected" in p.spend
    p.spent(2.0, 10.0)  # a budget's ledger, once it reports, is the figure shown
    p.advance({"passed": True, "cost_usd": 0.25})
    assert "$2.00 spent" in p.spend and "of $10" in p.spend


def test_a_priced_run_without_a_budget_shows_its_spend(
    scripted_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Progress] = []

    class Seen(Progress):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    from mcpfleet.runner.launch import progress as progress_mod

    monkeypatch.setattr(progress_mod, "Progress", Seen)  # (the launcher imports it when it runs)
    pack = make_tiny_pack(tmp_path / "pack", tasks=2)
    price = {"inputPerMillionTokens": 1000.0, "outputPerMillionTokens": 1000.0}
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "priced"},
        "spec": {
            "models": [{"name": "m", "model": "hosted_vllm/oracle", "apiBase": scripted_url, "pricing": price}],
            "tasks": {"path": str(pack)},
            "output": {"uri": str(tmp_path / "runs")},
        },
    }
    _, folder = launcher.execute(parse_evalrun(doc), tmp_path, show_progress=False)
    costs = [json.loads(p.read_text())["totals"]["cost_usd"] for p in Path(folder).glob("trials/*/result.json")]
    assert len(costs) == 2 and all(c > 0 for c in costs), costs
    [progress] = made
    assert f"${sum(costs):.2f} spent, ~${sum(costs):.2f} projected" in progress.spend, progress.spend
