"""A case of a run, whole (app `cases`): its input and expected value, each repeat's output,
grade, artifacts and verdict history, the attempt ledger behind it and its log lines — the
page where every feature of the case's world shows (its trace, files, services, a verdict).

- `selectors`: `case_detail`, one read for the page, the API and MCP `get_case`;
- `replies`: its reply, shared by all three (each result's artifacts are the blob store's);
- `views`, `api`, `urls`: `/runs/<id>/cases/<key>/` and `GET /api/runs/<id>/cases/<key>`;
- `templatetags.case_services`: the page's panel of the harness's services.
"""
