"""``python -m mcpfleet.sites.admin --data DIR --port N`` (DIR holds the shop's store.db)."""

from __future__ import annotations

import sys

from mcpfleet.sites.admin.app import make_site
from mcpfleet.sites.common.server import main

sys.exit(main(make_site))
