"""What the forkserver imports once, so that every warm worker forked from it starts ready.

The trial engine (LiteLLM alone takes 2-3 s), and the imports LiteLLM and the CLI would otherwise do lazily
in every worker: a worker's first LLM call imported ~60 more modules (the default tiktoken encoding among
them), ~0.2 s of CPU each, paid by all workers at once when a run starts. Best effort for the lazy ones: a
module that a LiteLLM release renames or drops is skipped, never an error.

Pydantic models whose schema LiteLLM leaves deferred (forward references) are completed on first use, and the
response path uses ten of them: a worker's first completion built their schemas, ~30 ms of its first round trip
(~70 ms against ~11 ms for the next), paid by every worker of a run where the serial loop pays it once. They are
rebuilt here instead (``REBUILT_MODELS``; best effort like the imports): pure schema work, safe across ``fork``.

The garbage collector is off while importing (the ~380k objects created would otherwise be scanned over and
over: ~0.7 s of a 3 s preload) and the result is frozen, so workers' collections never walk it again (a full
collection over it took ~0.1 s, in the middle of some LLM round trip) and forked pages stay shared.
Only imports and such pure computation belong here: no threads, clients or event loops, which would not
survive ``fork``. What a worker must pay itself (the pages a first call writes to) is ``llm_warmup``'s.
"""

from __future__ import annotations

import gc
import importlib

ENGINE = ("mcpfleet.runner.llm.client", "mcpfleet.runner.trial.engine", "mcp.client.stdio")

LAZY_MODULES = (
    "mcpfleet.runner.cli.app",  # the console script, which every worker re-imports as __mp_main__
    "mcpfleet.runner.llm.warmup",  # each worker's first round trip: its stand-in server is aiohttp.web (~30 ms)
    "litellm.litellm_core_utils.default_encoding",  # loads the tiktoken encoding
    "litellm.proxy._types",
    "litellm.responses.mcp.litellm_proxy_mcp_handler",
    "litellm.responses.mcp.chat_completions_handler",
    "litellm._service_logger",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.hosted_vllm.chat.transformation",
    # what the first completion's provider lookup and cost calculation import (litellm 1.106)
    "litellm.llms.edenai.chat.transformation",
    "litellm.llms.fal_ai.chat.transformation",
    "litellm.llms.fal_ai.cost_calculator",
    "litellm.llms.fal_ai.image_generation",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.transformation",
    "litellm.llms.vllm.common_utils",
    "litellm.proxy.openai_files_endpoints.common_utils",
)

# Deferred pydantic models a first completion completes (litellm 1.106: listed by diffing
# ``__pydantic_complete__`` across a first round trip with tool calls).
REBUILT_MODELS = (
    "litellm.types.router:LiteLLM_Params",
    "litellm.types.services:ServiceLoggerPayload",
    "litellm.types.utils:ChatCompletionMessageToolCall",
    "litellm.types.utils:Choices",
    "litellm.types.utils:CompletionTokensDetailsWrapper",
    "litellm.types.utils:Function",
    "litellm.types.utils:Message",
    "litellm.types.utils:ModelResponse",
    "litellm.types.utils:PromptTokensDetailsWrapper",
    "litellm.types.utils:Usage",
)


def preload(modules: tuple[str, ...] = LAZY_MODULES, models: tuple[str, ...] = REBUILT_MODELS) -> list[str]:
    """Import what can be imported and complete the deferred models; returns what could not be done."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a warm-up must never stop a run
            missing.append(name)
    for name in models:
        module, _, cls = name.partition(":")
        try:
            getattr(importlib.import_module(module), cls).model_rebuild()
        except Exception:  # noqa: BLE001
            missing.append(name)
    return missing


def prepare_forkserver() -> list[str]:
    """Import the engine and the lazy modules with the collector paused, then freeze what they made."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for name in ENGINE:
            importlib.import_module(name)  # required: a failure here is a broken install, and must say so
        return preload()
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


MISSING = prepare_forkserver()
