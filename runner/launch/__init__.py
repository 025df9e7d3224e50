"""Run an EvalRun on one machine: the launcher, warm workers, preflight checks, task checks, the scripted model."""
