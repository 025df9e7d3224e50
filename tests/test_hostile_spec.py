"""Hostile EvalRun specs (review findings 0, 6, 10, 11, 13, 15): huge integers, plans of millions of trials,
values the API server would refuse at pod creation, and credentials where the checks did not look. Each is
refused as one line naming the field (or the file's line), never a traceback; secrets are redacted in every form
they may be written in."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, make_tiny_pack

from mcpfleet.runner.plan import expand as plan_module
from mcpfleet.runner.results.records import redact, redact_text
from mcpfleet.runner.spec.crd import build_crd
from mcpfleet.runner.spec.evalrun import INT_MAX
from mcpfleet.runner.spec.load import SpecError, load_evalrun, parse_evalrun
from mcpfleet.runner.spec.yamlload import YAMLLimitError, load_all

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
CANARY = "sk-canary-7e6d5c4b3a291807"
HEAD = "apiVersion: mcpfleet.io/v1alpha1\nkind: EvalRun\nmetadata: {name: hostile}\nspec:\n"


def body(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "hostile"}, "spec": spec}


def refused(spec: dict[str, Any]) -> str:
    """The one error of an invalid spec, flattened."""
    with pytest.raises(SpecError) as err:
        parse_evalrun(body(spec))
    return " ".join(str(err.value).split())


def model(**extra: Any) -> dict[str, Any]:
    return {"name": "m", "model": "openai/gpt-5", **extra}


# --- 0: integers of more than 4,300 digits ---------------------------------------------------------------------

BIG = "1" + "0" * 5000


@pytest.mark.parametrize(
    "line",
    [
        f"  attempts: {BIG}",  # decimal: int() refuses it
        "  attempts: 0x" + "f" * 5000,  # hex: parsed, but cannot be written as text
        "  attempts: " + ":".join(["59"] * 3000),  # YAML 1.1 base 60
        f"  ? {BIG}\n  : x",  # as a mapping key
    ],
    ids=["decimal", "hex", "base60", "key"],
)
def test_an_integer_of_more_than_4300_digits_is_refused_naming_its_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + "  models: [{name: m, model: scripted/noop}]\n" + line + "\n")
    with pytest.raises(SpecError) as err:
        load_evalrun(path)
    text = str(err.value)
    assert "a number with more than 4,300 digits" in text and "line 6" in text, text


def test_validate_refuses_a_huge_integer_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + f"  models: [{{name: m, model: scripted/noop}}]\n  attempts: {BIG}\n")
    out = subprocess.run(
        [str(MCPFLEET), "validate", str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "more than 4,300 digits" in out.stderr, out.stderr


def test_an_impossible_date_is_refused_naming_its_line(tmp_path: Path) -> None:
    """PyYAML builds `2024-13-45` as a date and raises a plain ValueError (a traceback before)."""
    path = tmp_path / "date.yaml"
    path.write_text(HEAD + "  models: [{name: m, model: scripted/noop}]\n  attempts: 2024-13-45\n")
    with pytest.raises(SpecError) as err:
        load_evalrun(path)
    assert "not a valid date or time" in str(err.value) and "line 6" in str(err.value)


@pytest.mark.parametrize("where", ["spec", "metadata"])
def test_a_huge_integer_from_the_api_server_is_refused(where: str) -> None:
    """The operator hands parse_evalrun decoded JSON: a huge int there must be a SpecError (InvalidSpec)."""
    data = body({"models": [model()]})
    data[where]["attempts" if where == "spec" else "generation"] = 10**5000
    with pytest.raises(SpecError) as err:
        parse_evalrun(data)
    assert "(root): refused: a number with more than 4,300 digits" in str(err.value)


# --- 15 (last bullet): the expansion message names the limit, not what was left of it --------------------------


def test_many_documents_are_refused_naming_the_whole_limit() -> None:
    with pytest.raises(YAMLLimitError) as err:
        load_all("---\n{a: 1}\n" * 6, max_nodes=10)
    assert "more than 10 values" in str(err.value), str(err.value)


# --- 11: integers bounded as the CRD bounds them -----------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,field,bound",
    [
        ({"models": [model(params={"seed": INT_MAX + 1})]}, "spec.models[0].params.seed", INT_MAX),
        ({"models": [model(params={"maxTokens": INT_MAX + 1})]}, "spec.models[0].params.maxTokens", INT_MAX),
        ({"models": [model(concurrency=10**23)]}, "spec.models[0].concurrency", 10_000),
        ({"models": [model()], "concurrency": {"perModel": 10**20}}, "spec.concurrency.perModel", 10_000),
        ({"models": [model()], "limits": {"timeoutSeconds": 2**63}}, "spec.limits.timeoutSeconds", INT_MAX),
        (
            {"models": [model()], "limits": {"verifierTimeoutSeconds": 2**63}},
            "spec.limits.verifierTimeoutSeconds",
            INT_MAX,
        ),
        (
            {"models": [model()], "limits": {"toolCallTimeoutSeconds": 2**63}},
            "spec.limits.toolCallTimeoutSeconds",
            INT_MAX,
        ),
        ({"models": [model()], "provider": {"modelRetryBudget": 2**63}}, "spec.provider.modelRetryBudget", INT_MAX),
        ({"models": [model()], "retries": {"backoffLimit": 2**63}}, "spec.retries.backoffLimit", INT_MAX),
        ({"models": [model()], "pod": {"pendingTimeoutSeconds": 2**63}}, "spec.pod.pendingTimeoutSeconds", INT_MAX),
        ({"models": [model()], "ttlSecondsAfterFinished": 2**63}, "spec.ttlSecondsAfterFinished", INT_MAX),
        ({"models": [model()], "activeDeadlineSeconds": 2**63}, "spec.activeDeadlineSeconds", INT_MAX),
    ],
)
def test_integers_beyond_the_crds_range_are_refused(spec: dict[str, Any], field: str, bound: int) -> None:
    assert f"{field}: must be <= {bound}" in refused(spec)


def test_the_largest_allowed_timeouts_fit_a_pods_int64_deadline() -> None:
    """The operator sums timeoutSeconds + verifierTimeoutSeconds (+ a grace) into activeDeadlineSeconds."""
    limits = {"timeoutSeconds": INT_MAX, "verifierTimeoutSeconds": INT_MAX, "llmTimeoutSeconds": INT_MAX - 1}
    run = parse_evalrun(body({"models": [model(params={"seed": -INT_MAX})], "limits": limits}))
    assert run.spec.limits.timeout_seconds + run.spec.limits.verifier_timeout_seconds + 10**6 < 2**63


def test_the_crd_carries_the_same_integer_bounds() -> None:
    spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["limits"]["properties"]["timeoutSeconds"]["maximum"] == INT_MAX
    assert spec["concurrency"]["properties"]["perModel"]["maximum"] == 10_000
    seed = spec["models"]["items"]["properties"]["params"]["properties"]["seed"]
    assert (seed["minimum"], seed["maximum"]) == (-INT_MAX, INT_MAX)
    assert spec["models"]["maxItems"] == 1000


# --- 10: what the API server would refuse at pod creation --------------------------------------------------------


@pytest.mark.parametrize("bad", ["1.2.3.4", "-5Gi", "1eeeKKK", "1Kii", "Gi", "1e", "2Gi\n", "0x10"])
def test_a_quantity_outside_kubernetes_grammar_is_refused(bad: str) -> None:
    text = refused({"models": [model()], "pod": {"volumeSizeLimit": bad}})
    assert "spec.pod.volumeSizeLimit: must be a Kubernetes quantity" in text, text
    text = refused({"models": [model()], "pod": {"resources": {"limits": {"memory": bad}}}})
    assert "spec.pod.resources.limits: memory:" in text and "is not a Kubernetes quantity" in text, text


@pytest.mark.parametrize(
    "good", ["500m", "2", "1Gi", "1.5", ".5", "1.", "+1", "1e3", "2E-2", "100u", "3k", "1Ei", "1E", "7e1"]
)
def test_a_kubernetes_quantity_is_accepted(good: str) -> None:
    pod = {"volumeSizeLimit": good, "resources": {"requests": {"cpu": good}, "limits": {"cpu": good}}}
    assert parse_evalrun(body({"models": [model()], "pod": pod})).spec.pod.volume_size_limit == good


def test_requests_above_limits_are_refused() -> None:
    resources = {"requests": {"memory": "3Gi", "cpu": "100m"}, "limits": {"memory": "2048Mi", "cpu": "1"}}
    text = refused({"models": [model()], "pod": {"sidecarResources": resources}})
    assert "spec.pod.sidecarResources: requests.memory (3Gi) is more than limits.memory (2048Mi)" in text, text
    ok = {"requests": {"memory": "2Gi", "cpu": "1000m"}, "limits": {"memory": "2048Mi", "cpu": "1"}}
    parse_evalrun(body({"models": [model()], "pod": {"sidecarResources": ok}}))


@pytest.mark.parametrize(
    "selector,said",
    [
        ({"a b": "x"}, "key 'a b': not a label key"),
        ({"-disk": "x"}, "key '-disk': not a label key"),
        ({"Example.COM/disk": "x"}, "its prefix (before '/') must be a DNS subdomain"),
        ({"/disk": "x"}, "its prefix (before '/') must be a DNS subdomain"),
        ({"x" * 64: "x"}, "not a label key"),
        ({"disk": "!!"}, "disk: value '!!' is not a label value"),
        ({"disk": "a" * 64}, "is not a label value"),
    ],
)
def test_a_node_selector_that_is_no_label_is_refused(selector: dict[str, str], said: str) -> None:
    text = refused({"models": [model()], "pod": {"nodeSelector": selector}})
    assert "spec.pod.nodeSelector: " in text and said in text, text


def test_a_node_selector_of_labels_is_accepted() -> None:
    selector = {"kubernetes.io/arch": "amd64", "node.example.com/pool_1": "gpu.large-2", "spot": ""}
    assert parse_evalrun(body({"models": [model()], "pod": {"nodeSelector": selector}})).spec.pod.node_selector


# --- 6: the plan's size is capped before it is built -------------------------------------------------------------


def test_too_many_models_are_refused() -> None:
    models = [{"name": f"m{i}", "model": "scripted/noop"} for i in range(1001)]
    assert "spec.models: must have at most 1000 item(s)" in refused({"models": models})


def test_a_plan_past_the_cap_is_refused_naming_its_factors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = make_tiny_pack(tmp_path / "pack", tasks=3)
    models = [{"name": "a", "model": "scripted/noop"}, {"name": "b", "model": "scripted/noop"}]
    run = parse_evalrun(body({"models": models, "attempts": 2, "tasks": {"path": str(pack)}}))
    assert len(plan_module.plan(run, tmp_path)) == 12
    monkeypatch.setattr(plan_module, "MAX_TRIALS", 11)
    built: list[int] = []
    monkeypatch.setattr(plan_module, "TrialSpec", lambda **kw: built.append(1))  # nothing is built when refused
    with pytest.raises(SpecError) as err:
        plan_module.plan(run, tmp_path)
    text = " ".join(str(err.value).split())
    assert "2 models x 3 tasks x 2 attempts = 12 trials; at most 11 are allowed" in text, text
    assert built == []


def test_the_real_cap_refuses_a_sweep_of_millions() -> None:
    run = parse_evalrun(body({"models": [{"name": f"m{i}", "model": "scripted/noop"} for i in range(1000)]}))
    run = run.model_copy(update={"spec": run.spec.model_copy(update={"attempts": 100})})
    plan_module.check_plan_size(run, 1, 1)  # 100,000: allowed
    with pytest.raises(SpecError, match="1,000 models x 15 tasks x 100 attempts = 1,500,000 trials"):
        plan_module.check_plan_size(run, 15, 15)


# --- 13: credentials where the checks did not look; redaction of every form of a key ------------------------------


@pytest.mark.parametrize(
    "field,value,said",
    [
        ("model", f"openai/gpt-4?api_key={CANARY}", "looks like it carries a credential"),
        ("model", f"openai/{CANARY}", "looks like it carries a credential"),
        ("model", f"openai/gpt-4#token:{CANARY}", "looks like it carries a credential"),
        ("apiBase", f"http://h/v1#api_key={CANARY}", "has a #fragment, which is never sent"),
        ("apiBase", f"http://h/v1/{CANARY}/", "looks like it carries credentials in its path"),
        ("apiBase", f"http://h/v1/api_key={CANARY}", "looks like it carries credentials in its path"),
        ("apiBase", f"http://h/v1?x=1;api_key={CANARY}", "carries credentials in its query (api_key)"),
        ("apiBase", "http://h:99999/v1", "has no valid port"),
        ("apiBase", "http://h:port/v1", "has no valid port"),
    ],
)
def test_credentials_in_a_model_string_or_url_are_refused_without_echoing_them(
    field: str, value: str, said: str
) -> None:
    text = refused({"models": [model(**{field: value})]})
    assert f"spec.models[0].{field}: " in text and said in text, text
    assert CANARY not in text
    judge = {"model": "openai/gpt-5-mini", field: value}
    text = refused({"models": [model()], "toolcalls": {"judge": judge}})
    assert f"spec.toolcalls.judge.{field}: " in text and said in text, text
    assert CANARY not in text


@pytest.mark.parametrize(
    "extra",
    [
        {"model": "scripted/oracle?key=the-right-key&fault=auth"},  # the scripted server's own options
        {"model": "bedrock/anthropic.claude-3-sonnet-20240229-v1:0"},
        {"model": "vertex_ai/claude-3-5-sonnet@20240620"},
        {"model": "ollama/llama3:8b", "apiBase": "http://127.0.0.1:11434"},
        {"model": "azure/gpt-4o", "apiBase": "https://x.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18"},
        {"model": "openai/m", "apiBase": "http://[::1]:8000/v1?api-version=2024-06-01"},
    ],
)
def test_ordinary_model_strings_and_urls_stay_valid(extra: dict[str, str]) -> None:
    parse_evalrun(body({"models": [model(**extra)]}))


@pytest.mark.parametrize(
    "key", ['sk-ab"cd\\ef-123456', "sk-ünïcode-1234567", "sk/with+plus and space", "abc123", "k3y!/x"]
)
def test_every_written_form_of_a_key_is_redacted(key: str) -> None:
    from urllib.parse import quote, quote_plus

    record = {"error": f"401: bad key {key}", "url": f"http://h/?k={quote(key, safe='')}&q={quote_plus(key)}"}
    nested = {"messages": [{"content": json.dumps(record)}]}  # a tool result holding JSON: escaped twice
    for blob in (json.dumps(record), json.dumps(record, ensure_ascii=False), json.dumps(nested)):
        out = redact(blob.encode(), [key]).decode()
        assert "[REDACTED]" in out
        for form in (key, json.dumps(key)[1:-1], quote(key, safe=""), quote_plus(key), key.replace('"', '\\"')):
            assert form not in out, (form, out)
        json.loads(out)  # still a record
    assert redact_text(f"Incorrect API key provided: {key}.", [key]) == "Incorrect API key provided: [REDACTED]."


def test_a_dummy_key_of_one_to_five_characters_leaves_records_whole() -> None:
    """A local server's dummy key (`x`, vLLM's `EMPTY`) is no secret; replacing every `x` or `text` would break
    the records' JSON."""
    data = json.dumps({"attempt": 1, "text": "x marks 1 spot, EMPTY"}).encode()
    assert redact(data, ["x", "1", "", "text", "EMPTY"]) == data


def test_a_run_redacts_escaped_and_short_keys_everywhere(tmp_path: Path) -> None:
    """The scripted server's 401 echoes the key it was given; a key with `"` and `\\` was written JSON-escaped,
    and one with `/` and `+` URL-encoded."""
    pack = make_tiny_pack(tmp_path / "pack")
    keys = {"K_QUOTED": 'sk-ab"cd\\ef-123456', "K_SHORT": "sk/ab+cd 123456"}
    models = [
        {"name": name, "model": "scripted/oracle?key=expected-value-xyz", "apiKeyEnv": env}
        for name, env in (("q", "K_QUOTED"), ("s", "K_SHORT"))
    ]
    spec = {"models": models, "tasks": {"path": str(pack)}, "retries": {"limit": 0}, "output": {"uri": "runs"}}
    path = tmp_path / "secret.yaml"
    path.write_text(yaml.safe_dump(body(spec)))
    out = subprocess.run(
        [str(MCPFLEET), "run", str(path), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, **keys},
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 3, (out.returncode, out.stderr)  # both models stopped by their 401
    assert "[REDACTED]" in out.stderr
    written = [out.stdout, out.stderr] + [
        p.read_text(errors="replace") for p in (tmp_path / "runs").rglob("*") if p.is_file()
    ]
    for key in keys.values():
        for form in (key, json.dumps(key)[1:-1]):
            assert not [w for w in written if form in w], form


# --- review leftovers: the store's credentials as a model's key, image references --------------------------------


@pytest.mark.parametrize("name", ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN"])
def test_the_stores_credentials_are_refused_as_a_models_key(name: str) -> None:
    """Before: valid; every trial sent the S3 store's secret to the model's provider (any apiBase) as its key."""
    text = refused({"models": [model(apiKeyEnv=name)]})
    assert "spec.models[0].apiKeyEnv: " in text and "results store's S3 credentials" in text, text
    judge = {"model": "openai/gpt-5-mini", "apiKeyEnv": name}
    text = refused({"models": [model()], "toolcalls": {"judge": judge}})
    assert "spec.toolcalls.judge.apiKeyEnv: " in text and "results store's S3 credentials" in text, text


def test_a_bedrock_api_key_variable_stays_a_valid_key() -> None:
    run = parse_evalrun(body({"models": [model(model="bedrock/m", apiKeyEnv="AWS_BEARER_TOKEN_BEDROCK")]}))
    assert run.spec.models[0].api_key_env == "AWS_BEARER_TOKEN_BEDROCK"


BAD_IMAGES = [
    "ghcr.io/MCPFleet/runner:1",  # a repository in capitals
    "runner image",
    "ghcr.io/x/y:",
    "ghcr.io/x/y@sha256:abc",  # a digest too short
    "x:tag:again",
    "ghcr.io/x/y:" + "t" * 200,  # a tag past 128 characters
    "ghcr.io/x/" + "y" * 600,
    "ghcr.io/x/y:ünï",
]


@pytest.mark.parametrize("image", BAD_IMAGES)
def test_an_image_no_runtime_can_pull_is_refused(image: str) -> None:
    """Before: valid; every trial pod sat in InvalidImageName until its pending timeout, then an infra error."""
    text = refused({"models": [model()], "pod": {"runnerImage": image}})
    assert "spec.pod.runnerImage: " in text and "is not a container image reference" in text, text
    text = refused({"models": [model()], "pod": {"sidecarImages": {"filesystem": image}}})
    assert "spec.pod.sidecarImages: " in text and "filesystem: " in text, text
    assert "is not a container image reference" in text, text


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/mcpfleet/runner:0.1.0",
        "busybox",
        "localhost:5000/team/runner:dev_1.2-rc",
        "registry.k8s.io/pause:3.9",
        "docker.io/library/python@sha256:" + "a" * 64,
        "my-registry.example:443/a__b/c-d.e:latest@sha256:" + "0" * 64,
        "",  # empty: the operator's default
    ],
)
def test_ordinary_image_references_stay_valid(image: str) -> None:
    pod = {"runnerImage": image, "sidecarImages": {"filesystem": image, "postgres-db": image}}
    run = parse_evalrun(body({"models": [model()], "pod": pod}))
    assert run.spec.pod.runner_image == image


def test_every_integer_of_the_crd_is_declared_int64() -> None:
    """As Kubernetes' own types declare theirs (kubectl explain and client generators read the format); the
    Kubernetes types spec.pod embeds (tolerations, affinity, ...) keep Kubernetes' own formats (int32 weights)."""
    found: dict[str, list[str | None]] = {"mcpfleet": [], "kubernetes": []}
    embedded = {"tolerations", "affinity", "topologySpreadConstraints", "dnsConfig", "imagePullSecrets"}

    def walk(node: Any, whose: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "integer":
                found[whose].append(node.get("format"))
            for key, value in node.items():
                walk(value, "kubernetes" if key in embedded and isinstance(value, dict) else whose)
        elif isinstance(node, list):
            for value in node:
                walk(value, whose)

    walk(build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"], "mcpfleet")
    assert len(found["mcpfleet"]) > 10 and set(found["mcpfleet"]) == {"int64"}, found
    assert set(found["kubernetes"]) == {"int32", "int64"}, found  # maxSkew, weights; tolerationSeconds


# --- s28 hostile-input audit, finding 12: values YAML 1.1 or a stray character turn into another experiment ---


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("  attempts: 010", "'010' is octal in YAML 1.1 (8) but 10 in YAML 1.2; write it without the leading zero"),
        ("  attempts: 1:30", "'1:30' is a base-60 number in YAML 1.1 (90) but text in YAML 1.2"),
        ("  limits: {timeoutSeconds: 1:30}", "'1:30' is a base-60 number in YAML 1.1 (90)"),
        ("  retries: {backoffSeconds: 1:30.5}", "'1:30.5' is a base-60 number in YAML 1.1 (90.5)"),
    ],
    ids=["octal", "base60", "base60-timeout", "base60-float"],
)
def test_a_number_yaml_1_1_and_1_2_read_apart_is_refused_naming_its_line(tmp_path: Path, line: str, said: str) -> None:
    """`attempts: 010` ran 8 attempts and `1:30` 90: PyYAML reads YAML 1.1, where a leading zero is octal and
    colons make base 60; a reader of YAML 1.2 (or of the file) sees 10 and the text 1:30."""
    path = tmp_path / "y11.yaml"
    path.write_text(HEAD + "  models: [{name: m, model: scripted/noop}]\n" + line + "\n")
    with pytest.raises(SpecError) as err:
        load_evalrun(path)
    assert said in str(err.value) and "line 6" in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ("{1: a, '1': b}", "1"),
        ("{true: a, 'true': b}", "true"),
        ("{null: a, 'null': b}", "null"),
        ("{1.5: a, '1.5': b}", "1.5"),
    ],
)
def test_keys_json_writes_alike_are_one_key_given_twice(tmp_path: Path, mapping: str, key: str) -> None:
    """`nodeSelector: {1: a, "1": b}` kept one of the two selectors without a word: JSON (and the API server, and
    the spec's string-keyed maps) reads both keys as the same text."""
    path = tmp_path / "keys.yaml"
    path.write_text(HEAD + "  models: [{name: m, model: scripted/noop}]\n  pod: {nodeSelector: " + mapping + "}\n")
    with pytest.raises(SpecError) as err:
        load_evalrun(path)
    assert f"found the key '{key}' twice" in str(err.value) and "line 6" in str(err.value), str(err.value)
    assert load_all("{1: a, 2: b, '3': c}") == [{1: "a", 2: "b", "3": "c"}]  # distinct keys stay as written


def test_a_field_given_both_in_camel_case_and_by_its_own_name_is_named_twice() -> None:
    """`limits: {maxTurns: 5, max_turns: 100}` was refused as "max_turns: unknown field", though max_turns alone is
    taken: the message now says the field was given twice."""
    said = refused({"models": [model()], "limits": {"maxTurns": 5, "max_turns": 100}})
    assert "spec.limits.max_turns: given twice, as maxTurns and max_turns; keep one" in said, said
    assert parse_evalrun(body({"models": [model()], "limits": {"max_turns": 7}})).spec.limits.max_turns == 7
    assert "spec.limits.maxTurn: unknown field; allowed fields:" in refused(
        {"models": [model()], "limits": {"maxTurn": 5}}
    )


def test_numbers_both_yaml_versions_read_alike_stay_valid() -> None:
    docs = load_all("a: 10\nb: 0x10\nc: 07\nd: 0\ne: 1_000\nf: 0.5\ng: 010.5\nh: '010'\n")
    assert docs == [{"a": 10, "b": 16, "c": 7, "d": 0, "e": 1000, "f": 0.5, "g": 10.5, "h": "010"}]


@pytest.mark.parametrize(
    "spec",
    [
        {"retries": {"backoffSeconds": float("nan")}},
        {"provider": {"retryAfterMaxSeconds": float("nan")}},
        {"models": [model(params={"temperature": float("inf")})]},
    ],
    ids=["backoff-nan", "retry-after-nan", "temperature-inf"],
)
def test_nan_and_infinity_are_refused_as_no_finite_number(spec: dict[str, Any]) -> None:
    """`.nan` was refused as "must be <= 3600.0", which it is not; `.inf` passed where no upper bound is set."""
    said = refused({"models": [model()], **spec})
    assert "must be a finite number (not .nan or .inf)" in said and "must be <=" not in said, said


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("openai/gpt-5 ", "'openai/gpt-5 ' starts or ends with whitespace; remove it"),
        (" openai/gpt-5", "' openai/gpt-5' starts or ends with whitespace"),
        ("openai/", "'openai/': give <provider>/<model>, e.g. openai/gpt-5"),
        ("/gpt-5", "'/gpt-5': give <provider>/<model>"),
        ("openai/" + "x" * 200_000, "spec.models[0].model: must be at most 1024 characters"),
    ],
    ids=["trailing-space", "leading-space", "no-model", "no-provider", "200k"],
)
def test_a_model_string_with_stray_space_empty_part_or_no_bound_is_refused(value: str, said: str) -> None:
    """`"openai/gpt-5 "` and `"openai/"` passed validate (the space or empty name reached the provider on every
    call); a 200 KB model string was valid, and a scripted one echoed whole in its error line."""
    text = refused({"models": [model(model=value)]})
    assert said in text and len(text) < 400, text[:400]


def test_a_long_scripted_model_string_is_cut_in_its_error() -> None:
    from mcpfleet.runner.launch.scripted_options import ModelError, parse_model

    with pytest.raises(ModelError) as err:
        parse_model("orcale" + "x" * 900, 0.0)
    assert "unknown scripted model 'orcale" in err.value.message and len(err.value.message) < 250


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ({"output": {"uri": "../runs2 "}}, "spec.output.uri: '../runs2 '"),
        ({"output": {"uri": "runs\n"}}, "spec.output.uri: 'runs\\n'"),
        ({"tasks": {"path": " pack"}}, "spec.tasks.path: ' pack'"),
        ({"tasks": {"statesPath": "states "}}, "spec.tasks.statesPath: 'states '"),
    ],
    ids=["uri-space", "uri-newline", "path", "states"],
)
def test_a_path_with_surrounding_whitespace_is_refused(where: dict[str, Any], field: str) -> None:
    """`output.uri: "../runs2 "` made a folder named `runs2 ` (a YAML block scalar's newline does the same)."""
    said = refused({"models": [model()], **where})
    assert f"{field} starts or ends with whitespace; remove it" in said, said
