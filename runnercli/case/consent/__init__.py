"""Consent: the member, not the workspace, decides what runs on this machine. The `Allow`
stage (`stage`) asks `Consent` (`decide`) under what `run` was told (`settings`): the trust
store (`trust`), a question on the terminal (`prompt`, showing what will run and what will
leave the machine: `disclosure`) or, without one, a question kept pending for
`allow --pending N` (`pending`); a refusal says why (`refusals`)."""
