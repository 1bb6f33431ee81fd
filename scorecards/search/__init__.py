"""Search across what agents did (app `search`): a literal, case-insensitive substring of a
run's (or a workspace's) outputs, reasons, errors, stderr tails and the trace events of the
attempts that settled — what people type is code and commands (`rm -rf`, `TypeError:`), so
no query language reads it.

- `migrations`: the indexes — trigram GIN indexes (`pg_trgm`) on PostgreSQL; on SQLite, FTS5
  tables with the `trigram` tokenizer kept by triggers (skipped where SQLite lacks it);
- `lookups`: `Contains`, the literal case-insensitive match (`ILIKE` / `LIKE … ESCAPE`);
- `selectors`: `search_results` (scoped as runs are, paginated) and the query's bounds;
- `snippets`: a match in its context, HTML-escaped, the match in `<mark>`;
- `replies`, `api`, `views`, `urls`: `GET /api/runs/<id>/search?q=`,
  `GET /api/workspaces/<slug>/search?q=`, the pages `/runs/<id>/search`, `/w/<slug>/search`.
"""
