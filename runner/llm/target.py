"""The LLMTarget a trial calls its model through, and the API key it is given."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from mcpfleet.runner.spec.evalrun import ModelSpec
from mcpfleet.runner.spec.trial import TrialContext, TrialSpec

if TYPE_CHECKING:
    from mcpfleet.runner.llm.client import LLMTarget

SCRIPTED_PREFIX = "scripted/"
POD_API_KEY_ENV = "MCPFLEET_MODEL_API_KEY"  # where a trial pod receives the key of apiKeySecretRef


def api_key(model: ModelSpec, env: Any) -> str | None:
    if model.api_key_env:
        return env.get(model.api_key_env)
    if model.api_key_secret_ref:
        return env.get(POD_API_KEY_ENV)
    return None


def llm_target(model: ModelSpec, spec: TrialSpec, ctx: TrialContext, *, budget_scale: int = 1) -> LLMTarget:
    """The trial's LLMTarget. ``budget_scale`` multiplies the trial retry budget: a toolcalls shard is one trial's
    worth of calls per case."""
    from mcpfleet.runner.llm.client import LLMTarget  # LiteLLM's import: paid where a model is called

    env = ctx.env if ctx.env is not None else os.environ
    p = spec.provider
    common: dict[str, Any] = {
        "params": model.params.litellm_kwargs(),
        "timeout": spec.limits.llm_call_timeout,
        "retries": spec.limits.llm_retries,
        "backoff_initial": p.backoff_initial_seconds if ctx.backoff_initial is None else ctx.backoff_initial,
        "backoff_max": p.backoff_max_seconds,
        "retry_after_max": p.retry_after_max_seconds,
        "trial_retry_budget": p.trial_retry_budget * budget_scale,
    }
    if model.is_scripted:
        if not ctx.scripted_base_url:
            raise RuntimeError(f"model '{model.name}' uses the scripted server but no scripted server URL was given")
        # The scripted server is a self-hosted OpenAI-compatible endpoint; LiteLLM's provider for those
        # (hosted_vllm) speaks HTTP directly instead of through the OpenAI SDK: ~5 ms less per call here.
        # It checks a key only when its model string asks for one (?key=...), as a provider would.
        target = LLMTarget(
            model="hosted_vllm/" + model.model[len(SCRIPTED_PREFIX) :],
            api_base=ctx.scripted_base_url,
            api_key=api_key(model, env) or "scripted",
            **common,
        )
    else:
        target = LLMTarget(model=model.model, api_base=model.api_base, api_key=api_key(model, env), **common)
    return paced(target, model, spec, env)


def paced(target: LLMTarget, model: ModelSpec, spec: TrialSpec, env: Any) -> LLMTarget:
    """The target with its request metrics' labels and, when its model has a rateLimit or a budget covers it, the
    shared pacer every request asks first (pace.py)."""
    from mcpfleet.runner.llm.pace import LOCAL_NAMESPACE, NAMESPACE_ENV, Pacer, pace_config

    namespace = env.get(NAMESPACE_ENV) or os.environ.get(NAMESPACE_ENV) or LOCAL_NAMESPACE
    target.labels = (namespace, spec.run, model.name)
    if model.pricing is not None:
        from mcpfleet.runner.llm.pricing import price_of

        target.price = price_of(model)
    config = pace_config(
        model, target.model, target.api_base, spec.run, spec.budget, env, float(spec.limits.llm_call_timeout)
    )
    if config is not None:
        target.pacer = Pacer(config, log=lambda line: target.log.append(line))  # (the trial sets its log later)
    from mcpfleet.runner.llm.meters import start_series

    start_series(target.labels, paced=config is not None)
    return target
