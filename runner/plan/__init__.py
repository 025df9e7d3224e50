"""Expand an EvalRun into trials (pure, the same for the launcher and the operator) and order their launch."""
