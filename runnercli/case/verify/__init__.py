"""The verifier, protected paths and hidden files of a case run in a worktree (protocol 4).

`reaper` (every process the agent left is killed once it has ended: the runner as the child
subreaper on Linux), `protect` (the protected paths compared with the start commit, then
restored), `hidden` (the case's hidden files written, then taken away), `report` (a JUnit or
JSON report read with bounds), `verifier` (the verifier's command run with its own timeout),
`stage` (`Verify`, working in the pipeline's `finish`, and `Reap`, right after the agent).
"""
