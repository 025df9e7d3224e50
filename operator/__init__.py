"""mcpfleet operator: the kopf controller that runs EvalRuns as one pod per trial.

Importing this package registers the handlers, so ``kopf run -m mcpfleet.operator`` works as well as
``mcpfleet operator``.
"""

import sys

# kopf imports every Kubernetes client library it finds: to recognise their model objects (the operator passes plain
# dicts) and for login handlers of its own (the operator registers its own: login.py). Imported, kubernetes-asyncio
# and kubernetes are 65 MB and 15 MB of the operator's memory, so they are kept from kopf while it and the handlers'
# registry load (an entry of None in sys.modules makes an import fail as not installed), then let through again:
# login.py imports kubernetes-asyncio for a kubeconfig only it can read. Where kopf was imported first (``kopf run``),
# nothing changes but the memory.
_HIDDEN = [
    name for name in ("kubernetes", "kubernetes_asyncio") if "kopf" not in sys.modules and name not in sys.modules
]
for _name in _HIDDEN:
    sys.modules[_name] = None  # type: ignore[assignment]
try:
    from mcpfleet.operator import handlers as handlers  # noqa: E402, F401 - registers the kopf handlers
finally:
    for _name in _HIDDEN:
        if _name in sys.modules and sys.modules[_name] is None:
            del sys.modules[_name]
