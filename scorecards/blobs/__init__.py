"""Artifacts and blobs (app `blobs`): bytes a workspace holds by their SHA-256 — artifacts of
results, screen frames, files a page asked of a running case — in `STORAGES["blobs"]`.

- `models`: blobs, uploads in progress, artifacts; `references`: what names a blob and what
  retention forgets (registries the traces and files fill);
- `store`, `uploads`, `fence`: the bytes, chunked uploads, a runner's fenced calls, all
  through `services`, the face other features and MCP call;
- `artifacts`: a result's artifacts refused or recorded as it settles (`scorecards.lifecycle`);
- `selectors`, `replies`, `responses`, `api`, `urls`: an artifact read back, its reply, a
  blob served as a file, `GET /api/runs/<id>/artifacts`;
- `gc` (`manage.py blobs_gc`), `templatetags.blobs` (the workspace page's storage line).
"""
