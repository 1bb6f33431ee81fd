"""One case, as a pipeline of stages: prepare, execute, collect, deliver (`pipeline` says how).

Each stage is a module of its own; `local.run_case` runs a case here without a server.
"""

from runnercli.case.argv import render_argv
from runnercli.case.casefile import CASE_ENV, CASE_FILE_ENV
from runnercli.case.collect import advisory_usage
from runnercli.case.local import run_case
from runnercli.case.pipeline import CaseContext, CaseEnded, Pipeline, Stage, StartError

__all__ = [
    "CASE_ENV",
    "CASE_FILE_ENV",
    "CaseContext",
    "CaseEnded",
    "Pipeline",
    "Stage",
    "StartError",
    "advisory_usage",
    "render_argv",
    "run_case",
]
