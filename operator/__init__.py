"""mcpfleet operator: the kopf controller that runs EvalRuns as one pod per trial.

Importing this package registers the handlers, so ``kopf run -m mcpfleet.operator`` works as well as
``mcpfleet operator``.
"""

from mcpfleet.operator import handlers as handlers  # noqa: F401 - registers the kopf handlers
