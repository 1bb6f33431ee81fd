"""`python -m runnercli push`: the harnesses and datasets of a repo's `.everdict/`, pushed as one
change with the member's API key (`tree` finds and reads the files, `lines` names the line of
what is wrong in one, `command` sends them and says what each became)."""
