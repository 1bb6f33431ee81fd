"""The shared base below every app: domain errors and how the API, pages and MCP render
them, transient-error detection, JSON bounds, request parsing, the OpenAPI schema's error
replies and the base reply shape. Nothing here knows users, runners or runs."""
