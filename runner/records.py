"""Trial records: mcpfleet's result.json plus MCPMark-compatible messages.json and meta.json.

result.json is the completion marker: it is written last, atomically, so a folder without it is an
unfinished trial, whatever else it holds.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class Timings(BaseModel):
    state: float = 0.0
    mcp_start: float = 0.0
    agent: float = 0.0
    verify: float = 0.0
    record: float = 0.0
    total: float = 0.0
    llm_wait: float = 0.0


class Totals(BaseModel):
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    malformed_tool_calls: int = 0
    llm_retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None


class VerifierRecord(BaseModel):
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""


class TrialResult(BaseModel):
    """One trial's outcome; the unit every aggregate is computed from."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    run: str
    trial_id: str
    spec_hash: str = Field(description="Hash of everything that defines this trial; resume compares it.")
    model: str
    litellm_model: str
    service: str
    task_id: str
    attempt: int
    agent: str
    passed: bool
    failure: str | None = None
    stop_reason: str | None = None
    error: str | None = Field(
        default=None, description="One line: '<ExceptionType>: <cause>'; tracebacks go to the trial's trial.log."
    )
    error_type: str | None = None
    verifier: VerifierRecord = Field(default_factory=VerifierRecord)
    timings: Timings = Field(default_factory=Timings)
    totals: Totals = Field(default_factory=Totals)
    turns: list[dict[str, Any]] = Field(default_factory=list)
    infra_attempts: int = 1
    started_at: str = ""
    finished_at: str = ""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_mcpmark_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages -> MCPMark's messages.json items (what its answer-task verifiers read)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role in ("user", "system"):
            items.append({"role": role, "content": m.get("content") or ""})
        elif role == "assistant":
            if m.get("content"):
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": m["content"]}],
                    }
                )
            for c in m.get("tool_calls") or []:
                items.append(
                    {
                        "type": "function_call",
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                        "call_id": c["id"],
                    }
                )
        elif role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": m.get("content") or ""}
            )
    return items


def mcpmark_meta(result: TrialResult, task_name: str, params: dict[str, Any]) -> dict[str, Any]:
    """MCPMark's per-run meta.json shape, so its analysis scripts read mcpfleet runs."""
    t = result.totals
    return {
        "task_name": task_name,
        "model_name": result.model,
        "litellm_run_model_name": result.litellm_model,
        "reasoning_effort": params.get("reasoning_effort"),
        "mcp": result.service,
        "timestamp": result.finished_at,
        "agent_execution_time": round(result.timings.agent, 3),
        "task_execution_time": round(result.timings.total, 3),
        "execution_result": {
            "success": result.passed,
            "error_message": result.error,
            "verification_error": None if result.passed else (result.failure or "verifier_failed"),
            "verification_output": result.verifier.stdout,
        },
        "token_usage": {
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
            "total_tokens": t.input_tokens + t.output_tokens,
            "reasoning_tokens": t.reasoning_tokens,
        },
        "turn_count": t.turns,
    }


def dumps(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def redact_text(text: str | None, secrets: list[str]) -> str | None:
    """``redact`` for a string kept in memory (an error message shown by the launcher)."""
    if text is None:
        return None
    for s in secrets:
        if s and len(s) >= 6:
            text = text.replace(s, "[REDACTED]")
    return text


def redact(data: bytes, secrets: list[str]) -> bytes:
    """Last line of defence: a secret value that slipped into any text never reaches storage."""
    for s in secrets:
        if s and len(s) >= 6:
            data = data.replace(s.encode(), b"[REDACTED]")
    return data
