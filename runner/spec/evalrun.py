"""The EvalRun resource: the single source of truth for CLI validation, the CRD schema and docs.

Keys follow the Kubernetes API conventions (camelCase) because the same object is applied with
``kubectl`` as a custom resource and run locally with ``mcpfleet run``. Unknown fields are errors
everywhere: a typo such as ``maxTurn`` must never be silently ignored in a 10,000-trial sweep.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from mcpfleet.runner.spec.checks import (
    ENV_VAR_NAME,
    QUANTITY,
    check_image,
    check_key_env,
    check_labels,
    check_no_credentials,
    check_no_secret_text,
    check_no_surrounding_space,
    check_s3_uri,
    quantity_value,
)
from mcpfleet.runner.spec.placement import PodPlacement
from mcpfleet.runner.spec.service_decl import MAX_VARIANTS, ServerVariant
from mcpfleet.runner.spec.specmodel import SpecModel

API_GROUP = "mcpfleet.io"
API_VERSION = "v1alpha1"
KIND = "EvalRun"

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# The largest integer a field takes when nothing smaller is meaningful: the API server (and every JSON parser
# that reads numbers as doubles) keeps integers exactly only up to 2**53 - 1, and the operator sums timeouts into
# a pod's int64 activeDeadlineSeconds, which three of these cannot overflow.
INT_MAX = 2**53 - 1


# Bounds on free-text locations: a path no file system accepts, or a URL no client sends, is refused up front with
# the field's name, and the CRD's CEL rule, which compares output.uri and output.endpointUrl, is priced by the
# API server on these lengths rather than on a 3 MiB worst case.
MAX_PATH = 4096  # Linux PATH_MAX; an s3:// URI is far shorter (a key is at most 1024 bytes)
MAX_URL = 2048
MAX_ATTEMPTS = 100  # k; also the most a report trusts from a stored run.json or summary.json
# A model string: provider model names are short, a scripted model's script=<path> is the longest real one.
MAX_MODEL = 1024


class SecretKeyRef(SpecModel):
    """A key in a Kubernetes Secret in the EvalRun's namespace."""

    name: str = Field(pattern=DNS_LABEL.replace("[-a-z0-9]", "[-.a-z0-9]"), max_length=253, description="Secret name.")
    key: str = Field(min_length=1, description="Key inside the Secret.")


class ReasoningEffort(StrEnum):
    minimal = "minimal"
    low = "low"
    medium = "medium"
    high = "high"


class ModelParams(SpecModel):
    """Sampling parameters passed to LiteLLM; unset ones are not sent at all."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=INT_MAX, description="Max output tokens per LLM call.")
    reasoning_effort: ReasoningEffort | None = None
    seed: int | None = Field(default=None, ge=-INT_MAX, le=INT_MAX)

    def litellm_kwargs(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(by_alias=False).items() if v is not None}


class RateLimit(SpecModel):
    """What the provider account allows for this model: the harness paces every trial's requests to stay under it,
    shared by every trial (and, in a cluster, every EvalRun) that uses the same account and model."""

    requests_per_minute: int | None = Field(default=None, ge=1, le=INT_MAX, description="Requests sent per minute.")
    tokens_per_minute: int | None = Field(
        default=None,
        ge=1,
        le=INT_MAX,
        description="Tokens per minute: a request counts its prompt plus its output-token ceiling until it is "
        "answered, then what the provider reported.",
    )
    max_concurrent_requests: int | None = Field(default=None, ge=1, le=100_000, description="Requests in flight.")

    @model_validator(mode="after")
    def _some_limit(self) -> RateLimit:
        if self.requests_per_minute is None and self.tokens_per_minute is None and self.max_concurrent_requests is None:
            raise ValueError("give at least one of requestsPerMinute, tokensPerMinute, maxConcurrentRequests")
        return self


class Pricing(SpecModel):
    """USD per million tokens, for a model LiteLLM's price map lacks (or prices differently than the account)."""

    input_per_million_tokens: float = Field(ge=0, le=1_000_000, description="USD per million prompt tokens.")
    output_per_million_tokens: float = Field(
        ge=0, le=1_000_000, description="USD per million output tokens (reasoning tokens included)."
    )


class Budget(SpecModel):
    """The most the provider may bill: requests that could pass it are not sent."""

    usd: float = Field(gt=0, le=1e9, description="USD.")


class ModelSpec(SpecModel):
    """One model under test. Secrets are referenced, never inlined."""

    name: str = Field(
        pattern=DNS_LABEL, max_length=40, description="Short DNS-label name used in trial ids, pod labels and reports."
    )
    model: str = Field(
        min_length=1,
        max_length=MAX_MODEL,
        description=(
            "LiteLLM model string, e.g. 'openai/gpt-5' or 'anthropic/claude-sonnet-4'. "
            "'scripted/<policy>' uses mcpfleet's scripted model server (oracle, noop, malformed)."
        ),
    )
    api_base: str | None = Field(default=None, max_length=MAX_URL, description="OpenAI-compatible base URL override.")
    api_key_env: str | None = Field(
        default=None, pattern=ENV_VAR_NAME, description="Name of the environment variable holding the API key."
    )
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Kubernetes Secret key holding the API key (operator only)."
    )
    params: ModelParams = Field(default_factory=ModelParams)
    concurrency: int | None = Field(
        default=None, ge=1, le=10_000, description="Max trials of this model in flight; overrides concurrency.perModel."
    )
    rate_limit: RateLimit | None = Field(
        default=None,
        description=(
            "What the provider account allows (requests and tokens per minute, requests in flight): requests are "
            "paced under it, shared by every trial using the same apiBase, key reference and model."
        ),
    )
    pricing: Pricing | None = Field(
        default=None,
        description="USD per million tokens, when LiteLLM's price map lacks the model (or to override it).",
    )
    budget: Budget | None = Field(
        default=None,
        description="The most this model's trials may spend; trials it cuts short are budget_exhausted (not scored).",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for bad in ("apiKey", "api_key", "key", "token"):
                if bad in data:
                    raise ValueError(
                        f"inline secret field '{bad}' is not allowed; reference it with "
                        "apiKeyEnv (an environment variable name) or apiKeySecretRef {name, key}"
                    )
        return data

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, v: str | None) -> str | None:
        return check_no_credentials(v)

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, v: str | None) -> str | None:
        return check_key_env(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        check_no_surrounding_space(v)
        provider, slash, name = v.partition("/")
        if slash and not (provider and name):
            raise ValueError(f"{v[:80]!r}: give <provider>/<model>, e.g. openai/gpt-5 (one of the two is empty)")
        return check_no_secret_text(v)

    @model_validator(mode="after")
    def _one_key_source(self) -> ModelSpec:
        if self.api_key_env and self.api_key_secret_ref:
            raise ValueError("set at most one of apiKeyEnv and apiKeySecretRef")
        return self

    @property
    def is_scripted(self) -> bool:
        return self.model.startswith("scripted/")


class TaskSelection(SpecModel):
    """Which tasks to run: a task pack and filters on it. Empty filters select everything."""

    path: str = Field(
        default="tasks",
        max_length=MAX_PATH,
        description=(
            "Task-pack root in MCPMark layout (<service>/<difficulty>/<category>/<task>/): a folder, or "
            "s3://bucket/prefix for a pack kept in S3. Relative folders resolve against the EvalRun file's "
            "folder locally, and against the runner image's bundled tasks."
        ),
    )
    states_path: str | None = Field(
        default=None,
        max_length=MAX_PATH,
        description=(
            "Folder (or s3://bucket/prefix) holding initial states for packs that do not bundle them (e.g. "
            "MCPMark's own tasks), as <category>/ (MCPMark's layout: its filesystem test_environments folder "
            "as is) or <service>/<category>/. Defaults to <path>/<service>/states."
        ),
    )
    endpoint_url: str | None = Field(
        default=None, max_length=MAX_URL, description="S3 endpoint of an s3:// pack (non-AWS stores)."
    )
    region: str | None = Field(default=None, description="S3 region of an s3:// pack.")
    credentials_secret_ref: str | None = Field(
        default=None,
        description=(
            "Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY that trial pods use to read an s3:// pack "
            "(the operator reads it with its own credentials; locally the environment's are used)."
        ),
    )
    services: list[str] = Field(default_factory=list, description="e.g. [filesystem, postgres]")
    difficulties: list[str] = Field(default_factory=list, description="e.g. [standard, easy]")
    categories: list[str] = Field(default_factory=list)
    include: list[str] = Field(
        default_factory=list, description=("Glob patterns over task ids '<service>/<difficulty>/<category>/<task>'.")
    )
    exclude: list[str] = Field(default_factory=list, description="Glob patterns over task ids.")
    override_services: list[str] = Field(
        default_factory=list,
        description=(
            "Bundled services (e.g. filesystem) whose name a declared service of the pack (<service>/service.yaml) "
            "may take, replacing the bundled one for this run; any other clash is refused."
        ),
    )

    @field_validator("path", "states_path")
    @classmethod
    def _pack_uri(cls, v: str | None) -> str | None:
        if v is not None:
            check_no_surrounding_space(v)
        if v is not None and "://" in v:
            check_s3_uri(v)
        return v

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        return check_no_credentials(v)

    @property
    def in_s3(self) -> bool:
        return self.path.startswith("s3://")

    def location_view(self) -> set[str]:
        """Fields that say where the pack is read from, not which tasks run (left out of the spec hash); and
        ``override_services`` when unset, so every run's hash stays what it was before the field."""
        return {"endpoint_url", "region", "credentials_secret_ref"} | (
            set() if self.override_services else {"override_services"}
        )


class AgentKind(StrEnum):
    """Who acts in a trial. ``mcpmark`` (the default) shows the model exactly what MCPMark's agent does:
    its system prompt, the suffix it appends to every task description, tool results serialised as it
    serialises them. ``react`` is MCPMark's ReAct agent (JSON replies, no native tool calling).
    ``mcpfleet`` is the same tool-calling loop with mcpfleet's own prompt: the bare description, no system
    prompt, tool results as plain text. ``oracle`` replays oracle.json; ``noop`` does nothing."""

    mcpmark = "mcpmark"
    react = "react"
    mcpfleet = "mcpfleet"
    oracle = "oracle"
    noop = "noop"

    def __str__(self) -> str:
        return self.value


class Limits(SpecModel):
    """Per-trial limits; defaults are MCPMark's."""

    max_turns: int = Field(default=100, ge=1, le=10_000)
    timeout_seconds: int = Field(
        default=3600,
        ge=1,
        le=INT_MAX,
        description="Whole agent run, counted from the trial's connection to its MCP server (MCPMark counts from the "
        "server's start; a warm spare or a pod's sidecar is up already). A toolcalls shard's whole limit.",
    )
    tool_call_timeout_seconds: int = Field(default=60, ge=1, le=INT_MAX)
    verifier_timeout_seconds: int = Field(default=300, ge=1, le=INT_MAX)
    llm_retries: int = Field(
        default=5,
        ge=0,
        le=20,
        description=(
            "Retries of one LLM call after a provider fault (429, 5xx, a hang, a dropped connection, an unusable "
            "reply); waits follow spec.provider. When they run out the trial is a provider_error: not scored, "
            "re-run on resume."
        ),
    )
    llm_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=INT_MAX,
        description=(
            "One LLM call: no reply within it is a provider hang, retried. Default: half of timeoutSeconds, as "
            "MCPMark's agent waits (1800 s of its 3600 s), so a reasoning model's long call is no hang. Must be "
            "less than timeoutSeconds; time lost to provider faults does not count against timeoutSeconds."
        ),
    )

    @property
    def llm_call_timeout(self) -> int:
        """The limit of one LLM call: ``llmTimeoutSeconds``, else half the agent's time (MCPMark's ``timeout / 2``)."""
        if self.llm_timeout_seconds is not None:
            return self.llm_timeout_seconds
        return max(1, self.timeout_seconds // 2)

    @model_validator(mode="after")
    def _llm_call_fits(self) -> Limits:
        # A call that may outlast the whole agent run would end as the agent's timeout, charged to the model,
        # when it is the provider that hangs.
        if self.llm_timeout_seconds is not None and self.llm_timeout_seconds >= self.timeout_seconds:
            raise ValueError(
                f"llmTimeoutSeconds ({self.llm_timeout_seconds}) must be less than timeoutSeconds "
                f"({self.timeout_seconds}): a hung provider must end as a provider fault, not as the agent's "
                "timeout; lower llmTimeoutSeconds or raise timeoutSeconds"
            )
        return self


class ProviderPolicy(SpecModel):
    """How provider faults are waited out and when a model's launches stop.

    Not part of the spec hash: waits and budgets change how long a run takes, never what a finished trial
    measured. Configuration errors (401/402/403, unknown model, an apiBase still unreachable after a few quick
    retries) stop a model's launches at once, whatever these say."""

    backoff_initial_seconds: float = Field(
        default=1.0, ge=0, le=600, description="First wait of the jittered exponential backoff between retries."
    )
    backoff_max_seconds: float = Field(default=30.0, ge=0, le=3600, description="Longest backoff wait.")
    retry_after_max_seconds: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description=(
            "Longest wait honoured when a provider says how long to wait (Retry-After in seconds or as an HTTP "
            "date, retry-after-ms, x-ratelimit-reset-*, anthropic-ratelimit-*-reset); longer asks wait this long."
        ),
    )
    trial_retry_budget: int = Field(
        default=30,
        ge=0,
        le=1000,
        description=(
            "LLM retries one trial may spend over all its calls; when spent, the trial ends as a provider_error. "
            "In toolcall tasks, per case (a shard of N cases has N times this budget)."
        ),
    )
    model_retry_budget: int | None = Field(
        default=1000,
        ge=0,
        le=INT_MAX,
        description=(
            "LLM retries the trials of one model may spend, counted from when its launches (re)started (a "
            "`mcpfleet run`, an operator start, a spec edit). When exceeded, no more of its trials are launched: "
            "the run reports the model as stopped, and re-running resumes it. null: no limit."
        ),
    )


class Concurrency(SpecModel):
    total: int = Field(default=4, ge=1, le=10_000, description="Max trials in flight for the run.")
    per_model: int | None = Field(default=None, ge=1, le=10_000, description="Max trials in flight per model.")


RETRY_WAIT_MAX_SECONDS = 3600.0  # the longest wait before a trial's retry (the doubling stops there)


def retry_wait(backoff_seconds: float, tries: int) -> float:
    """Seconds before retry number ``tries`` (1-based): doubling from backoff_seconds, capped at an hour (20
    retries of 10 s doubled would wait 61 days before the last)."""
    return min(RETRY_WAIT_MAX_SECONDS, backoff_seconds * 2.0 ** min(tries - 1, 64))


class Retries(SpecModel):
    """Retries of trials that measured nothing (infra_error, provider_error); model outcomes are never retried."""

    limit: int = Field(default=2, ge=0, le=20)
    backoff_seconds: float = Field(
        default=10,
        ge=0,
        le=RETRY_WAIT_MAX_SECONDS,
        description="Wait before a trial's first retry; doubled for each next one, at most an hour.",
    )
    backoff_limit: int | None = Field(
        default=None,
        ge=0,
        le=INT_MAX,
        description=(
            "Operator: infrastructure failures in a row (no trial recorded in between) after which the run "
            "stops as Failed (BackoffLimitExceeded), like a Job's backoffLimit: a bad image or a missing Secret "
            "fails every pod. Default: twice concurrency.total, at least 6."
        ),
    )


class LaunchOrder(SpecModel):
    """Operator: which waiting trial gets the next free pod. Longest expected first, learned as the run goes;
    the order never changes what a trial measures, only when the sweep ends."""

    learn_from: list[Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]] = Field(
        default_factory=list,
        max_length=20,
        description=(
            "Operator: earlier runs, by name, stored in this run's spec.output (every run of that name: it keeps "
            "each under its UID): their finished trials' times tell the launch order how long each task takes "
            "before this run has measured any, so a sweep of tasks run before starts its longest trials first. "
            "Other models' and other hardware's times serve too (their speed is fitted apart). A run that cannot "
            "be read is reported by an event and skipped."
        ),
    )


class Output(SpecModel):
    """Where records go: a local folder, or s3://bucket/prefix."""

    uri: str = Field(default="runs", min_length=1, max_length=MAX_PATH, description="Local path or s3://bucket/prefix.")
    endpoint_url: str | None = Field(default=None, max_length=MAX_URL, description="S3 endpoint for non-AWS stores.")
    region: str | None = None
    credentials_secret_ref: str | None = Field(
        default=None, description="Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (operator only)."
    )

    @field_validator("uri")
    @classmethod
    def _uri(cls, v: str) -> str:
        check_no_surrounding_space(v)
        if "\0" in v:
            raise ValueError("must not contain a NUL byte (no file system path can)")
        if "://" in v:
            check_s3_uri(v)
        return v

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        return check_no_credentials(v)


class Resources(SpecModel):
    """Kubernetes resource requests and limits for a container (cpu, memory, ephemeral-storage)."""

    requests: dict[Literal["cpu", "memory", "ephemeral-storage"], str] = Field(default_factory=dict)
    limits: dict[Literal["cpu", "memory", "ephemeral-storage"], str] = Field(default_factory=dict)

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, v: dict[str, str]) -> dict[str, str]:
        for key, q in v.items():
            try:
                quantity_value(str(q))
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Resources:
        # The API server refuses such a pod at creation: every trial of the run would fail the same way.
        for key, limit in self.limits.items():
            request = self.requests.get(key)
            if request is not None and quantity_value(request) > quantity_value(limit):
                raise ValueError(
                    f"requests.{key} ({request}) is more than limits.{key} ({limit}); the API server refuses such "
                    f"a pod: lower the request or raise the limit"
                )
        return self


class PodSettings(PodPlacement):
    """How trial pods are built (operator only; ignored by ``mcpfleet run``). The Kubernetes placement fields
    (tolerations, affinity, labels, ...) are PodPlacement's, laid over the operator's defaults."""

    runner_image: str | None = Field(default=None, description="Overrides the operator's default runner image.")
    sidecar_images: dict[str, str] = Field(
        default_factory=dict, description="MCP sidecar image per service, e.g. {filesystem: ...}."
    )
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "256Mi"},
            limits={"memory": "2Gi", "ephemeral-storage": "2Gi"},
        ),
        description="Runner container (agent loop and verifier).",
    )
    sidecar_resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "64Mi"},
            limits={"memory": "1Gi", "ephemeral-storage": "1Gi"},
        )
    )
    init_resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "64Mi"},
            limits={"memory": "512Mi", "ephemeral-storage": "1Gi"},
        ),
        description="The init container that materialises the initial state (and fetches an s3:// pack's task).",
    )
    volume_size_limit: str = Field(
        default="2Gi",
        pattern=QUANTITY,
        description="sizeLimit of each scratch emptyDir (state, /tmp, task): a trial filling it is evicted.",
    )
    service_account_name: str | None = Field(default=None, pattern=DNS_LABEL)
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels a trial pod must run on (label keys and values)."
    )
    pending_timeout_seconds: int = Field(
        default=600,
        ge=10,
        le=INT_MAX,
        description=(
            "A trial pod still Pending after this long (unschedulable, image pull failure) is an infrastructure "
            "error and is retried. Pending, as Kubernetes counts it, includes pulling images and the init "
            "containers (materialising the state, fetching an s3:// pack's task), so leave room for them."
        ),
    )

    @field_validator("runner_image")
    @classmethod
    def _runner_image(cls, v: str | None) -> str | None:
        return check_image(v)

    @field_validator("sidecar_images")
    @classmethod
    def _sidecar_images(cls, v: dict[str, str]) -> dict[str, str]:
        for key, image in v.items():
            try:
                check_image(image)
            except ValueError as exc:
                raise ValueError(f"{key[:80]}: {exc}") from None
        return v

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        return check_labels(v)  # the API server refuses a pod whose nodeSelector is no label: every trial alike


class JudgeSettings(SpecModel):
    """The LLM judge of the toolcall suite: any LiteLLM model, with the four-class rubric (see the README)."""

    model: str = Field(min_length=1, description="LiteLLM model string, e.g. 'openai/gpt-5-mini'.")
    api_base: str | None = Field(default=None, description="OpenAI-compatible base URL (a self-hosted judge).")
    api_key_env: str | None = Field(
        default=None, pattern=ENV_VAR_NAME, description="Name of the environment variable holding the judge's key."
    )
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Kubernetes Secret key holding the judge's API key (operator only)."
    )
    concurrency: int = Field(default=4, ge=1, le=256, description="Judge calls in flight per trial.")
    rate_per_second: float | None = Field(default=None, gt=0, description="Judge calls started per second per trial.")
    rate_limit: RateLimit | None = Field(
        default=None,
        description=(
            "What the judge's provider account allows, as a model's rateLimit. Unset: a tested model on the same "
            "account (apiBase, key reference, LiteLLM model) lends its own, and the judge shares that limit."
        ),
    )
    pricing: Pricing | None = Field(
        default=None,
        description="USD per million tokens, as a model's; unset: LiteLLM's map, else a same-account model's.",
    )

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, v: str | None) -> str | None:
        return check_no_credentials(v)

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, v: str | None) -> str | None:
        return check_key_env(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        return check_no_secret_text(v)

    @model_validator(mode="after")
    def _one_key_source(self) -> JudgeSettings:
        if self.api_key_env and self.api_key_secret_ref:
            raise ValueError("set at most one of apiKeyEnv and apiKeySecretRef")
        return self

    def same_account(self, model: ModelSpec) -> bool:
        """Whether ``model`` is called on the judge's provider account and model: same apiBase, key reference and
        LiteLLM model string (what a rate limit is shared by)."""
        return (
            model.model == self.model
            and (model.api_base or "").rstrip("/") == (self.api_base or "").rstrip("/")
            and model.api_key_env == self.api_key_env
            and model.api_key_secret_ref == self.api_key_secret_ref
        )

    def lent(self, models: list[ModelSpec]) -> JudgeSettings:
        """The judge with the rateLimit and pricing it does not set itself taken from a tested model on its account
        (the plan's, so a trial pod knows its judge's limit without the run's other models)."""
        same = next((m for m in models if self.same_account(m)), None)
        if same is None:
            return self
        return self.model_copy(
            update={"rate_limit": self.rate_limit or same.rate_limit, "pricing": self.pricing or same.pricing}
        )

    def as_model(self) -> ModelSpec:
        """The judge as the pace and the budget ledgers see a model (pace.py): its account, limit and price, no
        budget of its own (its spend counts toward spec.budget)."""
        return ModelSpec(
            name=JUDGE_MODEL_NAME,
            model=self.model,
            api_base=self.api_base,
            api_key_env=self.api_key_env,
            api_key_secret_ref=self.api_key_secret_ref,
            rate_limit=self.rate_limit,
            pricing=self.pricing,
        )


JUDGE_MODEL_NAME = "judge"  # the judge's model label in the LLM metrics


class ToolCallSettings(SpecModel):
    """How toolcall tasks (limbic-format single-call cases) run: cases per trial and who judges calls without a
    gold call. A 10,000-case task is 10,000 / shardSize trials (pods), not 10,000."""

    shard_size: int = Field(default=250, ge=1, le=100_000, description="Cases per trial (one pod per shard).")
    concurrency: int = Field(default=8, ge=1, le=256, description="Model calls in flight inside one shard.")
    judge: JudgeSettings | None = Field(
        default=None,
        description=(
            "Judge of calls that have no gold call (cases labelled incorrect_*). Without one such a call passes "
            "when the checker finds it schema-valid and it is not the case's labelled wrong call (an upper bound)."
        ),
    )

    def measured(self) -> dict[str, Any]:
        """What changes a shard's outcome (the judge's key and rate do not)."""
        judge = self.judge.model_dump(mode="json", include={"model", "api_base"}) if self.judge else None
        return {"shard_size": self.shard_size, "judge": judge}


RESULT_FIELDS = ("models", "tasks", "attempts", "agent", "limits", "toolcalls")  # frozen once trials exist
# Where the records are: frozen once trials exist too (the operator reads each trial's record there), but not
# hashed (a run copied to another bucket measured the same thing).
FROZEN_OUTPUT = ("uri", "endpoint_url")


MAX_MODELS = 1000  # models in one run; the plan's size (models x tasks x attempts) is capped as well


class EvalRunSpec(SpecModel):
    models: list[ModelSpec] = Field(min_length=1, max_length=MAX_MODELS)
    tasks: TaskSelection = Field(default_factory=TaskSelection)
    attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS, description="k: independent attempts per (model, task).")
    agent: AgentKind = Field(
        default=AgentKind.mcpmark,
        validate_default=True,  # -> "mcpmark", like parsed values
        description=(
            "mcpmark (MCPMark's agent: its system prompt and task suffix, the default), react (MCPMark's ReAct "
            "agent), mcpfleet (the same loop with mcpfleet's bare prompt), oracle (replays oracle.json) or noop."
        ),
    )
    limits: Limits = Field(default_factory=Limits)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    retries: Retries = Field(default_factory=Retries)
    provider: ProviderPolicy = Field(default_factory=ProviderPolicy)
    output: Output = Field(default_factory=Output)
    suspend: bool = Field(
        default=False,
        description=(
            "Operator: while true, like a Job's: the run's trial pods are deleted and none is launched; a trial "
            "whose pod stored no record goes back to pending without using a retry. False again: launches resume."
        ),
    )
    launch_order: LaunchOrder = Field(default_factory=LaunchOrder)
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=INT_MAX,
        description=(
            "Operator: delete the EvalRun (and so its pods) this long after it finished, Succeeded or Failed, "
            "like a Job's; its records and summary.json stay in spec.output. Unset: kept."
        ),
    )
    active_deadline_seconds: int | None = Field(
        default=None,
        gt=0,
        le=INT_MAX,
        description=(
            "Operator: like a Job's, the longest the run may be active, counted from status.startedAt (which a "
            "resume from suspend resets, so suspended time does not count); past it the run's pods are deleted "
            "and it ends Failed (DeadlineExceeded), its stored records kept. Unset: no limit. `mcpfleet run` "
            "(the local launcher) ignores it. It does not change what a trial measures (nor the spec hash)."
        ),
    )
    pod: PodSettings = Field(default_factory=PodSettings)
    toolcalls: ToolCallSettings | None = Field(
        default=None, description="Settings of toolcall tasks (single tool-call cases); defaults apply when unset."
    )
    servers: list[ServerVariant] = Field(
        default_factory=list,
        max_length=MAX_VARIANTS,
        description=(
            "Server variants of declared services (<pack>/<service>/service.yaml): each replaces keys of the pack's "
            "server block (command, args, env, url, image). A service any entry names runs once per entry: "
            "variants x models x tasks x attempts. An entry with only name and service is the pack's own server."
        ),
    )
    budget: Budget | None = Field(
        default=None,
        description=(
            "The most the whole run may spend on its models; trials it cuts short are budget_exhausted (not scored) "
            "and run again when it is raised and the run resumed."
        ),
    )

    @field_validator("models", "servers")
    @classmethod
    def _unique_names(cls, v: list[Any], info: ValidationInfo) -> list[Any]:
        what = "model" if info.field_name == "models" else "server variant"
        seen: set[str] = set()
        for entry in v:
            if entry.name in seen:
                raise ValueError(f"{what} names must be unique; '{entry.name}' appears twice")
            seen.add(entry.name)
        return v

    def frozen_view(self) -> dict[str, Any]:
        """What cannot change once trials exist: what a trial measures, and where its record is stored."""
        return self.results_view() | {"output": self.output.model_dump(mode="json", include=set(FROZEN_OUTPUT))}

    def results_view(self) -> dict[str, Any]:
        """The part of the spec that changes what a trial measures (not how fast or where)."""
        models = [m.model_dump(mode="json", include={"name", "model", "api_base", "params"}) for m in self.models]
        view = {
            "models": models,
            "tasks": self.tasks.model_dump(mode="json", exclude=self.tasks.location_view()),
            "attempts": self.attempts,
            "agent": self.agent,
            "limits": self.limits.model_dump(mode="json"),
        }
        if self.toolcalls is not None:  # only when set: the hash of every run without it stays as it was
            view["toolcalls"] = self.toolcalls.measured()
        if self.servers:  # likewise
            view["servers"] = [s.model_dump(mode="json", exclude_none=True) for s in self.servers]
        return view


class ObjectMeta(BaseModel):
    """The subset of Kubernetes ObjectMeta we read; the rest is allowed but ignored (it is the API server's)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(pattern=DNS_LABEL, max_length=63)
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class EvalRun(SpecModel):
    api_version: Literal["mcpfleet.io/v1alpha1"]
    kind: Literal["EvalRun"]
    metadata: ObjectMeta
    spec: EvalRunSpec
    status: dict[str, Any] | None = Field(default=None, exclude=True)

    @property
    def name(self) -> str:
        return self.metadata.name
