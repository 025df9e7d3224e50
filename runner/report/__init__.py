"""What a run's records add up to: scores, summary.json, the terminal table, the HTML report, MCPMark export."""
