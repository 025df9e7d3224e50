"""Trial records: mcpfleet's result.json plus MCPMark's messages.json and meta.json.

result.json is the completion marker: it is written last, atomically, so a folder without it is an
unfinished trial, whatever else it holds. messages.json and meta.json are field for field what MCPMark's
evaluator writes (src/results_reporter.py, src/agents/base_agent.py ``_convert_to_sdk_format``), so its
verifiers and analysis scripts read them unchanged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, quote_plus

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcpfleet.runner.spec import mcpmark_protocol as protocol

SCHEMA_VERSION = 1


class Timings(BaseModel):
    state: float = 0.0
    mcp_start: float = 0.0
    agent: float = 0.0
    verify: float = 0.0
    record: float = 0.0
    total: float = 0.0
    llm_wait: float = 0.0
    teardown: float = 0.0  # stopping its MCP server (a browser with it) and removing its state, before the record
    # A claimed spare's own boot, off the trial's path (see warm.py); mcp_start is then only what the trial waited
    # for it (~0 when it was ready). spare_started: its preparation once up (a browser spare's Chromium launch).
    spare_mcp_start: float = 0.0
    spare_started: float = 0.0


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
    # Tool calls per class (call_classes.py): the checker's, or the judge's for valid calls when one is named.
    call_classes: dict[str, int] = Field(default_factory=dict)


class VerifierRecord(BaseModel):
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    # What ran, as environment/invocation.py writes it (placeholders for paths, no secret values); empty when no
    # verifier ran, and in records older than these fields.
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class ServerFingerprint(BaseModel):
    """What identifies the MCP server a trial measured: ``serverInfo`` from MCP's initialize, and a digest of its
    ``tools/list`` (names, descriptions, input schemas, in the server's order), before any tool is refused."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    version: str | None = None
    tools: int = 0
    tools_digest: str | None = None


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
    variant: str | None = Field(default=None, description="The server variant (spec.servers) the trial measured.")
    server: ServerFingerprint | None = Field(
        default=None, description="The MCP server the trial measured: initialize's serverInfo and its tools' digest."
    )
    protocol: str | None = Field(default=None, description="Whose words the model read, e.g. mcpmark@<commit>.")
    provider_model: str | None = Field(default=None, description="The model name the provider reported.")
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
    harness: str | None = Field(
        default=None, description="What ran the trial: 'mcpfleet <version>', plus the runner image in a pod."
    )


def service_label(record: dict[str, Any]) -> str:
    """A record's service as metrics and status name it: ``<service>@<variant>`` for a server variant's trial."""
    variant = record.get("variant")
    return f"{record.get('service')}@{variant}" if isinstance(variant, str) and variant else str(record.get("service"))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_record(raw: bytes) -> Any:
    """``raw`` as JSON, None when it is none (damaged, not UTF-8, NaN or Infinity, nested too deep).

    pydantic-core's parser first: it reads a record in about a third of ``json.loads``'s time, and opening a
    10,000-trial run (view, report, resume) is mostly this. Whatever it refuses goes to ``json.loads``, so the
    answer is always ``json.loads``'s: a byte-order mark or an escaped lone surrogate, which only the standard
    parser accepts, still reads (a finished trial must never turn unfinished and run again)."""
    try:
        return pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError:
        pass
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None


def usable_record(raw: bytes, trial_id: str | None = None) -> dict[str, Any] | None:
    """A stored result.json as every reader may take it, else None: the trial reads as unfinished (run again on
    resume, left out of every aggregate), never as a crash or a wrong score in each summary, report and export.

    Refused: no JSON object (damaged, not UTF-8, NaN or Infinity, which no JSON reader downstream accepts); a
    record that does not validate as a TrialResult with exact types (``"passed": "false"`` is no pass, an
    ``attempt`` of ``"1"`` no attempt); and, given ``trial_id`` (the folder or key it was read from), a record of
    another trial: a copied folder (``trials/X.bak``) would otherwise count X twice."""
    rec = parse_record(raw)
    if not isinstance(rec, dict) or (trial_id is not None and rec.get("trial_id") != trial_id):
        return None
    try:
        TrialResult.model_validate(rec, strict=True)
    except ValidationError:
        return None
    return rec


def harness_id() -> str:
    """This process's harness, for its records: a run whose records name more than one is flagged (a runner
    image edited mid-run, a resume under a newer mcpfleet), since its scores may not be comparable."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    try:
        out = f"mcpfleet {version('mcpfleet')}"
    except PackageNotFoundError:
        out = "mcpfleet (not installed)"
    image = os.environ.get("MCPFLEET_RUNNER_IMAGE")
    return f"{out} ({image})" if image else out


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: object) -> datetime | None:
    """A timestamp as records and the Kubernetes API write it (``...Z`` or an offset; naive: UTC), None when the
    value is missing or no ISO-8601 time: every reader of a stored or foreign record says what that means."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def epoch_seconds(value: object) -> float | None:
    """``parse_time`` in epoch seconds; None when the value is missing or no time (the caller picks the fallback)."""
    t = parse_time(value)
    return t.timestamp() if t is not None else None


def _user_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if content is not None else ""


def _output(text: Any) -> str:
    """A tool result as MCPMark's messages.json wraps it: a JSON text item, ASCII-escaped (json.dumps defaults)."""
    return json.dumps({"type": "text", "text": text if text is not None else "", "annotations": None, "meta": None})


def to_mcpmark_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages -> MCPMark's messages.json items, as its agents convert them: the system
    message is left out, each item has MCPMark's keys in MCPMark's order."""
    fake_id = protocol.text("output_item_id")
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "user":
            items.append({"content": _user_text(m.get("content")), "role": "user"})
        elif role == "assistant":
            content = m.get("content")
            if content:
                items.append(
                    {
                        "id": fake_id,
                        "content": [{"annotations": [], "text": content, "type": "output_text"}],
                        "role": "assistant",
                        "status": "completed",
                        "type": "message",
                    }
                )
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                items.append(
                    {
                        "arguments": fn.get("arguments", "{}"),
                        "call_id": c.get("id") or f"call_{uuid.uuid4().hex}",
                        "name": fn.get("name", ""),
                        "type": "function_call",
                        "id": fake_id,
                    }
                )
            fc = m.get("function_call")
            if fc:
                items.append(
                    {
                        "arguments": fc.get("arguments", "{}"),
                        "call_id": f"call_{uuid.uuid4().hex}",
                        "name": fc.get("name", ""),
                        "type": "function_call",
                        "id": fake_id,
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "call_id": m.get("tool_call_id", ""),
                    "output": _output(m.get("content")),
                    "type": "function_call_output",
                }
            )
    return items


def messages_json(messages: list[dict[str, Any]], *, raw: bool = False) -> list[dict[str, Any]]:
    """What messages.json holds (and the verifier reads as MCP_MESSAGES): MCPMark's SDK items, or with ``raw`` the
    chat list as the agent kept it, system message included. MCPMark's agent writes that raw list for a Claude
    model whose run its timeout ended (src/agents/mcpmark_agent.py ``execute``: ``_partial_messages`` unconverted
    when ``is_claude``), so a verifier looking for a ``"type": "message"`` answer finds none there."""
    return messages if raw else to_mcpmark_messages(messages)


@dataclass
class MCPMarkFacts:
    """What meta.json needs beyond result.json, in MCPMark's terms."""

    task_name: str  # <category_id>__<task_id>
    timeout: float  # the agent's whole-run limit
    started: float  # epoch seconds
    finished: float
    turn_count: int | None  # assistant messages; None when the state could not be set up
    run_model: str | None  # the provider's model name from the first response
    agent_error: str | None  # the agent's error as MCPMark words it; None when it ended normally
    state_failed: bool = False
    verifier_ran: bool = True
    verifier_command: tuple[str, ...] = ()
    verifier_timeout: float = 300


def _local_iso(ts: float) -> str:
    return datetime.fromtimestamp(ts).isoformat()  # MCPMark: naive local time, microseconds


def mcpmark_error_message(agent_error: str | None, service: str, *, state_failed: bool = False) -> str | None:
    """meta.json's ``error_message``: what MCPMark's evaluator records for the trial (and what its resume and
    aggregator test for a retryable error)."""
    if state_failed:
        return protocol.text("state_error")
    return protocol.standardize_error(agent_error, service) if agent_error else None


def mcpmark_meta(result: TrialResult, facts: MCPMarkFacts, params: dict[str, Any]) -> dict[str, Any]:
    """MCPMark's per-task meta.json (src/results_reporter.py ``save_meta_json``), field for field."""
    v = result.verifier
    error = mcpmark_error_message(facts.agent_error, result.service, state_failed=facts.state_failed)
    verification_error: str | None = None
    verification_output: str | None = None
    if facts.verifier_ran and not facts.state_failed:
        if v.timed_out:
            command = repr(list(facts.verifier_command))
            verification_error = protocol.render(
                "verifier_timeout_error", command=command, timeout=f"{facts.verifier_timeout:g}"
            )
        else:
            verification_output = v.stdout
            if v.exit_code != 0:
                verification_error = v.stderr or protocol.text("verification_no_stderr")
    state_only = facts.state_failed
    effort = params.get("reasoning_effort") or "default"
    return {
        "task_name": facts.task_name,
        "model_name": result.model,
        "litellm_run_model_name": facts.run_model,
        "reasoning_effort": str(effort),
        "mcp": result.service,
        "timeout": int(facts.timeout) if float(facts.timeout).is_integer() else facts.timeout,
        "time": {"start": _local_iso(facts.started), "end": _local_iso(facts.finished)},
        "agent_execution_time": 0.0 if state_only else result.timings.mcp_start + result.timings.agent,
        "task_execution_time": result.timings.total,
        "execution_result": {
            "success": result.passed,
            "error_message": error,
            "verification_error": verification_error,
            "verification_output": verification_output,
        },
        "token_usage": {} if state_only else mcpmark_token_usage(result, str(effort)),
        "turn_count": facts.turn_count,
    }


def _count(turn: dict[str, Any], key: str) -> int | None:
    value = turn.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def mcpmark_token_usage(result: TrialResult, reasoning_effort: str = "default") -> dict[str, int]:
    """meta.json's ``token_usage`` as MCPMark's agents sum it over the responses. Both keep the provider's total
    (0 when it gives none, as LiteLLM reads it). Its tool-calling agent counts ``output_tokens`` as that total less
    the prompt (the completion tokens when the total is 0); ReAct counts the completion tokens. They differ from
    result.json's totals only for a provider whose total is missing or holds tokens no other field does: the
    totals are adjusted by each turn's difference, so a record whose turns lack the provider's total (older ones)
    reads as prompt plus completion. A Claude run with a reasoning effort goes to Anthropic's API directly there,
    which it counts no reasoning tokens for (a TODO in its agent), so neither does this."""
    react = result.agent == "react"
    t = result.totals
    more_output = more_total = 0
    for turn in result.turns:
        total = _count(turn, "total_tokens")
        if total is None:
            continue
        hidden = total - (_count(turn, "input_tokens") or 0) - (_count(turn, "output_tokens") or 0)
        more_total += hidden
        if not react and total > 0:
            more_output += hidden
    # MCPMark's use_claude_thinking: is_claude ("claude" in the model name) and an effort other than "default".
    is_claude = "claude" in result.litellm_model.lower()
    claude_native = result.agent == "mcpmark" and is_claude and reasoning_effort != "default"
    return {
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens + more_output,
        "total_tokens": t.input_tokens + t.output_tokens + more_total,
        "reasoning_tokens": 0 if claude_native else t.reasoning_tokens,
    }


def dumps(obj: Any) -> bytes:
    # A lone surrogate (half an emoji a provider cut at a token boundary) cannot be UTF-8: it is written as the
    # JSON escape ``\\udXXX``, which reads back as the same string. Only strings hold one, so the JSON stays valid.
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


def dumps_lines(objs: Iterable[Any]) -> bytes:
    """JSON Lines (one compact object per line), lone surrogates as in ``dumps``."""
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs).encode("utf-8", "backslashreplace")


def dumps_mcpmark(obj: Any) -> bytes:
    """messages.json and meta.json byte for byte as MCPMark writes them (``json.dump``, indent 2, no newline);
    a lone surrogate, which MCPMark's own write would fail on, as in ``dumps``."""
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8", "backslashreplace")


MIN_SECRET_CHARS = 6


def secret_forms(secrets: list[str]) -> list[str]:
    """Every form in which a secret may be written: as is, JSON-escaped (``"`` and ``\\`` escaped, non-ASCII as
    is or as ``\\uXXXX``; once, or twice for JSON inside a JSON string) and URL-encoded (``%XX``, ``+`` for a
    space). Longest first, so a form is replaced before a shorter one inside it. Keys from MIN_SECRET_CHARS
    characters: shorter ones are local servers' dummies (``x``, vLLM's ``EMPTY``), no provider issues one, and
    replacing every ``text`` or ``EMPTY`` would break the records' JSON (a key name replaced)."""
    forms: set[str] = set()
    for s in secrets:
        if not s or len(s) < MIN_SECRET_CHARS:
            continue
        escaped = [json.dumps(s, ensure_ascii=a)[1:-1] for a in (False, True)]
        twice = [json.dumps(e, ensure_ascii=a)[1:-1] for e in escaped for a in (False, True)]
        forms.update([s, *escaped, *twice, quote(s, safe=""), quote_plus(s, safe=""), quote(s)])
    return sorted(forms, key=lambda f: (-len(f), f))


def redact_text(text: str | None, secrets: list[str]) -> str | None:
    """``redact`` for a string kept in memory (an error message shown by the launcher)."""
    if text is None:
        return None
    for s in secret_forms(secrets):
        text = text.replace(s, "[REDACTED]")
    return text


# The fields that name a record (plan.TrialSpec.record_identity, and meta.json's). They come from the spec, never
# from a model or a provider, and are left as written: a key that occurs in a model's name (Ollama's documented
# dummy key "ollama", a model named "ollama-qwen") must not rename the record, which could then never be read back.
IDENTITY_FIELDS = frozenset(
    {"run", "trial_id", "spec_hash", "model", "litellm_model", "service", "task_id", "attempt", "agent", "variant"}
    | {"task_name", "model_name", "mcp"}  # meta.json's
)
CASE_IDENTITY = IDENTITY_FIELDS | {"id"}  # and a tool-call case's (cases.jsonl)


def redact_values(obj: Any, secrets: list[str], keep: frozenset[str] = IDENTITY_FIELDS) -> Any:
    """``obj`` (parsed JSON) with every secret form replaced in its string values; object keys, and the values of
    the top-level fields in ``keep``, stay as they are (a secret equal to a field name such as "passed" must not
    break the record's shape)."""
    forms = secret_forms(secrets)
    if not forms:
        return obj

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            for f in forms:
                if f in value:
                    value = value.replace(f, "[REDACTED]")
            return value
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    if isinstance(obj, dict):
        return {k: v if k in keep else walk(v) for k, v in obj.items()}
    return walk(obj)


def redact(data: bytes, secrets: list[str]) -> bytes:
    """Last line of defence: a secret value that slipped into any text never reaches storage."""
    for s in secret_forms(secrets):
        data = data.replace(s.encode(), b"[REDACTED]")
    return data
