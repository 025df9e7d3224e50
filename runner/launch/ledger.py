"""A local run's budget ledgers across invocations: what the run spent is kept in its folder (``spend.json``), so a
resume (with the budget raised) counts what earlier invocations spent, and the run's own pace store, which dies
with each invocation, starts from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpfleet.runner.llm import meters, pace
from mcpfleet.runner.results.records import now_iso
from mcpfleet.runner.results.store import ResultStore
from mcpfleet.runner.spec.evalrun import EvalRun

SPEND_FILE = "spend.json"


def budget_scope(error: str | None) -> str:
    """Which budget a budget_exhausted trial met, from its record's error: "run" (spec.budget) or "model"."""
    return "run" if "spec.budget of" in (error or "") else "model"


@dataclass
class Ledger:
    run: EvalRun
    url: str
    namespace: str = pace.LOCAL_NAMESPACE
    scope: str = ""  # pace.run_scope: the run's folder, hashed
    lines: dict[str, tuple[str, float, str | None]] = field(default_factory=dict)  # key -> (which, usd, model)

    def __post_init__(self) -> None:
        spec = self.run.spec
        if spec.budget is not None:
            key = pace.budget_key(self.namespace, self.run.name, None, self.scope)
            self.lines[key] = ("spec.budget", spec.budget.usd, None)
        for m in spec.models:
            if m.budget is not None:
                key = pace.budget_key(self.namespace, self.run.name, m.name, self.scope)
                self.lines[key] = (pace.model_budget(m.name), m.budget.usd, m.name)

    async def spent(self) -> dict[str, float]:
        keys = list(self.lines)
        return dict(zip(keys, await pace.spent(self.url, keys), strict=True)) if keys else {}

    async def seed(self, store: ResultStore) -> None:
        """Start the ledgers at what the run's folder says was spent (never lower than what the store holds)."""
        saved = _read(store)
        now = await self.spent()
        start = {k: max(now.get(k, 0.0), float(saved.get(k, 0.0))) for k in self.lines}
        await pace.seed(self.url, {k: v for k, v in start.items() if v > now.get(k, 0.0)})

    async def save(self, store: ResultStore) -> dict[str, float]:
        spent = await self.spent()
        doc = {
            "updated_at": now_iso(),
            "ledgers": {k: round(v, 10) for k, v in spent.items()},
            "budgets": {which: {"usd": usd, "spent": spent.get(k, 0.0)} for k, (which, usd, _) in self.lines.items()},
        }
        store.write_json(SPEND_FILE, doc)
        for k, (_, usd, model) in self.lines.items():
            labels = (self.namespace, self.run.name, model or "")
            scope = "model" if model else "run"
            meters.BUDGET_SPENT.labels(*labels, scope).set(spent.get(k, 0.0))
            meters.BUDGET_LIMIT.labels(*labels, scope).set(usd)
        return spent

    def headline(self, spent: dict[str, float]) -> tuple[float, float | None]:
        """(what the run spent, its budget): spec.budget's ledger, else the sum of the models' (no run budget)."""
        run_key = pace.budget_key(self.namespace, self.run.name, None, self.scope)
        if run_key in self.lines:
            return spent.get(run_key, 0.0), self.lines[run_key][1]
        return sum(spent.values()), None

    def exhausted(self, spent: dict[str, float]) -> list[tuple[str, str | None, str]]:
        """Budgets spent to their usd: (which, model or None for the run's, why)."""
        out = []
        for k, (which, usd, model) in self.lines.items():
            if spent.get(k, 0.0) >= usd:
                out.append((which, model, f"budget_exhausted: {which} of {usd:g} USD is spent ({spent[k]:.4f} USD)"))
        return out


def _read(store: ResultStore) -> dict[str, Any]:
    try:
        doc = store.read_json(SPEND_FILE)
    except Exception:  # noqa: BLE001 - unreadable: as if none (the ledger starts at zero, as on a first run)
        return {}
    ledgers = doc.get("ledgers") if isinstance(doc, dict) else None
    if not isinstance(ledgers, dict):
        return {}
    return {str(k): float(v) for k, v in ledgers.items() if isinstance(v, int | float)}
