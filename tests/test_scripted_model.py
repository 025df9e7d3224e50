"""The scripted model server, driven through LiteLLM over real HTTP exactly as the harness drives a provider."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp
import litellm
import pytest
import pytest_asyncio
from aiohttp import web

from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess
from mcpfleet.runner.launch.scripted_server import build_app
from mcpfleet.runner.tasks.discovery import discover

litellm.suppress_debug_info = True

DESCRIPTION = "Move the draft into the archive folder and write a summary.\n"
ROOT = "/tmp/x"
ORACLE = [
    {"tool": "create_directory", "arguments": {"path": "{root}/archive"}},
    {"tool": "move_file", "arguments": {"source": "{root}/draft.md", "destination": "{root}/archive/draft.md"}},
    {"tool": "write_file", "arguments": {"path": "{root}/summary.txt", "content": "moved {root}/draft.md"}},
]
TOOL_NAMES = ["list_allowed_directories", "create_directory", "move_file", "write_file", "read_text_file"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": n,
            "description": n,
            "parameters": {
                "type": "object",
                "properties": {} if n == "list_allowed_directories" else {"path": {"type": "string"}},
            },
        },
    }
    for n in TOOL_NAMES
]


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    task = tmp_path / "pack" / "filesystem" / "easy" / "files" / "archive_draft"
    task.mkdir(parents=True)
    (task / "description.md").write_text(DESCRIPTION)
    (task / "meta.json").write_text(json.dumps({"task_id": "archive_draft", "category_id": "files"}))
    (task / "verify.py").write_text("import sys\nsys.exit(0)\n")
    (task / "oracle.json").write_text(json.dumps({"steps": ORACLE}))
    return tmp_path / "pack"


async def _start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"


@pytest_asyncio.fixture
async def url(pack: Path) -> AsyncIterator[str]:
    runner, base = await _start(build_app([pack]))
    yield base
    await runner.cleanup()


async def complete(
    url: str, policy: str, messages: list[dict[str, Any]], stream: bool = False, **kw: Any
) -> tuple[str | None, list[dict[str, Any]], Any]:
    """One LiteLLM call; returns (content, tool calls as {id, name, arguments-string}, usage)."""
    resp = await litellm.acompletion(
        model=f"openai/{policy}",
        api_base=url,
        api_key="x",
        messages=messages,
        tools=TOOLS,
        stream=stream,
        max_retries=0,
        **kw,
    )
    if not stream:
        msg = resp.choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in msg.tool_calls or []]
        return msg.content, calls, resp.usage
    content, usage = "", None
    by_index: dict[int, dict[str, Any]] = {}
    async for chunk in resp:
        usage = getattr(chunk, "usage", None) or usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            slot = by_index.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            slot["name"] += tc.function.name or ""
            slot["arguments"] += tc.function.arguments or ""
    return content or None, [by_index[i] for i in sorted(by_index)], usage


def tool_result(name: str) -> str:
    return f"Allowed directories:\n{ROOT}" if name == "list_allowed_directories" else "ok"


async def drive(
    url: str, policy: str, prompt: str = DESCRIPTION, stream: bool = False, max_turns: int = 10
) -> tuple[list[tuple[str, Any]], str | None, list[Any]]:
    """A minimal agent loop feeding fake tool results back; returns (calls, final text, usages)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    made: list[tuple[str, Any]] = []
    usages = []
    for _ in range(max_turns):
        content, calls, usage = await complete(
            url, policy, messages, stream=stream, **({"stream_options": {"include_usage": True}} if stream else {})
        )
        usages.append(usage)
        if not calls:
            return made, content, usages
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ],
            }
        )
        for c in calls:
            made.append((c["name"], json.loads(c["arguments"])))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": tool_result(c["name"])})
    return made, None, usages


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(
    "prompt", [DESCRIPTION, f"You are an agent.\n\n{DESCRIPTION}\nUse the tools."], ids=["exact", "contained"]
)
async def test_oracle_plays_steps_in_order(url: str, pack: Path, stream: bool, prompt: str) -> None:
    oracle = discover(pack)[0].oracle
    made, final, usages = await drive(url, "oracle", prompt, stream=stream)
    assert made == [("list_allowed_directories", {})] + [(s.tool, s.resolve(ROOT)) for s in oracle]
    assert made[2][1] == {"source": "/tmp/x/draft.md", "destination": "/tmp/x/archive/draft.md"}
    assert final == "Done."
    assert len(usages) == 5 and all(u is not None for u in usages)
    assert usages[0].prompt_tokens == len(prompt) // 4
    assert usages[-1].prompt_tokens > usages[0].prompt_tokens and usages[-1].completion_tokens >= 1
    assert usages[-1].completion_tokens_details.reasoning_tokens == 0
    assert usages[-1].prompt_tokens_details.cached_tokens == 0


async def test_oracle_unknown_task_explains(url: str) -> None:
    made, final, _ = await drive(url, "oracle", "Something no task describes.")
    assert made == [] and final is not None and "No oracle is known" in final


async def test_noop(url: str) -> None:
    for stream in (False, True):
        made, final, _ = await drive(url, "noop", stream=stream)
        assert made == [] and final == "I have reviewed the request."


async def test_loop_never_stops(url: str) -> None:
    made, final, _ = await drive(url, "loop", max_turns=4)
    assert made == [("list_allowed_directories", {})] * 4 and final is None


async def test_malformed_arguments_reach_the_client(url: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": DESCRIPTION}]
    content, calls, _ = await complete(url, "malformed", messages)
    assert len(calls) == 1 and calls[0]["name"] in TOOL_NAMES
    with pytest.raises(json.JSONDecodeError):
        json.loads(calls[0]["arguments"])
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": calls[0]["id"],
                    "type": "function",
                    "function": {"name": calls[0]["name"], "arguments": calls[0]["arguments"]},
                }
            ],
        },
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "error: arguments are not JSON"},
    ]
    content, calls, _ = await complete(url, "malformed", messages)
    assert content == "Done." and calls == []


async def test_overflow_raises_context_window_exceeded(url: str) -> None:
    with pytest.raises(litellm.ContextWindowExceededError):
        await complete(url, "overflow", [{"role": "user", "content": "hi"}])


async def test_script_policy(url: str, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "list_allowed_directories", "arguments": {}}]},
                    {
                        "tool_calls": [
                            {"name": "read_text_file", "arguments": {"path": "{root}/a.txt"}},
                            {"name": "write_file", "arguments": '{"path": "{root}/b.txt", "content": "x"}'},
                        ]
                    },
                    {"content": "Thinking out loud."},
                ]
            }
        )
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "anything"}]
    seen = []
    for _ in range(3):
        content, calls, _ = await complete(url, f"script={script}", messages)
        seen.append((content, [(c["name"], json.loads(c["arguments"])) for c in calls]))
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ]
                or None,
            }
        )
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": tool_result(c["name"])} for c in calls]
    assert seen == [
        (None, [("list_allowed_directories", {})]),
        (
            None,
            [("read_text_file", {"path": "/tmp/x/a.txt"}), ("write_file", {"path": "/tmp/x/b.txt", "content": "x"})],
        ),
        ("Thinking out loud.", []),
    ]
    content, calls, _ = await complete(url, f"script={script}", messages)
    assert content == "Done." and calls == []


async def test_fail_then_succeed_over_raw_http(url: str) -> None:
    body = {"model": "noop?fail=2&fail_status=503", "messages": [{"role": "user", "content": "retry me"}]}
    async with aiohttp.ClientSession() as session:
        statuses = []
        for _ in range(3):
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                statuses.append(resp.status)
                data = await resp.json()
        assert statuses == [503, 503, 200]
        assert data["choices"][0]["message"]["content"] == "I have reviewed the request."
        # a different conversation gets its own count
        other = {**body, "messages": [{"role": "user", "content": "another conversation"}]}
        async with session.post(f"{url}/chat/completions", json=other) as resp:
            assert resp.status == 503 and (await resp.json())["error"]["type"] == "server_error"


async def test_fault_window_and_rate_limit_headers_over_raw_http(url: str) -> None:
    """fault=<kind> hits calls after..after+fail-1 of a conversation; a 429 carries the asked-for waits."""
    body = {
        "model": "noop?fault=status&fail_status=429&after=1&fail=2&retry_after=3&reset=1.5",
        "messages": [{"role": "user", "content": "window"}],
    }
    async with aiohttp.ClientSession() as session:
        got = []
        for _ in range(4):
            async with session.post(f"{url}/chat/completions", json=body) as resp:
                got.append(
                    (resp.status, resp.headers.get("Retry-After"), resp.headers.get("x-ratelimit-reset-requests"))
                )
        assert got == [(200, None, None), (429, "3", "1.5s"), (429, "3", "1.5s"), (200, None, None)]
        dated = {**body, "model": "noop?fault=status&fail_status=503&retry_after_date=5"}
        async with session.post(f"{url}/chat/completions", json=dated) as resp:
            assert resp.status == 503 and resp.headers["Retry-After"].endswith(" GMT")
        for fault, check in (
            ("empty", lambda d: d["choices"] == []),
            ("nomessage", lambda d: "message" not in d["choices"][0]),
            (
                "length",
                lambda d: d["choices"][0]["finish_reason"] == "length" and d["choices"][0]["message"]["content"] == "",
            ),
            ("filter", lambda d: d["choices"][0]["finish_reason"] == "content_filter"),
            ("parts", lambda d: [p["type"] for p in d["choices"][0]["message"]["content"]] == ["text", "text"]),
            ("odd_usage", lambda d: d["usage"]["prompt_tokens"] == str(d["usage"]["prompt_tokens"])),
        ):
            async with session.post(f"{url}/chat/completions", json={**body, "model": f"noop?fault={fault}"}) as resp:
                assert resp.status == 200 and check(await resp.json()), fault
        async with session.post(f"{url}/chat/completions", json={**body, "model": "noop?fault=garbage"}) as resp:
            assert resp.status == 200 and resp.content_type == "text/html"


async def test_key_check_echoes_the_key_it_was_given(url: str) -> None:
    body = {"model": "noop?key=good", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", json=body, headers={"Authorization": "Bearer bad"}) as r:
            assert r.status == 401 and "Incorrect API key provided: bad" in (await r.json())["error"]["message"]
        async with session.post(f"{url}/chat/completions", json=body, headers={"Authorization": "Bearer good"}) as r:
            assert r.status == 200


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ([{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}], "has no 'id'"),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
            ],
            "duplicate tool call id 'a'",
        ),
        ([{"role": "tool", "tool_call_id": "zz", "content": "x"}], "must be a response to a preceding"),
    ],
)
async def test_the_server_refuses_what_strict_providers_refuse(
    url: str, messages: list[dict[str, Any]], why: str
) -> None:
    body = {"model": "noop", "messages": [{"role": "user", "content": "strict"}, *messages]}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", json=body) as resp:
            assert resp.status == 400 and why in (await resp.json())["error"]["message"]


async def test_unknown_fault_is_refused(url: str) -> None:
    with pytest.raises(litellm.BadRequestError, match="unknown fault"):
        await complete(url, "noop?fault=meteor", [{"role": "user", "content": "hi"}])


async def test_fail_maps_to_litellm_errors_and_its_default_retries(url: str) -> None:
    msgs = [{"role": "user", "content": "rate limited"}]
    with pytest.raises(litellm.RateLimitError):
        await complete(url, "noop?fail=1&fail_status=429", msgs)
    # LiteLLM's openai client retries twice by default (DEFAULT_MAX_RETRIES=2): fail=2 is absorbed silently.
    resp = await litellm.acompletion(
        model="openai/noop+fail=2", api_base=url, api_key="x", messages=[{"role": "user", "content": "absorbed"}]
    )
    assert resp.choices[0].message.content == "I have reviewed the request."


async def test_latency_per_model_and_server_wide(url: str, pack: Path) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    for policy in ("noop?latency=0.3", "noop+latency=0.3"):
        t0 = time.monotonic()
        await complete(url, policy, msgs)
        assert time.monotonic() - t0 >= 0.3
    runner, slow = await _start(build_app([pack], latency=0.25))
    try:
        t0 = time.monotonic()
        await complete(slow, "noop", msgs)
        assert time.monotonic() - t0 >= 0.25
        t0 = time.monotonic()
        await complete(slow, "noop?latency=0", msgs)
        assert time.monotonic() - t0 < 0.25
    finally:
        await runner.cleanup()


async def test_bad_model_strings_and_endpoints(url: str) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(litellm.NotFoundError):
        await complete(url, "gpt-5", msgs)
    with pytest.raises(litellm.BadRequestError):
        await complete(url, "noop?speed=9", msgs)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/models") as resp:
            assert "oracle" in [m["id"] for m in (await resp.json())["data"]]
        async with session.get(url.removesuffix("/v1") + "/healthz") as resp:
            assert (await resp.json()) == {"status": "ok", "tasks": 1}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_process_starts_and_stops(pack: Path) -> None:
    server = ScriptedServerProcess([pack])
    with server as base:
        assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
        assert server.proc is not None
        pid = server.proc.pid
        assert os.getpgid(pid) == pid  # its own process group/session
        resp = litellm.completion(
            model="openai/noop", api_base=base, api_key="x", messages=[{"role": "user", "content": "hi"}]
        )
        assert resp.choices[0].message.content == "I have reviewed the request."
    assert server.proc.returncode is not None and not _alive(pid)


def test_server_process_reports_startup_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="does not exist"):
        with ScriptedServerProcess([tmp_path / "missing"]):
            pass


def test_ctrl_c_while_the_server_starts_stops_it(pack: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during the server's start (its imports take seconds) left it running until its lifeline armed, up
    to 12 s: __enter__ stopped it for an Exception only, and the with-block's exit never runs when __enter__
    raises. In its own session, it gets no signal of the terminal's."""
    server = ScriptedServerProcess([pack])

    def interrupted(self: ScriptedServerProcess) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(ScriptedServerProcess, "_read_line", interrupted)
    with pytest.raises(KeyboardInterrupt):
        server.__enter__()
    assert server.proc is not None and server.proc.returncode is not None and not _alive(server.proc.pid)


async def test_a_description_tasks_with_other_oracles_share_is_refused_not_replayed(pack: Path) -> None:
    """The oracle policy knows a task by its description only: with a variant sharing it (another oracle), it
    replayed whichever was found first (an unselected task's too), scoring the oracle 0 without a word. Now the
    call is refused (404: an unscored config_error that stops the model), naming both tasks; a copy with the
    same oracle (a variant differing in its state only) is still replayed."""
    original = pack / "filesystem" / "easy" / "files" / "archive_draft"
    twin = original.with_name("aaa_same_oracle")
    shutil.copytree(original, twin)
    runner, base = await _start(build_app([pack]))
    try:
        made, final, _ = await drive(base, "oracle")
        assert len(made) == 1 + len(ORACLE) and final == "Done."
    finally:
        await runner.cleanup()
    variant = original.with_name("aaa_variant")
    shutil.copytree(original, variant)
    (variant / "oracle.json").write_text(json.dumps({"steps": ORACLE[:1]}))
    runner, base = await _start(build_app([pack]))
    try:
        with pytest.raises(litellm.NotFoundError) as refused:
            await drive(base, "oracle")
        said = " ".join(str(refused.value).split())
        assert "filesystem/easy/files/aaa_variant" in said and "filesystem/easy/files/archive_draft" in said
        assert "with different oracles, so the scripted oracle cannot tell which task to replay" in said
        made, final, _ = await drive(base, "noop")  # the other policies are untouched
        assert final == "I have reviewed the request."
    finally:
        await runner.cleanup()


async def test_a_relative_script_is_read_from_the_servers_script_base(tmp_path: Path, pack: Path) -> None:
    """A relative script=<path> is read from --script-base (mcpfleet run gives the EvalRun file's folder, where
    validate checks it); a script that cannot be played is a 404 (config_error), not the model's 400."""
    (tmp_path / "play.json").write_text(json.dumps({"turns": [{"content": "scripted hello"}]}))
    runner, base = await _start(build_app([pack], script_base=tmp_path))
    try:
        content, _, _ = await complete(base, "script=play.json", [{"role": "user", "content": "hi"}])
        assert content == "scripted hello"
        with pytest.raises(litellm.NotFoundError, match=r"script .*/missing\.json: No such file or directory"):
            await complete(base, "script=missing.json", [{"role": "user", "content": "hi"}])
    finally:
        await runner.cleanup()
