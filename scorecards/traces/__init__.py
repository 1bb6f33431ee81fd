"""A case's trace and screens as the runner reports them while it runs (protocol 3).

- `models`: the events of each attempt's trace (unique by `(attempt, seq)`), its counters,
  and the filmstrip of its screen frames (blobs of the job's workspace);
- `steps`: what a trace says the case is doing now, and its token and cost totals;
- `services`: `trace_report` and `screen_report`, fenced like every call after a lease;
- `selectors` and `replies`: the timeline a page reads in pages, the filmstrip, the running
  cases of a run with their current step and latest frame;
- `api`: the REST endpoints, by case key in the query (`?key=K`).
"""
