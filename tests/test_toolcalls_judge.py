"""The LLM judge through LiteLLM against a local OpenAI-compatible server: answers, retries, cache and limits."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer, judge_server

from mcpfleet.runner.toolcalls import JUDGE_ERROR, SCHEMA_VALID, Case
from mcpfleet.runner.toolcalls import judge as judge_mod
from mcpfleet.runner.toolcalls.judge import Judge, JudgeError, RateLimiter, assess, assess_all, parse_answer
from mcpfleet.runner.toolcalls.judge_cache import JudgeCache, cache_key
from mcpfleet.runner.toolcalls.loader import load_cases

FIXTURE = Path(__file__).resolve().parent / "data" / "toolcalls_200.jsonl"


@pytest.fixture(scope="module")
def server() -> Iterator[JudgeServer]:
    with judge_server() as s:
        yield s


@pytest.fixture(autouse=True)
async def close_judges(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Every judge a test makes is closed in the test's own loop, as the shard and the CLI close theirs."""
    made: list[Judge] = []
    original = Judge.for_model

    def for_model(*args: Any, **kw: Any) -> Judge:
        made.append(original(*args, **kw))
        return made[-1]

    monkeypatch.setattr(Judge, "for_model", for_model)
    yield
    for judge in made:
        await judge.aclose()


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return load_cases(FIXTURE).cases


def pick(cases: list[Case], mutation: str | None, n: int = 1) -> list[Case]:
    return [c for c in cases if c.mutation == mutation][:n]


def make(server: JudgeServer, model: str, cache_dir: Path | None = None, **kw: object) -> Judge:
    cache = JudgeCache(cache_dir) if cache_dir else None
    return Judge.for_model(f"openai/{model}", api_base=server.url, api_key="sk-test", cache=cache, **kw)


def test_parse_answer_accepts_bare_fenced_and_embedded_json_and_rejects_the_rest() -> None:
    assert parse_answer('{"score": "correct", "reasoning": "ok"}').score == "correct"
    fenced = parse_answer('```json\n{"score": "incorrect_tool", "reasoning": ["a", "b"]}\n```')
    assert (fenced.score, fenced.reasoning) == ("incorrect_tool", "a b")
    assert parse_answer('Verdict: {"score": "incorrect_parameter_names"} done').score == "incorrect_parameter_names"
    with pytest.raises(ValueError, match="no JSON object"):
        parse_answer("looks fine")
    with pytest.raises(ValueError, match="score"):
        parse_answer('{"score": "mostly_fine", "reasoning": "x"}')
    with pytest.raises(ValueError, match="not an object"):
        parse_answer('["correct"]')


async def test_a_valid_answer_becomes_the_verdict(server: JudgeServer, cases: list[Case]) -> None:
    judge = make(server, "rule")
    good, fake = pick(cases, None)[0], pick(cases, "hallucinated_tool")[0]
    assert (await judge.judge(good)).label == "correct"
    verdict = await judge.judge(fake)
    assert verdict.source == "judge" and verdict.label == "incorrect_tool"
    assert f"{fake.call.name} is not available" in verdict.reasoning
    assert judge.stats.requests == 2 and judge.stats.malformed == 0
    assert (judge.stats.input_tokens, judge.stats.output_tokens) == (200, 40)
    sent = server.requests[-1]
    assert sent["messages"][0]["content"] == judge_mod.RUBRIC
    assert sent["response_format"] == {"type": "json_object"} and sent["temperature"] == 0


async def test_an_answer_that_is_not_json_is_sent_back_and_the_retry_is_used(
    server: JudgeServer, cases: list[Case]
) -> None:
    judge = make(server, "flaky")
    before = len(server.requests)
    verdict = await judge.judge(cases[0])
    assert (verdict.label, verdict.reasoning) == ("correct", "arguments match tool exists")
    assert (judge.stats.requests, judge.stats.malformed, judge.stats.failed) == (2, 1, 0)
    retry = server.requests[before + 1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "I think this call is correct."}
    assert retry[-1]["role"] == "user" and "no JSON object" in retry[-1]["content"]


async def test_a_judge_that_never_answers_json_gives_judge_error_after_its_attempts(
    server: JudgeServer, cases: list[Case], tmp_path: Path
) -> None:
    judge = make(server, "garbage", tmp_path / "cache", attempts=3)
    verdict = await judge.judge(cases[0])
    assert verdict.label == JUDGE_ERROR and "3 attempts" in verdict.reasoning
    assert (judge.stats.requests, judge.stats.malformed, judge.stats.failed) == (3, 3, 1)
    assert judge.cache is not None and len(judge.cache) == 0  # failures are not cached


async def test_a_cached_answer_makes_no_http_call(server: JudgeServer, cases: list[Case], tmp_path: Path) -> None:
    batch = cases[:5]
    first = make(server, "rule", tmp_path / "cache")
    labels = [v.label for v in await asyncio.gather(*(first.judge(c) for c in batch))]
    assert first.stats.requests == 5 and first.stats.cache_hits == 0
    before = len(server.requests)
    second = make(server, "rule", tmp_path / "cache")  # a new process would see the same file
    again = await asyncio.gather(*(second.judge(c) for c in batch))
    assert len(server.requests) == before  # no HTTP call at all
    assert [v.label for v in again] == labels and all(v.cached for v in again)
    assert (second.stats.requests, second.stats.cache_hits) == (0, 5)
    other = make(server, "answer=incorrect_tool", tmp_path / "cache")  # another judge model: another key
    assert (await other.judge(batch[0])).label == "incorrect_tool" and other.stats.requests == 1


def test_the_cache_key_covers_tools_history_call_model_and_rubric(cases: list[Case]) -> None:
    case = cases[0]
    key = cache_key(case, "m", "v1")
    assert key == cache_key(case.model_copy(), "m", "v1")
    changed = [
        cache_key(case.model_copy(update={"tools": case.tools[:-1]}), "m", "v1"),
        cache_key(case.model_copy(update={"history": [*case.history, {"role": "user", "content": "x"}]}), "m", "v1"),
        cache_key(case.model_copy(update={"call": case.call.model_copy(update={"arguments": {"x": 1}})}), "m", "v1"),
        cache_key(case, "other-model", "v1"),
        cache_key(case, "m", "v2"),
    ]
    assert key not in changed and len(set(changed)) == len(changed)


async def test_concurrency_is_bounded(server: JudgeServer, cases: list[Case]) -> None:
    judge = make(server, "rule?latency=0.3", concurrency=2)
    server.max_in_flight = 0
    await asyncio.gather(*(judge.judge(c) for c in cases[:6]))
    assert server.max_in_flight == 2 and judge.stats.requests == 6


async def test_the_rate_limit_spaces_call_starts() -> None:
    limiter = RateLimiter(20.0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    starts = []

    async def one() -> None:
        await limiter.wait()
        starts.append(loop.time() - start)

    await asyncio.gather(*(one() for _ in range(5)))
    starts.sort()
    assert starts[-1] >= 0.2 - 1e-3
    assert all(b - a >= 0.05 - 1e-3 for a, b in zip(starts, starts[1:], strict=False))
    unlimited = RateLimiter(None)
    t = time.perf_counter()
    await asyncio.gather(*(unlimited.wait() for _ in range(100)))
    assert time.perf_counter() - t < 0.1


async def test_checker_first_then_the_judge_for_schema_valid_calls(server: JudgeServer, cases: list[Case]) -> None:
    judge = make(server, "answer=incorrect_parameter_values")
    wrong, valid = pick(cases, "missing_required")[0], pick(cases, "off_intent")[0]
    a = await assess(wrong, judge)
    assert a.judge is None and a.combined.label == "incorrect_parameter_names" and judge.stats.requests == 0
    b = await assess(valid, judge)
    assert b.checker.label == SCHEMA_VALID and b.combined.label == "incorrect_parameter_values"
    everything = await assess_all([wrong, valid], judge, judge_all=True)
    assert [x.judge.label if x.judge else None for x in everything] == ["incorrect_parameter_values"] * 2
    assert everything[0].combined.label == "incorrect_parameter_names"  # the checker's finding stands
    assert judge.stats.requests == 3


async def test_an_unreachable_judge_raises_instead_of_scoring(cases: list[Case]) -> None:
    judge = Judge.for_model("openai/rule", api_base="http://127.0.0.1:9/v1", api_key="sk-test")
    judge.target.retries = 0
    with pytest.raises(JudgeError, match="openai/rule"):
        await judge.judge(cases[0])


def test_the_cache_key_depends_on_the_judge_endpoint() -> None:
    from mcpfleet.runner.toolcalls.judge_cache import cache_key
    from mcpfleet.runner.toolcalls.loader import load_cases as _load

    c = _load(Path(__file__).parent / "data" / "toolcalls_200.jsonl").cases[0]
    a = cache_key(c, "hosted_vllm/m", "v1", "http://a:8000/v1")
    b = cache_key(c, "hosted_vllm/m", "v1", "http://b:8000/v1")
    assert a != b and a == cache_key(c, "hosted_vllm/m", "v1", "http://a:8000/v1/")


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (
            'The assistant called the tool with {"path": "/data/a.txt"}. My verdict: '
            '{"score": "incorrect_parameter_values", "reasoning": "another file"}',
            "incorrect_parameter_values",
        ),
        ('Checking {the schema} first. {"score": "correct", "reasoning": "ok"}', "correct"),
        ('{"score": "incorrect_tool", "reasoning": "x", "evidence": {"score": "correct"}}', "incorrect_tool"),
        ('{"verdict": {"score": "incorrect_parameter_names", "reasoning": "typo"}}', "incorrect_parameter_names"),
        ('Draft: {"score": "correct"}. On reflection: {"score": "incorrect_tool", "reasoning": "r"}', "incorrect_tool"),
        ('Here:\n```json\n{"score": "correct", "reasoning": "fenced"}\n```', "correct"),
    ],
)
def test_the_answer_object_is_found_wherever_it_is_in_the_text(text: str, label: str) -> None:
    assert parse_answer(text).score == label


def test_an_answer_with_no_valid_object_names_the_scored_objects_problem() -> None:
    with pytest.raises(ValueError, match="score"):
        parse_answer('I looked at {"path": "/a"} and say {"score": "mostly_fine"}')
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_answer("a {broken brace")


def test_a_cache_that_cannot_be_written_or_read_is_a_miss_not_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only pre-populated cache (the table exists, so opening writes nothing) still answers; a write
    that fails is logged once and not tried again; a read that fails is a miss."""
    import sqlite3

    from mcpfleet.runner.toolcalls import judge_cache

    monkeypatch.setattr(judge_cache, "_no_writes", set())
    monkeypatch.setattr(judge_cache, "_warned", set())
    warm = JudgeCache(tmp_path)
    warm.put("k1", "m", "r", "correct", "cached")
    warm.close()
    path = tmp_path / "judge-cache.sqlite"
    path.chmod(0o444)
    readonly = JudgeCache(tmp_path)
    readonly._db.close()
    readonly._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)  # read-only even for root
    assert readonly.get("k1") == ("correct", "cached")
    readonly.put("k2", "m", "r", "correct", "x")
    readonly.put("k3", "m", "r", "correct", "y")
    assert not readonly.writable and readonly.get("k2") is None
    assert len([r for r in caplog.records if "writing" in r.getMessage()]) == 1
    readonly._db.close()
    readonly._db = sqlite3.connect(":memory:")  # no table: every read fails
    assert readonly.get("k1") is None
    path.chmod(0o644)


def test_a_corrupt_cache_file_fails_to_open_and_judge_eval_says_which_and_what_to_do(tmp_path: Path) -> None:
    import sqlite3
    import subprocess
    import sys

    (tmp_path / "judge-cache.sqlite").write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        JudgeCache(tmp_path)
    cli = Path(sys.executable).parent / "mcpfleet"
    out = subprocess.run(
        [
            str(cli),
            "judge-eval",
            str(FIXTURE),
            "--judge",
            "openai/unused",
            "--api-base",
            "http://127.0.0.1:9/v1",
            "--cache-dir",
            str(tmp_path),
            "--limit",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OPENAI_API_KEY": "sk-x"},
        stdin=subprocess.DEVNULL,
    )
    message = " ".join(out.stderr.split())
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"judge cache {tmp_path / 'judge-cache.sqlite'}" in message and "--no-cache" in message
