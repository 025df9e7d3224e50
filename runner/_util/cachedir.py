"""Where mcpfleet keeps mirrors of S3 task packs and the viewer's indexes on this machine: packs and ``mcpfleet
view`` fill them, the sandbox hides both (a pack's answers; runs' transcripts)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MCPFLEET_CACHE_DIR"
VIEWER_CACHE_ENV = "MCPFLEET_VIEWER_CACHE_DIR"


def cache_dir() -> Path:
    """Where mirrors of S3 packs live: $MCPFLEET_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache, /mcpfleet/packs."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcpfleet" / "packs"


def viewer_cache_dir() -> Path:
    """Where ``mcpfleet view`` keeps runs' indexes: $MCPFLEET_VIEWER_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache,
    /mcpfleet/viewer."""
    if os.environ.get(VIEWER_CACHE_ENV):
        return Path(os.environ[VIEWER_CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcpfleet" / "viewer"
