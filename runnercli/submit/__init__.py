"""`python -m runnercli submit`: a scorecard run from CI (`command`), its personal API
(`api`), its metadata, following and judging the run (`run`), and `--here`."""

from runnercli.submit.command import submit

__all__ = ["submit"]
