"""``python -m mcpfleet.sites.shop --data DIR --port N``."""

from __future__ import annotations

import sys

from ..common.server import main
from .site import make_site

sys.exit(main(make_site))
