"""What one request costs: a model's price per token (``pricing`` in the spec, else LiteLLM's price map) and the
output-token ceiling a budget reservation counts on. One price for the reservation and the settlement, so what the
ledger settles is what it reserved against, priced the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfleet.runner.spec.evalrun import ModelSpec

# A request's output-token ceiling when neither the spec (params.maxTokens) nor LiteLLM's map gives one: sent
# as max_tokens then (only when a budget needs a ceiling), so the reservation is one the provider enforces.
DEFAULT_OUTPUT_CEILING = 8192


@dataclass(frozen=True)
class Price:
    """USD per token."""

    input: float
    output: float
    source: str  # "spec.pricing" or "litellm"

    def cost(self, prompt_tokens: int, output_tokens: int) -> float:
        return max(0, prompt_tokens) * self.input + max(0, output_tokens) * self.output


def _info(model: str) -> dict[str, Any] | None:
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - a model missing from the map has no price: the caller says so
        return None
    return dict(info) if info else None


def price_of(model: ModelSpec) -> Price | None:
    """The model's price: ``pricing`` when set, else LiteLLM's map; None when neither knows it (scripted models
    are never in the map)."""
    if model.pricing is not None:
        p = model.pricing
        return Price(p.input_per_million_tokens / 1e6, p.output_per_million_tokens / 1e6, "spec.pricing")
    if model.is_scripted:
        return None
    info = _info(model.model)
    if not info:
        return None
    cin, cout = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if not isinstance(cin, int | float) or not isinstance(cout, int | float):
        return None
    return Price(float(cin), float(cout), "litellm")


def output_ceiling(model: ModelSpec, litellm_model: str) -> tuple[int, bool]:
    """(the most output tokens one request may produce, whether max_tokens must be sent to make it so)."""
    if model.params.max_tokens is not None:
        return model.params.max_tokens, False
    info = None if model.is_scripted else _info(litellm_model)
    ceiling = (info or {}).get("max_output_tokens") or (info or {}).get("max_tokens")
    if isinstance(ceiling, int) and ceiling > 0:
        return ceiling, False  # the provider's own ceiling for the model
    return DEFAULT_OUTPUT_CEILING, True
