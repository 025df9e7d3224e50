"""Failure taxonomy from the MCPMark paper, as a pure function of what happened in a trial.

Implicit failure (``verifier_failed``) is a run that ended normally but left a wrong end state; the
explicit ones say why the agent never got there. A passing verifier wins: the end state is what counts.

Some outcomes measured nothing of the model (``NOT_SCORED``): the harness failed (``infra_error``), the
provider failed after its retries (``provider_error``: 5xx/429, hangs, dropped connections, unusable
replies; also a failure MCPMark runs again: its meta.json ``error_message`` holds one of MCPMark's retryable
patterns, mcpmark_protocol.is_retryable), or the model cannot be reached as
configured (``config_error``: 401/403, unknown model, an unreachable base URL). They are left out of every
score, counted apart, and run again on resume. A passing end state still wins over a provider error once the
model had answered (MCPMark verifies whatever the agent left and records the pass); the trial decides that
(``passed``), this function only names the outcome.
"""

from __future__ import annotations

import re

from mcpfleet.runner.spec.mcpmark_protocol import is_retryable

VERIFIER_FAILED = "verifier_failed"
CONTEXT_OVERFLOW = "context_overflow"
TURN_LIMIT = "turn_limit"
ABANDONED = "abandoned"
PREMATURE_STOP = "premature_stop"
MALFORMED_TOOL_CALL = "malformed_tool_call"
TIMEOUT = "timeout"
LLM_API_ERROR = "llm_api_error"
OUTPUT_TRUNCATED = "output_truncated"
CONTENT_FILTER = "content_filter"
INFRA_ERROR = "infra_error"
PROVIDER_ERROR = "provider_error"
CONFIG_ERROR = "config_error"
# A budget (spec.budget, spec.models[].budget) left no room for the trial's next request: not sent, the trial cut
# short. Measured nothing of the model, like a provider_error: not scored, counted apart, run again on resume
# (once the budget is raised), and the model's (or the run's) launches stop, like a config_error.
BUDGET_EXHAUSTED = "budget_exhausted"

CATEGORIES = (
    VERIFIER_FAILED,
    CONTEXT_OVERFLOW,
    TURN_LIMIT,
    ABANDONED,
    PREMATURE_STOP,
    MALFORMED_TOOL_CALL,
    TIMEOUT,
    LLM_API_ERROR,
    OUTPUT_TRUNCATED,
    CONTENT_FILTER,
    INFRA_ERROR,
    PROVIDER_ERROR,
    CONFIG_ERROR,
    BUDGET_EXHAUSTED,
)
# Outcomes that measured nothing of the model: excluded from scores, re-run on resume.
NOT_SCORED = frozenset({INFRA_ERROR, PROVIDER_ERROR, CONFIG_ERROR, BUDGET_EXHAUSTED})


def is_scored(failure: str | None) -> bool:
    """Whether a trial with this outcome counts in pass@1, pass@k and pass^k."""
    return failure not in NOT_SCORED


_GIVE_UP = re.compile(
    r"\b(i\s+(can(?:no|['’])t|am\s+unable\s+to|am\s+not\s+able\s+to|could\s+not|couldn['’]t)|unable\s+to\s+(complete|"
    r"proceed|perform|access)|not\s+possible|impossible|infeasible|cannot\s+be\s+(done|completed))\b",
    re.I,
)
_ASKS_USER = re.compile(r"(\?\s*$|\b(would you like|shall i|should i|do you want|let me know|please confirm)\b)", re.I)


def classify(
    *,
    passed: bool,
    stop_reason: str,
    tool_calls: int,
    malformed_calls: int,
    last_call_malformed: bool,
    final_text: str | None,
    infra_error: bool = False,
    error_message: str | None = None,
) -> str | None:
    """Return None for a pass, else the failure category (final_text None: the model ended without text).
    ``error_message``: meta.json's, as MCPMark's evaluator words it. A failure it marks retryable is a
    provider error: MCPMark runs such a task again and never reports it as the model's failure (its aggregator
    sets the model aside while one is left)."""
    if infra_error:
        return INFRA_ERROR
    if passed:
        return None
    if stop_reason in (PROVIDER_ERROR, CONFIG_ERROR, BUDGET_EXHAUSTED):
        return stop_reason
    if is_retryable(error_message):
        return PROVIDER_ERROR
    explicit = {
        "timeout": TIMEOUT,
        "context_overflow": CONTEXT_OVERFLOW,
        "turn_limit": TURN_LIMIT,
        "llm_api_error": LLM_API_ERROR,
        "output_truncated": OUTPUT_TRUNCATED,
        "content_filter": CONTENT_FILTER,
    }
    if stop_reason in explicit:
        return explicit[stop_reason]
    # The model stopped on its own and the end state is wrong: find out why, most specific first.
    if malformed_calls and (last_call_malformed or malformed_calls * 2 >= tool_calls):
        return MALFORMED_TOOL_CALL
    if _GIVE_UP.search(final_text or ""):
        return ABANDONED
    if tool_calls == 0 or _ASKS_USER.search((final_text or "").strip()):
        return PREMATURE_STOP
    return VERIFIER_FAILED
