"""One trial as every layer sees it: what it runs (TrialSpec), where its outside world is (TrialContext)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from mcpfleet.runner.spec.evalrun import (
    AgentKind,
    Budget,
    JudgeSettings,
    Limits,
    ModelSpec,
    ProviderPolicy,
    ToolCallSettings,
)
from mcpfleet.runner.spec.service_decl import ServerVariant
from mcpfleet.runner.spec.task import Mutant, OracleStep, Task

if TYPE_CHECKING:
    from mcp import ClientSession


class TrialSpec(BaseModel):
    """Everything one trial needs, serialisable: a worker process or a pod runs it from this alone."""

    model_config = ConfigDict(frozen=True)

    run: str
    trial_id: str
    spec_hash: str
    model: ModelSpec
    task_id: str
    tasks_root: str
    states_path: str | None = None
    task_digest: str | None = None  # the task's content when planned; a pod refuses a different one
    attempt: int
    agent: AgentKind
    limits: Limits
    # A sharded task (a toolcall data set): which slice of its cases this trial runs, and the suite's settings.
    shard: int | None = None
    toolcalls: ToolCallSettings | None = None
    provider: ProviderPolicy = Field(default_factory=ProviderPolicy)  # how provider faults are waited out
    budget: Budget | None = None  # the run's (spec.budget); the model's own is in ``model``. Outside the hash
    # The judge that classifies an MCP trial's valid tool calls (spec.toolcalls.judge); outside the trial's hash:
    # it annotates calls, never changes an outcome.
    judge: JudgeSettings | None = None
    # What the trial's pod needs to know about the task (Service.trial_params: e.g. a browser task's sites).
    service_params: dict[str, Any] = Field(default_factory=dict)
    # The server variant (spec.servers) this trial measures, for a declared service that has variants.
    server: ServerVariant | None = None

    @property
    def service(self) -> str:
        return self.task_id.split("/", 1)[0]

    @property
    def variant(self) -> str | None:
        return self.server.name if self.server is not None else None

    def record_identity(self) -> dict[str, Any]:
        """The fields by which every record of this trial (the runner's, the operator's own) names it."""
        return {
            "run": self.run,
            "trial_id": self.trial_id,
            "spec_hash": self.spec_hash,
            "model": self.model.name,
            "litellm_model": self.model.model,
            "service": self.service,
            "task_id": self.task_id,
            "attempt": self.attempt,
            "agent": str(self.agent),
            "variant": self.variant,
        }


@dataclass
class SpareBoot:
    """How long the spare took to boot, off its trial's path (after the gate): its server from spawn to an
    initialised session (the environment's set-up included), then ``Spare.started`` (a browser's launch)."""

    mcp_start: float = 0.0
    started: float = 0.0


@dataclass(frozen=True)
class Replay:
    """What the oracle agent replays instead of the task's oracle.json: a mutant's calls and final answer."""

    steps: tuple[OracleStep, ...]
    answer: str | None = None

    @classmethod
    def of(cls, task: Task, mutant: Mutant) -> Replay:
        """A mutant's replay: the oracle's steps first when it is a near miss of the right answer."""
        before = tuple(task.oracle) if mutant.after_oracle else ()
        # A near miss of the right answer keeps the oracle's final answer unless it gives its own.
        answer = mutant.answer if mutant.answer is not None or not mutant.after_oracle else task.oracle_answer
        return cls(before + mutant.steps, answer)


class WarmSpare(Protocol):
    """What the trial engine asks of a server started before its trial (a worker's ``trial.warm.WarmServer``):
    a Protocol here, so that the nouns every layer shares do not import the engine."""

    service: str
    workdir: Path
    log: IO[Any]
    boot: SpareBoot

    async def session(self) -> ClientSession: ...

    variant: Any  # the server variant (spec.servers) its server runs, or None

    def fits(self, task: Task, variant: Any = None) -> bool: ...
    def environment(self, task: Task) -> AbstractAsyncContextManager[Any]: ...
    def release(self) -> None: ...
    async def stop(self) -> None: ...
    async def close(self) -> None: ...


@dataclass
class TrialContext:
    """Where the trial's outside world is: set by the launcher or the pod, not by global state."""

    scripted_base_url: str | None = None
    mcp_url: str | None = None  # a sidecar's streamable-HTTP endpoint; None = spawn stdio locally
    # A sidecar's stdio server over the pod's FIFO bridge (services/bridge.py): the folder of its FIFOs, and the
    # container serving them (named when it never answers).
    mcp_fifo: Path | None = None
    mcp_container: str | None = None
    state_dir: Path | None = None  # pre-materialised state (init container); None = materialise here
    env: dict[str, str] | None = None  # where API keys are looked up; defaults to the process environment
    backoff_initial: float | None = None  # overrides spec.provider.backoffInitialSeconds (tests)
    warm: WarmSpare | None = None  # a server already started on an empty state folder (workers)
    metrics: bool = False  # record Prometheus metrics (a pod serving /metrics)
    # Called once the trial's first tool call has returned (workers start their spare then: not while this trial's
    # own server still warms up, as a browser does on its first call; measured: cold browser trials slowed 2x).
    on_first_call: Callable[[], None] | None = None
    replay: Replay | None = None  # the oracle agent replays these calls instead of oracle.json (mutants)
    # Run-scoped resources by service, passed by value (e.g. the run's PostgreSQL cluster: port, credentials).
    resources: dict[str, Any] = field(default_factory=dict, repr=False)
