"""Let postgres-mcp 0.3.0 run on Python 3.11 (Debian 12's), installed by scripts/setup.sh only there.

Its sole Python 3.12-only dependency is ``typing.override`` (a no-op decorator at run time, imported by its
index-tuning modules at start-up); typing_extensions has the same decorator for older Pythons. Loaded through
``py311_compat.pth`` in the server's own virtualenv, never in mcpfleet's.
"""

import typing

if not hasattr(typing, "override"):
    from typing_extensions import override

    typing.override = override
