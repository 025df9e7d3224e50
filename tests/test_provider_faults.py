"""Provider faults end to end: each row of the fault matrix (tests/faultmatrix.py) is a real trial against the
scripted model server playing that fault over HTTP through LiteLLM, with the real filesystem MCP server and
the task's own verifier. A score measures the model, never the provider: what the provider did is retried,
then recorded as an outcome that is not scored; only what the model did counts against it.
"""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import TINY_DESCRIPTION, make_tiny_pack
from faultmatrix import (
    CASES,
    CLOSED_PORT,
    FAST,
    FAULT_TABLE_DOC,
    PASSED,
    FaultCase,
    doc_table,
    model_string,
    render_table,
)

import mcpfleet.runner.llm.client  # noqa: F401 - the warm-worker import (sets its LiteLLM env defaults once)
from mcpfleet.runner.plan import expand as plan
from mcpfleet.runner.results import store
from mcpfleet.runner.results.outcome import is_scored
from mcpfleet.runner.results.records import TrialResult
from mcpfleet.runner.spec import evalrun as spec
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.trial import engine as trial

SECRET = "sk-fault-secret-7f3a9c"


def unique_pack(root: Path) -> Path:
    """A one-task pack whose description is unique to the test: the scripted server counts calls per
    conversation (model string + first user message), so each test's fault window starts at call 0."""
    pack = make_tiny_pack(root)
    desc = pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "description.md"
    desc.write_text(TINY_DESCRIPTION + f"(conversation {uuid.uuid4().hex})\n")
    return pack


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def one(
    pack: Path,
    model: str,
    limits: dict[str, Any] | None = None,
    provider: dict[str, Any] | None = None,
    **model_extra: Any,
) -> plan.TrialSpec:
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "faults"},
        "spec": {
            "models": [{"name": "m", "model": model, **model_extra}],
            "tasks": {"path": str(pack)},
            "limits": limits or {},
            "provider": provider or {},
        },
    }
    [s] = plan.plan(parse_evalrun(doc), pack)
    return s


async def run(s: plan.TrialSpec, out: Path, url: str, env: dict[str, str] | None = None) -> tuple[TrialResult, Path]:
    st = store.LocalStore(out)
    ctx = trial.TrialContext(scripted_base_url=url, backoff_initial=0.01, env=env)
    return await trial.run_trial(s, st, ctx), st.trial_dir(s.trial_id)


def run_case(case: FaultCase, tmp_path: Path) -> plan.TrialSpec:
    extra = {k: str(v).replace(CLOSED_PORT, str(closed_port())) for k, v in case.model_extra.items()}
    return one(unique_pack(tmp_path / "pack"), model_string(case), case.limits, case.provider, **extra)


# -- the matrix ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_fault_matrix(case: FaultCase, scripted_url: str, tmp_path: Path) -> None:
    result, d = await run(run_case(case, tmp_path), tmp_path / "out", scripted_url)
    failure = None if case.outcome == PASSED else case.outcome
    assert (result.passed, result.failure) == (case.outcome == PASSED, failure), (result.error, result.stop_reason)
    # Retried by the provider's backoff (llm_retries), or, a call the model failed, as MCPMark's loop tries it again.
    log_file = d / "trial.log"  # (none when nothing was worth a note)
    retried_as_mcpmark = log_file.is_file() and "as MCPMark's loop does" in log_file.read_text()
    assert (result.totals.llm_retries > 0 or retried_as_mcpmark) == case.retried, (result.totals.llm_retries, result)
    assert not (retried_as_mcpmark and result.totals.llm_retries), "the model's retries are not the provider's"
    assert is_scored(result.failure) == (case.outcome == PASSED or is_scored(case.outcome))
    # Whatever happened, the conversation so far is recorded and the verifier judged the end state.
    assert result.verifier.exit_code is not None, result.error
    items = json.loads((d / "messages.json").read_text())
    assert items and items[0]["role"] == "user"
    if case.min_wait:
        assert result.turns[0]["latency_s"] >= case.min_wait, result.turns[0]
    if case.max_wait is not None:
        assert result.turns[0]["latency_s"] < case.max_wait, result.turns[0]
    if failure is None:
        assert result.error is None
        return
    # MCPMark's agent never reads finish_reason: meta.json ends such a run normally (error_message null), while
    # result.json names the ending for the failure taxonomy.
    meta_error = json.loads((d / "meta.json").read_text())["execution_result"]["error_message"]
    assert (meta_error is None) == (result.stop_reason in ("output_truncated", "content_filter")), meta_error
    # The record keeps the exception type and a one-line cause; the details go to the trial's log.
    error = result.error or ""
    assert error and "\n" not in error and len(error) < 500, error
    assert "Traceback" not in error and "site-packages" not in error and "received_args" not in error, error
    if result.failure in ("provider_error", "config_error", "llm_api_error", "context_overflow"):  # an exception
        assert result.error_type and error.startswith(result.error_type), (result.error_type, error)
        log = (d / "trial.log").read_text()
        assert "Traceback (most recent call last)" in log and result.error_type in log


def test_docs_fault_table_is_generated_from_the_matrix() -> None:
    table = doc_table(FAULT_TABLE_DOC.read_text())
    assert table is not None, "docs/provider-faults.md lacks the fault table markers"
    assert table == render_table(), (
        "docs/provider-faults.md's fault table is stale: run .venv/bin/python tests/faultmatrix.py --write"
    )


def test_the_matrix_covers_every_fault_the_server_plays() -> None:
    from mcpfleet.runner.launch.scripted_options import FAULTS

    played = {part.split("=", 1)[1] for c in CASES for part in c.model.replace("?", "&").split("&") if "fault=" in part}
    assert played == set(FAULTS)
    assert len({c.id for c in CASES}) == len(CASES)


# -- specifics ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["mcpfleet", "react"])
async def test_only_mcpmarks_tool_calling_loop_tries_a_call_the_model_failed_again(
    agent: str, scripted_url: str, tmp_path: Path
) -> None:
    """MCPMark's tool-calling loop tries any failed call three times in a row; its ReAct agent (and mcpfleet's own
    loop) end the run at the first 400, so a 400 once is the model's failure there."""
    s = one(unique_pack(tmp_path / "pack"), "scripted/oracle?fault=status&fail_status=400&fail=1")
    s = s.model_copy(update={"agent": spec.AgentKind(agent)})
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert (result.passed, result.failure) == (False, "llm_api_error"), result.error
    assert "as MCPMark's loop does" not in (d / "trial.log").read_text()


async def test_empty_choices_keep_the_conversation_and_name_the_cause(scripted_url: str, tmp_path: Path) -> None:
    """Before: IndexError on choices[0] escaped the agent (infra_error, empty messages.json, no verifier, rerun
    forever). Now: retried, then recorded with the conversation so far and the cause named."""
    s = one(unique_pack(tmp_path / "pack"), "scripted/oracle?fault=empty&after=2", {"llmRetries": 1})
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert result.failure == "provider_error" and result.stop_reason == "provider_error"
    assert result.error_type == "UnusableReply" and "no choices" in (result.error or "")
    assert len(result.turns) == 3 and result.totals.tool_calls == 2 and result.turns[2]["retries"] == 1
    assert result.totals.turns == 2  # the third call got no usable reply: no turn of the model's
    names = [i["name"] for i in json.loads((d / "messages.json").read_text()) if i.get("type") == "function_call"]
    assert names == ["list_allowed_directories", "read_text_file"]
    assert result.verifier.exit_code == 1 and "still in place" in result.verifier.stdout


async def test_a_provider_that_fails_after_the_work_is_done_leaves_a_pass(scripted_url: str, tmp_path: Path) -> None:
    """MCPMark verifies whatever the agent left, also after an agent error, and records a pass as a pass
    (base/task_manager.py execute_task). Before, mcpfleet recorded provider_error (unscored, run again) for a
    trial whose end state was already right: the tiny oracle makes its five tool calls, then every call fails."""
    s = one(unique_pack(tmp_path / "pack"), "scripted/oracle?fault=status&fail_status=500&after=5", FAST)
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert result.verifier.exit_code == 0, result.verifier.stdout
    assert (result.passed, result.failure) == (True, None), (result.failure, result.error)
    assert result.stop_reason == "provider_error" and "500" in (result.error or "")  # the record still says so
    assert result.totals.tool_calls == 5 and result.totals.llm_retries > 0
    meta = json.loads((d / "meta.json").read_text())["execution_result"]
    assert meta["success"] is True and meta["error_message"], meta  # as MCPMark writes such a trial


async def test_a_provider_error_before_any_answer_never_passes(scripted_url: str, tmp_path: Path) -> None:
    """A state that passes untouched is the task's fault, not a model's pass: with no answer from the model, a
    passing verifier still leaves the trial unscored."""
    pack = unique_pack(tmp_path / "pack")
    verify = pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py"
    verify.write_text("import sys\nsys.exit(0)\n")
    s = one(pack, "scripted/oracle?fault=status&fail_status=500&after=0", FAST)
    result, _ = await run(s, tmp_path / "out", scripted_url)
    assert result.verifier.exit_code == 0 and result.totals.tool_calls == 0
    assert (result.passed, result.failure) == (False, "provider_error")


async def test_a_key_echoed_by_a_401_is_never_written_or_returned(scripted_url: str, tmp_path: Path) -> None:
    s = one(unique_pack(tmp_path / "pack"), "scripted/oracle?key=the-right-key", apiKeyEnv="FAULT_KEY")
    result, d = await run(s, tmp_path / "out", scripted_url, env={"FAULT_KEY": SECRET})
    assert result.failure == "config_error" and result.totals.llm_retries == 0
    assert "401" in (result.error or "") and SECRET not in (result.error or "") and "[REDACTED]" in (result.error or "")
    for p in (tmp_path / "out").rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p
    assert b"[REDACTED]" in (d / "trial.log").read_bytes()
    # The same trial with the right key passes: nothing about the model was wrong.
    good, _ = await run(s, tmp_path / "out2", scripted_url, env={"FAULT_KEY": "the-right-key"})
    assert good.passed


async def test_tool_call_ids_are_unique_before_results_go_back(scripted_url: str, tmp_path: Path) -> None:
    """Two calls in one turn sharing an id, then a later turn reusing it: the strict server accepts the
    conversation only if every call got its own id, and every result answers its own call."""
    script = tmp_path / "two.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "list_allowed_directories", "arguments": {}}]},
                    {
                        "tool_calls": [
                            {"name": "read_text_file", "arguments": {"path": "{root}/notes/todo.txt"}},
                            {"name": "read_text_file", "arguments": {"path": "{root}/keep.txt"}},
                        ]
                    },
                    {"content": "I read both files."},
                ]
            }
        )
    )
    s = one(unique_pack(tmp_path / "pack"), f"scripted/script={script}?fault=dup_ids")
    result, d = await run(s, tmp_path / "out", scripted_url)
    assert result.stop_reason == "completed" and result.totals.tool_calls == 3, result.error
    items = json.loads((d / "messages.json").read_text())
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert len(set(calls)) == 3 and outputs == calls
    texts = [i["output"] for i in items if i.get("type") == "function_call_output"]
    # Each result went to its own call (MCPMark's conversation sends the tool result as its JSON dump).
    # Escapes removed, the file's "a\nb\nc" reads "anbnc" at any depth of escaping.
    assert "anbnc" in texts[1].replace("\\", "") and "keep me" not in texts[1] and "keep me" in texts[2]


async def test_odd_usage_is_counted(scripted_url: str, tmp_path: Path) -> None:
    s = one(unique_pack(tmp_path / "pack"), "scripted/oracle?fault=odd_usage")
    result, _ = await run(s, tmp_path / "out", scripted_url)
    assert result.passed and result.totals.llm_retries == 0
    assert result.totals.input_tokens > 0 and result.totals.output_tokens > 0  # "12" and 3.0 were read as counts
    assert result.totals.reasoning_tokens == 0  # "n/a" is not a count


async def test_a_hang_is_the_providers_not_the_agents_timeout(scripted_url: str, tmp_path: Path) -> None:
    """llmTimeoutSeconds x attempts exceeds timeoutSeconds: before, the agent's timeout fired first and the
    trial was charged to the model; now time lost to the provider does not count against the agent."""
    limits = {"llmTimeoutSeconds": 1, "timeoutSeconds": 2, "llmRetries": 3}
    result, _ = await run(
        one(unique_pack(tmp_path / "pack"), "scripted/oracle?fault=hang", limits), tmp_path, scripted_url
    )
    assert result.failure == "provider_error" and result.stop_reason == "provider_error", result.error
    assert result.turns[0]["retries"] == 3 and "no reply within 1 s" in (result.error or "")
    assert result.timings.agent >= 4.0  # four 1 s attempts: past the agent's 2 s, which did not count them


# -- the pieces, on their own ----------------------------------------------------------------------------

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "4"}, 4.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"Retry-After": "Fri, 15 Jan 2027 08:00:07 GMT"}, 7.0),  # NOW is 2027-01-15T08:00:00Z
        ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, 360.0),  # latest
        (
            {
                "x-ratelimit-remaining-requests": "12",
                "x-ratelimit-reset-requests": "1m",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "1.5s",
            },
            1.5,  # the exhausted limit's reset
        ),
        ({"anthropic-ratelimit-requests-reset": "2027-01-15T08:00:03Z"}, 3.0),
        ({"x-ratelimit-reset": str(int(NOW) + 12)}, 12.0),  # an epoch time
        ({"Retry-After": "Fri, 15 Jan 2027 07:59:00 GMT"}, 0.0),  # in the past
        ({"content-type": "application/json"}, None),
        ({"Retry-After": "soon"}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], seconds: float | None) -> None:
    from mcpfleet.runner.llm.faults import retry_after_seconds

    assert NOW == 1_800_000_000.0  # 2027-01-15T08:00:00Z
    got = retry_after_seconds(headers, now=NOW)
    assert got == (None if seconds is None else pytest.approx(seconds))


def test_one_line_drops_tracebacks_prefixes_and_dumps() -> None:
    from mcpfleet.runner.llm.faults import one_line

    class APIError(Exception):
        pass

    exc = APIError(
        "litellm.APIError: APIError: Hosted_vllmException - Invalid response object Traceback (most recent call "
        "last):\n  File \"/x/site-packages/litellm/a.py\", line 1\n\nreceived_args={'response_object': {}}"
    )
    assert one_line(exc) == "APIError: Invalid response object"
    body = APIError('OpenAIException - {"error": {"message": "slow down", "type": "rate_limit_error"}}')
    assert one_line(body) == "APIError: slow down"
    group = ExceptionGroup("unhandled errors in a TaskGroup", [IndexError("list index out of range")])
    assert one_line(group) == "IndexError: list index out of range"
    assert len(one_line(APIError("x" * 5000))) < 320


def test_one_line_redacts_a_key_before_cutting_it_and_drops_control_characters() -> None:
    """A provider's 401 that echoes the key across the 300-character cut: redacted after the cut, the key's first
    part would survive (no later redaction recognises part of a key). Terminal controls are dropped."""
    from mcpfleet.runner.llm.faults import classify, one_line

    key = "sk-proj-Abc123SECRETkeyMaterial0987654321xyz"

    class AuthenticationError(Exception):
        pass

    for lead in range(250, 300, 7):  # the cut falls at every place inside the key
        exc = AuthenticationError("x" * lead + f" Incorrect API key provided: {key}")
        for cause in (one_line(exc, [key]), classify(exc, first_call=True, secrets=[key]).cause):
            assert key[:8] not in cause and len(cause) <= len("AuthenticationError: ") + 300, (lead, cause)
    hostile = AuthenticationError("Invalid key \x1b]0;PWNED\x07\x1b[2J\x1b[H\u202espoofed\x00 [/v1/keys]")
    assert one_line(hostile) == "AuthenticationError: Invalid key ]0;PWNED[2J[Hspoofed [/v1/keys]"


def test_normalise_completion() -> None:
    from mcpfleet.runner.llm.normalise import normalise_completion

    body = {
        "choices": [
            {
                "message": {
                    "content": [{"type": "text", "text": "Do"}, {"type": "image_url"}, "ne."],
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}],
                }
            }
        ],
        "usage": {"prompt_tokens": "12", "completion_tokens": 3.0, "total_tokens": None, "x": {"y": 1}, "cost": "n/a"},
    }
    out = normalise_completion(body)
    msg = out["choices"][0]["message"]
    assert msg["content"] == "Done." and msg["role"] == "assistant"
    assert msg["tool_calls"] == [{"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]
    # A total the provider did not give stays 0, as LiteLLM reads it and MCPMark's agents add it to meta.json.
    assert out["usage"] == {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 0}
    assert normalise_completion({"usage": [1, 2], "choices": []}) == {"choices": []}
    assert normalise_completion({"error": {"message": "x"}}) == {"error": {"message": "x"}}  # not a completion
