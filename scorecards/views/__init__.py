"""Workspace pages: overview, harnesses, datasets, runs, the run form, the run page, compare.

Server-rendered and usable without JavaScript; small scripts only enhance them (the run
form greys out incapable runners as the harness changes, the run page follows the run
live). Every page reads and writes through the same selectors and services as the API, so
the rules (who may start, cancel or create what) are the services' alone.
"""

from scorecards.views.run_form import run_new
from scorecards.views.runs import compare, run_cancel_view, run_detail
from scorecards.views.workspaces import datasets, harnesses, home, run_list, workspace_overview

__all__ = [
    "compare",
    "datasets",
    "harnesses",
    "home",
    "run_cancel_view",
    "run_detail",
    "run_list",
    "run_new",
    "workspace_overview",
]
