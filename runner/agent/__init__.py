"""The agent loops (MCPMark's tool-calling agent, ReAct, oracle, no-op), what the model is shown, per-call classes."""
