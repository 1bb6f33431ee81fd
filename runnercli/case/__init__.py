"""One case, as a pipeline of stages: prepare, execute, collect, deliver (`pipeline` says how).

Each stage is a module of its own; `local.run_case` runs a case here without a server.
"""

from runnercli.case.collect import advisory_usage
from runnercli.case.local import run_case
from runnercli.case.pipeline import CaseContext, CaseEnded, Pipeline, Stage

__all__ = ["CaseContext", "CaseEnded", "Pipeline", "Stage", "advisory_usage", "run_case"]
