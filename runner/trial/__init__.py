"""The trial engine: state -> MCP server -> agent -> verifier -> record, and the warm servers that shorten it."""
