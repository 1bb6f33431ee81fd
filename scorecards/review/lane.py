"""How the review queue joins a harness's reply and panel: each judge's agreement with people."""

from __future__ import annotations

from typing import Any

from scorecards import lifecycle
from scorecards.models import Workspace
from scorecards.review.replies import AgreementItem
from scorecards.review.selectors import people_agreement


@lifecycle.harness_part
def harness_people_agreement(workspace: Workspace, name: str) -> dict[str, Any]:
    agreement = people_agreement(workspace=workspace, harness=name)
    return {"people_agreement": [AgreementItem.of(a).data() for a in agreement]}
