"""The failure taxonomy (outcome.classify) and the record helpers (MCPMark messages, redaction, meta)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from mcpfleet.runner.results import outcome
from mcpfleet.runner.results.outcome import (
    ABANDONED,
    BUDGET_EXHAUSTED,
    CATEGORIES,
    CONFIG_ERROR,
    CONTEXT_OVERFLOW,
    INFRA_ERROR,
    LLM_API_ERROR,
    MALFORMED_TOOL_CALL,
    NOT_SCORED,
    PREMATURE_STOP,
    PROVIDER_ERROR,
    TIMEOUT,
    TURN_LIMIT,
    VERIFIER_FAILED,
    classify,
    is_scored,
)
from mcpfleet.runner.results.records import dumps, redact, to_mcpmark_messages


def c(
    passed: bool = False,
    stop_reason: str = "completed",
    tool_calls: int = 3,
    malformed_calls: int = 0,
    last_call_malformed: bool = False,
    final_text: str = "Finished.",
    infra_error: bool = False,
    error_message: str | None = None,
) -> str | None:
    return classify(
        passed=passed,
        stop_reason=stop_reason,
        tool_calls=tool_calls,
        malformed_calls=malformed_calls,
        last_call_malformed=last_call_malformed,
        final_text=final_text,
        infra_error=infra_error,
        error_message=error_message,
    )


# -- classify: each category ----------------------------------------------------------------------------


def test_pass_is_none() -> None:
    assert c(passed=True) is None


@pytest.mark.parametrize(
    "stop,category",
    [
        ("timeout", TIMEOUT),
        ("context_overflow", CONTEXT_OVERFLOW),
        ("turn_limit", TURN_LIMIT),
        ("llm_api_error", LLM_API_ERROR),
    ],
)
def test_explicit_stop_reasons(stop: str, category: str) -> None:
    assert c(stop_reason=stop) == category
    # the stop reason is the cause even if the text gives up, calls were malformed or none were made
    assert (
        c(
            stop_reason=stop,
            final_text="I cannot complete this task.",
            malformed_calls=3,
            tool_calls=3,
            last_call_malformed=True,
        )
        == category
    )
    assert c(stop_reason=stop, tool_calls=0, final_text="") == category


def test_infra_error() -> None:
    assert c(infra_error=True) == INFRA_ERROR
    assert c(infra_error=True, stop_reason="timeout") == INFRA_ERROR


def test_verifier_failed_is_the_implicit_failure() -> None:
    assert c(tool_calls=5, final_text="I moved the files and wrote the summary.") == VERIFIER_FAILED
    assert c(tool_calls=1, final_text="") == VERIFIER_FAILED
    assert c(tool_calls=2, final_text="Done.") == VERIFIER_FAILED


def test_every_category_is_reachable_and_listed() -> None:
    seen = {
        c(infra_error=True),
        c(stop_reason="timeout"),
        c(stop_reason="context_overflow"),
        c(stop_reason="turn_limit"),
        c(stop_reason="llm_api_error"),
        c(stop_reason="output_truncated"),
        c(stop_reason="content_filter"),
        c(stop_reason="provider_error"),
        c(stop_reason="config_error"),
        c(stop_reason="budget_exhausted"),
        c(malformed_calls=1, tool_calls=1),
        c(final_text="I cannot do that."),
        c(tool_calls=0),
        c(),
    }
    assert seen == set(CATEGORIES)
    assert len(CATEGORIES) == len(set(CATEGORIES)) == 14


@pytest.mark.parametrize("stop", ["provider_error", "config_error", "budget_exhausted"])
def test_provider_and_config_errors_are_not_scored_unless_the_trial_passed(stop: str) -> None:
    """What the provider did is not the model's: a cut-short trial is not scored, whatever the model said. The
    trial decides whether its end state passes anyway (tests/test_provider_faults.py); a pass is then a pass."""
    assert c(stop_reason=stop) == stop
    assert c(stop_reason=stop, final_text="I cannot complete this task.", tool_calls=0) == stop
    assert c(stop_reason=stop, malformed_calls=2, tool_calls=2, last_call_malformed=True) == stop
    assert c(passed=True, stop_reason=stop) is None
    assert not is_scored(stop) and not is_scored(INFRA_ERROR)
    assert NOT_SCORED == {INFRA_ERROR, PROVIDER_ERROR, CONFIG_ERROR, BUDGET_EXHAUSTED}


@pytest.mark.parametrize("stop", ["output_truncated", "content_filter"])
def test_truncated_and_filtered_answers_are_the_models(stop: str) -> None:
    assert c(stop_reason=stop) == stop and is_scored(stop)
    assert c(passed=True, stop_reason=stop) is None  # a cut answer that still solved the task passes
    assert stop != CONTEXT_OVERFLOW


# -- classify: precedence -------------------------------------------------------------------------------


def test_infra_wins_over_everything_even_a_pass() -> None:
    assert c(passed=True, infra_error=True) == INFRA_ERROR


@pytest.mark.parametrize("stop", ["turn_limit", "timeout", "context_overflow", "llm_api_error", "completed"])
def test_a_passing_end_state_wins_over_a_limit(stop: str) -> None:
    assert c(passed=True, stop_reason=stop, malformed_calls=2, tool_calls=2, final_text="I cannot") is None


@pytest.mark.parametrize(
    "tool_calls,malformed,last,expected",
    [
        (1, 1, True, MALFORMED_TOOL_CALL),  # the only call was malformed
        (4, 1, True, MALFORMED_TOOL_CALL),  # the last call was malformed: the model gave up after it
        (4, 2, False, MALFORMED_TOOL_CALL),  # half the calls malformed
        (5, 2, False, VERIFIER_FAILED),  # a minority, recovered from
        (10, 1, False, VERIFIER_FAILED),
        (4, 0, False, VERIFIER_FAILED),
    ],
)
def test_malformed_threshold(tool_calls: int, malformed: int, last: bool, expected: str) -> None:
    assert c(tool_calls=tool_calls, malformed_calls=malformed, last_call_malformed=last) == expected


def test_malformed_wins_over_abandoned_and_premature() -> None:
    assert (
        c(
            tool_calls=1,
            malformed_calls=1,
            last_call_malformed=True,
            final_text="I cannot call this tool. Would you like me to try again?",
        )
        == MALFORMED_TOOL_CALL
    )


def test_a_recovered_malformed_call_does_not_hide_abandonment() -> None:
    assert c(tool_calls=5, malformed_calls=1, final_text="I cannot complete this task.") == ABANDONED


def test_abandoned_wins_over_premature() -> None:
    assert c(tool_calls=0, final_text="I cannot access that folder.") == ABANDONED
    assert c(tool_calls=2, final_text="I am unable to finish. Should I try another way?") == ABANDONED


@pytest.mark.parametrize(
    "text",
    [
        "I cannot complete this task.",
        "I can't find the file.",
        "I am unable to move the file.",
        "I'm not sure, but I could not write the summary.",
        "Sorry, I couldn't open it.",
        "i am not able to do this",
        "The task is unable to complete because the folder is read-only.",
        "Unable to proceed without write access.",
        "This is not possible with the available tools.",
        "That is impossible.",
        "The request is infeasible.",
        "The move cannot be completed.",
        "Moving it cannot be done.",
        "I CANNOT DO THIS.",
    ],
)
def test_give_up_phrases(text: str) -> None:
    assert c(final_text=text) == ABANDONED


@pytest.mark.parametrize(
    "text",
    [
        "I can\u2019t complete this task.",  # typographic apostrophe, as most chat models write it
        "I couldn\u2019t open the file.",
    ],
)
def test_give_up_with_typographic_apostrophe(text: str) -> None:
    assert c(final_text=text) == ABANDONED


@pytest.mark.parametrize(
    "text",
    [
        "I can confirm the files were moved.",
        "I could move them all.",
        "Everything was possible to do.",
        "The summary is complete.",
        "Scannable files were processed.",
    ],
)
def test_success_talk_is_not_abandonment(text: str) -> None:
    assert c(final_text=text) == VERIFIER_FAILED


@pytest.mark.parametrize(
    "text",
    [
        "Would you like me to move the files as well?",
        "Which folder should I use?",
        "I found the notes. Shall I continue with the move",
        "Let me know if I should proceed.",
        "Please confirm the destination before I write anything.",
        "Do you want a CSV or JSON summary",
        "Should I overwrite summary.txt",
        "Ready when you are?  \n",
    ],
)
def test_asking_the_user_is_premature_stop(text: str) -> None:
    assert c(tool_calls=3, final_text=text) == PREMATURE_STOP


def test_no_tool_calls_is_premature_stop() -> None:
    assert c(tool_calls=0, final_text="I have reviewed the request.") == PREMATURE_STOP
    assert c(tool_calls=0, final_text="") == PREMATURE_STOP


@pytest.mark.parametrize("stop", ["completed", "timeout", "turn_limit", "llm_api_error", "content_filter"])
def test_a_failure_mcpmark_runs_again_is_a_provider_error(stop: str) -> None:
    # MCPMark's RETRYABLE_PATTERNS, matched as a lower-cased substring of meta.json's error_message.
    retryable = "ReAct agent execution failed: 'str' object has no attribute 'get'"
    assert c(stop_reason=stop, error_message=retryable) == PROVIDER_ERROR
    assert c(stop_reason=stop, error_message="Error: QUOTA exceeded") == PROVIDER_ERROR
    # Other messages keep the model's failure; a pass, an infra error and a config error keep theirs.
    assert c(stop_reason=stop, error_message="Max turns (3) exceeded") not in NOT_SCORED
    assert c(passed=True, stop_reason=stop, error_message=retryable) is None
    assert c(infra_error=True, error_message=retryable) == INFRA_ERROR
    assert c(stop_reason=CONFIG_ERROR, error_message=retryable) == CONFIG_ERROR


def test_question_mark_only_counts_at_the_end() -> None:
    assert c(tool_calls=3, final_text="Was the file there? Yes, and I moved it.") == VERIFIER_FAILED


def test_unknown_stop_reason_falls_through_to_the_heuristics() -> None:
    assert c(stop_reason="something-new", tool_calls=0) == PREMATURE_STOP
    assert (
        outcome.classify(
            passed=False,
            stop_reason="completed",
            tool_calls=2,
            malformed_calls=0,
            last_call_malformed=False,
            final_text=None,
        )
        == VERIFIER_FAILED
    )


# -- records.to_mcpmark_messages (MCPMark's own format: see test_mcpmark_formats.py) ----------------------


def test_to_mcpmark_messages_edge_cases() -> None:
    assert to_mcpmark_messages([]) == []
    assert to_mcpmark_messages([{"role": "user", "content": None}]) == [{"content": "", "role": "user"}]
    # MCPMark leaves the system message out of messages.json
    assert to_mcpmark_messages([{"role": "system", "content": "Be careful."}]) == []
    # an assistant turn with neither text nor calls leaves no item (MCPMark has no empty message items)
    assert (
        to_mcpmark_messages(
            [{"role": "assistant", "content": ""}, {"role": "assistant", "content": None, "tool_calls": []}]
        )
        == []
    )
    # malformed arguments are kept verbatim: the record shows what the model really sent
    chat: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "mv", "arguments": '{"a": "'}}],
        },
        {"role": "tool", "tool_call_id": "c3", "content": None},
    ]
    before = copy.deepcopy(chat)
    items = to_mcpmark_messages(chat)
    assert items[0]["arguments"] == '{"a": "' and json.loads(items[1]["output"])["text"] == ""
    assert chat == before  # input untouched
    assert json.loads(dumps(items)) == items


# -- records.redact -------------------------------------------------------------------------------------


def test_redact_replaces_every_occurrence_of_every_secret() -> None:
    data = b'{"a": "sk-abc123456", "b": "x sk-abc123456 y", "c": "tok-zzzzzz"}'
    out = redact(data, ["sk-abc123456", "tok-zzzzzz"])
    assert out == b'{"a": "[REDACTED]", "b": "x [REDACTED] y", "c": "[REDACTED]"}'
    assert b"sk-abc" not in out


def test_redact_ignores_empty_and_short_values() -> None:
    data = b"the key is abcde and the model said abc"
    assert redact(data, ["", "abc", "abcde"]) == data  # a 5-character value would blank ordinary words
    assert redact(data, ["abcdef"]) == data  # absent: unchanged
    assert redact(b"abcdef", ["abcdef"]) == b"[REDACTED]"  # 6 characters is enough
    assert redact(b"nothing", []) == b"nothing"


def test_redact_non_ascii_secret_in_utf8_json() -> None:
    secret = "clé-secrète-ü"
    data = dumps({"text": f"echo {secret}"})  # ensure_ascii=False: the secret appears as UTF-8
    assert secret.encode() not in redact(data, [secret])
    assert json.loads(redact(data, [secret])) == {"text": "echo [REDACTED]"}
