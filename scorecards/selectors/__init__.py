"""Reads: what the pages, the API and MCP show, as rows, querysets and plain values (the
reply shapes are built from them in `scorecards.replies`). Nothing here writes.

Every read starts from the caller's membership, so someone outside a workspace gets
NotFound for everything in it.
"""
