"""What every service gives the trial engine: a run-scoped resource, a per-trial environment, a server.

The engine (trial, launcher, worker, taskcheck) only calls these; anything service-specific (how a state
is restored, what the server is, what the verifier is told) lives in the service's own module.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.environment.server import ServerCommand

if TYPE_CHECKING:
    from mcpfleet.runner.results.records import TrialResult
    from mcpfleet.runner.results.store import ResultStore
    from mcpfleet.runner.spec.evalrun import EvalRunSpec
    from mcpfleet.runner.spec.task import Task
    from mcpfleet.runner.spec.trial import TrialContext, TrialSpec


class EnvironmentLost(RuntimeError):
    """Part of the trial's environment broke under the agent (a site died or stopped answering): the trial
    measured the harness, not the model, so it is an infrastructure error (retried), never a scored failure.
    Raised by ``TrialEnv.quiesce``."""


class GradingRefused(RuntimeError):
    """The agent left its environment in a state no verifier can be run in cleanly (a superuser agent whose own
    server cannot be made ready to grade): the trial is scored as the model's failure, its verifier not run, the
    reason in the verifier's record. Raised by ``TrialEnv.grading``."""


@dataclass
class TrialEnv:
    """One trial's ready environment: where its state is, how to start its server, what its verifier gets."""

    state_dir: Path
    server: ServerCommand
    verifier_env: dict[str, str] = field(repr=False)
    verifier_args: list[str] = field(default_factory=list)
    # Called after the agent, before the verifier: stops what still writes the state (a browser task's sites).
    quiesce: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    # Called after ``quiesce``, right before the verifier: makes what the verifier logs in with, which the agent
    # cannot have influenced (PostgreSQL: a grader of its own, the agent's settings removed), and returns the
    # variables that replace ``verifier_env``'s. GradingRefused: see there.
    grading: Callable[[], Awaitable[dict[str, str]]] | None = field(default=None, repr=False)
    # Called after a verifier that failed: EnvironmentLost if the environment died under the verifier (a server
    # killed mid-check), which makes the failure the infrastructure's, not the model's.
    recheck: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    # What the environment saw that the trial's log (trial.log) should say, e.g. an agent cut off at a limit.
    notes: list[str] = field(default_factory=list, repr=False)
    # A streamable-HTTP server that is already running (a declared ``url``): reached there, ``server`` unused.
    url: str | None = None
    # Appended to the task's description as sent to the model (a declared service's ``prompt``).
    prompt: str | None = None


class Spare:
    """An environment made before its trial is known (a worker's next trial), so that its MCP server can boot
    while the current trial runs. ``claim`` turns it into one trial's environment."""

    server: ServerCommand
    needs_session = False  # whether claiming must wait until the server is up (and ``started`` has run)

    async def started(self, session: Any) -> None:
        """Called once the server's MCP session is initialised, before the spare is offered."""

    def claim(self, task: Task) -> AbstractAsyncContextManager[TrialEnv]:
        raise NotImplementedError


# A trial pod's servers listen on its loopback only: the runner shares the pod's network namespace, and nothing
# else may reach an MCP server, a site or a database of the trial (the chart's ingress policy admits only the
# runner's metrics port). supergateway has no host option: mcpfleet-gateway (servers/gateway) gives it one. Their
# startup probes run inside the container (PROBE, an exec probe), since a kubelet's httpGet goes to the pod IP.
LOOPBACK = "127.0.0.1"
GATEWAY = "mcpfleet-gateway"
PROBE = "mcpfleet-probe"


@dataclass(frozen=True)
class PodContext:
    """What a trial pod's service containers are made of: images, the MCP port the runner connects to, the
    state volume's mount, and the resources and security context every container gets (operator/manifests.py)."""

    runner_image: str
    server_image: str
    mcp_port: int
    state_mount: str
    resources: dict[str, Any] = field(default_factory=dict)
    security: dict[str, Any] = field(default_factory=dict)
    # Every sidecar image the operator knows (settings, then the EvalRun's spec.pod.sidecarImages), by key:
    # a service whose pod needs more than its MCP server's image names the others (postgres: "postgres-db").
    images: dict[str, str] = field(default_factory=dict)
    volume_size_limit: str | None = None  # what each emptyDir of the pod may hold
    # Ports the pod's own containers listen on, by port, with whose (the runner's metrics): the pod's containers
    # share one network, so a service's sidecar may not take one of them.
    taken_ports: dict[int, str] = field(default_factory=dict)

    def image(self, key: str) -> str:
        try:
            return self.images[key]
        except KeyError:
            raise ValueError(
                f"no image for '{key}'; set spec.pod.sidecarImages.{key} (or the chart's sidecarImages.{key})"
            ) from None

    def empty_dir(self, name: str, medium: str | None = None) -> dict[str, Any]:
        """An emptyDir volume sized like the pod's others."""
        spec: dict[str, Any] = {}
        if self.volume_size_limit:
            spec["sizeLimit"] = self.volume_size_limit
        if medium:
            spec["medium"] = medium
        return {"name": name, "emptyDir": spec}


def stdio_server_sidecar(
    service: str,
    pod: PodContext,
    command: str | None = None,
    env: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The default trial-pod sidecar: the service's stdio MCP server (``command``, by default
    ``mcp-server-<service> <state>`` in its image) behind supergateway, serving streamable HTTP on the MCP port of
    the pod's loopback only (``mcpfleet-gateway --host``, servers/gateway: nothing outside the pod can drive it),
    ready when /healthz answers there (an exec probe: a kubelet's httpGet goes to the pod IP). ``env`` is added to
    the server's environment; ``mounts`` replace the default (the state volume and /tmp)."""
    return {
        "name": f"mcp-{service}",
        "image": pod.server_image,
        "restartPolicy": "Always",
        "command": [GATEWAY],
        "args": [
            "--host",
            LOOPBACK,
            "--stdio",
            command or f"mcp-server-{service} {pod.state_mount}",
            "--outputTransport",
            "streamableHttp",
            "--stateful",
            "--port",
            "$(MCP_PORT)",
            "--healthEndpoint",
            "/healthz",
        ],
        "env": [
            {"name": "MCP_PORT", "value": str(pod.mcp_port)},
            *(env or []),
            {"name": "TZ", "value": "UTC"},
            {"name": "HOME", "value": "/tmp"},
        ],
        "ports": [{"name": "mcp", "containerPort": pod.mcp_port, "protocol": "TCP"}],
        "startupProbe": {
            "exec": {"command": [PROBE, "MCP_PORT", "/healthz"]},
            "periodSeconds": 1,
            "failureThreshold": 120,
        },
        "volumeMounts": mounts
        or [{"name": "state", "mountPath": pod.state_mount}, {"name": "tmp", "mountPath": "/tmp"}],
        "resources": pod.resources,
        "securityContext": pod.security,
    }


class Service:
    """A service's behaviour. Subclasses override what differs; the defaults describe a stateless service."""

    name: str = ""
    # Whether a spare server can start before its trial's state exists (see warm.py): only servers that are
    # given their state as a folder at start, and read it later, can.
    spare_servers: bool = False
    # A tool whose result names the trial's folder, which oracle steps write as {root} (the scripted oracle
    # asks it first); None when oracle steps need no folder.
    oracle_root_tool: str | None = None
    # Whether trials talk to an MCP server of this service (a pod gets its sidecar); False for suites whose
    # tools come with each case (toolcall).
    mcp_server: bool = True
    # Images its pods need besides its MCP server's, by their key in spec.pod.sidecarImages (postgres-db).
    pod_images: tuple[str, ...] = ()
    # Whether its oracle agent (and the scripted oracle model) replays the task's oracle.json; False when the
    # oracle's answers come from elsewhere (toolcall: each case's labelled call).
    oracle_json: bool = True
    # Files every task folder of this service must have (``mcpfleet tasks validate``).
    required_files: tuple[str, ...] = ("description.md", "verify.py", "meta.json")
    # Whether the service runs its trials itself (``run_trial``) instead of the engine's state -> MCP server ->
    # agent -> verifier sequence.
    owns_trials: bool = False
    # Tools its server offers that no agent may list or call: they reach past the task's world (code run in the
    # server's process, the host's files), so a model could read keys or write the graded state directly.
    refused_tools: frozenset[str] = frozenset()
    # The keys its tasks may set in meta.json's "mcpfleet" object, each with the values it takes (None: checked
    # elsewhere, as sites are): a misspelt key or value is refused, never silently taken for the default.
    meta_keys: dict[str, tuple[str, ...] | None] = {}
    # The folder of an MCPMark checkout that holds this service's states (test_environments, postgres_state), so a
    # ``tasks.statesPath`` naming the checkout serves every service of one EvalRun; None: MCPMark keeps none.
    mcpmark_states: str | None = None
    # A variable MCPMark's state manager sets for this service's verifiers to the folder holding messages.json
    # (PLAYWRIGHT_WORK_DIR), beside MCP_MESSAGES which every verifier gets.
    messages_dir_env: str | None = None
    # Whether ``{root}`` in a tool call's arguments is the trial's state folder, substituted by the harness
    # (``tool_arguments``): for servers with no tool that names their folder (declared services), so the scripted
    # oracle sends its steps' ``{root}`` as written.
    harness_root: bool = False
    # The service's server variant (spec.servers), if a declared service's trial runs one.
    variant: Any = None

    def meta_problems(self, task: Task) -> list[str]:
        """meta.json's "mcpfleet" keys and values this service does not know (``mcpfleet tasks validate``)."""
        given = task.meta.get("mcpfleet") or {}
        problems = []
        for key, value in given.items():
            if key not in self.meta_keys:
                known = ", ".join(f'"{k}"' for k in self.meta_keys) or "none"
                problems.append(f'{task.id}: meta.json "mcpfleet" has an unknown key "{key}" (known: {known})')
            elif (values := self.meta_keys[key]) is not None and value not in values:
                problems.append(
                    f'{task.id}: meta.json "mcpfleet": {{"{key}": {json.dumps(value)[:80]}}} is not one of '
                    + ", ".join(f'"{v}"' for v in values)
                )
        return problems

    def refused_call(self, name: str, arguments: Any) -> str | None:
        """Why the agent's call must not reach the server (answered as a tool error instead), or None."""
        return f'Tool "{name}" is not available in this benchmark.' if name in self.refused_tools else None

    def own_image(self) -> str | None:
        """The image a trial pod runs its MCP server from, when the service names one itself (a declared
        ``server.image``); None: spec.pod.sidecarImages or the chart's."""
        return None

    def launch_problems(self) -> list[str]:
        """What keeps this machine from starting the service's server, found before any trial (a declared
        command that is not installed); each names the key and the fix."""
        return []

    def task_problems(self, tasks: list[Task]) -> list[str]:
        """What keeps this machine from running these (selected) tasks safely, found before any trial (a task
        whose agent gets a shell that this machine cannot confine); each names the tasks and the fix."""
        return []

    def image_hint(self) -> str | None:
        """Where its trial pods' MCP server image is set, when not in spec.pod.sidecarImages (a declaration)."""
        return None

    def tool_arguments(self, arguments: Any, state_dir: Path) -> Any:
        """A tool call's arguments as the server gets them (``harness_root``: ``{root}`` substituted)."""
        return arguments

    def with_variant(self, variant: Any) -> Service:
        """The service running ``variant``'s server (only declared services have variants)."""
        if variant is not None:
            raise ValueError(f"service '{self.name}' is bundled: spec.servers may only name declared services")
        return self

    def trial_params(self, task: Task) -> dict[str, Any]:
        """What a trial pod of ``task`` needs to know about the task beyond its id (e.g. the sites a browser task
        names), computed when trials are planned so that rendering the pod stays a pure function. JSON values."""
        return {}

    def pod_sidecars(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        """The trial pod's service containers, run after the state init container, in start order: native sidecars
        (init containers with ``restartPolicy: Always`` and a startup probe) and any one-shot init step between
        them (e.g. building a database from the state). The runner reaches the MCP server as ``pod_mcp`` says.
        Default: one stdio server behind supergateway. ``params`` is
        ``trial_params(task)``."""
        return [stdio_server_sidecar(self.name, pod)]

    def pod_volumes(self, params: dict[str, Any], pod: PodContext) -> list[dict[str, Any]]:
        """Volumes the sidecars of ``pod_sidecars`` mount besides the pod's own (state, tmp): e.g. a database's
        data directory."""
        return []

    def pod_runner(self, params: dict[str, Any], pod: PodContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What the runner container needs of the service's volumes besides the pod's own: (volume mounts, env),
        e.g. the database's superuser login it grades with, which no sidecar mounts."""
        return [], []

    def pod_mcp(self, params: dict[str, Any], pod: PodContext) -> list[str]:
        """How the runner reaches the MCP server of ``pod_sidecars``: ``mcpfleet trial``'s arguments. Default: its
        streamable HTTP on the pod's loopback (a declared stdio server: the FIFO bridge, services/bridge.py)."""
        return ["--mcp-url", f"http://{LOOPBACK}:$(MCP_PORT)/mcp"]

    def shards(self, task: Task, spec: EvalRunSpec) -> int | None:
        """How many trials one attempt of ``task`` is cut into; None: one trial, unsharded (every MCP task)."""
        return None

    async def run_trial(
        self, spec: TrialSpec, store: ResultStore, ctx: TrialContext, infra_attempt: int, find_task: Callable[[], Task]
    ) -> TrialResult:
        """Run and record one trial (only if ``owns_trials``); the same contract as ``trial.run_trial``.
        ``find_task``: the engine's look-up of the trial's task (a task it cannot find is the trial's
        ``infra_error``, recorded as any other)."""
        raise NotImplementedError(f"service '{self.name}' does not run its own trials")

    def sweep_leftovers(self) -> None:
        """Remove what runs killed outright (SIGKILL, a lost machine) left of this service's run-scoped resources;
        called at the start of every local run, whichever services it uses, so leftovers never outlive the next
        run. Must not touch what live runs own."""

    @contextmanager
    def run_resource(self, prefork: bool = False, on_lost: Callable[[str], None] | None = None) -> Iterator[Any]:
        """Started once per run (by the launcher, in its main thread) and stopped when the run ends, however
        it ends. Yields a picklable handle passed by value to every trial, or None if the service needs none.
        ``prefork``: the run may start a zygote for the service's Python server (prefork.py); only ``mcpfleet
        run`` asks, other commands start their few servers directly. ``on_lost``: to call (from any thread) with
        why, when the resource is gone for good; None: interrupt the run as Ctrl-C does."""
        yield None

    @asynccontextmanager
    async def environment(
        self, task: Task, state_dir: Path, resource: Any, *, materialised: bool = False
    ) -> AsyncIterator[TrialEnv]:
        """Prepare one trial's state (and remove it on exit, also when the trial fails or is cancelled).
        ``materialised``: the state is already in place (a pod's init container made it)."""
        raise NotImplementedError
        yield  # pragma: no cover

    @asynccontextmanager
    async def spare(self, state_dir: Path, resource: Any) -> AsyncIterator[Spare]:
        """A spare environment (only if ``spare_servers``); on exit whatever it made and no trial claimed goes."""
        raise NotImplementedError(f"service '{self.name}' has no spare servers")
        yield  # pragma: no cover

    def spare_fits(self, task: Task) -> bool:
        """Whether a spare of this service can become ``task``'s environment."""
        return self.spare_servers

    def materialise(self, task: Task, dest: Path) -> int:
        """Write the task's initial state into ``dest`` (``mcpfleet materialise``). Returns a count of items."""
        dest.mkdir(parents=True, exist_ok=True)
        return 0

    def state_files(self, task: Task) -> list[Path]:
        """Files and folders that make up the task's initial state: part of the task's content digest."""
        return []

    def result_is_error(self, text: str) -> bool:
        """Whether a tool result the server did not flag as an error reports one (counted as a tool error)."""
        return False

    def state_names(self, category: str) -> list[str]:
        """Names (files or folders) a category's state may have in a states folder: what a pod fetches."""
        return []

    def check_state(self, task: Task) -> list[str]:
        """Problems with the task's initial state (``mcpfleet tasks validate``)."""
        return []
