"""Where mcpfleet keeps mirrors of S3 task packs on this machine: packs fill it, the sandbox hides it."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MCPFLEET_CACHE_DIR"


def cache_dir() -> Path:
    """Where mirrors of S3 packs live: $MCPFLEET_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache, /mcpfleet/packs."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcpfleet" / "packs"
