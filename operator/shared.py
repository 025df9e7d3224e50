"""What every run's reconciler shares: the operator's settings, its API client, and the pod-creation budget."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.operator.kube import Kube
from mcpfleet.operator.settings import OperatorSettings


@dataclass
class Shared:
    """Operator-wide objects, created once at startup (kopf gives each object a shallow copy of memo)."""

    settings: OperatorSettings
    kube: Kube
    runs: dict[str, asyncio.Queue[tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    born: float = field(default_factory=time.monotonic)  # when this operator started
    peering: bool = False  # one of several replicas (kopf peering), not standalone
    inflight: int = 0
    tokens: float = 0.0
    last_refill: float = field(default_factory=time.monotonic)

    def take_tokens(self, want: int) -> int:
        """Client-side rate limit on pod creation, shared by all runs."""
        now = time.monotonic()
        rate = self.settings.create_rate
        self.tokens = min(rate, self.tokens + rate * (now - self.last_refill))
        self.last_refill = now
        grant = min(want, int(self.tokens), max(0, self.settings.max_pods - self.inflight))
        self.tokens -= grant
        return grant
