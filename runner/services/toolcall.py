"""The ``toolcall`` suite as a service: single tool calls from limbic-format data, no MCP server, no verifier.

A task folder holds ``description.md``, ``meta.json`` and the cases (``cases.jsonl`` and friends, see
toolcalls/shards.py). The planner cuts each attempt into ``ceil(cases / spec.toolcalls.shardSize)`` trials; the
engine hands each trial to ``run_trial`` (toolcalls/suite.py), which asks the model every case of its shard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpfleet.runner.services.base import Service

if TYPE_CHECKING:
    from mcpfleet.runner.results.records import TrialResult
    from mcpfleet.runner.results.store import ResultStore
    from mcpfleet.runner.spec.evalrun import EvalRunSpec
    from mcpfleet.runner.spec.task import Task
    from mcpfleet.runner.spec.trial import TrialContext, TrialSpec


class ToolCallService(Service):
    name = "toolcall"
    mcp_server = False
    owns_trials = True
    oracle_json = False
    required_files = ("description.md", "meta.json")

    def shards(self, task: Task, spec: EvalRunSpec) -> int | None:
        from mcpfleet.runner.spec.evalrun import ToolCallSettings
        from mcpfleet.runner.spec.task import TaskError
        from mcpfleet.runner.toolcalls.loader import DataError
        from mcpfleet.runner.toolcalls.shards import cases_path, count_cases, shard_count

        data = cases_path(task.path)
        if data is None:
            raise TaskError(f"{task.id}: no cases.jsonl, cases.json, cases.parquet or cases/ in {task.path}")
        try:
            rows = count_cases(data)
        except DataError as exc:
            raise TaskError(f"{task.id}: {exc}") from None
        return shard_count(rows, (spec.toolcalls or ToolCallSettings()).shard_size)

    async def run_trial(
        self, spec: TrialSpec, store: ResultStore, ctx: TrialContext, infra_attempt: int, find_task: Callable[[], Task]
    ) -> TrialResult:
        from mcpfleet.runner.toolcalls.suite import run_shard

        return await run_shard(spec, store, ctx, infra_attempt, find_task)

    def check_state(self, task: Task) -> list[str]:
        """Every row of the task's data must load (``mcpfleet tasks validate``)."""
        from mcpfleet.runner.toolcalls.loader import DataError, load_cases
        from mcpfleet.runner.toolcalls.shards import cases_path

        data = cases_path(task.path)
        if data is None:
            return [f"{task.id}: no cases.jsonl, cases.json, cases.parquet or cases/ folder"]
        try:
            load_cases(data, require_label=False)
        except DataError as exc:
            return [f"{task.id}: {exc}"]
        return []
