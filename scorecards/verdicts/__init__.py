"""Verdicts beyond the grader's (app `verdicts`): a person's verdict on a case, set with a note
and withdrawn the same way, and a regrade of a finished run's stored outputs by its grader or
another version's (judge jobs for a judge grader). What each result's verdict is, and its
history, are written by the shared rule (`scorecards.services.grades`).

- `services`: `verdict_set`, `verdict_withdraw` (member or above);
- `regrades`: `run_regrade`, deterministic graders at once, judges as judge jobs;
- `replies`, `api`, `views`, `urls`: `PUT`/`DELETE /api/runs/<id>/verdict?key=K`,
  `POST /api/runs/<id>/regrade`, the case page's verdict and the run page's Regrade.
"""
