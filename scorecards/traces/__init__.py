"""Traces and screens (app `traces`): what a running case does, step by step, and what its
screen shows, as its runner reports them (protocol 3).

- `models`: the events of each attempt's trace (unique by `(attempt, seq)`), its counters,
  and the filmstrip of its screen frames (blobs of the job's workspace);
- `store`: an attempt's events written within the case's bounds;
- `steps`: what a trace says the case is doing now, and its token and cost totals;
- `services` and `screens`: `trace_report` and `screen_report`, fenced like every call
  after a lease;
- `selectors` and `replies`: the timeline a page reads in pages, the filmstrip, the running
  cases of a run with their current step and newest frame;
- `live`: the run page's running cases as deltas (a live part of `scorecards.lifecycle`);
  `api` and `urls`: the REST endpoints, by case key in the query (`?key=K`);
  `templatetags.traces`: the case page's first page of the timeline.
"""
