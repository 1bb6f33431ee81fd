"""`python -m runnercli submit`: a scorecard run from CI (`command`), its metadata, following
and judging the run (`run`), `--here`, and `--harness-file` (`harness_file`)."""

from runnercli.submit.command import submit

__all__ = ["submit"]
