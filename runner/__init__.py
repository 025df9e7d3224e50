"""mcpfleet runner: the trial engine (spec, tasks, agent, verifier, results, local launcher)."""
