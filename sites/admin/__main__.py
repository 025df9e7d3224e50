"""``python -m mcpfleet.sites.admin --data DIR --port N`` (DIR holds the shop's store.db)."""

from __future__ import annotations

import sys

from ..common.server import main
from .site import make_site

sys.exit(main(make_site))
