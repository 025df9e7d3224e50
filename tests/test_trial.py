"""run_trial end to end: the real scripted model over HTTP through LiteLLM, the real filesystem MCP server.

Nothing is mocked: every trial spawns ``@modelcontextprotocol/server-filesystem`` (or reaches it through
supergateway over streamable HTTP), every LLM call is an HTTP request to the scripted model server, and
every verdict comes from the task's own verify.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import TASKS, TINY_DESCRIPTION, make_tiny_pack

import mcpfleet.runner.llm.client  # noqa: F401 - the warm-worker import (sets its LiteLLM env defaults once)
from mcpfleet.runner.environment.server import servers_bin
from mcpfleet.runner.plan import expand as plan
from mcpfleet.runner.results import store
from mcpfleet.runner.results.records import TrialResult
from mcpfleet.runner.spec import mcpmark_protocol
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.tasks.discovery import find_task
from mcpfleet.runner.tasks.materialise import materialise
from mcpfleet.runner.trial import engine as trial

TINY_ID = "filesystem/standard/tiny/move_todo_0"
REAL_ID = "filesystem/standard/team_project/spend_vs_budget"
SECRET = "sk-test-secret-123456"
FS_SERVER = b"mcp-server-filesystem"


# -- helpers ------------------------------------------------------------------------------------------


def specs(
    pack: Path,
    model: str = "scripted/oracle",
    *,
    agent: str | None = None,
    limits: dict[str, Any] | None = None,
    include: list[str] | None = None,
    attempts: int = 1,
    **model_extra: Any,
) -> list[plan.TrialSpec]:
    doc: dict[str, Any] = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {
            "models": [{"name": "m", "model": model, **model_extra}],
            "tasks": {"path": str(pack), **({"include": include} if include else {})},
            "attempts": attempts,
            "limits": limits or {},
        },
    }
    if agent:
        doc["spec"]["agent"] = agent
    return plan.plan(parse_evalrun(doc), pack)


def one(pack: Path, model: str = "scripted/oracle", **kw: Any) -> plan.TrialSpec:
    [s] = specs(pack, model, **kw)
    return s


def ctx(url: str, **kw: Any) -> trial.TrialContext:
    return trial.TrialContext(scripted_base_url=url, backoff_initial=0.01, **kw)


async def run(s: plan.TrialSpec, out: Path, c: trial.TrialContext) -> tuple[TrialResult, Path]:
    st = store.LocalStore(out)
    result = await trial.run_trial(s, st, c)
    return result, st.trial_dir(s.trial_id)


def unique_pack(root: Path) -> Path:
    """A tiny pack whose description is unique to this test, so the scripted server's per-conversation
    ``fail`` counters start at zero; the oracle still matches (the tiny description is contained in it)."""
    pack = make_tiny_pack(root)
    desc = pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "description.md"
    desc.write_text(TINY_DESCRIPTION + f"(conversation {uuid.uuid4().hex})\n")
    return pack


def script(path: Path, turns: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"turns": turns}))
    return f"scripted/script={path}"


LIST = {"tool_calls": [{"name": "list_allowed_directories", "arguments": {}}]}


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        table[int(entry)] = (int(fields[1]), fields[0])
    return table


def descendants(pid: int) -> list[int]:
    table = _proc_table()
    out, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, (pp, state) in table.items() if pp == parent and state != "Z"]
        out += kids
        frontier += kids
    return out


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def fs_servers() -> list[int]:
    """Live mcp-server-filesystem processes started (directly or not) by this test process (not the reaper each
    runs under, whose command line names it too)."""
    return [p for p in descendants(os.getpid()) if FS_SERVER in cmdline(p) and not reaper(p)]


def reaper(pid: int) -> bool:
    """Whether ``pid`` is verifier.py's reaper (``python -I -S -c <code> ...``), which stdio servers run under."""
    return cmdline(pid).split(b"\0")[1:4] == [b"-I", b"-S", b"-c"]


def written(trial_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in trial_dir.iterdir() if p.is_file()}


def output_text(output: str) -> str:
    """The tool's text inside a messages.json output (MCPMark wraps it; its own agent's is an MCP result dump)."""
    text = json.loads(output)["text"]
    try:
        dump = json.loads(text)
    except ValueError:
        return text
    return "\n".join(b["text"] for b in dump["content"])


def tool_outputs(items: list[dict[str, Any]]) -> list[str]:
    return [output_text(i["output"]) for i in items if i.get("type") == "function_call_output"]


def check_mcpmark_messages(
    items: list[dict[str, Any]], description: str, final_text: str, *, suffix: bool = True
) -> list[str]:
    """Assert MCPMark's item format; returns the function-call names in order."""
    first = description + (mcpmark_protocol.task_suffix("filesystem") if suffix else "")
    assert items[0] == {"content": first, "role": "user"} and list(items[0]) == ["content", "role"]
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    for c in calls:
        assert list(c) == ["arguments", "call_id", "name", "type", "id"] and c["call_id"] and c["id"] == "__fake_id__"
        assert isinstance(c["arguments"], str) and isinstance(json.loads(c["arguments"]), dict)
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]
    assert len({c["call_id"] for c in calls}) == len(calls)
    for o in outputs:
        assert list(o) == ["call_id", "output", "type"] and isinstance(o["output"], str)
        assert list(json.loads(o["output"])) == ["type", "text", "annotations", "meta"]
    # every output directly follows its call (one call per turn in these runs)
    for i, item in enumerate(items):
        if item.get("type") == "function_call_output":
            assert items[i - 1]["call_id"] == item["call_id"]
    assert items[-1] == {
        "id": "__fake_id__",
        "content": [{"annotations": [], "text": final_text, "type": "output_text"}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }
    return [c["name"] for c in calls]


# -- 1. LLM-driven oracle on the tiny pack --------------------------------------------------------------


async def test_scripted_oracle_passes_with_full_records(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    s = one(tiny_pack)
    assert s.task_id == TINY_ID and s.agent == "mcpmark"
    result, d = await run(s, tmp_path / "out", ctx(scripted_url))

    assert result.passed and result.failure is None, (result.error, result.verifier)
    assert result.stop_reason == "completed" and result.error is None
    assert result.verifier.exit_code == 0 and "all good" in result.verifier.stdout
    # Its command as a reader can use it: placeholders for this machine's folders, the service's variables only.
    assert result.verifier.command == ["python", "{task}/verify.py"]
    assert result.verifier.env == {"FILESYSTEM_TEST_DIR": "{state}", "MCP_MESSAGES": "{trial}/messages.json"}
    # list_allowed_directories + 4 oracle steps + the final "Done." = 6 LLM calls, 5 tool calls
    assert result.totals.turns == len(result.turns) == 6
    assert result.totals.tool_calls == 5 and result.totals.tool_errors == 0
    assert result.totals.malformed_tool_calls == 0 and result.totals.llm_retries == 0
    assert result.totals.input_tokens > 0 and result.totals.output_tokens > 0
    assert all(t["latency_s"] > 0 for t in result.turns)
    assert [t["finish_reason"] for t in result.turns] == ["tool_calls"] * 5 + ["stop"]
    assert result.timings.llm_wait > 0
    assert result.timings.llm_wait == pytest.approx(sum(t["latency_s"] for t in result.turns))
    assert result.timings.mcp_start > 0 and result.timings.agent >= result.timings.llm_wait
    assert result.timings.verify > 0 and result.timings.total >= result.timings.agent + result.timings.verify
    assert result.litellm_model == "scripted/oracle" and result.model == "m"
    assert result.provider_model == "oracle" and result.protocol == mcpmark_protocol.version()

    files = sorted(p.name for p in d.iterdir())
    assert {"result.json", "messages.json", "meta.json"} <= set(files)
    assert not [f for f in files if f.endswith(".tmp")]
    on_disk = json.loads((d / "result.json").read_text())
    assert on_disk == result.model_dump(mode="json")
    assert store.LocalStore(tmp_path / "out").read_result(s.trial_id) == on_disk
    # result.json is the completion marker: written after every other file
    marker = (d / "result.json").stat().st_mtime_ns
    assert all(marker >= (d / f).stat().st_mtime_ns for f in files)

    items = json.loads((d / "messages.json").read_text())
    names = check_mcpmark_messages(items, TINY_DESCRIPTION, "Done.")
    assert names == ["list_allowed_directories", "read_text_file", "create_directory", "write_file", "move_file"]
    assert tool_outputs(items)[1].strip() == "a\nb\nc"  # the real server read the real materialised file

    meta = json.loads((d / "meta.json").read_text())
    assert meta["execution_result"]["success"] is True
    assert meta["execution_result"]["verification_error"] is None
    assert meta["execution_result"]["error_message"] is None
    assert "all good" in meta["execution_result"]["verification_output"]
    assert meta["task_name"] == "tiny__move_todo_0" and meta["mcp"] == "filesystem" and meta["turn_count"] == 6
    assert meta["model_name"] == "m" and meta["litellm_run_model_name"] == "oracle" and meta["timeout"] == 3600
    assert meta["token_usage"]["total_tokens"] == result.totals.input_tokens + result.totals.output_tokens


async def test_meta_json_carries_execution_times(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    """MCPMark's analysis reads agent_execution_time/task_execution_time/time from meta.json."""
    result, d = await run(one(tiny_pack), tmp_path / "out", ctx(scripted_url))
    assert result.passed
    meta = json.loads((d / "meta.json").read_text())
    # MCPMark's agent time spans its MCP server's start, as its agent starts the server itself
    agent_time = result.timings.mcp_start + result.timings.agent
    assert meta["agent_execution_time"] == pytest.approx(agent_time, abs=0.01)
    assert meta["agent_execution_time"] > 0
    # the whole trial, measured before its records are written
    assert agent_time < meta["task_execution_time"] <= result.timings.total
    start, end = (datetime.fromisoformat(meta["time"][k]) for k in ("start", "end"))
    assert start.tzinfo is None and 0 < (end - start).total_seconds() < 60


# -- 2. a real bundled task -----------------------------------------------------------------------------


async def test_real_task_oracle_passes_and_noop_fails(scripted_url: str, tmp_path: Path) -> None:
    passing, failing = await asyncio.gather(
        run(one(TASKS, include=[REAL_ID]), tmp_path / "a", ctx(scripted_url)),
        run(one(TASKS, "scripted/noop", include=[REAL_ID]), tmp_path / "b", ctx(scripted_url)),
    )
    result, d = passing
    assert result.task_id == REAL_ID
    assert result.passed and result.failure is None, (result.error, result.verifier)
    steps = len(find_task(TASKS, REAL_ID).oracle)
    assert result.totals.tool_calls == steps + 1 and result.totals.turns == steps + 2
    assert result.totals.tool_errors == 0
    check_mcpmark_messages(
        json.loads((d / "messages.json").read_text()), find_task(TASKS, REAL_ID).description, "Done."
    )

    result, d = failing
    assert not result.passed and result.failure == "premature_stop"
    assert result.stop_reason == "completed" and result.totals.turns == 1 and result.totals.tool_calls == 0
    assert result.verifier.exit_code not in (0, None)
    assert json.loads((d / "meta.json").read_text())["execution_result"]["success"] is False


# -- 3. failure taxonomy end to end ---------------------------------------------------------------------

TAXONOMY = [
    ("malformed", "scripted/malformed", {}, "malformed_tool_call"),
    ("overflow", "scripted/overflow", {}, "context_overflow"),
    ("loop", "scripted/loop", {"maxTurns": 5}, "turn_limit"),
    # The second call (1.5 s) is still running when the agent's 3 s are up: the model was slow, not hung
    # (no call may outlast llmTimeoutSeconds, and a call must fit in the agent's time: spec.py).
    ("timeout", "scripted/oracle?latency=1.5", {"timeoutSeconds": 3, "llmTimeoutSeconds": 2}, "timeout"),
]


@pytest.mark.parametrize("case,model,limits,failure", TAXONOMY, ids=[t[0] for t in TAXONOMY])
async def test_failure_taxonomy(
    case: str, model: str, limits: dict[str, Any], failure: str, tiny_pack: Path, scripted_url: str, tmp_path: Path
) -> None:
    t = time.perf_counter()
    result, d = await run(one(tiny_pack, model, limits=limits), tmp_path / "out", ctx(scripted_url))
    elapsed = time.perf_counter() - t
    assert not result.passed and result.failure == failure, (result.stop_reason, result.error)
    assert result.verifier.exit_code == 1  # the verifier still judged the (untouched) end state
    assert (d / "result.json").is_file() and (d / "messages.json").is_file()
    if case == "malformed":
        # MCPMark's agent parses the arguments before calling and ends the run when they do not parse
        assert result.stop_reason == "malformed_tool_call" and "Unterminated string" in (result.error or "")
        assert result.totals.malformed_tool_calls >= 1 and result.totals.tool_errors >= 1
        [call] = [c for t_ in result.turns for c in t_["tool_calls"]]
        assert call["malformed"] and call["arguments"] == '{"path": "'
        items = json.loads((d / "messages.json").read_text())
        assert [i["type"] for i in items[1:]] == ["function_call"] and not tool_outputs(items)
        meta = json.loads((d / "meta.json").read_text())
        assert meta["execution_result"]["error_message"] == result.error
    elif case == "overflow":
        assert result.stop_reason == "context_overflow" and len(result.turns) == 1
        # The call that overflowed is in the per-call list, but no turn of the model's (MCPMark's turn_count)
        meta = json.loads((d / "meta.json").read_text())
        assert result.totals.turns == meta["turn_count"] == 0
        assert "ContextWindowExceeded" in (result.error or "")
    elif case == "loop":
        assert result.stop_reason == "turn_limit" and result.error == "Max turns (5) exceeded"
        assert result.totals.turns == len(result.turns) == 5 and result.totals.tool_calls == 5
        meta = json.loads((d / "meta.json").read_text())
        assert meta["execution_result"]["error_message"] == "Max turns (5) exceeded" and meta["turn_count"] == 5
    elif case == "timeout":
        assert result.stop_reason == "timeout" and result.error == "Execution timed out after 3 seconds"
        assert result.timings.agent < 3.8 and elapsed < 8 and result.totals.llm_retries == 0


async def test_provider_error_after_retries_run_out(scripted_url: str, tmp_path: Path) -> None:
    """fail=3 with llmRetries=1: two calls, both 503 -> provider_error (the provider's, not scored). A follow-up
    trial of the same conversation then proves the server saw exactly 2 calls: its first call is the 3rd
    (fails), the next succeeds."""
    pack = unique_pack(tmp_path / "pack")
    model = "scripted/noop?fail=3&fail_status=503"
    result, d = await run(one(pack, model, limits={"llmRetries": 1}), tmp_path / "out1", ctx(scripted_url))
    assert not result.passed and result.failure == "provider_error"
    assert result.stop_reason == "provider_error" and "HTTP 503" in (result.error or "")
    assert result.totals.turns == 0 and len(result.turns) == 1 and (d / "result.json").is_file()  # no response

    again, _ = await run(one(pack, model, limits={"llmRetries": 5}), tmp_path / "out2", ctx(scripted_url))
    assert again.stop_reason == "completed" and again.failure == "premature_stop"
    assert again.turns[0]["retries"] == 1  # call 3 failed, call 4 answered: the first trial made exactly 2


async def test_provider_error_records_the_retries_it_spent(scripted_url: str, tmp_path: Path) -> None:
    """The failed turn of a provider_error trial must still say how many retries it used (and its wait)."""
    pack = unique_pack(tmp_path / "pack")
    result, _ = await run(
        one(pack, "scripted/noop?fail=3&fail_status=503", limits={"llmRetries": 1}), tmp_path / "out", ctx(scripted_url)
    )
    assert result.failure == "provider_error"
    assert result.turns[0]["retries"] == 1 and result.totals.llm_retries == 1
    assert result.timings.llm_wait > 0


async def test_transient_errors_are_retried_by_tenacity_only(scripted_url: str, tmp_path: Path) -> None:
    """fail=2 with llmRetries=3 passes with exactly 2 retries: the OpenAI client's own retries are off
    (max_retries=0), else it would absorb the 503s and tenacity would count 0."""
    pack = unique_pack(tmp_path / "pack")
    result, _ = await run(
        one(pack, "scripted/oracle?fail=2&fail_status=503", limits={"llmRetries": 3}),
        tmp_path / "out",
        ctx(scripted_url),
    )
    assert result.passed and result.failure is None, (result.error, result.verifier)
    assert result.turns[0]["retries"] == 2
    assert [t["retries"] for t in result.turns[1:]] == [0] * 5
    assert result.totals.llm_retries == 2 and result.totals.turns == 6


@pytest.mark.parametrize("agent", ["mcpmark", "mcpfleet", "react"])
async def test_an_mcp_server_that_dies_mid_trial_is_an_infrastructure_error(
    agent: str, tiny_pack: Path, scripted_url: str, tmp_path: Path
) -> None:
    """A server killed mid-trial (OOM, a crash) answers every later call with "Connection closed": that measured
    the harness, not the model. The trial is an unscored infra_error (retried by the launcher), never a model
    that kept calling a broken tool and then failed the verifier."""
    react = json.dumps({"thought": "look", "action": {"tool": "list_allowed_directories", "arguments": {}}})
    turn = {"content": react} if agent == "react" else LIST
    model = script(tmp_path / "s.json", [turn] * 6 + [{"content": "done"}]) + "?latency=0.4"

    async def kill_the_server_after_its_first_call() -> int:
        # Counted from the server's start, not the trial's (a busy machine spends a second on the state and the
        # spawn): its first call is done by then (one 0.4 s model turn after list_tools), the later ones are not.
        while not fs_servers():
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.6)  # of seven 0.4 s turns: past the first call even on a busy machine, before the last
        [pid] = fs_servers()
        os.kill(pid, signal.SIGKILL)
        return pid

    (result, d), killed = await asyncio.gather(
        run(one(tiny_pack, model, agent=agent), tmp_path / "out", ctx(scripted_url)),
        kill_the_server_after_its_first_call(),
    )
    assert (result.passed, result.failure) == (False, "infra_error"), (result.error, result.stop_reason)
    assert "MCP server's connection closed" in (result.error or ""), result.error
    assert killed not in fs_servers() and "Connection closed" in (d / "trial.log").read_text()


async def test_abandoned_and_verifier_failed(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    give_up = script(
        tmp_path / "give_up.json",
        [
            LIST,
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "{root}/notes/todo.txt", "content": "wrong\n"}}
                ]
            },
            {"content": "I cannot complete this task."},
        ],
    )
    reads = script(
        tmp_path / "reads.json",
        [
            LIST,
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": "{root}/notes/todo.txt"}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": "{root}/keep.txt"}}]},
            {"content": "I reviewed the notes; everything is in order."},
        ],
    )
    (abandoned, d1), (wrong, _) = await asyncio.gather(
        run(one(tiny_pack, give_up), tmp_path / "o1", ctx(scripted_url)),
        run(one(tiny_pack, reads), tmp_path / "o2", ctx(scripted_url)),
    )

    assert not abandoned.passed and abandoned.failure == "abandoned"
    assert abandoned.stop_reason == "completed" and abandoned.totals.tool_calls == 2
    assert abandoned.totals.tool_errors == 0  # the wrong write really happened
    assert "notes/todo.txt still in place" in abandoned.verifier.stdout
    items = json.loads((d1 / "messages.json").read_text())
    assert items[-1]["content"][0]["text"] == "I cannot complete this task."

    assert not wrong.passed and wrong.failure == "verifier_failed"
    assert wrong.stop_reason == "completed" and wrong.totals.tool_calls == 3 and wrong.totals.turns == 4
    assert wrong.totals.tool_errors == 0 and wrong.totals.malformed_tool_calls == 0


# -- 4. the LLM-free agents -----------------------------------------------------------------------------


async def test_oracle_and_noop_agents(tiny_pack: Path, tmp_path: Path) -> None:
    # No scripted URL at all: neither agent may touch an LLM.
    oracle, d = await run(one(tiny_pack, agent="oracle"), tmp_path / "o", trial.TrialContext())
    assert oracle.passed and oracle.failure is None
    assert oracle.totals.tool_calls == 4 and oracle.totals.input_tokens == 0
    # Four steps and the final answer: five responses, as meta.json's turn_count says.
    assert oracle.totals.turns == 5 == json.loads((d / "meta.json").read_text())["turn_count"]
    assert oracle.timings.llm_wait == 0
    names = check_mcpmark_messages(
        json.loads((d / "messages.json").read_text()), TINY_DESCRIPTION, "Oracle solution applied.", suffix=False
    )
    assert names == ["read_text_file", "create_directory", "write_file", "move_file"]

    noop, d = await run(one(tiny_pack, agent="noop"), tmp_path / "n", trial.TrialContext())
    assert not noop.passed and noop.failure == "premature_stop"
    assert noop.totals.tool_calls == 0 and noop.timings.mcp_start == 0
    assert noop.totals.turns == 1 == json.loads((d / "meta.json").read_text())["turn_count"]  # its one answer
    assert noop.verifier.exit_code == 1
    assert json.loads((d / "meta.json").read_text())["execution_result"]["success"] is False


@pytest.mark.parametrize("agent", ["noop", "oracle"])
async def test_result_names_the_agent_kind(agent: str, tiny_pack: Path, tmp_path: Path) -> None:
    """result.json's agent is the spec's value ('oracle'), as the summary and MCPMark tooling group by it."""
    result, d = await run(one(tiny_pack, agent=agent), tmp_path / "out", trial.TrialContext())
    assert json.loads((d / "result.json").read_text())["agent"] == agent
    assert result.agent == agent


# -- 5. infrastructure ----------------------------------------------------------------------------------


async def test_missing_state_is_infra_error_with_a_record(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    state = tiny_pack / "filesystem" / "states" / "tiny"
    shutil.rmtree(state)
    s = one(tiny_pack)
    result, d = await run(s, tmp_path / "out", ctx(scripted_url))
    assert not result.passed and result.failure == "infra_error"
    assert str(state) in (result.error or "") and result.stop_reason is None
    assert result.verifier.exit_code is None and result.totals.turns == 0
    record = store.LocalStore(tmp_path / "out").read_result(s.trial_id)
    assert record is not None and record["failure"] == "infra_error"
    meta = json.loads((d / "meta.json").read_text())
    assert meta["execution_result"] == {
        "success": False,
        "error_message": "State Duplication Error",  # MCPMark's words for a state that could not be set up
        "verification_error": None,
        "verification_output": None,
    }
    assert meta["token_usage"] == {} and meta["turn_count"] is None and meta["agent_execution_time"] == 0.0


async def test_verifier_timeout_is_enforced(tmp_path: Path) -> None:
    pack = make_tiny_pack(tmp_path / "pack")
    verify = pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py"
    verify.write_text("import time\ntime.sleep(30)\n")
    t = time.perf_counter()
    result, d = await run(
        one(pack, agent="noop", limits={"verifierTimeoutSeconds": 1}), tmp_path / "out", trial.TrialContext()
    )
    elapsed = time.perf_counter() - t
    assert elapsed < 5, f"trial took {elapsed:.1f} s: the 30 s verifier was not killed at 1 s"
    assert not result.passed and result.verifier.timed_out and result.verifier.exit_code is None
    assert 0.9 < result.verifier.duration_s < 3 and "killed after 1 s" in result.verifier.stderr
    assert (d / "result.json").is_file()
    assert not [p for p in descendants(os.getpid()) if str(verify).encode() in cmdline(p)]
    # meta.json words it as MCPMark's evaluator does: Python's TimeoutExpired on [python, verify.py]
    meta = json.loads((d / "meta.json").read_text())["execution_result"]
    assert meta["verification_error"] == f"Command '{[sys.executable, str(verify)]}' timed out after 1 seconds"
    assert meta["verification_output"] is None


async def test_timed_out_verifier_keeps_its_output(tmp_path: Path) -> None:
    """What a verifier printed before it hung is the only clue to where it hung: it must reach the record."""
    pack = make_tiny_pack(tmp_path / "pack")
    verify = pack / "filesystem" / "standard" / "tiny" / "move_todo_0" / "verify.py"
    verify.write_text(
        "import sys, time\nprint('checked summary.txt', flush=True)\n"
        "print('checking archive', file=sys.stderr, flush=True)\ntime.sleep(30)\n"
    )
    result, _ = await run(
        one(pack, agent="noop", limits={"verifierTimeoutSeconds": 1}), tmp_path / "out", trial.TrialContext()
    )
    assert result.verifier.timed_out
    assert "checked summary.txt" in result.verifier.stdout
    assert "checking archive" in result.verifier.stderr


# -- 6. isolation ---------------------------------------------------------------------------------------


async def test_concurrent_trials_of_one_task_are_isolated(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    a, b = specs(tiny_pack, attempts=2)
    assert a.task_id == b.task_id and a.trial_id != b.trial_id
    (ra, da), (rb, db) = await asyncio.gather(
        run(a, tmp_path / "out", ctx(scripted_url)), run(b, tmp_path / "out", ctx(scripted_url))
    )
    assert ra.passed and rb.passed, (ra.verifier, rb.verifier)
    assert da != db and (da / "result.json").is_file() and (db / "result.json").is_file()
    assert {r["attempt"] for r in store.LocalStore(tmp_path / "out").iter_results()} == {1, 2}

    def root(d: Path) -> str:
        return tool_outputs(json.loads((d / "messages.json").read_text()))[0]

    assert root(da) != root(db)  # each trial had its own state folder and its own server


async def test_secret_never_written_and_environment_untouched(
    tiny_pack: Path, scripted_url: str, tmp_path: Path
) -> None:
    leaky = script(
        tmp_path / "leak.json",
        [
            LIST,
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "{root}/leak.txt", "content": f"key={SECRET}"}}
                ]
            },
            {"content": f"Done. For the record, the key you gave me is {SECRET}."},
        ],
    )
    s = one(tiny_pack, leaky, apiKeyEnv="MCPFLEET_TEST_API_KEY")
    assert s.model.is_scripted and s.model.api_key_env == "MCPFLEET_TEST_API_KEY"
    assert "MCPFLEET_TEST_API_KEY" not in os.environ
    before = dict(os.environ)
    result, d = await run(s, tmp_path / "out", ctx(scripted_url, env={"MCPFLEET_TEST_API_KEY": SECRET}))
    assert dict(os.environ) == before
    assert result.failure == "verifier_failed" and result.totals.tool_calls == 2

    out = tmp_path / "out"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"result.json", "messages.json", "meta.json"}
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), f"{p} contains the API key"
    messages = (d / "messages.json").read_text()
    assert messages.count("[REDACTED]") == 2  # the write_file arguments and the final message


async def test_a_key_inside_the_models_name_leaves_the_record_readable(
    tiny_pack: Path, scripted_url: str, tmp_path: Path
) -> None:
    """Ollama documents the dummy key "ollama"; a model named after its server then holds its key. The key is
    redacted from what the model wrote, never from the fields that name the record (which could then never be
    read back: the trial would run again, and be paid again, on every resume)."""
    echo = script(tmp_path / "echo.json", [LIST, {"content": "My key is ollama, as configured."}])
    s = one(tiny_pack, echo, name="ollama-qwen", apiKeyEnv="MCPFLEET_TEST_API_KEY")
    result, d = await run(s, tmp_path / "out", ctx(scripted_url, env={"MCPFLEET_TEST_API_KEY": "ollama"}))
    assert result.trial_id.startswith("ollama-qwen.") and result.model == "ollama-qwen"
    stored = store.LocalStore(tmp_path / "out").read_result(s.trial_id)
    assert stored is not None and stored["trial_id"] == s.trial_id and stored["model"] == "ollama-qwen"
    meta = json.loads((d / "meta.json").read_text())
    assert meta["model_name"] == "ollama-qwen"
    messages = (d / "messages.json").read_text()
    assert "My key is [REDACTED], as configured." in messages and "is ollama" not in messages


async def test_a_lone_surrogate_from_the_model_is_recorded(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    """Half an emoji (a lone surrogate, which a provider sends as the JSON escape \\ud83d) cannot be encoded as
    UTF-8: the trial is recorded anyway, and its files read back to what the model said."""
    half = script(
        tmp_path / "half.json",
        [{**LIST, "content": "Here is half an emoji: \ud83d and the rest"}, {"content": "done \ud83d"}],
    )
    result, d = await run(one(tiny_pack, half), tmp_path / "out", ctx(scripted_url))
    assert result.failure == "verifier_failed" and result.error is None
    messages = json.loads((d / "messages.json").read_bytes())
    texts = json.dumps(messages, ensure_ascii=True)
    assert "half an emoji: \\ud83d and the rest" in texts and "done \\ud83d" in texts
    assert store.LocalStore(tmp_path / "out").read_result(result.trial_id) is not None


async def test_mcp_server_does_not_inherit_secrets(
    tiny_pack: Path, scripted_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET + "-aws")
    job = asyncio.create_task(run(one(tiny_pack, "scripted/oracle?latency=0.3"), tmp_path / "out", ctx(scripted_url)))
    env = None
    deadline = time.monotonic() + 10
    while env is None and time.monotonic() < deadline and not job.done():
        for pid in fs_servers():
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
        await asyncio.sleep(0.05)
    result, _ = await job
    assert env is not None, "never saw the trial's mcp-server-filesystem process"
    assert b"TZ=UTC" in env.split(b"\0")  # we read the right process
    assert SECRET.encode() not in env and b"OPENAI_API_KEY" not in env and b"AWS_SECRET" not in env
    assert result.passed


# -- 7. cancellation ------------------------------------------------------------------------------------


async def test_cancellation_writes_nothing_and_leaves_nothing(
    tiny_pack: Path, scripted_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))  # mkdtemp lands here, unseen by other runs
    assert not fs_servers()
    out = tmp_path / "out"
    job = asyncio.create_task(run(one(tiny_pack, "scripted/oracle?latency=1"), out, ctx(scripted_url)))
    await asyncio.sleep(1.5)
    # mid-trial: the working folder and the server exist, so their absence afterwards means something
    assert [p.name for p in private_tmp.iterdir() if p.name.startswith("mcpfleet-trial-")]
    assert fs_servers()
    assert not job.done()
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert not list(out.rglob("result.json"))
    assert not [p for p in private_tmp.iterdir() if p.name.startswith("mcpfleet-trial-")]
    assert not fs_servers()


# -- 8. streamable HTTP sidecar -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_streamable_http_sidecar(tiny_pack: Path, scripted_url: str, tmp_path: Path) -> None:
    task = find_task(tiny_pack, TINY_ID)
    state = tmp_path / "state"
    assert materialise(task, state) == 2
    port = _free_port()
    log = open(tmp_path / "supergateway.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(servers_bin() / "supergateway"),
            "--stdio",
            f"{servers_bin() / 'mcp-server-filesystem'} {state}",
            "--outputTransport",
            "streamableHttp",
            "--stateful",
            "--port",
            str(port),
            "--healthEndpoint",
            "/healthz",
            "--logLevel",
            "none",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}, "TZ": "UTC"},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "supergateway.log").read_text()
            await asyncio.sleep(0.1)
        before = set(descendants(os.getpid()))
        result, d = await run(
            one(tiny_pack), tmp_path / "out", ctx(scripted_url, mcp_url=f"http://localhost:{port}/mcp", state_dir=state)
        )
        assert result.passed and result.failure is None, (result.error, result.verifier)
        assert result.totals.tool_calls == 5 and result.totals.turns == 6
        # the tools ran against the sidecar's folder, not a locally spawned server's
        items = json.loads((d / "messages.json").read_text())
        listed = tool_outputs(items)[0]
        assert str(state) in listed.splitlines()
        assert (state / "done" / "summary.txt").read_text() == "3\n"
        assert not (set(fs_servers()) - before)
        # A pod's state volume is a folder of its own: the record names it as any trial's state.
        assert result.verifier.env["FILESYSTEM_TEST_DIR"] == "{state}" and str(tmp_path) not in str(result.verifier)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
