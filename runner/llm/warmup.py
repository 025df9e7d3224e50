"""A warm worker's first LLM round trip, made before its first trial against a local stand-in endpoint.

A forked worker's first completion cost ~45 ms of harness time against ~12 ms for the next ones, even with
everything imported and built in the forkserver (``warmup``): the call path writes to ~4,300 pages of the
forkserver's memory (reference counts), each copied on that first write, and it fills per-process caches
(the source lines of the traceback LiteLLM formats for an unpriced model, a thread of the loop's executor, the
HTTP transport's first connection). The serial loop pays that once per run; a run at concurrency 4 paid it on
the first model call of four trials, inside the model's recorded latency. Here each worker pays it once, when
it starts, through the same client the trials use (``llm.complete``), for each OpenAI-dialect provider the
run's models use (the providers ``normalise`` covers; others keep their first-call cost). For ``openai`` that
first call also imports the OpenAI SDK's lazy modules (~450, ~0.6 s here), now paid at the worker's start too.

The stand-in is an HTTP server on 127.0.0.1 inside the worker's own loop that answers every request with one
canned tool-call completion. No key is sent (the run's keys never reach it) and nothing is recorded. Best
effort: a failure or a stall (``TIMEOUT_S``) only means the first trial pays the cost as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

TIMEOUT_S = 2.0
MODEL = "warmup"

_REPLY = {
    "id": "chatcmpl-warmup",
    "object": "chat.completion",
    "created": 0,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "warm", "arguments": "{}"}}],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
_TOOL = {"type": "function", "function": {"name": "warm", "parameters": {"type": "object", "properties": {}}}}


async def _answer(request: web.BaseRequest) -> web.Response:
    """Every request gets the canned completion, its body read first (aiohttp keeps the connection alive)."""
    await request.read()
    return web.json_response(_REPLY)


def providers(models: list[str]) -> list[str]:
    """The OpenAI-dialect providers (the ones the trial's own client covers) among LiteLLM model strings."""
    from mcpfleet.runner.llm.client import dialect_of

    found: list[str] = []
    for model in models:
        provider = dialect_of(model)
        if provider is not None and provider not in found:
            found.append(provider)
    return found


async def _round_trip(base: str, provider: str) -> None:
    from mcpfleet.runner.llm import client as llm

    target = llm.LLMTarget(model=f"{provider}/{MODEL}", api_base=base, api_key="warmup", timeout=TIMEOUT_S, retries=0)
    try:
        response, _, _ = await llm.complete(target, [{"role": "user", "content": "warm up"}], [_TOOL])
        llm.usage_of(response, target)
        llm.reply_of(response, [])
    finally:
        await llm.close(target)


async def warm(models: list[str]) -> list[str]:
    """One round trip per OpenAI-dialect provider of ``models``; returns the providers warmed."""
    server = web.Server(_answer, access_log=None)
    listener = await asyncio.get_running_loop().create_server(server, "127.0.0.1", 0)
    warmed = []
    try:
        port = listener.sockets[0].getsockname()[1]
        for provider in providers(models):
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    await _round_trip(f"http://127.0.0.1:{port}/v1", provider)
                warmed.append(provider)
            except Exception:  # noqa: BLE001 - best effort: the first trial pays instead
                pass
    finally:
        listener.close()
        await server.shutdown(0)
        await listener.wait_closed()
    return warmed


def warm_models(spec_models: list[Any]) -> list[str]:
    """The LiteLLM model strings a run's models are called as (the scripted model through hosted_vllm)."""
    return ["hosted_vllm/" + MODEL if m.is_scripted else m.model for m in spec_models]
