"""What the member sees on the terminal: the status line (`status`), text from the server made
harmless (`terminal`), and how the runner stops — its exit codes (`exits`)."""
