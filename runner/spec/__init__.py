"""The EvalRun resource and the nouns every layer shares: the single source
of truth for CLI validation, the CRD and docs."""
