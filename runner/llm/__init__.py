"""One LLM call through LiteLLM: the client, reply normalisation, provider faults and the warm-up round trip."""
