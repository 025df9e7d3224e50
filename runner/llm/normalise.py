"""Odd but usable replies of OpenAI-compatible endpoints, made usable before LiteLLM parses them.

Providers and proxies answer in dialects: ``content`` as a list of text parts, tool arguments as a JSON
object instead of a string, a ``usage`` block with strings, nulls, lists or vendor fields. LiteLLM rejects
some of these ("Invalid response object"), which used to be retried as a server error until the trial
failed. Here the JSON body of a chat completion is rewritten into the plain dialect at the HTTP layer (an
httpx transport handed to LiteLLM as the call's client), for the providers that speak OpenAI's format
(``openai/`` with any base URL, ``hosted_vllm/``); other providers keep LiteLLM's own client and parsing.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

OPENAI_DIALECT = ("openai", "hosted_vllm")
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")
_DROP_HEADERS = {b"content-length", b"content-encoding", b"transfer-encoding"}


def _count(value: Any) -> int | float | None:
    """A token count (or cost) as a number, or None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float):
        return value if math.isfinite(value) and value >= 0 else None
    if isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return None
        return (int(x) if x.is_integer() else x) if math.isfinite(x) and x >= 0 else None
    return None


def _numbers(obj: dict[str, Any]) -> dict[str, Any]:
    """Keep the numeric fields of a usage-details block (recursively); drop anything else."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            out[k] = _numbers(v)
        elif (n := _count(v)) is not None:
            out[k] = n
    return out


def normalise_usage(usage: Any) -> dict[str, Any] | None:
    """OpenAI's usage shape with numbers only; None when there is nothing usable."""
    if not isinstance(usage, dict):
        return None
    # Numbers, and the *_details blocks OpenAI defines (numbers only); vendor objects are dropped.
    out = _numbers({k: v for k, v in usage.items() if not isinstance(v, dict) or k.endswith("_details")})
    # Some OpenAI-compatible servers speak Anthropic's names.
    if "prompt_tokens" not in out and "input_tokens" in out:
        out["prompt_tokens"] = out["input_tokens"]
    if "completion_tokens" not in out and "output_tokens" in out:
        out["completion_tokens"] = out["output_tokens"]
    for key in _USAGE_COUNTS:
        value = out.get(key, 0)
        out[key] = int(value) if isinstance(value, int | float) else 0
    # A total the provider did not give stays 0, as LiteLLM reads it from a raw body and MCPMark's agents add it
    # to meta.json's token_usage (records.mcpmark_token_usage).
    return out


def text_of(content: Any) -> str | None:
    """Message content as one string: a string, a list of text parts, or one part object."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "".join(parts)
    return str(content)


def _tool_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    fn = call.get("function")
    if isinstance(fn, dict):
        args = fn.get("arguments")
        if args is not None and not isinstance(args, str):
            fn["arguments"] = json.dumps(args)
        if fn.get("name") is None:
            fn["name"] = ""
    call.setdefault("type", "function")
    return call


def normalise_completion(body: Any) -> Any:
    """Rewrite a chat-completion JSON body into the plain dialect; anything else is returned unchanged."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return body
    for choice in body["choices"]:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        if not isinstance(message, dict):
            continue
        if not message.get("role"):
            message["role"] = "assistant"
        message["content"] = text_of(message.get("content"))
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [_tool_call(c) for c in calls] or None
        elif calls is not None:
            message["tool_calls"] = None
    if "usage" in body:
        usage = normalise_usage(body["usage"])
        if usage is None:
            del body["usage"]
        else:
            body["usage"] = usage
    return body


class NormalisingTransport(httpx.AsyncBaseTransport):
    """Passes requests through; rewrites JSON chat-completion bodies with ``normalise_completion``."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if "json" not in response.headers.get("content-type", "") or not request.url.path.endswith("/completions"):
            return response
        raw = await response.aread()
        await response.aclose()
        try:
            body = normalise_completion(json.loads(raw))
        except ValueError:
            content = raw  # not JSON after all: LiteLLM reports it (and the call is retried)
        else:
            content = json.dumps(body).encode()
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _DROP_HEADERS]
        return httpx.Response(
            response.status_code, headers=headers, content=content, request=request, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def make_client(provider: str, api_base: str | None, api_key: str | None, timeout: float) -> Any:
    """A LiteLLM ``client`` for one trial that normalises replies, or None for providers it does not cover."""
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    # Around the transport LiteLLM would use itself (aiohttp unless disabled), which is faster than httpx's own:
    # 0.35 ms less per call against the scripted server here.
    if provider == "hosted_vllm":
        return AsyncHTTPHandler(
            timeout=timeout, transport=NormalisingTransport(AsyncHTTPHandler.create_async_transport())
        )
    if provider == "openai":
        import openai

        try:
            return openai.AsyncOpenAI(
                api_key=api_key,
                base_url=api_base,
                max_retries=0,  # retries are mcpfleet's (llm.py), never the SDK's
                timeout=timeout,
                http_client=httpx.AsyncClient(
                    transport=NormalisingTransport(AsyncHTTPHandler.create_async_transport()), timeout=timeout
                ),
            )
        except openai.OpenAIError:  # no key anywhere: LiteLLM's own path reports it (a config_error)
            return None
    return None


async def close_client(client: Any) -> None:
    """Close a client from ``make_client`` (both kinds have an async close)."""
    if client is None:
        return
    close = getattr(client, "close", None)
    if close is not None:
        await close()
