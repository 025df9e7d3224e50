"""What a trial leaves: its records (result.json, MCPMark's messages.json and meta.json),
where they are stored, the outcome taxonomy."""
