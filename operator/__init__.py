"""mcpfleet operator: the kopf controller that runs EvalRuns as pods."""
