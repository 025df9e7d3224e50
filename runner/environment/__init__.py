"""A trial's world outside the model: its state copy, the sandbox, the MCP client and the verifier runner."""
