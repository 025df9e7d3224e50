"""EvalRun validation: the exact problem lines users see, file loading, defaults and spec_hash."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.runner.spec.evalrun import AgentKind
from mcpfleet.runner.spec.load import SpecError, load_evalrun, parse_evalrun, spec_hash

DNS_MSG = "must be a DNS label: lowercase letters, digits and '-', starting and ending alphanumeric"

Doc = dict[str, Any]


def minimal() -> Doc:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {"models": [{"name": "m", "model": "scripted/oracle"}]},
    }


def problems(mutate: Callable[[Doc], Any]) -> list[str]:
    doc = minimal()
    mutate(doc)
    with pytest.raises(SpecError) as info:
        parse_evalrun(doc)
    return info.value.problems


def spec(d: Doc) -> Doc:
    return d["spec"]


def model(d: Doc) -> Doc:
    return d["spec"]["models"][0]


INVALID: list[tuple[str, Callable[[Doc], Any], list[str]]] = [
    ("attempts-zero", lambda d: spec(d).update(attempts=0), ["spec.attempts: must be >= 1"]),
    ("attempts-too-many", lambda d: spec(d).update(attempts=101), ["spec.attempts: must be <= 100"]),
    (
        "active-deadline-zero",
        lambda d: spec(d).update(activeDeadlineSeconds=0),
        ["spec.activeDeadlineSeconds: must be > 0"],
    ),
    (
        "unknown-top-level",
        lambda d: d.update(extra=1),
        ["extra: unknown field; allowed fields: apiVersion, kind, metadata, spec, status"],
    ),
    (
        "unknown-in-spec",
        lambda d: spec(d).update(attempt=2),
        [
            "spec.attempt: unknown field; allowed fields: activeDeadlineSeconds, agent, attempts, budget, "
            "concurrency, launchOrder, limits, models, output, pod, provider, retries, servers, suspend, tasks, "
            "toolcalls, "
            "ttlSecondsAfterFinished"
        ],
    ),
    (
        "unknown-in-limits",
        lambda d: spec(d).update(limits={"maxTurn": 5}),
        [
            "spec.limits.maxTurn: unknown field; allowed fields: llmRetries, llmTimeoutSeconds, maxTurns, "
            "timeoutSeconds, toolCallTimeoutSeconds, verifierTimeoutSeconds"
        ],
    ),
    (
        "unknown-in-model",
        lambda d: model(d).update(temperature=0.5),
        [
            "spec.models[0].temperature: unknown field; allowed fields: apiBase, apiKeyEnv, apiKeySecretRef, "
            "budget, concurrency, model, name, params, pricing, rateLimit"
        ],
    ),
    (
        "unknown-in-secret-ref",
        lambda d: model(d).update(apiKeySecretRef={"name": "s", "key": "k", "ns": "x"}),
        ["spec.models[0].apiKeySecretRef.ns: unknown field; allowed fields: key, name"],
    ),
    (
        "inline-api-key",
        lambda d: model(d).update(apiKey="sk-123"),
        [
            "spec.models[0]: inline secret field 'apiKey' is not allowed; reference it with apiKeyEnv "
            "(an environment variable name) or apiKeySecretRef {name, key}"
        ],
    ),
    (
        "two-key-sources",
        lambda d: model(d).update(apiKeyEnv="KEY", apiKeySecretRef={"name": "s", "key": "k"}),
        ["spec.models[0]: set at most one of apiKeyEnv and apiKeySecretRef"],
    ),
    (
        "bad-key-env",
        lambda d: model(d).update(apiKeyEnv="1KEY"),
        ["spec.models[0].apiKeyEnv: must match ^[A-Za-z_][A-Za-z0-9_]*$"],
    ),
    (
        "duplicate-models",
        lambda d: spec(d)["models"].append({"name": "m", "model": "openai/gpt-5"}),
        ["spec.models: model names must be unique; 'm' appears twice"],
    ),
    ("bad-model-name", lambda d: model(d).update(name="GPT_5"), [f"spec.models[0].name: {DNS_MSG}"]),
    ("empty-model-string", lambda d: model(d).update(model=""), ["spec.models[0].model: must not be empty"]),
    ("missing-model-string", lambda d: model(d).pop("model"), ["spec.models[0].model: required field is missing"]),
    (
        "bad-agent",
        lambda d: spec(d).update(agent="human"),
        ["spec.agent: must be one of 'mcpmark', 'react', 'mcpfleet', 'oracle' or 'noop'"],
    ),
    ("empty-models", lambda d: spec(d).update(models=[]), ["spec.models: must have at least 1 item(s)"]),
    (
        "gcs-uri",
        lambda d: spec(d).update(output={"uri": "gs://bucket/runs"}),
        ["spec.output.uri: must be a local path or s3://bucket/prefix"],
    ),
    (
        "bad-bucket",
        lambda d: spec(d).update(output={"uri": "s3://Bad_Bucket/runs"}),
        ["spec.output.uri: s3 URI must be s3://<bucket>/<prefix> with a valid bucket name"],
    ),
    (
        "temperature-high",
        lambda d: model(d).update(params={"temperature": 3}),
        ["spec.models[0].params.temperature: must be <= 2.0"],
    ),
    ("top-p-zero", lambda d: model(d).update(params={"topP": 0}), ["spec.models[0].params.topP: must be > 0.0"]),
    (
        "bad-effort",
        lambda d: model(d).update(params={"reasoningEffort": "max"}),
        ["spec.models[0].params.reasoningEffort: must be one of 'minimal', 'low', 'medium' or 'high'"],
    ),
    (
        "wrong-api-version",
        lambda d: d.update(apiVersion="mcpfleet.io/v1"),
        ["apiVersion: must be 'mcpfleet.io/v1alpha1'"],
    ),
    ("wrong-kind", lambda d: d.update(kind="Job"), ["kind: must be 'EvalRun'"]),
    ("missing-spec", lambda d: d.pop("spec"), ["spec: required field is missing"]),
    ("bad-run-name", lambda d: d.update(metadata={"name": "My_Run"}), [f"metadata.name: {DNS_MSG}"]),
    ("zero-concurrency", lambda d: spec(d).update(concurrency={"total": 0}), ["spec.concurrency.total: must be >= 1"]),
    (
        # An LLM call allowed to outlast the agent: a hung provider would be the model's timeout.
        "llm-call-outlasts-the-agent",
        lambda d: spec(d).update(limits={"timeoutSeconds": 300, "llmTimeoutSeconds": 600}),
        [
            "spec.limits: llmTimeoutSeconds (600) must be less than timeoutSeconds (300): a hung provider must "
            "end as a provider fault, not as the agent's timeout; lower llmTimeoutSeconds or raise timeoutSeconds"
        ],
    ),
    (
        "negative-retry-budget",
        lambda d: spec(d).update(provider={"trialRetryBudget": -1}),
        ["spec.provider.trialRetryBudget: must be >= 0"],
    ),
    (
        "many-at-once",
        lambda d: (spec(d).update(attempts=0, bogus=True), model(d).update(name="A")),
        [
            f"spec.models[0].name: {DNS_MSG}",
            "spec.attempts: must be >= 1",
            "spec.bogus: unknown field; allowed fields: activeDeadlineSeconds, agent, attempts, budget, "
            "concurrency, launchOrder, limits, models, output, pod, provider, retries, servers, suspend, tasks, "
            "toolcalls, "
            "ttlSecondsAfterFinished",
        ],
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_spec_problem_lines(mutate: Callable[[Doc], Any], expected: list[str]) -> None:
    assert problems(mutate) == expected


def test_error_message_lists_every_problem_under_a_header() -> None:
    doc = minimal()
    spec(doc).update(attempts=0, concurrency={"total": 0})
    with pytest.raises(SpecError) as info:
        parse_evalrun(doc, "run.yaml")
    assert str(info.value) == (
        "invalid EvalRun in run.yaml:\n  spec.attempts: must be >= 1\n  spec.concurrency.total: must be >= 1"
    )
    assert info.value.source == "run.yaml"


def test_non_mapping_document() -> None:
    with pytest.raises(SpecError) as info:
        parse_evalrun(["not", "a", "mapping"])
    assert info.value.problems == ["(root): must be a mapping with apiVersion, kind, metadata and spec"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_load_reports_yaml_syntax_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, "apiVersion: mcpfleet.io/v1alpha1\nspec: [unclosed\n")
    with pytest.raises(SpecError) as info:
        load_evalrun(path)
    (line,) = info.value.problems
    assert line.startswith("(file): not valid YAML: ") and "line 2" in line
    assert info.value.source == str(path)


def test_load_reports_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_evalrun(tmp_path / "absent.yaml")
    assert info.value.problems == ["(file): cannot read: No such file or directory"]


@pytest.mark.parametrize(
    ("docs", "found"),
    [
        ([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}], 0),
        ([], 0),
        ([minimal(), minimal()], 2),
    ],
)
def test_load_needs_exactly_one_evalrun(tmp_path: Path, docs: list[Doc], found: int) -> None:
    path = _write(tmp_path, yaml.safe_dump_all(docs) if docs else "# nothing here\n")
    with pytest.raises(SpecError) as info:
        load_evalrun(path)
    assert info.value.problems == [f"(file): expected exactly one document of kind EvalRun, found {found}"]


def test_load_picks_the_evalrun_among_other_documents(tmp_path: Path) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "llm-keys"}}
    run = load_evalrun(_write(tmp_path, yaml.safe_dump_all([secret, minimal()])))
    assert run.name == "t"


def test_load_reports_spec_problems_with_the_file_name(tmp_path: Path) -> None:
    doc = minimal()
    spec(doc)["attempts"] = 0
    path = _write(tmp_path, yaml.safe_dump(doc))
    with pytest.raises(SpecError) as info:
        load_evalrun(path)
    assert info.value.problems == ["spec.attempts: must be >= 1"]
    assert str(info.value).startswith(f"invalid EvalRun in {path}:")


def test_defaults() -> None:
    run = parse_evalrun(minimal())
    s = run.spec
    assert (
        s.limits.max_turns,
        s.limits.timeout_seconds,
        s.limits.tool_call_timeout_seconds,
        s.limits.verifier_timeout_seconds,
    ) == (100, 3600, 60, 300)
    # One LLM call may take half the agent's time, as MCPMark's agent allows (timeout / 2): a reasoning model's
    # 10-minute call is no provider hang (600 s made it one, retried until the trial was unscored).
    assert (s.limits.llm_retries, s.limits.llm_timeout_seconds, s.limits.llm_call_timeout) == (5, None, 1800)
    assert s.attempts == 1
    assert s.agent == AgentKind.mcpmark and type(s.agent) is str and f"{s.agent}" == "mcpmark"
    assert (s.concurrency.total, s.concurrency.per_model) == (4, None)
    assert (s.retries.limit, s.retries.backoff_seconds) == (2, 10)
    p = s.provider
    assert (p.backoff_initial_seconds, p.backoff_max_seconds, p.retry_after_max_seconds) == (1.0, 30.0, 60.0)
    assert (p.trial_retry_budget, p.model_retry_budget) == (30, 1000)
    assert s.limits.llm_call_timeout < s.limits.timeout_seconds  # the defaults fit the time budget
    assert (s.output.uri, s.suspend, s.tasks.path, s.tasks.services) == ("runs", False, "tasks", [])
    assert s.models[0].params.litellm_kwargs() == {}


@pytest.mark.parametrize(("limits", "call"), [({"timeoutSeconds": 300}, 150), ({"llmTimeoutSeconds": 120}, 120)])
def test_an_llm_call_may_take_half_the_agents_time_unless_set(
    limits: dict[str, int], call: int, tmp_path: Path
) -> None:
    """Before, the default 600 s refused `timeoutSeconds: 300` (the call outlasted the agent) and cut every longer
    call of a slow reasoning model as a provider hang. MCPMark's agent waits timeout / 2 per call; so does this."""
    from mcpfleet.runner.llm.target import llm_target
    from mcpfleet.runner.plan.expand import plan
    from mcpfleet.runner.spec.trial import TrialContext

    doc = minimal()
    spec(doc)["limits"] = limits
    run = parse_evalrun(doc)
    assert run.spec.limits.llm_call_timeout == call
    from conftest import make_tiny_pack

    pack = make_tiny_pack(tmp_path / "pack")
    spec(doc)["tasks"] = {"path": str(pack)}
    [trial] = plan(parse_evalrun(doc), pack)
    assert llm_target(trial.model, trial, TrialContext(scripted_base_url="http://127.0.0.1:9")).timeout == call


def test_camel_and_snake_case_both_parse() -> None:
    doc = minimal()
    spec(doc)["limits"] = {"max_turns": 7}
    model(doc)["params"] = {"top_p": 0.5, "reasoningEffort": "low"}
    s = parse_evalrun(doc).spec
    assert s.limits.max_turns == 7
    assert s.models[0].params.litellm_kwargs() == {"top_p": 0.5, "reasoning_effort": "low"}


def _hash(mutate: Callable[[Doc], Any] = lambda d: None) -> str:
    doc = minimal()
    mutate(doc)
    return spec_hash(parse_evalrun(doc))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: spec(d).update(concurrency={"total": 64, "perModel": 8}),
        lambda d: model(d).update(concurrency=2),
        lambda d: spec(d).update(output={"uri": "s3://bucket/runs", "region": "eu-west-1"}),
        lambda d: spec(d).update(retries={"limit": 5, "backoffSeconds": 1}),
        lambda d: spec(d).update(suspend=True),
        lambda d: spec(d).update(activeDeadlineSeconds=3600),
        lambda d: model(d).update(apiKeyEnv="OTHER_KEY"),
        lambda d: d.update(metadata={"name": "renamed", "labels": {"a": "b"}}),
        lambda d: spec(d).update(limits={"maxTurns": 100}, attempts=1, agent="mcpmark"),  # explicit defaults
        lambda d: spec(d).update(provider={"retryAfterMaxSeconds": 5, "trialRetryBudget": 3, "modelRetryBudget": None}),
    ],
    ids=[
        "concurrency",
        "model-concurrency",
        "output",
        "retries",
        "suspend",
        "active-deadline",
        "key-source",
        "metadata",
        "explicit-defaults",
        "provider-policy",
    ],
)
def test_spec_hash_ignores_how_and_where(mutate: Callable[[Doc], Any]) -> None:
    assert _hash(mutate) == _hash()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: model(d).update(params={"temperature": 0.5}),
        lambda d: model(d).update(model="scripted/noop"),
        lambda d: model(d).update(apiBase="http://llm:8000/v1"),
        lambda d: spec(d).update(limits={"maxTurns": 50}),
        lambda d: spec(d).update(limits={"verifierTimeoutSeconds": 30}),
        lambda d: spec(d).update(attempts=4),
        lambda d: spec(d).update(agent="oracle"),
        lambda d: spec(d).update(tasks={"services": ["filesystem"]}),
    ],
    ids=["param", "model", "api-base", "max-turns", "verifier-timeout", "attempts", "agent", "tasks"],
)
def test_spec_hash_changes_with_what_is_measured(mutate: Callable[[Doc], Any]) -> None:
    assert _hash(mutate) != _hash()


def test_parse_does_not_mutate_input() -> None:
    doc = minimal()
    before = copy.deepcopy(doc)
    parse_evalrun(doc)
    assert doc == before
