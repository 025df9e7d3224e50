"""A tiny OpenAI-compatible judge server for the judge tests, run in its own thread so that both async tests and
the ``mcpfleet judge-eval`` command (which runs its own event loop) can reach it over real HTTP through LiteLLM.

The model string picks the behaviour (LiteLLM's ``openai/`` prefix is stripped before it arrives):
``rule`` says incorrect_tool when the called tool is not among the available tools, else correct;
``answer=<label>`` always answers that label; ``flaky`` answers prose first and valid JSON once the
conversation holds the judge's correction; ``garbage`` never answers JSON; ``fenced`` wraps JSON in a code
fence. ``?latency=S`` delays every answer. Every request body is recorded in ``JudgeServer.requests``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class JudgeServer:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)  # time.time() of each request, as the pace tests count them
    in_flight: int = 0
    max_in_flight: int = 0
    throttled: int = 0  # 429s answered (model "throttle": each conversation's first request)
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _runner: Any = None

    def open_connections(self, wait: float = 2.0) -> int:
        """Client connections still open once the clients had ``wait`` seconds to close theirs."""
        deadline = time.monotonic() + wait
        while self._runner.server.connections and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self._runner.server.connections)

    def answer(self, model: str, messages: list[dict[str, Any]]) -> str:
        policy = model.split("?", 1)[0]
        if policy == "garbage":
            return "The call looks fine to me."
        if policy == "flaky":
            if not any(m.get("role") == "assistant" for m in messages):
                return "I think this call is correct."
            return json.dumps({"score": "correct", "reasoning": ["arguments match", "tool exists"]})
        if policy.startswith("answer="):
            return json.dumps({"score": policy.split("=", 1)[1], "reasoning": "scripted"})
        payload = json.loads(messages[1]["content"])
        names = {t["name"] for t in payload["available_tools"]}
        called = payload["messages"][-1]["tool_calls"][0]["function"]["name"]
        score = "correct" if called in names else "incorrect_tool"
        text = json.dumps(
            {"score": score, "reasoning": f"{called} {'is' if score == 'correct' else 'is not'} available"}
        )
        return f"```json\n{text}\n```" if policy == "fenced" else text

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            self.arrived.append(time.time())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            model = str(body["model"])
            if model.startswith("throttle"):
                conversation = json.dumps(body["messages"], sort_keys=True)
                with self._lock:
                    first = conversation not in self._seen
                    self._seen.add(conversation)
                    self.throttled += first
                if first:
                    error = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
                    return web.json_response(error, status=429, headers={"retry-after-ms": "1"})
            if "latency=" in model:
                await asyncio.sleep(float(model.split("latency=", 1)[1]))
            text = self.answer(model, body["messages"])
        finally:
            with self._lock:
                self.in_flight -= 1
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
        )


@contextmanager
def judge_server() -> Iterator[JudgeServer]:
    """Serve on 127.0.0.1 from a background thread; ``.url`` is the /v1 base URL."""
    server = JudgeServer()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.chat)
        runner = server._runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10), "judge server did not start"
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
