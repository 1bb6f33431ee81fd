"""Files while it runs (the fs rendezvous): a member's request for a running case's files,
queued for the job's lease, taken by the runner holding it, answered with a listing, a blob
or an error. The services are in `scorecards.files.services` (not re-exported here: the
models module of the app imports `scorecards.files.models` while it is itself loading).

- `fs_answer_get` (`fs_request_ask`, then `fs_request_wait`): what the page, the API and
  MCP call (one service);
- `fs_requests_take`, `fs_requests_give_back`, `fs_request_answer`: the runner's side,
  fenced by `(job_id, lease_epoch)` like every runner call.
"""
