"""The ``toolcall`` suite: one trial runs a shard of a limbic-format data set against the model under test.

Each case gives the model the case's tools and the conversation up to the request (the history before the
labelled call); the model's first tool call is scored:

- a case labelled ``correct`` has a gold call (the labelled one): the model passes when it calls the same tool
  with the same parameter names and values equal after normalisation (gold.py); otherwise the class of the
  first difference (tool, names, values) is its failure;
- any other case (``incorrect_*`` or unlabelled) has no gold call, only a known wrong one. The model's call
  fails when the checker finds it wrong (its class is the failure), when it repeats the labelled wrong call,
  or, with a judge, when the judge does not classify it ``correct``. Without a judge a schema-valid call that
  is not the labelled wrong one passes: an upper bound, since the checker cannot see intent (documented).

No call at all, arguments that are not JSON and a model that cannot be reached are failures of the case, never
of the shard; only what the model cannot cause (unreadable data, no model URL) is an infrastructure error.

Records: result.json is a TrialResult plus ``cases`` (one compact entry per case, what summaries need);
``cases.jsonl`` holds each case's full detail (the model's call, checker reasons, judge reasoning, gold diff).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.results.outcome import BUDGET_EXHAUSTED, CONFIG_ERROR, INFRA_ERROR, PROVIDER_ERROR
from mcpfleet.runner.toolcalls.checker import classify_call
from mcpfleet.runner.toolcalls.gold import MATCH, compare
from mcpfleet.runner.toolcalls.models import JUDGE_ERROR, SCHEMA_VALID, Case, Reason, Tool, ToolCall, Verdict
from mcpfleet.runner.toolcalls.shards import cases_path, load_shard

if TYPE_CHECKING:
    from mcpfleet.runner.llm.client import LLMTarget
    from mcpfleet.runner.results.records import TrialResult
    from mcpfleet.runner.results.store import ResultStore
    from mcpfleet.runner.spec.evalrun import JudgeSettings
    from mcpfleet.runner.spec.task import Task
    from mcpfleet.runner.spec.trial import TrialContext, TrialSpec
    from mcpfleet.runner.toolcalls.judge import Judge

NO_CALL = "no_tool_call"
MALFORMED = "malformed_tool_call"
REPEATS_LABELLED = "repeats_labelled_call"
LLM_ERROR = "llm_api_error"
CONTEXT_OVERFLOW = "context_overflow"
TIMEOUT = "timeout"
CASES_FAILED = "toolcall_cases_failed"
JUDGE_KEY_ENV = "MCPFLEET_JUDGE_API_KEY"  # where a pod receives the judge's apiKeySecretRef


@dataclass
class Answer:
    """What the model did with one case: its first call (or none), and what it cost."""

    call: ToolCall | None = None
    raw_arguments: str | None = None  # arguments that were not valid JSON
    text: str | None = None
    error: str | None = None
    failure: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    retries: int = 0
    provider_model: str | None = None


@dataclass
class CaseOutcome:
    case: Case
    answer: Answer
    passed: bool
    failure: str | None
    scored_by: str  # gold | checker | judge | none
    checker: str | None = None  # the checker's class of the model's call (None: no call)
    judge: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def compact(self) -> dict[str, Any]:
        """result.json's entry: what summaries and reports need, nothing bulky."""
        out: dict[str, Any] = {
            "id": self.case.id,
            "label": self.case.label,
            "passed": self.passed,
            "failure": self.failure,
            "scored_by": self.scored_by,
            "class": self.checker,
            "input_tokens": self.answer.input_tokens,
            "output_tokens": self.answer.output_tokens,
            "seconds": round(self.answer.seconds, 4),
        }
        if self.judge is not None:
            out["judge"] = self.judge
        if self.answer.cost_usd is not None:
            out["cost_usd"] = self.answer.cost_usd
        return out

    def full(self) -> dict[str, Any]:
        a = self.answer
        call = {"name": a.call.name, "arguments": a.call.arguments} if a.call else None
        return {
            **self.compact(),
            "source": self.case.source,
            "mutation": self.case.mutation,
            "call": call,
            "raw_arguments": a.raw_arguments,
            "text": a.text,
            "error": a.error,
            "labelled_call": {"name": self.case.call.name, "arguments": self.case.call.arguments},
            **self.detail,
        }


def openai_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
        for t in tools
    ]


def first_call(message: Any) -> tuple[ToolCall | None, str | None]:
    """The first tool call of an assistant message, and its raw arguments when they are not a JSON value."""
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        return None, None
    fn = calls[0].function
    raw = fn.arguments if fn.arguments is not None else "{}"
    if isinstance(raw, str):
        try:
            args = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):  # not JSON, an integer too long to read, nesting too deep
            return ToolCall(name=fn.name or "", arguments=raw, id=getattr(calls[0], "id", None)), raw
    else:
        args = raw
    return ToolCall(name=fn.name or "", arguments=args, id=getattr(calls[0], "id", None)), None


async def ask(target: LLMTarget, case: Case) -> Answer:
    """One model call for one case: the case's conversation (as a valid OpenAI conversation, loader's
    ``openai_history``) and tools, nothing else."""
    from mcpfleet.runner.llm.client import LLMFailure, complete, usage_of
    from mcpfleet.runner.toolcalls.loader import RowError, openai_history

    answer = Answer()
    try:
        messages = openai_history(case.history)
    except RowError as exc:  # the loader refuses such rows; a case made otherwise measured nothing either
        answer.error, answer.failure = f"history: field '{exc.field}': {exc}", INFRA_ERROR
        return answer
    try:
        response, seconds, retries = await complete(target, messages, openai_tools(case.tools))
    except LLMFailure as exc:  # after retries; its category says who is charged (provider faults are not scored)
        answer.error, answer.failure = exc.summary, exc.stop_reason
        answer.seconds, answer.retries = exc.seconds, exc.retries
        return answer
    usage = usage_of(response, target)
    answer.input_tokens, answer.output_tokens, answer.cost_usd = usage.input_tokens, usage.output_tokens, usage.cost_usd
    answer.seconds, answer.retries = seconds, retries
    answer.provider_model = getattr(response, "model", None)
    message = response.choices[0].message
    answer.text = message.content or None
    answer.call, answer.raw_arguments = first_call(message)
    return answer


async def score(case: Case, answer: Answer, judge: Judge | None, timeout_s: float | None = None) -> CaseOutcome:
    """Score one answer (see the module docstring for what passes). ``timeout_s`` bounds the judge's answer; a
    judge that fails, gives no usable answer or none in time leaves the case ``judge_error``: not scored.

    No exception of one case's scoring takes its shard down (cancellation aside): the checker failing on a
    call makes that call ``unchecked`` (schema-valid with the reason, as for a schema it cannot apply), the
    judge failing in any way is ``judge_error``, and anything else going wrong while scoring the case makes
    the case ``infra_error``: not scored, like ``judge_error``, and its shard runs again on resume."""
    try:
        return await _score(case, answer, judge, timeout_s)
    except Exception as exc:  # noqa: BLE001 - one case's scoring must not cost the shard's other cases
        why = f"scoring failed: {type(exc).__name__}: {exc}"
        return CaseOutcome(case, answer, False, INFRA_ERROR, "none", detail={"scoring_error": why})


def _checked(tools: list[Tool], call: ToolCall) -> Verdict:
    """The checker's verdict; an exception in it makes the call unchecked, never the shard's error."""
    try:
        return classify_call(tools, call)
    except Exception as exc:  # noqa: BLE001
        why = f"the checker could not apply the schema: {type(exc).__name__}: {exc}"
        return Verdict(SCHEMA_VALID, "checker", (Reason("unchecked", "$", why),))


async def _score(case: Case, answer: Answer, judge: Judge | None, timeout_s: float | None) -> CaseOutcome:
    if answer.failure is not None:
        return CaseOutcome(case, answer, False, answer.failure, "none")
    call = answer.call
    if call is None:
        return CaseOutcome(case, answer, False, NO_CALL, "none")
    verdict = _checked(case.tools, call)
    checked = {"checker_reasons": [r.as_dict() for r in verdict.reasons]} if verdict.reasons else {}
    if answer.raw_arguments is not None:
        return CaseOutcome(case, answer, False, MALFORMED, "checker", verdict.label, detail=checked)
    if case.label == "correct":
        diff = compare(case.tools, case.call, call)
        failure = None if diff.matches else diff.kind
        detail = {**checked, "gold_diff": diff.detail} if diff.detail else checked
        return CaseOutcome(case, answer, diff.matches, failure, "gold", verdict.label, detail=detail)
    if verdict.label != SCHEMA_VALID:
        return CaseOutcome(case, answer, False, verdict.label, "checker", verdict.label, detail=checked)
    if compare(case.tools, case.call, call).kind == MATCH:
        return CaseOutcome(case, answer, False, REPEATS_LABELLED, "checker", verdict.label, detail=checked)
    if judge is None:
        return CaseOutcome(case, answer, True, None, "checker", verdict.label, detail=checked)
    from mcpfleet.runner.toolcalls.judge import JudgeError

    asked = case.model_copy(update={"call": call, "call_content": answer.text, "label": None})
    try:
        if timeout_s is not None and timeout_s <= 0:
            raise TimeoutError
        judged = await asyncio.wait_for(judge.judge(asked), timeout_s)
    except Exception as exc:  # noqa: BLE001 - JudgeError, TimeoutError, or the judge's own bug: no verdict
        if isinstance(exc, JudgeError):
            why = str(exc)
        elif isinstance(exc, TimeoutError):
            why = "no judge answer before the shard's time was up"
        else:
            why = f"the judge failed: {type(exc).__name__}: {exc}"
        detail = {**checked, "judge_reasoning": why}
        return CaseOutcome(case, answer, False, JUDGE_ERROR, "judge", verdict.label, judge=JUDGE_ERROR, detail=detail)
    passed = judged.label == "correct"
    failure = None if passed else judged.label
    detail = {**checked, "judge_reasoning": judged.reasoning}
    return CaseOutcome(case, answer, passed, failure, "judge", verdict.label, judge=judged.label, detail=detail)


def judge_keys(settings: JudgeSettings | None, env: Any) -> list[str]:
    """Every value a judge key may have here (the named variable's and the pod's): redacted from records."""
    names = [JUDGE_KEY_ENV] + ([settings.api_key_env] if settings is not None and settings.api_key_env else [])
    return [v for v in (env.get(n) for n in names) if v]


def make_judge(
    settings: JudgeSettings | None, env: Any, *, budget_scale: int = 1, spec: TrialSpec | None = None
) -> Judge | None:
    """The judge ``settings`` name (None for none); ``budget_scale`` multiplies its retry budget (judge_target).
    With the trial's ``spec``, its calls are paced and metered as a model's (llm/target.py ``paced``): under its
    account's shared limit (its own rateLimit, or the one a tested model on its account lent it in the plan), its
    spend counted toward the run's budget (spec.budget)."""
    if settings is None:
        return None
    from mcpfleet.runner.llm.target import paced
    from mcpfleet.runner.toolcalls.judge import Judge, judge_target
    from mcpfleet.runner.toolcalls.judge_cache import JudgeCache, default_cache_dir

    key = env.get(settings.api_key_env) if settings.api_key_env else env.get(JUDGE_KEY_ENV)
    try:
        cache: JudgeCache | None = JudgeCache(default_cache_dir())
    except Exception:  # noqa: BLE001 - a read-only home (a pod) judges without a cache
        cache = None
    target = judge_target(settings.model, settings.api_base, key or None, budget_scale=budget_scale)
    if spec is not None:
        paced(target, settings.as_model(), spec, env)
    return Judge(
        target,
        cache=cache,
        concurrency=settings.concurrency,
        rate_per_second=settings.rate_per_second,
    )


def replayed(case: Case) -> Answer:
    """The ``oracle`` agent's answer: the case's labelled call (the gold call of a correct case)."""
    return Answer(call=case.call)


def no_answer(case: Case) -> Answer:
    """The ``noop`` agent's answer: no call at all."""
    return Answer(text="I have reviewed the request.")


async def run_cases(
    cases: list[Case],
    target: LLMTarget | None,
    judge: Judge | None,
    concurrency: int,
    timeout_s: float | None = None,
    play: Callable[[Case], Answer] | None = None,
) -> list[CaseOutcome]:
    """Every case, ``concurrency`` model calls in flight, outcomes in the cases' order. A case whose answer has
    not come when the shard's time (``limits.timeoutSeconds``) is up fails as ``timeout``; the others stand.
    ``play`` answers instead of the model (the oracle and no-op agents of ``mcpfleet tasks validate``)."""
    gate = asyncio.Semaphore(concurrency)
    deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s

    async def one(case: Case) -> CaseOutcome:
        async with gate:
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            try:
                if left is not None and left <= 0:
                    raise TimeoutError
                if play is not None:
                    answer = play(case)
                elif target is None:
                    raise ValueError("run_cases needs a model target or answers to play")
                else:
                    answer = await asyncio.wait_for(ask(target, case), left)
            except TimeoutError:
                answer = Answer(error=f"no answer within the shard's {timeout_s:g} s", failure=TIMEOUT)
        # The judge's answer counts against the shard's time too (a hung judge must not hold the shard).
        left = None if deadline is None else deadline - asyncio.get_running_loop().time()
        return await score(case, answer, judge, left)

    return list(await asyncio.gather(*(one(c) for c in cases)))


def shard_result(spec: TrialSpec, outcomes: list[CaseOutcome], started: str, total_s: float) -> TrialResult:
    from mcpfleet.runner.results.records import Timings, Totals, TrialResult, harness_id, now_iso

    answers = [o.answer for o in outcomes]
    costs = [a.cost_usd for a in answers if a.cost_usd is not None]
    failed = [o for o in outcomes if not o.passed]
    failures = Counter(o.failure for o in failed)
    # A case its provider failed measured nothing: the shard is then the provider's (retried like an infra
    # error, or its model stopped on a configuration error), not the model's. A case the judge could not
    # classify measured nothing either: its shard is an infra_error (not scored, run again on resume).
    # A case whose scoring failed (score's INFRA_ERROR) likewise.
    kinds = (CONFIG_ERROR, BUDGET_EXHAUSTED, PROVIDER_ERROR, JUDGE_ERROR, INFRA_ERROR)
    unscored = [o for o in failed if o.failure in kinds]
    lost = next((o for f in kinds for o in unscored if o.failure == f), None)
    lost_as = None if lost is None else INFRA_ERROR if lost.failure == JUDGE_ERROR else lost.failure
    return TrialResult(
        **spec.record_identity(),
        harness=harness_id(),
        provider_model=next((a.provider_model for a in answers if a.provider_model), None),
        passed=bool(outcomes) and not failed,
        failure=lost_as if lost is not None else None if outcomes and not failed else CASES_FAILED,
        stop_reason=lost.failure if lost is not None else "completed",
        error=(
            f"{len(failed)}/{len(outcomes)} cases failed: {dict(failures.most_common())}"
            + (
                f"; e.g. {lost.answer.error or lost.detail.get('judge_reasoning') or lost.detail.get('scoring_error')}"
                if lost is not None
                else ""
            )
            if failed
            else None
        ),
        totals=Totals(
            turns=len(outcomes),
            tool_calls=sum(a.call is not None for a in answers),
            malformed_tool_calls=sum(a.raw_arguments is not None for a in answers),
            llm_retries=sum(a.retries for a in answers),
            input_tokens=sum(a.input_tokens for a in answers),
            output_tokens=sum(a.output_tokens for a in answers),
            cost_usd=sum(costs) if costs else None,
        ),
        timings=Timings(agent=total_s, total=total_s, llm_wait=sum(a.seconds for a in answers)),
        started_at=started,
        finished_at=now_iso(),
    )


async def run_shard(
    spec: TrialSpec, store: ResultStore, ctx: TrialContext, infra_attempt: int, find_task: Callable[[], Task]
) -> TrialResult:
    """Run one shard and record it whole (result.json last); unreadable data is an ``infra_error`` record, as is a
    task ``find_task`` cannot find (the engine's look-up, passed down)."""
    import os

    from mcpfleet.runner.llm.target import api_key, llm_target
    from mcpfleet.runner.results.records import (
        CASE_IDENTITY,
        TrialResult,
        dumps,
        dumps_lines,
        harness_id,
        now_iso,
        redact_text,
        redact_values,
    )
    from mcpfleet.runner.spec.evalrun import AgentKind, ToolCallSettings

    started, t0 = now_iso(), time.perf_counter()
    settings = spec.toolcalls or ToolCallSettings()
    env = ctx.env if ctx.env is not None else os.environ
    outcomes: list[CaseOutcome] = []
    try:
        task = find_task()
        data = cases_path(task.path)
        if data is None:
            raise FileNotFoundError(f"task {task.id} has no cases.jsonl / cases.json / cases.parquet / cases/")
        cases = load_shard(data, spec.shard or 0, settings.shard_size)
        if not cases:
            raise ValueError(f"shard {spec.shard} of {task.id} is empty (shard size {settings.shard_size})")
        play = {AgentKind.oracle: replayed, AgentKind.noop: no_answer}.get(AgentKind(spec.agent))
        # A case is a trial's worth of calls: the trial retry budget is the shard's per case. Shared by the
        # shard whole, a rate-limit burst spent it on the first few dozen of 250 cases, and every later case's
        # first 429 lost the shard (unscored, and so again on every retry of it).
        target = None if play is not None else llm_target(spec.model, spec, ctx, budget_scale=len(cases))
        judge = make_judge(settings.judge, env, budget_scale=len(cases), spec=spec)
        try:
            outcomes = await run_cases(
                cases, target, judge, settings.concurrency, spec.limits.timeout_seconds, play=play
            )
        finally:
            if judge is not None:
                await judge.aclose()
            if target is not None:
                from mcpfleet.runner.llm.client import close

                await close(target)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything before the model answers is infrastructure
        result = TrialResult(
            **spec.record_identity(),
            harness=harness_id(),
            passed=False,
            failure="infra_error",
            error=f"{type(exc).__name__}: {exc}",
            infra_attempts=infra_attempt,
            started_at=started,
            finished_at=now_iso(),
        )
        record: dict[str, Any] = result.model_dump(mode="json")
    else:
        result = shard_result(spec, outcomes, started, time.perf_counter() - t0)
        result.infra_attempts = infra_attempt
        record = {**result.model_dump(mode="json"), "shard": spec.shard, "cases": [o.compact() for o in outcomes]}
    secrets = [s for s in (api_key(spec.model, env), *judge_keys(settings.judge, env)) if s]
    result.error = redact_text(result.error, secrets)  # the launcher prints it
    # Keys are redacted from values, never from the fields that name a record or a case (records.CASE_IDENTITY).
    files = {"cases.jsonl": dumps_lines(redact_values(o.full(), secrets, keep=CASE_IDENTITY) for o in outcomes)}

    async def write() -> None:
        from mcpfleet.runner.results.store import record_unless_finished

        await asyncio.to_thread(
            record_unless_finished,
            store,
            spec.trial_id,
            spec.spec_hash,
            files,
            lambda: dumps(redact_values(record, secrets)),
        )

    writing = asyncio.ensure_future(write())
    try:
        await asyncio.shield(writing)
    except asyncio.CancelledError:
        await writing
        raise
    return result
