"""The LLM judge: any LiteLLM model classifies one call into the four limbic classes with a versioned rubric.

The answer must be a JSON object ``{"score": <class>, "reasoning": ...}`` (Quotient's judge API returns the
same fields); it is validated with pydantic, and a malformed answer is sent back to the model with the error
for another try. Answers are cached on disk (judge_cache.py). Calls go through ``runner.llm.complete``
(LiteLLM with retries on transient errors); a Judge bounds its concurrent calls and their rate.

``assess`` is the combined verdict: the checker first, the judge only for calls the checker finds
schema-valid (or for every call with ``judge_all``, to measure the judge alone).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from mcpfleet.runner.llm.client import LLMTarget, complete, usage_of
from mcpfleet.runner.toolcalls.checker import classify_call
from mcpfleet.runner.toolcalls.judge_cache import JudgeCache, cache_key
from mcpfleet.runner.toolcalls.models import JUDGE_ERROR, SCHEMA_VALID, Case, Label, Verdict

RUBRIC_VERSION = "limbic-4class-v1"
RUBRIC = """You judge one tool call made by an AI assistant. You get the tools that were available (name, \
description, JSON input schema) and the conversation; the last assistant message holds the call to judge. \
Classify the call into exactly one class, checking in this order and stopping at the first that applies:

1. incorrect_tool: the called function is not among the available tools, or another available tool is the \
one that does what the user asked.
2. incorrect_parameter_names: the function is right but a parameter name is wrong: a required parameter is \
missing, a name is misspelt or differs from the schema, or the call uses a name the schema does not declare.
3. incorrect_parameter_values: function and names are right but a value is wrong: the wrong type, outside \
the allowed range or enum, an invalid format (date, date-time, email, URI, ...), a broken nested structure, \
or a valid value that is not what the user asked for (another file, date, amount, recipient, ...).
4. correct: an available tool that does what the user asked, with the right parameter names and values.

Optional parameters the user did not ask for may be left out. Answer with only this JSON object and nothing \
else: {"score": "correct" | "incorrect_tool" | "incorrect_parameter_names" | "incorrect_parameter_values", \
"reasoning": "<one or two sentences>"}"""
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


class JudgeError(RuntimeError):
    """The judge model could not be reached (after LiteLLM's retries on transient errors)."""


class JudgeAnswer(BaseModel):
    """A judge's answer; extra fields are ignored, ``reasoning`` may be a string or a list of strings."""

    model_config = ConfigDict(extra="ignore")

    score: Label
    reasoning: str = ""

    @field_validator("reasoning", mode="before")
    @classmethod
    def _join(cls, value: Any) -> Any:
        if isinstance(value, list):
            return " ".join(str(v) for v in value)
        return "" if value is None else value


def _validated(data: Any) -> JudgeAnswer:
    """``data`` as an answer; ValueError saying what does not fit."""
    if not isinstance(data, dict):
        raise ValueError(f"the answer is JSON but not an object: {type(data).__name__}")
    try:
        return JudgeAnswer.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"the JSON object does not fit the schema: {problems}") from None


def parse_answer(text: str) -> JudgeAnswer:
    """The answer in a model's text: bare JSON, fenced JSON, or the answer object anywhere in prose.

    In prose every ``{`` is tried: the *last* JSON object that validates as an answer wins (a judge often quotes
    the call's arguments before its verdict), and an object that does not validate is searched inside too (an
    answer wrapped in another object). Raises ValueError saying what is wrong (sent back to the model on a
    retry): the problem of the last object holding a ``score`` if there is one, else of the last object."""
    text = (text or "").strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        if not isinstance(whole, dict):
            raise ValueError(f"the answer is JSON but not an object: {type(whole).__name__}")
        try:
            return _validated(whole)
        except ValueError:
            pass  # perhaps an answer inside it: searched below
    decoder = json.JSONDecoder()
    found: JudgeAnswer | None = None
    problem: str | None = None  # of the last object that did not validate (one with a score preferred)
    scored_problem: str | None = None
    first_error: str | None = None
    start = text.find("{")
    if start < 0:
        raise ValueError("the answer contains no JSON object")
    while start >= 0:
        try:
            data, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            first_error = first_error or f"the answer is not valid JSON: {exc}"
            start = text.find("{", start + 1)
            continue
        if isinstance(data, dict):
            try:
                found = _validated(data)
            except ValueError as exc:
                problem = str(exc)
                if "score" in data:
                    scored_problem = problem
            else:
                start = text.find("{", end)  # its inner objects are part of this answer
                continue
        start = text.find("{", start + 1)
    if found is not None:
        return found
    raise ValueError(scored_problem or problem or first_error or "the answer contains no JSON object")


def judge_messages(case: Case) -> list[dict[str, Any]]:
    """The rubric and the case in Quotient's judge-API shape (``available_tools`` and ``messages``)."""
    payload = {"available_tools": [t.as_dict() for t in case.tools], "messages": case.messages()}
    return [
        {"role": "system", "content": RUBRIC},
        {"role": "user", "content": json.dumps(payload, ensure_ascii=False, indent=1)},
    ]


class RateLimiter:
    """At most ``per_second`` call starts per second, spaced evenly (None: no limit).

    The next slot counts from when a caller really started, not from when it was due: a caller woken late
    (a busy loop) must not let the next one start right behind it, or a provider sees a burst."""

    def __init__(self, per_second: float | None) -> None:
        self.interval = 1.0 / per_second if per_second else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()  # FIFO: callers start in the order they asked

    async def wait(self) -> None:
        if not self.interval:
            return
        loop = asyncio.get_running_loop()
        async with self._lock:
            delay = self._next - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._next = loop.time() + self.interval


@dataclass
class JudgeStats:
    requests: int = 0  # model calls made (LiteLLM's own transient retries not counted)
    cache_hits: int = 0
    malformed: int = 0  # answers that failed validation and were retried
    failed: int = 0  # cases left with JUDGE_ERROR after every attempt
    transient_retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def judge_target(
    model: str, api_base: str | None = None, api_key: str | None = None, *, budget_scale: int = 1
) -> LLMTarget:
    """The judge model's target. ``budget_scale`` multiplies its retry budget (a trial's, LLMTarget's default): a
    toolcalls shard's judge judges one trial's worth of calls per case."""
    params = {"temperature": 0, "response_format": {"type": "json_object"}}
    budget = LLMTarget.trial_retry_budget * budget_scale
    return LLMTarget(
        model=model, api_base=api_base, api_key=api_key, params=params, timeout=120.0, trial_retry_budget=budget
    )


@dataclass
class Judge:
    """One judge model. ``await judge.judge(case)`` -> Verdict with the class and the model's reasoning."""

    target: LLMTarget
    cache: JudgeCache | None = None
    concurrency: int = 8
    rate_per_second: float | None = None
    attempts: int = 3  # model answers per case until one validates
    stats: JudgeStats = field(default_factory=JudgeStats)

    def __post_init__(self) -> None:
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self._limiter = RateLimiter(self.rate_per_second)

    @classmethod
    def for_model(cls, model: str, api_base: str | None = None, api_key: str | None = None, **kw: Any) -> Judge:
        return cls(judge_target(model, api_base, api_key), **kw)

    async def aclose(self) -> None:
        """Release the judge's cache and HTTP client, inside the loop that used it: a client left open warns at
        exit and ends its connections with a reset, not a close the provider sees."""
        from mcpfleet.runner.llm.client import close

        if self.cache is not None:
            self.cache.close()
        await close(self.target)

    async def judge(self, case: Case) -> Verdict:
        key = cache_key(case, self.target.model, RUBRIC_VERSION, self.target.api_base)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.cache_hits += 1
            return Verdict(hit[0], "judge", reasoning=hit[1], cached=True)
        async with self._semaphore:
            answer, problem = await self._ask(judge_messages(case))
        if answer is None:
            self.stats.failed += 1
            return Verdict(JUDGE_ERROR, "judge", reasoning=f"no valid answer in {self.attempts} attempts: {problem}")
        if self.cache is not None:
            self.cache.put(key, self.target.model, RUBRIC_VERSION, answer.score, answer.reasoning)
        return Verdict(answer.score, "judge", reasoning=answer.reasoning)

    async def _ask(self, messages: list[dict[str, Any]]) -> tuple[JudgeAnswer | None, str]:
        problem = ""
        for _ in range(self.attempts):
            await self._limiter.wait()
            self.stats.requests += 1
            try:
                response, _, retries = await complete(self.target, messages, [])
            except Exception as exc:  # noqa: BLE001 - LiteLLM raises many types; all end the evaluation
                raise JudgeError(f"judge model {self.target.model}: {type(exc).__name__}: {exc}") from exc
            self._account(response, retries)
            text = response.choices[0].message.content or ""
            try:
                return parse_answer(text), ""
            except ValueError as exc:
                self.stats.malformed += 1
                problem = str(exc)
                messages = [
                    *messages,
                    {"role": "assistant", "content": text},
                    {
                        "role": "user",
                        "content": f"That answer is not usable: {problem}. Reply with only the JSON "
                        'object {"score": ..., "reasoning": ...}.',
                    },
                ]
        return None, problem

    def _account(self, response: Any, retries: int) -> None:
        usage = usage_of(response, self.target)
        self.stats.transient_retries += retries
        self.stats.input_tokens += usage.input_tokens
        self.stats.output_tokens += usage.output_tokens
        if usage.cost_usd is None or self.stats.cost_usd is None:
            self.stats.cost_usd = None  # one unpriced answer makes the total unknown, not smaller
        else:
            self.stats.cost_usd += usage.cost_usd


@dataclass(frozen=True)
class Assessment:
    """The checker's verdict, the judge's (if asked) and the combined one."""

    checker: Verdict
    judge: Verdict | None

    @property
    def combined(self) -> Verdict:
        """Checker first; the judge decides only what the checker found schema-valid."""
        if self.checker.label == SCHEMA_VALID and self.judge is not None:
            return self.judge
        return self.checker


async def assess(case: Case, judge: Judge | None = None, judge_all: bool = False) -> Assessment:
    checked = classify_call(case.tools, case.call)
    if judge is None or not (judge_all or checked.label == SCHEMA_VALID):
        return Assessment(checked, None)
    return Assessment(checked, await judge.judge(case))


async def assess_all(cases: list[Case], judge: Judge | None = None, judge_all: bool = False) -> list[Assessment]:
    """Every case, judged concurrently within the judge's limits; results in the cases' order."""
    return list(await asyncio.gather(*(assess(c, judge, judge_all) for c in cases)))
