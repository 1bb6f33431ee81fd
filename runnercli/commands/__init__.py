"""Subcommands of `python -m runnercli` kept outside `runnercli.cli`, one concern a module."""
