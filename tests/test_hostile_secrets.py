"""Credentials never reach what a run writes (issue 13, section 2): a URL embedding one is refused with the
secret left out of the message, and a canary API key and S3 secret are searched for in everything a run
writes: its output (a folder or S3 objects), stdout and stderr."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import boto3
import pytest
import yaml
from conftest import REPO

from mcpfleet.runner.spec.load import SpecError, parse_evalrun

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
API_KEY = "sk-canary-0f9e8d7c6b5a4321"
S3_SECRET = "canary-s3-secret-9a8b7c6d5e"
CANARIES = (API_KEY, S3_SECRET)


def evalrun(folder: Path, spec: dict) -> Path:
    path = folder / "secrets.yaml"
    body = {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "secrets"}, "spec": spec}
    path.write_text(yaml.safe_dump(body))
    return path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MCPFLEET_CANARY_KEY": API_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET}
    return subprocess.run(
        [str(MCPFLEET), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env, stdin=subprocess.DEVNULL
    )


def assert_no_canary(where: str, data: bytes | str) -> None:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    for canary in CANARIES:
        assert canary not in text, f"{canary} found in {where}"


@pytest.mark.parametrize(
    "field,url",
    [
        ("models[0].apiBase", f"https://user:{API_KEY}@llm.example.com/v1"),
        ("models[0].apiBase", f"https://llm.example.com/v1?api_key={API_KEY}"),
        ("output.endpointUrl", f"http://AKIA:{S3_SECRET}@127.0.0.1:9000"),
        ("tasks.endpointUrl", f"http://127.0.0.1:9000/?X-Amz-Signature={S3_SECRET}"),
    ],
)
def test_a_url_embedding_credentials_is_refused_without_echoing_them(field: str, url: str) -> None:
    spec: dict = {"models": [{"name": "m", "model": "openai/gpt-5"}], "tasks": {}, "output": {}}
    section, _, key = field.partition(".")
    target = spec["models"][0] if section == "models[0]" else spec[section]
    target[key] = url
    with pytest.raises(SpecError) as err:
        parse_evalrun(
            {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "x"}, "spec": spec}
        )
    text = str(err.value)
    assert f"spec.{field}: " in text and "credentials" in text
    assert_no_canary("the error message", text)


@pytest.mark.parametrize(
    "field,url,said",
    [
        ("models[0].apiBase", "not a url", "is not an http(s) URL"),
        ("models[0].apiBase", "localhost:8000/v1", "is not an http(s) URL"),
        ("output.endpointUrl", "ftp://127.0.0.1:9000", "is not an http(s) URL"),
        ("toolcalls.judge.apiBase", "http:///v1", "is not an http(s) URL"),
        ("toolcalls.judge.apiBase", f"https://u:{API_KEY}@judge.example.com/v1", "embeds credentials"),
    ],
)
def test_an_endpoint_that_is_no_http_url_is_refused(field: str, url: str, said: str) -> None:
    """`apiBase: "not a url"` was valid; the run then spent minutes retrying each trial's provider error. The
    judge's apiBase was not checked for credentials at all."""
    spec: dict = {"models": [{"name": "m", "model": "openai/gpt-5"}], "output": {}, "toolcalls": {"judge": {}}}
    section, _, key = field.rpartition(".")
    target = {"models[0]": spec["models"][0], "output": spec["output"], "toolcalls.judge": spec["toolcalls"]["judge"]}
    target[section][key] = url
    spec["toolcalls"]["judge"].setdefault("model", "openai/gpt-5-mini")
    with pytest.raises(SpecError) as err:
        parse_evalrun(
            {"apiVersion": "mcpfleet.io/v1alpha1", "kind": "EvalRun", "metadata": {"name": "x"}, "spec": spec}
        )
    text = str(err.value)
    assert f"spec.{field}: " in text and said in text, text
    assert_no_canary("the error message", text)


def test_validate_refuses_an_api_base_with_a_password(tmp_path: Path, session_pack: Path) -> None:
    model = {"name": "m", "model": "openai/oracle", "apiBase": f"http://u:{API_KEY}@127.0.0.1:1/v1"}
    out = run_cli(
        "validate", str(evalrun(tmp_path, {"models": [model], "tasks": {"path": str(session_pack)}})), cwd=tmp_path
    )
    assert out.returncode == 2
    assert "spec.models[0].apiBase: 'http://***@127.0.0.1:1/v1' embeds credentials" in " ".join(out.stderr.split())
    assert_no_canary("stderr", out.stderr + out.stdout)


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_no_canary_in_anything_a_run_writes(
    tmp_path: Path, session_pack: Path, scripted_url: str, where: str, request: pytest.FixtureRequest
) -> None:
    """A real LLM trial path (LiteLLM's openai provider against the scripted server, the key sent as a bearer
    token) plus failing calls, so errors and retries are recorded too."""
    models = [
        {"name": "ok", "model": "openai/oracle", "apiBase": scripted_url, "apiKeyEnv": "MCPFLEET_CANARY_KEY"},
        {
            "name": "flaky",
            "model": "openai/oracle?fail=1&fail_status=503",
            "apiBase": scripted_url,
            "apiKeyEnv": "MCPFLEET_CANARY_KEY",
        },
        {  # a 401 whose body echoes the key, as some providers do: a config error, the model stopped
            "name": "refused",
            "model": "openai/oracle?fault=auth",
            "apiBase": scripted_url,
            "apiKeyEnv": "MCPFLEET_CANARY_KEY",
        },
    ]
    spec: dict = {
        "models": models,
        "tasks": {"path": str(session_pack), "include": ["*/move_todo_0"]},
        "limits": {"llmRetries": 1},
        "retries": {"limit": 0},
    }
    if where == "s3":
        bucket = request.getfixturevalue("bucket")
        endpoint = request.getfixturevalue("s3")
        spec["output"] = {"uri": f"s3://{bucket}/runs", "endpointUrl": endpoint}
    else:
        spec["output"] = {"uri": "out"}
    out = run_cli("run", str(evalrun(tmp_path, spec)), "--no-progress", cwd=tmp_path)
    assert out.returncode == 3 and "model 'refused' stopped" in out.stderr, out.stderr
    assert_no_canary("stdout/stderr", out.stdout + out.stderr)
    written: dict[str, bytes] = {}
    if where == "s3":
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            written[obj["Key"]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    else:
        written = {str(p): p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert any(k.endswith("run.json") for k in written) and sum(k.endswith("result.json") for k in written) == 3
    for name, data in written.items():
        assert_no_canary(name, data)
