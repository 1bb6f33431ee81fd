"""A judge job: its own directory and the file of what it judges (the `Judge` stage,
`stage`)."""
