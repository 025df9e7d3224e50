"""The scripted model's HTTP face: OpenAI's chat completions (JSON or SSE), its provider faults, serve()."""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import math
import signal
import time
from collections.abc import AsyncIterator, Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

from aiohttp import web

from mcpfleet.runner.launch.scripted_options import POLICIES, ModelError, Options, parse_model
from mcpfleet.runner.launch.scripted_policies import Reply, ScriptedPolicies, _first_user, _text

LISTEN_PREFIX = "mcpfleet-scripted-model listening on "
HIDDEN_TOKENS = 16  # per reply, in total_tokens only (fault ``hidden_tokens``)
ODD_USAGE_EXTRA = {
    "total_tokens": None,
    "prompt_tokens_details": [{"cached_tokens": 0}],
    "completion_tokens_details": {"reasoning_tokens": "n/a", "accepted_prediction_tokens": None},
    "cost": {"usd": "0.0001"},
    "x_vendor_billing": {"tier": "free", "units": [1, 2]},
}


def _usage_chars(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        n += len(_text(m.get("content")))
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            n += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return n


class Meter:
    """Rate-limited accounts (``rpm``, ``window``) and what each was asked and billed, as a provider keeps them."""

    def __init__(self) -> None:
        self.sent: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self.accounts: dict[str, dict[str, float]] = collections.defaultdict(
            lambda: {"accepted": 0, "refused": 0, "prompt_tokens": 0, "output_tokens": 0, "peak_in_flight": 0}
        )
        self.in_flight: dict[str, int] = collections.defaultdict(int)
        self.accepted_at: dict[str, list[float]] = collections.defaultdict(list)

    @staticmethod
    def account(opts: Options, given: str) -> str:
        return opts.account or given or "default"

    def admit(self, opts: Options, given: str) -> web.Response | None:
        """None: admitted (counted); else the 429 a rate-limited account answers above its limit."""
        name = self.account(opts, given)
        now = time.monotonic()
        if opts.rpm is not None:
            sent = self.sent[name]
            while sent and sent[0] <= now - opts.window:
                sent.popleft()
            if len(sent) >= opts.rpm:
                self.accounts[name]["refused"] += 1
                wait = max(1, math.ceil(sent[0] + opts.window - now))
                response = ModelError(
                    429, f"Rate limit reached: {opts.rpm} requests per {opts.window:g} s", "rate_limit_error"
                ).response()
                response.headers["Retry-After"] = str(wait)
                response.headers["x-ratelimit-limit-requests"] = str(opts.rpm)
                response.headers["x-ratelimit-remaining-requests"] = "0"
                response.headers["x-ratelimit-reset-requests"] = f"{wait}s"
                return response
            sent.append(now)
        self.accounts[name]["accepted"] += 1
        self.accepted_at[name].append(time.time())
        self.in_flight[name] += 1
        self.accounts[name]["peak_in_flight"] = max(self.accounts[name]["peak_in_flight"], self.in_flight[name])
        return None

    def done(self, opts: Options, given: str, usage: dict[str, Any] | None) -> None:
        name = self.account(opts, given)
        self.in_flight[name] = max(0, self.in_flight[name] - 1)
        if usage:
            prompt = int(usage.get("prompt_tokens") or 0)
            output = max(int(usage.get("completion_tokens") or 0), int(usage.get("total_tokens") or 0) - prompt)
            self.accounts[name]["prompt_tokens"] += prompt
            self.accounts[name]["output_tokens"] += output

    async def report(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"accounts": {k: {**v, "accepted_at": self.accepted_at[k]} for k, v in self.accounts.items()}}
        )


class ScriptedModel(ScriptedPolicies):
    """The policies served over HTTP: a request's model string picks the policy, its options the faults."""

    meter: Meter

    # -- HTTP ---------------------------------------------------------------------------------
    def _fault_now(self, model: str, opts: Options, messages: list[dict[str, Any]]) -> str | None:
        """The fault of this call, if any: calls are counted per conversation (model string + first user
        message), and the fault hits calls ``after`` .. ``after + fail - 1``."""
        if not opts.faulty:
            return None
        key = hashlib.sha256(f"{model}\0{_first_user(messages)}".encode()).hexdigest()
        n = self._calls.get(key, 0)
        self._calls[key] = n + 1
        if n < opts.after or (opts.fail is not None and n >= opts.after + opts.fail):
            return None
        return opts.fault

    async def chat(self, request: web.Request) -> web.StreamResponse:
        arrived = asyncio.get_running_loop().time()
        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ModelError(400, "request body must be a JSON object with a 'messages' list")
        except (ValueError, UnicodeDecodeError):
            return ModelError(400, "request body is not valid JSON").response()
        except ModelError as exc:
            return exc.response()
        model = str(body.get("model", ""))
        try:
            opts = parse_model(model, self.latency)
            _check_conversation(body["messages"])
        except ModelError as exc:
            return exc.response()
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if opts.key is not None and given != opts.key:
            return _auth_error(given)
        if opts.rpm is not None or opts.account is not None:  # a metered account
            if (refused := self.meter.admit(opts, given)) is not None:
                return refused
            usage_seen: list[dict[str, Any]] = []
            try:
                return await self._answer(request, body, model, opts, given, arrived, usage_seen)
            finally:
                self.meter.done(opts, given, usage_seen[0] if usage_seen else None)
        return await self._answer(request, body, model, opts, given, arrived, [])

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        model: str,
        opts: Options,
        given: str,
        arrived: float,
        usage_seen: list[dict[str, Any]],
    ) -> web.StreamResponse:
        fault = self._fault_now(model, opts, body["messages"])
        try:
            if fault in _HTTP_FAULTS:
                return await self._misbehave(request, fault, opts, given, arrived)
            reply = self.reply(opts, body)
        except ModelError as exc:
            await self._wait_until(arrived + opts.latency)
            return exc.response()
        rid, created = f"chatcmpl-{next(self._ids)}", int(time.time())
        calls = [
            {"id": f"call_{rid[9:]}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(reply.tool_calls)
        ]
        if fault == "dup_ids":
            calls = [{**c, "id": "call_dup"} for c in calls]
        elif fault == "no_ids":
            calls = [
                {**c, "id": ""} if i % 2 == 0 else {k: v for k, v in c.items() if k != "id"}
                for i, c in enumerate(calls)
            ]
        out_chars = len(reply.content or "") + sum(len(n) + len(a) for n, a in reply.tool_calls)
        prompt = _usage_chars(body["messages"]) // 4
        completion = max(1, out_chars // 4)
        hidden = HIDDEN_TOKENS if fault == "hidden_tokens" else 0
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion + hidden,
            "completion_tokens_details": {"reasoning_tokens": 0},
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        finish = "tool_calls" if calls else "stop"
        content: Any = reply.content
        if fault == "length":
            calls, content, finish = [], "", "length"
        elif fault == "filter":
            calls, content, finish = [], None, "content_filter"
        elif fault == "parts" and content:
            half = len(content) // 2
            content = [{"type": "text", "text": content[:half]}, {"type": "text", "text": content[half:]}]
        if fault == "odd_usage":
            usage = {**usage, "prompt_tokens": str(prompt), "completion_tokens": float(completion), **ODD_USAGE_EXTRA}
        else:
            usage_seen.append(usage)
        base = {"id": rid, "created": created, "model": model, "system_fingerprint": None}
        if not body.get("stream"):
            message = {"role": "assistant", "content": content, "tool_calls": calls or None}
            response = web.json_response(
                {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                }
            )
            await self._wait_until(arrived + opts.latency)
            return response
        await self._wait_until(arrived + opts.latency)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        async for chunk in _chunks(base, reply, calls, finish, usage if include_usage else None):
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    async def _misbehave(
        self, request: web.Request, fault: str, opts: Options, given: str, arrived: float
    ) -> web.StreamResponse:
        """Answer a call with one of the HTTP-level faults."""
        if fault == "hang":  # until the client gives up (a disconnect), so no handler outlives its caller
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.05)
            return web.Response(status=499)
        await self._wait_until(arrived + opts.latency)
        if fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=499)
        if fault == "empty":
            return web.json_response(_completion_shell([]))
        if fault == "nomessage":
            return web.json_response(_completion_shell([{"index": 0, "finish_reason": "stop"}]))
        if fault == "garbage":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
        if fault == "auth":
            return _auth_error(given)
        if fault == "forbidden":
            return ModelError(403, "this key may not use this model", "permission_error").response()
        if fault == "notfound":
            return ModelError(
                404, "The model does not exist or you do not have access to it.", code="model_not_found"
            ).response()
        kind = (
            "rate_limit_error"
            if opts.fail_status == 429
            else ("server_error" if opts.fail_status >= 500 else "invalid_request_error")
        )
        response = ModelError(
            opts.fail_status, f"scripted failure (status {opts.fail_status}); retry the request", kind
        ).response()
        if opts.retry_after is not None:
            response.headers["Retry-After"] = f"{opts.retry_after:g}"
        if opts.retry_after_date is not None:
            response.headers["Retry-After"] = formatdate(time.time() + opts.retry_after_date, usegmt=True)
        if opts.reset is not None:
            response.headers["x-ratelimit-remaining-requests"] = "0"
            response.headers["x-ratelimit-reset-requests"] = f"{opts.reset:g}s"
            response.headers["x-ratelimit-remaining-tokens"] = "5000"
            response.headers["x-ratelimit-reset-tokens"] = "10ms"
        return response

    @staticmethod
    async def _wait_until(deadline: float) -> None:
        """Answer no earlier than the deadline: the latency is the whole call, this server's work included."""
        left = deadline - asyncio.get_running_loop().time()
        if left > 0:
            await asyncio.sleep(left)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": p, "object": "model", "created": 0, "owned_by": "mcpfleet"} for p in POLICIES],
            }
        )

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "tasks": len(self.tasks)})


_HTTP_FAULTS = frozenset({"status", "empty", "nomessage", "garbage", "hang", "drop", "auth", "forbidden", "notfound"})


def _auth_error(given: str) -> web.Response:
    """401 echoing the key it was given (some providers do: a harness must redact it)."""
    return ModelError(401, f"Incorrect API key provided: {given}.", code="invalid_api_key").response()


def _completion_shell(choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": choices,
        "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    }


def _check_conversation(messages: list[Any]) -> None:
    """Refuse what strict providers refuse: tool-call ids missing or repeated, results answering no call."""
    seen: set[str] = set()
    open_calls: set[str] = set()
    for m in messages:
        if not isinstance(m, dict):
            raise ModelError(400, "each message must be an object")
        if m.get("role") == "assistant":
            open_calls = set()
            for c in m.get("tool_calls") or []:
                cid = c.get("id") if isinstance(c, dict) else None
                if not isinstance(cid, str) or not cid:
                    raise ModelError(400, "Invalid 'messages': a tool call has no 'id'.")
                if cid in seen:
                    raise ModelError(400, f"Invalid 'messages': duplicate tool call id '{cid}'.")
                seen.add(cid)
                open_calls.add(cid)
        elif m.get("role") == "tool" and m.get("tool_call_id") not in open_calls:
            raise ModelError(
                400,
                "Invalid 'messages': messages with role 'tool' must be a response to a preceding message "
                f"with 'tool_calls' (tool_call_id {m.get('tool_call_id')!r}).",
            )


def _split(s: str, parts: int = 3) -> Iterator[str]:
    """Argument fragments, as real providers stream them (a client must concatenate)."""
    size = max(1, -(-len(s) // parts))
    return (s[i : i + size] for i in range(0, len(s), size))


async def _chunks(
    base: dict[str, Any], reply: Reply, calls: list[dict[str, Any]], finish: str, usage: dict[str, Any] | None
) -> AsyncIterator[bytes]:
    """SSE frames in OpenAI's order: role, content, tool-call deltas, finish, optional usage, [DONE]."""

    def frame(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> bytes:
        choices = (
            [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
        )
        payload = {**base, "object": "chat.completion.chunk", "choices": choices, **extra}
        if usage is not None and "usage" not in extra:
            payload["usage"] = None
        return f"data: {json.dumps(payload)}\n\n".encode()

    yield frame({"role": "assistant", "content": "" if calls else None})
    if reply.content:
        for piece in _split(reply.content, 2):
            yield frame({"content": piece})
    for i, call in enumerate(calls):
        fn = call["function"]
        yield frame(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in _split(fn["arguments"]):
            yield frame({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield frame({}, finish)
    if usage is not None:
        yield frame(None, usage=usage)
    yield b"data: [DONE]\n\n"


def build_app(tasks_roots: list[Path], latency: float = 0.0, script_base: Path | None = None) -> web.Application:
    """The aiohttp application; task packs are loaded here, once."""
    model = ScriptedModel(tasks_roots, latency, script_base)
    model.meter = Meter()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", model.chat)
    app.router.add_post("/chat/completions", model.chat)
    app.router.add_get("/v1/models", model.models)
    app.router.add_get("/v1/meter", model.meter.report)
    app.router.add_get("/healthz", model.healthz)
    return app


def serve(
    tasks_roots: list[Path],
    host: str = "127.0.0.1",
    port: int = 0,
    latency: float = 0.0,
    script_base: Path | None = None,
) -> None:
    """Bind, print the one listening line (callers parse it to learn the port), serve until SIGTERM/SIGINT."""

    async def main() -> None:
        runner = web.AppRunner(build_app(tasks_roots, latency, script_base), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        shown = f"[{host}]" if ":" in host else host
        print(f"{LISTEN_PREFIX}http://{shown}:{bound}/v1", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())
