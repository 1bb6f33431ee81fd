"""Files while it runs (app `files`): a member's request for a running case's files, queued
for the job's lease, taken by the runner holding it, answered with a listing, a blob or an
error (the fs rendezvous).

- `models`: the request, bound to `(job, lease_epoch)`;
- `services`: `fs_answer_get` (`fs_request_ask`, then `fs_request_wait`), the page's side;
- `awaiting`: `fs_answer_aget`, the same awaited on an event loop (blocking no thread while
  the runner reads), what the API view and the MCP tools call;
- `runner`: `fs_requests_take`, `fs_requests_give_back`, `fs_request_answer`, the runner's
  side, fenced like every runner call;
- `replies`, `api`, `urls`: a listing or a file, `GET /api/runs/<id>/files?key=K&path=P`.
"""
