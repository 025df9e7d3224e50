"""mcpfleet runner: the trial engine (spec, tasks, agent, verifier, results, local launcher)."""

import os as _os

# Process-wide, before LiteLLM can be imported anywhere: without it LiteLLM fetches its cost map over the
# network at import. Set once at package import, never per trial (trials pass their settings explicitly).
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_os.environ.setdefault("LITELLM_LOG", "ERROR")
