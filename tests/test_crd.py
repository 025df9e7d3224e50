"""The generated CRD: in sync with spec.py, accepted by Kubernetes, structural, and in agreement
with ``parse_evalrun`` on what is a valid EvalRun."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from mcpfleet.runner.spec.crd import (
    CRD_NAME,
    build_crd,
    openapi_schema,
    openapi_to_jsonschema,
    render_crd_yaml,
    to_structural,
)
from mcpfleet.runner.spec.evalrun import RESULT_FIELDS
from mcpfleet.runner.spec.load import SpecError, parse_evalrun, spec_hash

ROOT = Path(__file__).resolve().parents[1]
CRD_FILE = ROOT / "crds" / "evalrun.yaml"
EXAMPLES = ROOT / "examples"

# Keys a Kubernetes JSONSchemaProps node may have (minus the ones structural schemas forbid).
_K8S_KEYS = set(
    json.loads(
        resources.files("kubernetes_validate")
        .joinpath("kubernetes-json-schema/v1.30.0-local-strict/jsonschemaprops-apiextensions-v1.json")
        .read_text()
    )["properties"]
)
_FORBIDDEN = {"$ref", "$schema", "definitions", "title", "const", "anyOf", "oneOf", "allOf", "not", "id"}


def minimal() -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {"models": [{"name": "m", "model": "scripted/oracle"}]},
    }


def full() -> dict[str, Any]:
    """Every field of every spec object set, so a field missing from the CRD shows up."""
    return {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "full", "namespace": "evals", "labels": {"team": "x"}, "annotations": {"a": "b"}},
        "spec": {
            "models": [
                {
                    "name": "a",
                    "model": "openai/gpt-5",
                    "apiBase": "http://llm:8000/v1",
                    "apiKeyEnv": "OPENAI_API_KEY",
                    "params": {"temperature": 0.7, "topP": 0.9, "maxTokens": 2048, "reasoningEffort": "low", "seed": 7},
                    "concurrency": 3,
                },
                {
                    "name": "b",
                    "model": "anthropic/claude",
                    "apiKeySecretRef": {"name": "llm-keys", "key": "anthropic"},
                    "apiBase": None,
                    "apiKeyEnv": None,
                    "concurrency": None,
                    "params": {"temperature": None, "topP": None, "maxTokens": None, "seed": None},
                },
            ],
            "tasks": {
                "path": "tasks",
                "statesPath": "states",
                "services": ["filesystem"],
                "difficulties": ["easy"],
                "categories": ["c"],
                "include": ["filesystem/*"],
                "exclude": ["*/x"],
            },
            "attempts": 4,
            "agent": "oracle",
            "limits": {
                "maxTurns": 50,
                "timeoutSeconds": 60,
                "toolCallTimeoutSeconds": 5,
                "verifierTimeoutSeconds": 30,
                "llmRetries": 0,
                "llmTimeoutSeconds": 30,
            },
            "provider": {
                "backoffInitialSeconds": 0.5,
                "backoffMaxSeconds": 10,
                "retryAfterMaxSeconds": 20,
                "trialRetryBudget": 5,
                "modelRetryBudget": 50,
            },
            "concurrency": {"total": 8, "perModel": 4},
            "retries": {"limit": 0, "backoffSeconds": 0.5},
            "output": {
                "uri": "s3://bucket/prefix",
                "endpointUrl": "http://minio:9000",
                "region": "eu-west-1",
                "credentialsSecretRef": "s3-credentials",
            },
            "suspend": True,
            "pod": {
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"}],
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}
                        ]
                    }
                },
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
                ],
                "priorityClassName": "evals",
                "runtimeClassName": "gvisor",
                "imagePullSecrets": [{"name": "regcred"}],
                "labels": {"kueue.x-k8s.io/queue-name": "evals"},
                "annotations": {"example.com/a": "b"},
                "dnsPolicy": "ClusterFirst",
                "dnsConfig": {"nameservers": ["10.0.0.10"], "options": [{"name": "ndots", "value": "2"}]},
            },
        },
        "status": {"phase": "Running", "progress": "1/8", "anything": {"goes": [1]}},
    }


def _strict(node: Any) -> Any:
    """Emulate the API server's strict field validation: unknown fields are errors, not pruned."""
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) if k in ("items", "additionalProperties") else v for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: _strict(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    return out


def validator(strict: bool = False) -> jsonschema.Draft4Validator:
    """OpenAPI v3.0 schemas are draft-4 style (boolean exclusiveMinimum), plus ``nullable``."""
    schema = openapi_to_jsonschema(openapi_schema())
    return jsonschema.Draft4Validator(_strict(schema) if strict else schema)


def errors(doc: dict[str, Any], strict: bool = False) -> list[str]:
    return sorted(".".join(map(str, e.absolute_path)) for e in validator(strict).iter_errors(doc))


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path or "(root)", schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from nodes(schema[key], f"{path}[{key}]")


def test_crd_file_is_up_to_date() -> None:
    assert CRD_FILE.read_text().rstrip("\n") == render_crd_yaml().rstrip("\n"), (
        "crds/evalrun.yaml is stale; regenerate it with: mcpfleet crd > crds/evalrun.yaml"
    )
    assert render_crd_yaml().startswith("# Generated by `mcpfleet crd` from runner/spec/evalrun.py; do not edit.\n")
    assert yaml.safe_load(CRD_FILE.read_text()) == build_crd()


@pytest.mark.parametrize("version", ["1.30.0", kubernetes_validate.latest_version()])
def test_crd_is_a_valid_kubernetes_object(version: str) -> None:
    kubernetes_validate.validate(build_crd(), version, strict=True)


def test_crd_shape() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == CRD_NAME == "evalruns.mcpfleet.io"
    spec = crd["spec"]
    assert spec["group"] == "mcpfleet.io" and spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "EvalRun",
        "listKind": "EvalRunList",
        "plural": "evalruns",
        "singular": "evalrun",
        "shortNames": ["er"],
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: (c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ("string", ".status.phase"),
        "Progress": ("string", ".status.progress"),
        "Pass@1": ("string", ".status.passAt1"),
        "Age": ("date", ".metadata.creationTimestamp"),
    }
    root = version["schema"]["openAPIV3Schema"]
    assert root["required"] == ["spec"]
    assert root["properties"]["metadata"] == {"type": "object"}
    assert root["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True
    counts = root["properties"]["status"]["properties"]["counts"]["properties"]
    assert counts == {"finished": {"type": "integer"}, "running": {"type": "integer"}}


def test_result_affecting_fields_are_immutable_once_trials_exist() -> None:
    """A transition rule at the root: every field that changes what a trial measures is compared, guarded by
    the counts of trials that ran (a fix to a spec that never ran stays possible)."""
    [rule] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
    doc = minimal()
    doc["spec"]["toolcalls"] = {"shardSize": 50}
    assert set(RESULT_FIELDS) == set(parse_evalrun(doc).spec.results_view())  # what the spec hash reads
    # toolcalls counts only when set, so the hash of a run without it is what it was before the field existed.
    assert set(parse_evalrun(minimal()).spec.results_view()) == set(RESULT_FIELDS) - {"toolcalls"}
    for field in ("models", "tasks", "attempts", "agent", "limits", "toolcalls"):
        assert f"self.spec.{field} == oldSelf.spec.{field}" in rule["rule"], field
    assert "oldSelf.status.counts.finished > 0" in rule["rule"] and "oldSelf.status.counts.running > 0" in rule["rule"]
    # Where records are stored is frozen too (the operator reads them there), though the spec hash leaves it out.
    for frozen in ("output.uri", "output.endpointUrl"):
        assert f"self.spec.{frozen} == oldSelf.spec.{frozen}" in rule["rule"], frozen
    for mutable in ("suspend", "concurrency", "retries", "pod", "output.credentialsSecretRef", "output.region"):
        assert f"self.spec.{mutable}" not in rule["rule"], mutable
    assert rule["rule"].count("(") == rule["rule"].count(")")


def test_what_the_transition_rule_compares_is_bounded() -> None:
    """The API server prices a CEL expression before it accepts the CRD: ``==`` on a string costs its maxLength
    (3 MiB without one), on a list its maxItems. Every string and list the rule compares whole is bounded, so
    its estimate stays far under the per-expression limit (10M) however the spec grows."""
    [rule] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
    spec = openapi_schema()["properties"]["spec"]
    compared = re.findall(r"self\.spec\.([A-Za-z.]+) == oldSelf", rule["rule"])
    assert {"models", "agent", "output.uri", "output.endpointUrl"} <= set(compared)
    for path in compared:
        node = spec
        for part in path.split("."):
            node = node["properties"][part]
        if node["type"] == "string":
            assert 0 < node["maxLength"] <= 4096, path
        elif node["type"] == "array":
            assert 0 < node["maxItems"] <= 1000, path
    assert spec["properties"]["agent"]["maxLength"] == max(map(len, spec["properties"]["agent"]["enum"]))


def test_schema_is_structural() -> None:
    for path, node in nodes(openapi_schema()):
        assert not (set(node) - _K8S_KEYS), f"{path}: not a JSONSchemaProps key: {set(node) - _K8S_KEYS}"
        assert not (set(node) & _FORBIDDEN), f"{path}: {set(node) & _FORBIDDEN}"
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), f"{path}: no type"
        assert node.get("type") != "null", path
        if "additionalProperties" in node:
            assert "properties" not in node, f"{path}: additionalProperties next to properties"
            assert isinstance(node["additionalProperties"], dict), f"{path}: boolean additionalProperties"
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            assert isinstance(node.get(key, False), bool), f"{path}.{key} must be OpenAPI v3.0's boolean"
        if "default" in node:
            assert jsonschema.Draft4Validator(openapi_to_jsonschema(node)).is_valid(node["default"]), path
        if "enum" in node:  # the API server fails null against any enum; see crd.py
            assert not node.get("nullable") and None not in node["enum"], path


def test_constraints_survive_conversion() -> None:
    spec = openapi_schema()["properties"]["spec"]["properties"]
    model = spec["models"]["items"]["properties"]
    assert (spec["attempts"]["minimum"], spec["attempts"]["maximum"], spec["attempts"]["default"]) == (1, 100, 1)
    assert spec["models"]["minItems"] == 1 and spec["models"]["items"]["required"] == ["name", "model"]
    assert model["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" and model["name"]["maxLength"] == 40
    assert model["apiBase"]["nullable"] is True and model["apiBase"]["type"] == "string"
    assert (
        model["params"]["properties"]["topP"].items() >= {"minimum": 0, "exclusiveMinimum": True, "maximum": 1}.items()
    )
    assert spec["agent"]["enum"] == ["mcpmark", "react", "mcpfleet", "oracle", "noop"]
    assert spec["agent"]["default"] == "mcpmark"
    assert spec["limits"]["properties"]["maxTurns"]["default"] == 100
    assert model["apiKeySecretRef"]["description"].startswith("Kubernetes Secret key")  # outer text wins over $ref's
    assert "description" in model["name"]


def _example_docs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "EvalRun":
                found.append((path.name, doc))
    return found


def test_examples_are_valid_both_ways() -> None:
    docs = _example_docs()
    assert docs, "examples/*.yaml should hold at least one EvalRun"
    for name, doc in docs:
        assert errors(doc, strict=True) == [], name
        parse_evalrun(doc, name)


def test_full_document_is_valid_both_ways() -> None:
    doc = full()
    assert errors(doc, strict=True) == []
    parse_evalrun(doc)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[last] = value

    return mutate


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.attempts", 0),
        ("spec.attempts", 101),
        ("spec.attempts", "4"),
        ("spec.models", []),
        ("spec.models.0.name", "GPT_5"),
        ("spec.models.0.model", ""),
        ("spec.models.0.params", {"topP": 0}),
        ("spec.models.0.params", {"temperature": 2.5}),
        ("spec.models.0.params", {"reasoningEffort": "max"}),
        ("spec.models.0.apiKeyEnv", "1BAD"),
        ("spec.models.0.apiKeySecretRef", {"name": "s"}),
        ("spec.agent", "human"),
        ("spec.concurrency", {"total": 0}),
        ("spec.limits", {"maxTurns": 0}),
        ("spec.retries", {"limit": -1}),
        ("spec.suspend", "yes"),
        ("spec.attempts", True),
        ("spec.concurrency", {"total": "2"}),
        ("spec.limits", {"maxTurns": False}),
        ("spec.models.0.name", 5),
        ("spec.output", {"uri": "/" + "a" * 4096}),
        ("spec.models.0.apiBase", "http://" + "a" * 2048),
        ("spec.tasks", {"statesPath": "s3://b/" + "a" * 4096}),
    ],
)
def test_invalid_values_are_rejected_by_the_crd_schema(path: str, value: Any) -> None:
    """And by the CLI alike: pydantic's lax mode used to run `attempts: "4"` as 4 and `attempts: true` as 1."""
    doc = minimal()
    _set(path, value)(doc)
    assert errors(doc), f"CRD schema accepted {path}={value!r}"
    with pytest.raises(SpecError) as err:
        parse_evalrun(doc)
    assert path.split(".")[-1] in str(err.value), err.value  # the error names the field


@pytest.mark.parametrize(
    ("pod", "path"),
    [
        ({"tolerations": [{"key": "a", "effect": "Sometimes"}]}, "spec.pod.tolerations[0].effect"),
        (
            {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}]},
            "spec.pod.topologySpreadConstraints[0].maxSkew",
        ),
        (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
            "spec.pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        ),
        ({"dnsPolicy": "Cluster"}, "spec.pod.dnsPolicy"),
        ({"runtimeClassName": "Not_A_Name"}, "spec.pod.runtimeClassName"),
    ],
)
def test_kubernetes_typed_pod_fields_are_checked_by_the_crd_and_parse_evalrun_alike(
    pod: dict[str, Any], path: str
) -> None:
    """The CRD embeds Kubernetes' own schemas for them (runner/spec/kube_schemas.json), so the API server refuses
    what parse_evalrun refuses, and parse_evalrun names the field inside the Kubernetes type."""
    doc = minimal()
    doc["spec"]["pod"] = pod
    assert errors(doc), f"CRD schema accepted spec.pod={pod!r}"
    with pytest.raises(SpecError) as err:
        parse_evalrun(doc)
    assert err.value.problems[0].startswith(path + ":"), err.value.problems


def test_unknown_fields_inside_kubernetes_types_are_refused_like_any_other() -> None:
    doc = minimal()
    doc["spec"]["pod"] = {"tolerations": [{"key": "a", "efect": "NoSchedule"}]}
    assert errors(doc) == [] and errors(doc, strict=True) != []
    with pytest.raises(SpecError, match=r"spec\.pod\.tolerations\[0\]\.efect: unknown field"):
        parse_evalrun(doc)


def test_missing_spec_is_rejected_by_the_crd_schema() -> None:
    doc = minimal()
    del doc["spec"]
    assert errors(doc) == [""]
    doc = minimal()
    del doc["spec"]["models"][0]["model"]
    assert errors(doc) == ["spec.models.0"]


@pytest.mark.parametrize("path", ["spec.bogus", "spec.limits.maxTurn", "spec.models.0.apiKey", "spec.tasks.service"])
def test_unknown_fields_are_rejected_under_strict_field_validation(path: str) -> None:
    doc = minimal()
    doc["spec"].setdefault("limits", {})
    doc["spec"].setdefault("tasks", {})
    _set(path, 1)(doc)
    # The schema itself cannot forbid them (no additionalProperties: false in a CRD) ...
    assert errors(doc) == []
    # ... the API server's strict field validation does, as does parse_evalrun.
    assert errors(doc, strict=True) != []
    with pytest.raises(SpecError):
        parse_evalrun(doc)


def _apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """Emulate API-server defaulting: fill absent properties that have a default, recursively."""
    if isinstance(obj, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                obj[name] = _apply_defaults(sub, obj[name])
    elif isinstance(obj, list) and "items" in schema:
        return [_apply_defaults(schema["items"], v) for v in obj]
    return obj


def test_api_server_defaults_agree_with_pydantic_defaults() -> None:
    doc = minimal()
    doc["spec"].update(
        tasks={},
        limits={},
        concurrency={},
        retries={},
        provider={},
        output={},
        models=[{"name": "m", "model": "scripted/oracle", "params": {}}],
    )
    defaulted = _apply_defaults(openapi_schema(), copy.deepcopy(doc))
    assert defaulted["spec"]["limits"]["maxTurns"] == 100 and defaulted["spec"]["agent"] == "mcpmark"
    assert errors(defaulted, strict=True) == []
    plain, server = parse_evalrun(doc), parse_evalrun(defaulted)
    assert server.spec == plain.spec
    assert spec_hash(server) == spec_hash(plain)


def test_converter_rules() -> None:
    defs = {
        "Ref": {
            "type": "object",
            "title": "Ref",
            "description": "inner",
            "additionalProperties": False,
            "properties": {"x": {"type": "integer", "minimum": 1, "default": 0, "title": "X"}},
        }
    }
    node = to_structural(
        {"anyOf": [{"$ref": "#/$defs/Ref"}, {"type": "null"}], "description": "outer", "default": None}, defs
    )
    assert node == {
        "type": "object",
        "description": "outer",
        "nullable": True,
        "properties": {"x": {"type": "integer", "minimum": 1, "format": "int64"}},
    }  # invalid default 0 dropped; integers are int64
    assert to_structural({"type": "string", "const": "v"}, {}) == {"type": "string", "enum": ["v"], "maxLength": 1}
    assert to_structural({"type": "object", "additionalProperties": True}, {}) == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert to_structural({"type": "number", "exclusiveMaximum": 1}, {}) == {
        "type": "number",
        "maximum": 1,
        "exclusiveMaximum": True,
    }
    with pytest.raises(ValueError, match="structural"):
        to_structural({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {})
    with pytest.raises(ValueError, match="type"):
        to_structural({"description": "anything"}, {})
