"""Request bodies reach the application as they came: daphne's requests without Twisted's
form parsing.

Twisted parses the body of every `POST` that names a form type into `request.args`: a
`multipart/form-data` body whole, through the `email` package, before the application is
called. Daphne never reads `request.args` (it hands the application the raw body in
chunks), so the parse is pure cost: a 64 MiB multipart `POST` to a path that does not
exist, from anyone, took the server 2.3 s of CPU and 837 MiB of memory; and every JSON
`POST` (each MCP call, each run start) paid for its `Content-Type` parsed by `email`. The
application parses the forms it accepts itself (Django, within its upload limits).
"""

from __future__ import annotations

import inspect
from typing import Any

from daphne import http_protocol
from twisted.web import http


class UnparsedWebRequest(http_protocol.WebRequest):
    """Daphne's request, its body left to the application."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)


def leave_bodies_unparsed() -> bool:
    """Make daphne's HTTP factory build `UnparsedWebRequest`s; False (nothing changed) on a
    Twisted that always parses."""
    if "parsePOSTFormSubmission" not in inspect.signature(http.Request.__init__).parameters:
        return False
    http_protocol.WebRequest = UnparsedWebRequest  # type: ignore[misc]
    return True
