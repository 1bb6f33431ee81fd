"""Workspace pages: overview, harnesses (and each one's history), datasets, runs, the run form,
the run page, compare (a case of a run is `scorecards.cases`'s page).

Server-rendered and usable without JavaScript; small scripts only enhance them (the run
form greys out incapable runners as the harness changes, the run page follows the run
live, the history and the score distribution are charted). Every page reads and writes
through the same selectors and services as the API, so the rules (who may start, cancel or
create what) are the services' alone.
"""

from scorecards.views.compare import compare
from scorecards.views.history import harness_history
from scorecards.views.run_form import run_new
from scorecards.views.runs import run_cancel_view, run_detail, run_rerun_view
from scorecards.views.workspaces import datasets, harnesses, home, run_list, workspace_overview

__all__ = [
    "compare",
    "datasets",
    "harness_history",
    "harnesses",
    "home",
    "run_cancel_view",
    "run_detail",
    "run_list",
    "run_new",
    "run_rerun_view",
    "workspace_overview",
]
