"""``python -m mcpfleet.sites.shop --data DIR --port N``."""

from __future__ import annotations

import sys

from mcpfleet.sites.common.server import main
from mcpfleet.sites.shop.app import make_site

sys.exit(main(make_site))
