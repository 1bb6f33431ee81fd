"""A clean agent configuration (`agent_config: clean`): the member's login without the
member's settings (`stage`: the `AgentConfig` stage)."""
