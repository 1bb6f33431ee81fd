"""Routes of one case of a run: its page, and the same case under /api/."""

from __future__ import annotations

from scorecards.cases import api, views
from scorecards.links import case_patterns

urlpatterns = case_patterns(views.case_page, "case", slash=True)

api_urlpatterns = case_patterns(api.CaseDetailView.as_view(), "api-case", slash=False)
