"""``mcpfleet view`` and ``mcpfleet show``: a run's matrix, trials, transcripts and comparisons (docs/reports.md)."""
