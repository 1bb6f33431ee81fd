"""A case's budgets (`limits`), read from the agent's own stream: `meter` (tokens, turns and
cost as each stream tells them), `stage` (`Limits`: the agent stopped at the first event
over a limit)."""
