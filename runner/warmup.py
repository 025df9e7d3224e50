"""Imports that LiteLLM and the CLI would otherwise do lazily in every worker, done once in the forkserver.

A worker's first LLM call imported ~60 more modules (the default tiktoken encoding among them): ~0.2 s
of CPU each, paid by all workers at once when a run starts. Imported here, before the fork, they are
shared. Best effort: a module that a LiteLLM release renames or drops is skipped, never an error.
Only imports belong here: no calls, threads, clients or event loops, which would not survive ``fork``.
"""

from __future__ import annotations

import importlib

LAZY_MODULES = (
    "mcpfleet.runner.cli",  # the console script, which every worker re-imports as __mp_main__
    "litellm.litellm_core_utils.default_encoding",  # loads the tiktoken encoding
    "litellm.proxy._types",
    "litellm.responses.mcp.litellm_proxy_mcp_handler",
    "litellm.responses.mcp.chat_completions_handler",
    "litellm._service_logger",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.hosted_vllm.chat.transformation",
)


def preload(modules: tuple[str, ...] = LAZY_MODULES) -> list[str]:
    """Import what can be imported; returns the modules that could not be."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a warm-up must never stop a run
            missing.append(name)
    return missing


MISSING = preload()
