"""Reply shapes of the scorecards app, shared by the REST API, the pages and MCP: one module
per subject, each shape built by its `of(...)` from what the selectors read."""
